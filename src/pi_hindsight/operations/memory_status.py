"""``status`` (memory health, and a startup-memo operation looked up by id — only this scope's)
and ``refresh_memo`` (accepted is not completed: the operation id comes back at once, R-MEMO-3)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from pi_hindsight.engine.startup_memo import create_memo, memo_id
from pi_hindsight.errors import BackendError
from pi_hindsight.operations.base import (
    Operation,
    OperationArgs,
    OperationContext,
    OperationInputError,
    OperationResult,
    require_scope,
)

if TYPE_CHECKING:
    from pi_hindsight.engine.status import EngineStatus

MEMO_REFRESH = "memo-refresh"


class StatusArgs(OperationArgs):
    operation_id: str | None = Field(
        default=None, max_length=100, description="a refresh_memo operation id to follow"
    )


class MemoOperation(OperationResult):
    operation_id: str
    state: str
    requested_at: str


class StatusResult(OperationResult):
    summary: str
    # The engine's status snapshot (engine/status.py owns the shape). engine/status.py loads on
    # first use (tests/unit/test_startup_imports.py), so the type resolves then (``status``).
    status: EngineStatus
    startup_operation: MemoOperation | None = None

    def render(self) -> str:
        lines = [self.summary]
        if self.startup_operation is not None:
            operation = self.startup_operation
            lines.append(f"startup memo operation {operation.operation_id}: {operation.state}")
        return "\n".join(lines)


async def status(context: OperationContext, args: StatusArgs) -> StatusResult:
    current = await context.status()
    operation = None
    if args.operation_id:
        operation = await memo_operation(context, args.operation_id)
    from pi_hindsight.engine.status import EngineStatus  # noqa: PLC0415 - loaded by now

    StatusResult.model_rebuild(_types_namespace={"EngineStatus": EngineStatus})
    return StatusResult(summary=summary(current), status=current, startup_operation=operation)


async def memo_operation(context: OperationContext, operation_id: str) -> MemoOperation:
    """Only operations this layer requested for the current scope's memo are looked up;
    anything else is refused the same way, so nothing about other scopes leaks."""
    scope = require_scope(context)
    catalog = await context.open_catalog()
    record = await catalog.operation(operation_id)
    if record is None or record.scope_id != scope.scope_id or record.kind != MEMO_REFRESH:
        raise OperationInputError(
            f"{operation_id!r} is not a startup-memo operation of this scope; only ids "
            "returned by refresh_memo in this scope can be looked up"
        )
    backend = await context.backend()
    state = await backend.operation_status(
        record.bank_id, operation_id, timeout=context.settings.timeout_ms / 1000
    )
    return MemoOperation(
        operation_id=operation_id,
        state=state.state,
        requested_at=datetime.fromtimestamp(record.requested_at).astimezone().isoformat(),
    )


class RefreshMemoArgs(OperationArgs):
    pass


class RefreshMemoResult(OperationResult):
    operation_id: str
    state: Literal["accepted"] = "accepted"

    def render(self) -> str:
        return (
            "Refresh of the startup memo accepted (not yet completed). Follow it with "
            f'{{"action": "status", "operationId": "{self.operation_id}"}}.'
        )


async def refresh_memo(
    context: OperationContext, args: RefreshMemoArgs | None = None, *, full: bool = False
) -> RefreshMemoResult:
    """``full``: regenerate it from the scope's memories as they are now (after a forget; a delta
    refresh only integrates what is new)."""
    scope = require_scope(context)
    settings = context.settings
    backend = await context.backend_with_bank(scope.bank_id, settings.banks.project.mission)
    timeout = settings.timeout_ms / 1000
    model_id = memo_id(scope)
    if await backend.get_mental_model(scope.bank_id, model_id, timeout=timeout) is None:
        operation_id = await create_memo(
            backend,
            scope,
            timeout=timeout,
            min_refresh_interval_s=settings.memo.min_refresh_interval_s,
        )
    else:
        operation_id = await backend.refresh_mental_model(
            scope.bank_id, model_id, full=full, timeout=timeout
        )
    if not operation_id:
        raise BackendError("Hindsight accepted the refresh but returned no operation id")
    catalog = await context.open_catalog()
    await catalog.record_operation(
        operation_id=operation_id,
        scope_id=scope.scope_id,
        bank_id=scope.bank_id,
        kind=MEMO_REFRESH,
        subject=model_id,
    )
    context.forget_memo()
    return RefreshMemoResult(operation_id=operation_id)


def summary(status: EngineStatus) -> str:
    """The status for a model: short, and never hiding a degraded state."""
    scope = status.scope
    if scope is None:
        return f"Memory is off: {status.off_reason}"
    backend = status.backend
    health = {True: "healthy", False: f"unavailable ({backend.last_error})", None: "not contacted"}
    parts = [
        f"scope {scope.scope_id} in bank {scope.bank_id} (tags {', '.join(scope.tags)}, exact)",
        f"profile {status.profile}; backend {health[backend.healthy]}"
        + (f"; proxy {backend.proxy_line}" if backend.proxy_line else ""),
        f"last request: {status.last_outcome or 'none'}"
        + (f" ({status.last_reason})" if status.last_reason else ""),
    ]
    outbox = status.outbox
    if outbox is not None and outbox.error is None:
        parts.append(f"outbox: {outbox.counts_line()}")
    if status.evidence.enabled:
        parts.append("evidence: " + ("recording" if status.evidence.recording else "NOT recording"))
    parts.append(f"relevance: {status.recall.relevance}")
    if status.retain.paused:
        parts.append(f"retain paused: {status.retain.paused}")
    if status.spend is not None:
        parts.append(f"spend: {status.spend.describe()}")
    if status.evidence.held_back_line:
        parts.append(f"held back: {status.evidence.held_back_line}")
    for event in status.set_aside:
        parts.append(f"set aside: {event.store} ({event.reason}); see `pi-hindsight state list`")
    return "\n".join(parts)


STATUS = Operation(
    "status",
    "memory health (pass operationId to follow a refresh_memo)",
    StatusArgs,
    StatusResult,
    status,
)
REFRESH_MEMO = Operation(
    "refresh_memo",
    "ask Hindsight to refresh the startup memo (returns an operationId at once)",
    RefreshMemoArgs,
    RefreshMemoResult,
    refresh_memo,
)
