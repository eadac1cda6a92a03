"""A page of the evidence ledger (newest first, no bodies), for the host's evidence command and
``pi-hindsight evidence list``: one query, one line per request, one JSON form."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import ConfigDict, Field, PlainSerializer

from pi_hindsight.operations.base import (
    Operation,
    OperationArgs,
    OperationInputError,
    OperationResult,
)
from pi_hindsight.stores.evidence.shapes import Outcome
from pi_hindsight.stores.evidence.tables import iso

if TYPE_CHECKING:
    from typing import Unpack

    from pi_hindsight.engine.recording import LedgerFilters
    from pi_hindsight.stores.evidence.shapes import EvidencePage, EvidenceRecord


class EvidenceAccess(Protocol):
    """A session's engine provides it; so does the command line's ledger."""

    def evidence_unavailable(self) -> str | None: ...

    async def ledger_page(
        self, limit: int, **filters: Unpack[LedgerFilters]
    ) -> tuple[EvidencePage, str]: ...


def flag(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


def when(timestamp: float | None) -> str:
    text = iso(timestamp)
    return "-" if text is None else text[:19].replace("T", " ")


def list_line(record: EvidenceRecord) -> str:
    if record.outcome == "delivered":
        tail = (
            f"{record.record_count} rec, attached {flag(record.attached)}, "
            f"confirmed {flag(record.confirmed)}"
        )
    else:
        tail = (record.reason or "")[:60]
    if record.retain == "skipped":
        tail = f"{tail}; retain skipped: {record.retain_reason}".lstrip("; ")
    return (
        f"{when(record.prepared_at)}  {record.request_id}  {record.outcome:<19}  "
        f"{record.scope_id or '-'}  {tail}"
    ).rstrip()


class EvidenceListArgs(OperationArgs):
    scope: str | None = Field(default=None, description="only this scope id")
    session: str | None = Field(default=None, description="only this session id")
    since: float | None = Field(default=None, description="only since this timestamp")
    outcome: Outcome | None = Field(default=None, description="only this outcome")
    limit: int = Field(default=20, ge=1, le=10_000)
    before: str | None = Field(default=None, description="the cursor a previous page gave")


def _records_json(records: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [record.to_json() for record in records]


class EvidenceListResult(OperationResult):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    records: Annotated[tuple[Any, ...], PlainSerializer(_records_json)]  # EvidenceRecord
    next_cursor: str | None
    retention: str

    def render(self) -> str:
        lines = [list_line(record) for record in self.records] or ["no matching evidence"]
        lines.append(self.retention)
        lines.append("details: `pi-hindsight evidence explain ID`")
        if self.next_cursor:
            lines.append(f"more: add --before {self.next_cursor}")
        return "\n".join(lines)


async def evidence_list(context: EvidenceAccess, args: EvidenceListArgs) -> EvidenceListResult:
    why = context.evidence_unavailable()
    if why is not None:
        raise OperationInputError(f"no evidence ledger: {why}")
    page, retention = await context.ledger_page(
        args.limit,
        scope=args.scope,
        session=args.session,
        since=args.since,
        outcome=args.outcome,
        before=args.before,
    )
    return EvidenceListResult(
        records=page.records, next_cursor=page.next_cursor, retention=retention
    )


EVIDENCE_LIST = Operation(
    "evidence_list",
    "requests, newest first: outcome, memories, attached, confirmed (no bodies)",
    EvidenceListArgs,
    EvidenceListResult,
    evidence_list,
)
