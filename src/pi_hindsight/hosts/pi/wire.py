"""The shim ↔ sidecar wire shapes, defined once (docs/rpc.md).

Params are validated here as they arrive (extra keys ignored, identifiers bounded); results are
built as these models and dumped by alias. The shim's TypeScript types (``shim/wire.ts``) and the
shape reference in docs/rpc.md are generated from this module (``scripts/gen_wire.py``); a test
fails when either drifts from it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from pi_hindsight.engine.types import DeliveryDetails
from pi_hindsight.rpc.jsonrpc import Encoded

# Identifiers are bounded: they are stored in the evidence ledger and the outbox.
_ID_CHARS = 256
_PATH_CHARS = 4096


class WireModel(BaseModel):
    """Every wire shape: camelCase on the wire, snake_case in Python. Unknown keys are ignored
    (a newer shim may send more); in results every field is always present."""

    # defer_build: validators are built at first use, after the sidecar said ``ready``.
    model_config = ConfigDict(
        extra="ignore",
        populate_by_name=True,
        json_schema_serialization_defaults_required=True,
        defer_build=True,
    )

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")

    def wire_json(self) -> Encoded | dict[str, Any]:
        """The answer serialised once, straight to JSON bytes (no dict dumped and encoded
        again: the hot path's answer, issue 19); the same JSON as :meth:`wire`."""
        try:
            return Encoded(self.__pydantic_serializer__.to_json(self, by_alias=True))
        except ValueError:  # a lone surrogate from the server: jsonrpc.encode escapes it
            return self.wire()


# -- params (shim → sidecar) ---------------------------------------------------------------------


class SessionRef(WireModel):
    """Where the shim's event happened; sent with most calls, read where it matters."""

    cwd: str | None = Field(default=None, max_length=_PATH_CHARS)
    session_id: str | None = Field(default=None, alias="sessionId", max_length=_ID_CHARS)
    session_file: str | None = Field(default=None, alias="sessionFile", max_length=_PATH_CHARS)


class InitializeParams(WireModel):
    protocol_version: int = Field(alias="protocolVersion")
    cwd: str = Field(min_length=1, max_length=_PATH_CHARS)
    session_id: str = Field(alias="sessionId", min_length=1, max_length=_ID_CHARS)
    session_file: str | None = Field(default=None, alias="sessionFile", max_length=_PATH_CHARS)
    has_ui: bool = Field(default=False, alias="hasUI")
    reason: str = Field(default="startup", max_length=64)
    pi_version: str | None = Field(default=None, alias="piVersion", max_length=64)
    # The shim's own version (index.ts SHIM_VERSION): which extension files Pi loaded.
    shim_version: str | None = Field(default=None, alias="shimVersion", max_length=64)


class ConsentParams(WireModel):
    accepted: bool


class PrepareParams(SessionRef):
    """A run about to start (Pi's ``before_agent_start``). Pi 1.x tells user prompts (``user``)
    from runs another extension's message started (``custom``: no prompt, its ``customType``)."""

    request_id: str = Field(alias="requestId", min_length=1, max_length=_ID_CHARS)
    prompt: str = ""
    session_id: str = Field(alias="sessionId", min_length=1, max_length=_ID_CHARS)
    message_type: Literal["user", "custom"] = Field(default="user", alias="messageType")
    custom_type: str | None = Field(default=None, alias="customType", max_length=200)
    # Pi 1.x: the shim sets ``PrepareResult.framing`` as a system prompt section on every run,
    # so no memory message needs to carry the framing (0.73.1 has no sections: false).
    can_set_system_section: bool = Field(default=False, alias="canSetSystemSection")


class ConfirmParams(WireModel):
    request_id: str = Field(alias="requestId", max_length=_ID_CHARS)
    confirmed: bool
    # Stored as an SQLite integer (at most 2**63-1); a payload is at most a few megabytes.
    payload_bytes: int | None = Field(default=None, alias="payloadBytes", ge=0, le=2**53)


class TurnParams(SessionRef):
    """A finished request: Pi 0.73.1 sends ``agent_end``'s ``messages``; Pi 1.x, where
    ``agent_end`` is not final, sends the session ``entries`` the request added (after the leaf it
    started from, at ``agent_settled``), and the sidecar picks its messages (hosts/pi/messages.py).
    """

    request_id: str = Field(alias="requestId", max_length=_ID_CHARS)
    session_id: str = Field(alias="sessionId", min_length=1, max_length=_ID_CHARS)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    entries: list[dict[str, Any]] | None = None
    aborted: bool = False
    memory_entry_id: str | None = Field(default=None, alias="memoryEntryId", max_length=_ID_CHARS)


class AttachedParams(WireModel):
    request_id: str = Field(alias="requestId", max_length=_ID_CHARS)


class CompactionParams(SessionRef):
    pass


class CommandParams(SessionRef):
    name: str = Field(max_length=200)
    args: str = ""
    has_ui: bool = Field(default=False, alias="hasUI")
    accepted: bool | None = None


class ToolCallParams(SessionRef):
    name: str = Field(max_length=200)
    params: dict[str, Any] = Field(default_factory=dict)
    tool_call_id: str | None = Field(default=None, alias="toolCallId", max_length=_ID_CHARS)


class ShutdownParams(WireModel):
    reason: str = Field(default="quit", max_length=64)


# -- results (sidecar → shim) --------------------------------------------------------------------

Level = Literal["info", "warning", "error"]


class NoticeWire(WireModel):
    level: Level
    message: str


class ToolSpecWire(WireModel):
    name: str
    label: str
    description: str
    parameters: dict[str, Any]  # a JSON Schema object, passed to Pi as the tool's schema
    timeout_ms: int = Field(alias="timeoutMs")


class CommandSpecWire(WireModel):
    name: str
    description: str


class TimeoutsWire(WireModel):
    prepare_ms: int = Field(alias="prepareMs")
    confirm_ms: int = Field(alias="confirmMs")
    turn_ms: int = Field(alias="turnMs")
    command_ms: int = Field(alias="commandMs")
    shutdown_ms: int = Field(alias="shutdownMs")
    default_ms: int = Field(alias="defaultMs")


class ConsentQuestionWire(WireModel):
    title: str
    message: str


class SessionStateResult(WireModel):
    """The answer to ``initialize`` and ``consent``."""

    enabled: bool
    status_line: str | None = Field(alias="statusLine")
    notices: list[NoticeWire]
    consent: ConsentQuestionWire | None
    off_reason: str | None = Field(alias="offReason")
    tools: list[ToolSpecWire]
    commands: list[CommandSpecWire]
    timeouts: TimeoutsWire


class MemoryMessageWire(WireModel):
    custom_type: str = Field(alias="customType")
    content: str
    display: bool
    # Never sent to the model. Serialised as ``DeliveryDetails.to_json`` (engine/types.py) says,
    # straight from the record, in the same pass as the answer (issue 19); an object to the shim.
    details: Annotated[
        DeliveryDetails, WithJsonSchema({"additionalProperties": True, "type": "object"})
    ]


class FramingWire(WireModel):
    """The framing of memory (R-RECALL-5): the same text every time, stated once where it stays
    in the cached prefix. The shim sets it as the system prompt section ``section`` on every run
    (Pi drops a section a run does not set; an unchanged one keeps the prefix byte-identical)."""

    section: str
    text: str


class PrepareResult(WireModel):
    message: MemoryMessageWire | None
    outcome: str
    reason: str | None
    recall_ms: float | None = Field(alias="recallMs")
    notices: list[NoticeWire]
    status_line: str | None = Field(alias="statusLine")
    # Memory is on: set this section (whatever the outcome). None: memory is off, set nothing.
    framing: FramingWire | None


class TurnResult(WireModel):
    queued: int
    notices: list[NoticeWire]


class TextContentWire(WireModel):
    type: Literal["text"] = "text"
    text: str


class ToolCallResult(WireModel):
    content: list[TextContentWire]
    details: dict[str, Any]
    is_error: bool = Field(alias="isError")


class ConfirmRequestWire(WireModel):
    """A command asks the user first: the shim shows the dialog, then calls ``method`` with
    ``params`` plus ``accepted``."""

    title: str
    message: str
    method: str
    params: dict[str, Any]


class CommandResult(WireModel):
    """A command's answer. Absent keys mean "nothing": no text to show, no question, and the
    status line left as it is (a ``null`` status line would clear it)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=False)

    text: str | None = None
    level: Level = "info"
    confirm: ConfirmRequestWire | None = None
    status_line: str | None = Field(default=None, alias="statusLine")

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)


class ShutdownResult(WireModel):
    flushed: int
    pending: int


# -- notifications (sidecar → shim) -------------------------------------------------------------


class ReadyParams(WireModel):
    protocol_version: int = Field(alias="protocolVersion")
    version: str
    pid: int


class NotifyParams(WireModel):
    level: Level
    message: str


class StatusLineParams(WireModel):
    text: str | None


# What the reference in docs/rpc.md and shim/wire.ts list, in this order.
METHODS: tuple[tuple[str, type[WireModel], type[WireModel] | None], ...] = (
    ("initialize", InitializeParams, SessionStateResult),
    ("consent", ConsentParams, SessionStateResult),
    ("prepareMemory", PrepareParams, PrepareResult),
    ("confirmDelivery", ConfirmParams, None),
    ("memoryAttached", AttachedParams, None),
    ("turnCompleted", TurnParams, TurnResult),
    ("compaction", CompactionParams, None),
    ("toolCall", ToolCallParams, ToolCallResult),
    ("command", CommandParams, CommandResult),
    ("shutdown", ShutdownParams, ShutdownResult),
)
NOTIFICATIONS: tuple[tuple[str, type[WireModel]], ...] = (
    ("ready", ReadyParams),
    ("notify", NotifyParams),
    ("status", StatusLineParams),
)
