"""Claude Code's hook payloads (stdin JSON of each hook event) and the daemon's request lines,
parsed into typed records. This is where text from Claude Code becomes ours, so it is made safe
here, once: the JSON goes through the sidecar's hostile-input parser (bad UTF-8 and lone
surrogates become U+FFFD, nesting is bounded), and every field is checked for its type and
bounds. Bad input of any kind is a :class:`PayloadError` whose message names the field and
what is wrong, never a traceback.

Only what the adapter uses is read; other fields (``permission_mode``, ``effort``, …) are
ignored, so a newer Claude Code that adds fields still works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    StringConstraints,
    ValidationError,
)
from pydantic_core import ErrorDetails

from pi_hindsight.errors import PiHindsightError, RpcError
from pi_hindsight.hosts.claude_code import runtime
from pi_hindsight.rpc.jsonrpc import parse
from pi_hindsight.serialisation import Record

EventName = Literal[
    "SessionStart", "UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "SessionEnd"
]
EVENTS: tuple[EventName, ...] = (
    "SessionStart",
    "UserPromptSubmit",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "SessionEnd",
)
RETAIN_EVENTS = frozenset({"Stop", "SubagentStop", "PreCompact", "SessionEnd"})
_MAX_PATH_CHARS = 4096
_MAX_WORD_CHARS = 64


class PayloadError(PiHindsightError):
    """A hook payload or daemon request that cannot be used; the message says what is wrong."""


def _absolute(value: str) -> Path:
    if "\x00" in value or "\ufffd" in value or not value.startswith("/"):
        raise ValueError("must be an absolute path")
    return Path(value)


# Claude Code's ids are UUIDs; anything id-like and short is accepted, nothing path-like.
Identifier = Annotated[
    StrictStr, StringConstraints(max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
]
AbsolutePath = Annotated[
    StrictStr, StringConstraints(max_length=_MAX_PATH_CHARS), AfterValidator(_absolute)
]
Word = Annotated[StrictStr, StringConstraints(max_length=_MAX_WORD_CHARS)]


class _Wire(BaseModel):
    # Only what the adapter uses is read: a newer Claude Code's extra fields are ignored.
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)


class HookPayload(_Wire):
    """A hook's stdin JSON as Claude Code sends it (snake_case), checked field by field."""

    session_id: Identifier
    cwd: AbsolutePath
    hook_event_name: Word | None = None
    transcript_path: AbsolutePath | None = None
    prompt: StrictStr | None = None  # UserPromptSubmit
    prompt_id: Identifier | None = None
    source: Word | None = None  # SessionStart: startup, resume, clear, compact, fork
    reason: Word | None = None  # SessionEnd


class HookEvent(_Wire):
    """A hook event as the adapter uses it: the payload, under the event it was sent for."""

    name: EventName
    session_id: str
    cwd: Path
    transcript_path: Path | None = None
    prompt: str | None = None
    prompt_id: str | None = None
    source: str | None = None
    reason: str | None = None


Op = Literal["hook", "tools", "call", "ping", "stop"]


class RequestLine(_Wire):
    """One request line from a client (the hook, the MCP server, the CLI), as sent."""

    v: int | str | None = None
    key: StrictStr
    op: Op
    # hook: the event, its payload (None when the client found it too large) and its size, and
    # what the client ignored (a repository's settings)
    event: StrictStr | None = None
    payload: StrictStr | None = None
    payload_bytes: int | None = Field(default=None, alias="payloadBytes")
    ignored: list[Any] = []
    # tools, call
    session_id: Identifier | None = Field(default=None, alias="sessionId")
    cwd: AbsolutePath | None = None
    tool: Annotated[StrictStr, StringConstraints(max_length=64)] | None = None  # call
    arguments: dict[str, Any] | None = None  # call


class DaemonRequest(_Wire):
    """One line from a client: a hook event, the tool list or a tool call for a session."""

    op: Op
    key: str
    event: HookEvent | None = None
    session_id: str | None = None  # tools, call
    cwd: Path | None = None  # tools, call
    tool: str | None = None  # call
    arguments: dict[str, Any] | None = None  # call
    notes: tuple[str, ...] = ()  # hook: what the client ignored (a repository's settings)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _problem(item: ErrorDetails) -> str:
    """One pydantic error as the field and what is wrong with it, in the adapter's words."""
    field = str(item["loc"][0]) if item["loc"] else "the payload"
    kind, context = item["type"], item.get("ctx") or {}
    if kind == "missing":
        return f"'{field}' is missing"
    if kind == "string_type":
        return f"'{field}' must be a string, not {_kind(item['input'])}"
    if kind == "string_too_long":
        return f"'{field}' is longer than {context.get('max_length')} characters"
    if kind == "string_pattern_mismatch":
        return f"'{field}' is not an id (letters, digits, - _ . :)"
    if kind == "value_error":
        return f"'{field}' {context.get('error')}"
    return f"'{field}': {item['msg']}"


_M = TypeVar("_M", bound=BaseModel)


def _validated(model: type[_M], data: dict[str, Any], what: str) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise PayloadError(f"{what}: {_problem(error.errors()[0])}") from error


def _object(text: str, what: str) -> dict[str, Any]:
    try:
        value = parse(text.encode("utf-8", "replace"))
    except RpcError as error:
        raise PayloadError(f"{what} is not JSON: {error}") from error
    if not isinstance(value, dict):
        raise PayloadError(f"{what} must be a JSON object, not {_kind(value)}")
    return value


def parse_event(name: str, text: str) -> HookEvent:
    """The payload of hook event ``name`` (stdin of the hook) as a typed record."""
    if name not in EVENTS:
        known = ", ".join(EVENTS)
        raise PayloadError(f"unknown hook event {name[:40]!r}; this hook handles {known}")
    event: EventName = name
    data = _object(text, "the hook payload")
    stated = data.get("hook_event_name")
    if stated is not None and stated != name:
        raise PayloadError(
            f"hook payload: 'hook_event_name' is {str(stated)[:40]!r} but the hook was "
            f"installed for {name}; run `pi-hindsight setup --host claude-code` again"
        )
    payload = _validated(HookPayload, data, "hook payload")
    if event in RETAIN_EVENTS and payload.transcript_path is None:
        raise PayloadError("hook payload: 'transcript_path' is missing")
    if event == "UserPromptSubmit" and payload.prompt is None:
        raise PayloadError("hook payload: 'prompt' is missing")
    return HookEvent(
        name=event,
        session_id=payload.session_id,
        cwd=payload.cwd,
        transcript_path=payload.transcript_path,
        prompt=payload.prompt,
        prompt_id=payload.prompt_id,
        source=payload.source,
        reason=payload.reason,
    )


def parse_request(line: bytes) -> DaemonRequest:
    """One request line from a client (the hook, the MCP server, the CLI)."""
    try:
        data = parse(line)
    except RpcError as error:
        raise PayloadError(f"request is not JSON: {error}") from error
    if not isinstance(data, dict):
        raise PayloadError("a request must be a JSON object")
    version = data.get("v")
    if version != runtime.PROTOCOL:
        raise PayloadError(
            f"request protocol {str(version)[:10]!r} is not {runtime.PROTOCOL}; restart the daemon"
        )
    if not isinstance(data.get("key"), str) or data.get("op") not in get_args(Op):
        raise PayloadError("a request needs a string 'key' and an 'op' (hook, tools, call, ping)")
    request = _validated(RequestLine, data, "request")
    op, key = request.op, request.key
    if op == "hook":
        if request.payload is None:
            size = request.payload_bytes
            raise PayloadError(f"the hook payload is too large ({size} bytes); memory skipped")
        if request.event is None:
            raise PayloadError("a hook request needs a string 'event' and 'payload'")
        notes = tuple(note[:300] for note in request.ignored[:20] if isinstance(note, str))
        return DaemonRequest(
            op="hook", key=key, event=parse_event(request.event, request.payload), notes=notes
        )
    if op in ("tools", "call"):
        if request.session_id is None or request.cwd is None:
            missing = "sessionId" if request.session_id is None else "cwd"
            raise PayloadError(f"request: '{missing}' is missing")
        if op == "call" and (request.tool is None or request.arguments is None):
            raise PayloadError("a tool call needs a string 'tool' and an 'arguments' object")
        return DaemonRequest(
            op=op,
            key=key,
            session_id=request.session_id,
            cwd=request.cwd,
            tool=request.tool,
            arguments=request.arguments,
        )
    return DaemonRequest(op=op, key=key)


# -- the daemon's answers ---------------------------------------------------------------------


class HookContext(Record):
    """Context for the model (SessionStart, UserPromptSubmit), in Claude Code's names."""

    hook_event_name: str
    additional_context: str


class HookOutput(Record):
    """What a hook prints for Claude Code: context for the model, a message for the user."""

    hook_specific_output: HookContext | None = None
    system_message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ToolSpecAnswer(Record):
    """One memory tool as the MCP server lists it."""

    name: str
    label: str
    description: str
    parameters: dict[str, Any]  # the tool's JSON schema
    timeout_ms: int


class ToolCallAnswer(Record):
    text: str
    is_error: bool


class PingAnswer(Record):
    pid: int
    sessions: int | None = None  # ping: the sessions the daemon holds; stop: none


DaemonResult = HookOutput | list[ToolSpecAnswer] | ToolCallAnswer | PingAnswer | None


class DaemonAnswer(Record):
    """The one line a client gets back: ``{"ok": true, "result": …}`` or ``{"ok": false,
    "error": …}``."""

    ok: bool
    result: DaemonResult = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        if not self.ok:
            return {"ok": False, "error": self.error}
        return {"ok": True, "result": _result_json(self.result)}


def _result_json(result: DaemonResult) -> object:
    if isinstance(result, list):
        return [spec.to_json() for spec in result]
    return None if result is None else result.to_json()
