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

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pi_hindsight.errors import PiHindsightError, RpcError
from pi_hindsight.hosts.claude_code import runtime
from pi_hindsight.rpc.jsonrpc import parse

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
# Claude Code's ids are UUIDs; anything id-like and short is accepted, nothing path-like.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_MAX_PATH_CHARS = 4096
_MAX_WORD_CHARS = 64


class PayloadError(PiHindsightError):
    """A hook payload or daemon request that cannot be used; the message says what is wrong."""


@dataclass(frozen=True)
class HookEvent:
    name: EventName
    session_id: str
    cwd: Path
    transcript_path: Path | None = None
    prompt: str | None = None  # UserPromptSubmit
    prompt_id: str | None = None
    source: str | None = None  # SessionStart: startup, resume, clear, compact, fork
    reason: str | None = None  # SessionEnd


@dataclass(frozen=True)
class DaemonRequest:
    """One line from a client: a hook event, the tool list or a tool call for a session."""

    op: Literal["hook", "tools", "call", "ping", "stop"]
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


def _text(data: dict[str, Any], key: str, *, required: bool, max_chars: int | None) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise PayloadError(f"hook payload: '{key}' is missing")
        return None
    if not isinstance(value, str):
        raise PayloadError(f"hook payload: '{key}' must be a string, not {_kind(value)}")
    if max_chars is not None and len(value) > max_chars:
        raise PayloadError(f"hook payload: '{key}' is longer than {max_chars} characters")
    return value


def _identifier(data: dict[str, Any], key: str, *, required: bool) -> str | None:
    value = _text(data, key, required=required, max_chars=128)
    if value is not None and not _ID.fullmatch(value):
        raise PayloadError(f"hook payload: '{key}' is not an id (letters, digits, - _ . :)")
    return value


def _path(data: dict[str, Any], key: str, *, required: bool) -> Path | None:
    value = _text(data, key, required=required, max_chars=_MAX_PATH_CHARS)
    if value is None:
        return None
    if "\x00" in value or "\ufffd" in value or not value.startswith("/"):
        raise PayloadError(f"hook payload: '{key}' must be an absolute path")
    return Path(value)


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
    session_id = _identifier(data, "session_id", required=True)
    cwd = _path(data, "cwd", required=True)
    if session_id is None or cwd is None:  # (required: raised already)
        raise PayloadError("hook payload: 'session_id' and 'cwd' are required")
    return HookEvent(
        name=event,
        session_id=session_id,
        cwd=cwd,
        transcript_path=_path(data, "transcript_path", required=event in RETAIN_EVENTS),
        prompt=_text(data, "prompt", required=event == "UserPromptSubmit", max_chars=None),
        prompt_id=_identifier(data, "prompt_id", required=False),
        source=_text(data, "source", required=False, max_chars=_MAX_WORD_CHARS),
        reason=_text(data, "reason", required=False, max_chars=_MAX_WORD_CHARS),
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
    key = data.get("key")
    op = data.get("op")
    if not isinstance(key, str) or op not in ("hook", "tools", "call", "ping", "stop"):
        raise PayloadError("a request needs a string 'key' and an 'op' (hook, tools, call, ping)")
    if op == "hook":
        if data.get("payload") is None:
            size = data.get("payloadBytes")
            raise PayloadError(f"the hook payload is too large ({size} bytes); memory skipped")
        payload, name = data.get("payload"), data.get("event")
        if not isinstance(payload, str) or not isinstance(name, str):
            raise PayloadError("a hook request needs a string 'event' and 'payload'")
        raw_notes = data.get("ignored")
        notes = tuple(
            note[:300]
            for note in (raw_notes if isinstance(raw_notes, list) else [])[:20]
            if isinstance(note, str)
        )
        return DaemonRequest("hook", key, event=parse_event(name, payload), notes=notes)
    if op in ("tools", "call"):
        session_id = _identifier(data, "sessionId", required=True)
        cwd = _path(data, "cwd", required=True)
        tool = _text(data, "tool", required=op == "call", max_chars=64)
        arguments = data.get("arguments")
        if op == "call" and not isinstance(arguments, dict):
            raise PayloadError("a tool call needs an 'arguments' object")
        return DaemonRequest(
            op, key, session_id=session_id, cwd=cwd, tool=tool, arguments=arguments
        )
    return DaemonRequest(op, key)
