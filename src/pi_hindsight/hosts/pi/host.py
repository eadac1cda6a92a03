"""The Pi host adapter: the shim's JSON-RPC methods → engine calls, engine records → wire shapes.

Everything Pi-specific lives in this package (message roles, the hidden message's custom type,
session files, the shape of tool and command specs); the engine stays host-neutral.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from pi_hindsight.engine.engine import MemoryEngine
from pi_hindsight.engine.types import (
    CompletedTurn,
    Delivery,
    HostFacts,
    Notice,
    SessionInfo,
    SessionView,
    UserRequest,
)
from pi_hindsight.errors import PiHindsightError, RpcError, validation_problems
from pi_hindsight.hosts.adapter import HostAdapter, HostSession
from pi_hindsight.hosts.pi import wire
from pi_hindsight.hosts.pi.messages import request_messages, turn_messages
from pi_hindsight.hosts.pi.naming import CUSTOM_TYPE, FRAMING_SECTION, PI_HOST
from pi_hindsight.hosts.pi.session_file import session_start_dir
from pi_hindsight.hosts.pi.slash_commands import PiCommands, seed_offer
from pi_hindsight.rpc.jsonrpc import INVALID_PARAMS, PROTOCOL_VERSION, Encoded
from pi_hindsight.tools import MemoryTools

logger = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
ParamsT = TypeVar("ParamsT", bound=wire.WireModel)

# How long the shim waits for each call (initialize returns these; docs/rpc.md).
CONFIRM_MS = 1_000
TURN_MS = 5_000
SHUTDOWN_MS = 3_000


def _validate(model: type[ParamsT], params: dict[str, Any]) -> ParamsT:
    try:
        return model.model_validate(params)
    except ValidationError as error:
        problems = validation_problems(error, "(params)")
        raise RpcError(INVALID_PARAMS, f"invalid params: {problems}") from error


def notices_wire(notices: Sequence[Notice]) -> list[wire.NoticeWire]:
    return [wire.NoticeWire(level=notice.level, message=notice.message) for notice in notices]


class PiHost:
    """Holds the engine for one Pi process and answers the shim's methods."""

    # Methods whose work is committed locally and must finish even when a shutdown arrives
    # while they run (a completed turn goes to the outbox before Pi exits).
    durable_methods = frozenset({"turnCompleted"})

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self.session = HostSession(engine)  # one Pi session per sidecar process
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

    def _session_state(self, view: SessionView) -> dict[str, Any]:
        settings = self.engine.settings
        consent = view.consent
        state = wire.SessionStateResult(
            enabled=view.enabled,
            status_line=view.status_line,
            notices=notices_wire(view.notices),
            consent=None
            if consent is None
            else wire.ConsentQuestionWire(title=consent.title, message=consent.message),
            off_reason=view.off_reason,
            tools=[
                wire.ToolSpecWire(
                    name=spec.name,
                    label=spec.label,
                    description=spec.description,
                    parameters=spec.parameters,
                    timeout_ms=spec.timeout_ms,
                )
                for spec in self.tools.specs()
            ],
            commands=self.commands.specs(),
            timeouts=wire.TimeoutsWire(
                prepare_ms=settings.prepare_timeout_ms,
                confirm_ms=CONFIRM_MS,
                turn_ms=TURN_MS,
                command_ms=settings.timeout_ms + 2_000,
                shutdown_ms=SHUTDOWN_MS,
                default_ms=settings.timeout_ms,
            ),
        )
        return state.wire()

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(wire.InitializeParams, params)
        if parsed.protocol_version != PROTOCOL_VERSION:
            raise RpcError(
                INVALID_PARAMS,
                f"protocol version {parsed.protocol_version} is not supported "
                f"(this sidecar speaks {PROTOCOL_VERSION}); run `pi-hindsight setup` again",
            )
        logger.info(
            "initialize (%s): Pi %s, shim %s", parsed.reason, parsed.pi_version, parsed.shim_version
        )
        info = SessionInfo(
            session_id=parsed.session_id,
            cwd=session_start_dir(parsed.session_file, Path(parsed.cwd)),
            transcript_path=parsed.session_file,
            has_ui=parsed.has_ui,
            reason=parsed.reason,
        )
        return self._session_state(await self.session.open(info))

    # -- what a host adapter provides (hosts/adapter.py) ------------------------------------

    @property
    def facts(self) -> HostFacts:
        return PI_HOST

    async def open(self, info: SessionInfo) -> HostSession:
        """Pi opens its one session at every ``initialize`` (start, reload, new, resume, fork)."""
        await self.session.open(info)
        return self.session

    def deliver(self, session: HostSession, delivery: Delivery) -> wire.MemoryMessageWire | None:
        """The block as a hidden custom message of ours, with its details for Pi's record."""
        if delivery.text is None:
            return None
        return wire.MemoryMessageWire(
            custom_type=CUSTOM_TYPE,
            content=delivery.text,
            display=False,
            details=delivery.details,
        )

    def show(self, notices: Sequence[Notice]) -> list[wire.NoticeWire]:
        return notices_wire(notices)

    async def consent(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(wire.ConsentParams, params)
        view = await self.engine.answer_consent(parsed.accepted)
        offer = await seed_offer(self.engine) if parsed.accepted and view.enabled else None
        if offer is not None:
            view = dataclasses.replace(view, notices=(*view.notices, offer))
        return self._session_state(view)

    async def prepare_memory(self, params: dict[str, Any]) -> Encoded | dict[str, Any]:
        parsed = _validate(wire.PrepareParams, params)
        custom = parsed.message_type == "custom"
        delivery = await self.engine.prepare(
            UserRequest(
                request_id=parsed.request_id,
                session_id=parsed.session_id,
                prompt=parsed.prompt,
                origin="extension" if custom else "user",
                origin_detail=f"another extension's message ({parsed.custom_type or 'custom'})"
                if custom
                else None,
                host_states_framing=parsed.can_set_system_section,
            )
        )
        framing = self.engine.framing()
        return wire.PrepareResult(
            message=self.deliver(self.session, delivery),
            outcome=delivery.outcome,
            reason=delivery.reason,
            recall_ms=delivery.details.recall_ms,
            notices=self.show(delivery.notices),
            status_line=self.engine.status_line(),
            framing=None
            if framing is None
            else wire.FramingWire(section=FRAMING_SECTION, text=framing),
        ).wire_json()

    async def confirm_delivery(self, params: dict[str, Any]) -> None:
        parsed = _validate(wire.ConfirmParams, params)
        await self.engine.delivery_confirmed(
            parsed.request_id, parsed.confirmed, parsed.payload_bytes
        )

    async def memory_attached(self, params: dict[str, Any]) -> None:
        parsed = _validate(wire.AttachedParams, params)
        await self.engine.memory_attached(parsed.request_id)

    async def turn_completed(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(wire.TurnParams, params)
        messages, memory_entry_id = parsed.messages, parsed.memory_entry_id
        if parsed.entries is not None:
            messages, found = request_messages(parsed.entries, parsed.request_id)
            memory_entry_id = memory_entry_id or found
        try:
            queued = await self.engine.complete_turn(
                CompletedTurn(
                    request_id=parsed.request_id,
                    session_id=parsed.session_id,
                    messages=turn_messages(messages),
                    memory_entry_id=memory_entry_id,
                    transcript_path=parsed.session_file,
                    aborted=parsed.aborted,
                )
            )
        except PiHindsightError as error:
            warning = Notice.warning(f"retain not queued: {error.describe()}")
            return wire.TurnResult(queued=0, notices=notices_wire((warning,))).wire()
        return wire.TurnResult(queued=queued, notices=[]).wire()

    async def compaction(self, params: dict[str, Any]) -> None:
        parsed = _validate(wire.CompactionParams, params)
        logger.info("session compacted: %s", parsed.session_id)
        await self.engine.compacted()

    async def shutdown(self, params: dict[str, Any] | None, bound_s: float) -> dict[str, int]:
        """Submit what is ready within ``bound_s``; the rest stays in the outbox for later."""
        reason = "eof"
        if params is not None:
            try:
                reason = wire.ShutdownParams.model_validate(params).reason
            except ValueError:
                reason = "unknown"
        logger.info("shutting down (%s)", reason)
        return wire.ShutdownResult.model_validate(await self.engine.shutdown(bound_s)).wire()

    async def status(self, params: dict[str, Any]) -> dict[str, Any]:
        return (await self.engine.status()).to_json()

    async def tool_call(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(wire.ToolCallParams, params)
        result = await self.tools.call(parsed.name, parsed.params)
        return wire.ToolCallResult(
            content=[wire.TextContentWire(text=result.text)],
            details=result.details,
            is_error=result.is_error,
        ).wire()

    async def command(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = _validate(wire.CommandParams, params)
        result = await self.commands.run(
            parsed.name, parsed.args, accepted=parsed.accepted, has_ui=parsed.has_ui
        )
        return result.wire()


if TYPE_CHECKING:

    def _provides_the_adapter(host: PiHost) -> HostAdapter[HostSession]:
        return host  # mypy checks PiHost provides what hosts/adapter.py asks
