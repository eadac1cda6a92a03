"""The Pi host adapter: JSON-RPC methods from the shim → engine calls, Pi message shapes → turns.

Everything Pi-specific lives here (message roles, custom message types, the shape of tool and
command specs); the engine stays host-neutral.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pi_hindsight.engine.engine import MemoryEngine
from pi_hindsight.engine.render import CUSTOM_TYPE, FENCE
from pi_hindsight.engine.tools import MemoryTools
from pi_hindsight.engine.transcript import TurnMessage
from pi_hindsight.engine.types import (
    CompletedTurn,
    Delivery,
    DeliveryMemory,
    Notice,
    SessionInfo,
    SessionView,
    UserRequest,
)
from pi_hindsight.errors import InputFileError, PiHindsightError, RpcError
from pi_hindsight.hosts import pi_context
from pi_hindsight.hosts.pi_commands import PiCommands
from pi_hindsight.rpc.protocol import INVALID_PARAMS, PROTOCOL_VERSION
from pi_hindsight.safe_files import SESSION_HEADER_MAX_BYTES, FileMissing, read_json_lines

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class _Params(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


ParamsT = TypeVar("ParamsT", bound=_Params)


# Identifiers are bounded: they are stored in the evidence ledger and the outbox.
_ID_CHARS = 256


class InitializeParams(_Params):
    protocol_version: int = Field(alias="protocolVersion")
    cwd: str = Field(min_length=1, max_length=4096)
    session_id: str = Field(alias="sessionId", min_length=1, max_length=_ID_CHARS)
    session_file: str | None = Field(default=None, alias="sessionFile", max_length=4096)
    has_ui: bool = Field(default=False, alias="hasUI")
    reason: str = Field(default="startup", max_length=64)


class ConsentParams(_Params):
    accepted: bool


class PrepareParams(_Params):
    request_id: str = Field(alias="requestId", min_length=1, max_length=_ID_CHARS)
    prompt: str
    session_id: str = Field(alias="sessionId", min_length=1, max_length=_ID_CHARS)


class ConfirmParams(_Params):
    request_id: str = Field(alias="requestId", max_length=_ID_CHARS)
    confirmed: bool
    # Stored as an SQLite integer (at most 2**63-1); a payload is at most a few megabytes.
    payload_bytes: int | None = Field(default=None, alias="payloadBytes", ge=0, le=2**53)


class TurnParams(_Params):
    request_id: str = Field(alias="requestId", max_length=_ID_CHARS)
    session_id: str = Field(alias="sessionId", min_length=1, max_length=_ID_CHARS)
    session_file: str | None = Field(default=None, alias="sessionFile")
    messages: list[dict[str, Any]]
    memory_entry_id: str | None = Field(default=None, alias="memoryEntryId")


class AttachedParams(_Params):
    request_id: str = Field(alias="requestId", max_length=_ID_CHARS)


class CommandParams(_Params):
    name: str
    args: str = ""
    has_ui: bool = Field(default=False, alias="hasUI")
    accepted: bool | None = None


class ToolCallParams(_Params):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class ShutdownParams(_Params):
    reason: str = "quit"


def _validate(model: type[ParamsT], params: dict[str, Any]) -> ParamsT:
    try:
        return model.model_validate(params)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '(params)'}: {item['msg']}"
            for item in error.errors()
        )
        raise RpcError(INVALID_PARAMS, f"invalid params: {problems}") from error


# Pi's own text for summaries it hands the model as user messages (pi-coding-agent
# core/messages.js): such a message is Pi's summary, never the user's words.
_SUMMARY_PREFIXES = (
    "The conversation history before this point was compacted into the following summary:",
    "The following is a summary of a branch that this conversation came back from:",
)


def turn_messages(messages: list[dict[str, Any]]) -> list[TurnMessage]:
    """Pi ``agent_end`` messages → host-neutral turn messages (the retain policy filters them).

    Dropped here: custom messages (our injected memory and other extensions' messages),
    compaction and branch summaries (whether as their own roles or rendered as user text; never
    retained as if the user said them), our memory block arriving as user text, bash executions
    and thinking. Tool calls (with their arguments) and tool results are passed on; what of them
    is kept is ``retain.toolCalls`` / ``retain.toolResults`` (``engine/transcript.py``).
    """
    turn: list[TurnMessage] = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            text = pi_context.text_of(message.get("content"))
            head = text.lstrip()
            if head.startswith(f"<{FENCE}") or head.startswith(_SUMMARY_PREFIXES):
                continue  # defensive: our memory block or a summary, whatever role it has
            turn.append(TurnMessage("user", text))
        elif role == "assistant":
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            text = pi_context.text_of(blocks)
            if text.strip():
                turn.append(TurnMessage("assistant", text))
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    arguments = block.get("arguments")
                    turn.append(
                        TurnMessage(
                            "tool_call",
                            json.dumps(arguments, ensure_ascii=False, default=str)
                            if arguments
                            else "",
                            tool_name=str(block.get("name") or ""),
                        )
                    )
        elif role == "toolResult":
            turn.append(
                TurnMessage(
                    "tool_result",
                    pi_context.text_of(message.get("content")),
                    tool_name=str(message.get("toolName") or ""),
                    is_error=message.get("isError") is True,
                )
            )
    return turn


def read_visible_context(session_file: str | None, turns: int) -> DeliveryMemory | None:
    """What the session's visible context already holds, from its Pi session file: the memory
    records and memo version delivered there, and the last ``turns`` conversation turns."""
    if not session_file:
        return None
    session = pi_context.read_session_file(Path(session_file))
    if session is None:
        return None
    visible = pi_context.visible_entries(session.entries)
    return DeliveryMemory(
        record_ids=pi_context.delivered_record_ids(visible),
        record_keys=pi_context.delivered_record_ids(visible, "recordKeys"),
        memo_version=pi_context.memo_delivered(visible),
        recent=pi_context.recent_turns(visible, turns),
    )


def session_start_dir(session_file: str | None, cwd: Path) -> Path:
    """The directory the session started in: a resumed session keeps the scope of the directory
    recorded in its session file's header, wherever Pi runs now (R-SCOPE-5). Only the header is
    read (``safe_files``: a regular file, a bounded line); anything unusable means ``cwd``."""
    if not session_file:
        return cwd
    try:
        lines = read_json_lines(
            Path(session_file), max_bytes=None, max_line_bytes=SESSION_HEADER_MAX_BYTES, max_lines=1
        )
    except FileMissing:
        return cwd
    except InputFileError as error:
        logger.warning("session header not read: %s", error)
        return cwd
    header = lines.values[0][1] if lines.values else None
    if not isinstance(header, dict) or header.get("type") != "session":
        return cwd
    recorded = header.get("cwd")
    if isinstance(recorded, str) and Path(recorded).is_dir():
        return Path(recorded)
    return cwd


def _notices(notices: tuple[Notice, ...]) -> list[dict[str, str]]:
    return [notice.to_json() for notice in notices]


class PiHost:
    """Holds the engine for one Pi process and answers the shim's methods."""

    # Methods whose work is committed locally and must finish even when a shutdown arrives
    # while they run (a completed turn goes to the outbox before Pi exits).
    durable_methods = frozenset({"turnCompleted"})

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self.tools = MemoryTools(engine)
        self.commands = PiCommands(engine)
        self.handlers: dict[str, Handler] = {
            "initialize": self.initialize,
            "consent": self.consent,
            "prepareMemory": self.prepare_memory,
            "confirmDelivery": self.confirm_delivery,
            "memoryAttached": self.memory_attached,
            "turnCompleted": self.turn_completed,
            "compaction": self.compaction,
            "command": self.command,
            "toolCall": self.tool_call,
            "status": self.status,
        }

    def _session_json(self, view: SessionView) -> dict[str, Any]:
        settings = self.engine.settings
        return {
            "enabled": view.enabled,
            "statusLine": view.status_line,
            "notices": _notices(view.notices),
            "consent": None
            if view.consent is None
            else {"title": view.consent.title, "message": view.consent.message},
            "offReason": view.off_reason,
            "tools": [spec.to_json() for spec in self.tools.specs()],
            "commands": self.commands.specs(),
            "timeouts": {
                "prepareMs": settings.prepare_timeout_ms,
                "confirmMs": 1_000,
                "turnMs": 5_000,
                "commandMs": settings.timeout_ms + 2_000,
                "shutdownMs": 3_000,
                "defaultMs": settings.timeout_ms,
            },
        }

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(InitializeParams, params)
        if parsed.protocol_version != PROTOCOL_VERSION:
            raise RpcError(
                INVALID_PARAMS,
                f"protocol version {parsed.protocol_version} is not supported "
                f"(this sidecar speaks {PROTOCOL_VERSION}); run `pi-hindsight setup` again",
            )
        info = SessionInfo(
            session_id=parsed.session_id,
            cwd=session_start_dir(parsed.session_file, Path(parsed.cwd)),
            session_file=parsed.session_file,
            has_ui=parsed.has_ui,
            reason=parsed.reason,
        )
        return self._session_json(await self.engine.open_session(info))

    async def consent(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(ConsentParams, params)
        return self._session_json(await self.engine.answer_consent(parsed.accepted))

    async def prepare_memory(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(PrepareParams, params)
        delivery: Delivery = await self.engine.prepare(
            UserRequest(
                request_id=parsed.request_id, session_id=parsed.session_id, prompt=parsed.prompt
            )
        )
        message = None
        if delivery.text is not None:
            message = {
                "customType": CUSTOM_TYPE,
                "content": delivery.text,
                "display": False,
                "details": delivery.details,
            }
        return {
            "message": message,
            "outcome": delivery.outcome,
            "reason": delivery.reason,
            "recallMs": delivery.details.get("recallMs"),
            "notices": _notices(delivery.notices),
            "statusLine": self.engine.status_line(),
        }

    async def confirm_delivery(self, params: dict[str, Any]) -> None:
        parsed = _validate(ConfirmParams, params)
        self.engine.delivery_confirmed(parsed.request_id, parsed.confirmed, parsed.payload_bytes)

    async def memory_attached(self, params: dict[str, Any]) -> None:
        parsed = _validate(AttachedParams, params)
        self.engine.memory_attached(parsed.request_id)

    async def turn_completed(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(TurnParams, params)
        try:
            queued = await self.engine.complete_turn(
                CompletedTurn(
                    request_id=parsed.request_id,
                    session_id=parsed.session_id,
                    messages=turn_messages(parsed.messages),
                    memory_entry_id=parsed.memory_entry_id,
                    session_file=parsed.session_file,
                )
            )
        except PiHindsightError as error:
            return {
                "queued": 0,
                "notices": [
                    {"level": "warning", "message": f"retain not queued: {error.describe()}"}
                ],
            }
        return {"queued": queued, "notices": []}

    async def compaction(self, params: dict[str, Any]) -> None:
        logger.info("session compacted: %s", params.get("sessionId"))
        self.engine.compacted()

    async def status(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.engine.status()

    async def tool_call(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(ToolCallParams, params)
        result = await self.tools.call(parsed.name, parsed.params)
        return {
            "content": [{"type": "text", "text": result.text}],
            "details": result.details,
            "isError": result.is_error,
        }

    async def command(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(CommandParams, params)
        return await self.commands.run(
            parsed.name, parsed.args, accepted=parsed.accepted, has_ui=parsed.has_ui
        )
