"""The retain outbox's health and the retry of dead letters, for the host's outbox command and
``pi-hindsight outbox status | retry``: one wording of the outbox's health for both."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import Field

from pi_hindsight.operations.base import Operation, OperationArgs, OperationResult
from pi_hindsight.stores.outbox_records import counts_line

if TYPE_CHECKING:
    from pi_hindsight.stores.outbox_records import OutboxHealth


class OutboxAccess(Protocol):
    """A session's engine provides it; so does the command line's store (``cli/outbox_cmd.py``)."""

    async def outbox_health(self) -> OutboxHealth: ...

    async def retry_dead(self) -> int:
        """Re-queue every dead letter (their original idempotency keys)."""
        ...


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


class OutboxStatusArgs(OperationArgs):
    pass


class OutboxStatusResult(OperationResult):
    pending: int
    submitted: int
    dead: int
    done: int
    oldest_pending_age_s: float | None
    last_error: str | None
    last_error_at: float | None
    # What only the command line knows: the store's file and any set-aside reports.
    path: str | None = None
    set_aside: dict[str, str] | None = None
    set_aside_reports: list[dict[str, Any]] = Field(default_factory=list)

    def render(self) -> str:
        line = f"outbox: {counts_line(self.pending, self.submitted, self.dead, self.done)}"
        if self.oldest_pending_age_s is not None:
            line += f"; oldest pending {age(self.oldest_pending_age_s)}"
        lines = [line]
        if self.last_error:
            when = (
                ""
                if self.last_error_at is None
                else f" ({age(time.time() - self.last_error_at)} ago)"
            )
            lines.append(f"last error{when}: {self.last_error}")
        if self.dead:
            lines.append(
                "dead letters: `pi-hindsight outbox list --state dead`, then "
                "`pi-hindsight outbox retry --all`"
            )
        return "\n".join(lines)


async def outbox_status(context: OutboxAccess, args: OutboxStatusArgs) -> OutboxStatusResult:
    health = await context.outbox_health()
    return OutboxStatusResult(
        pending=health.pending,
        submitted=health.submitted,
        dead=health.dead,
        done=health.done,
        oldest_pending_age_s=health.oldest_pending_age_s,
        last_error=health.last_error,
        last_error_at=health.last_error_at,
    )


class OutboxRetryArgs(OperationArgs):
    pass


class OutboxRetryResult(OperationResult):
    retried: int

    def render(self) -> str:
        return f"re-queued {self.retried} item(s): they will be sent again"


async def outbox_retry(context: OutboxAccess, args: OutboxRetryArgs) -> OutboxRetryResult:
    return OutboxRetryResult(retried=await context.retry_dead())


OUTBOX_STATUS = Operation(
    "outbox_status",
    "outbox health: pending, awaiting confirmation, dead letters, oldest age, last error",
    OutboxStatusArgs,
    OutboxStatusResult,
    outbox_status,
)
OUTBOX_RETRY = Operation(
    "outbox_retry",
    "send every dead letter again (original idempotency keys)",
    OutboxRetryArgs,
    OutboxRetryResult,
    outbox_retry,
)
