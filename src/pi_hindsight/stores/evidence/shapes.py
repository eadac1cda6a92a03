"""The evidence ledger's records: what one request's delivery was (``PreparedRecord``, the
engine's input; ``RequestRow``, as stored), how a record reads back (``EvidenceRecord``,
``EvidenceDetail``, ``EvidencePage``) with its one JSON form, and a migrated legacy file
(``LegacySource``). ``schema.py`` holds the SQL and the row conversions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_serializer, model_serializer

from pi_hindsight.serialisation import Record
from pi_hindsight.stores.evidence.held import HeldItem

Outcome = Literal[
    "delivered",
    "nothing_found",
    "skipped",
    "backend_unavailable",
    "not_registered",
    "not_user_request",
    "error",
]

RetainDecision = Literal["queued", "skipped"]


def iso(timestamp: float | None) -> str | None:
    """Epoch seconds → ``2025-01-31T12:00:00.123Z`` (UTC)."""
    if timestamp is None:
        return None
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def format_bytes(count: float) -> str:
    """Decimal units, as the cap is configured (50 MB = 50,000,000 bytes)."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(count) < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} GB"  # pragma: no cover - the loop returns


def tri(value: object) -> Literal["true", "false", "unknown"]:
    if value is None:
        return "unknown"
    return "true" if value else "false"


class MemoInfo(Record):
    """The startup memo that was part of a delivery: its id and the backend's refresh time."""

    memo_id: str = Field(alias="id")
    refreshed_at: str | None = None


class DeliveredItem(Record):
    """One record a delivery gave the model, as the ledger keeps it (R-RECALL-4: what the block
    did not show is not lost). The engine's ``DeliveredRecord``, in the store's terms."""

    record_id: str = Field(alias="id")
    section: str  # project, user
    key: str | None = None
    type: str | None = None
    document_id: str | None = None
    chunk_id: str | None = None
    occurred: str | None = None
    context: str | None = None
    shown: tuple[str, ...] = ()  # what besides the text the block showed: context, source
    duplicate_ids: tuple[str, ...] = ()  # same-text records left out as duplicates of it
    # Why recall returned it: Hindsight's scores (final, reranker, semantic, keyword; {} for
    # records kept before scores were, or recall gave none).
    scores: dict[str, float] = Field(default_factory=dict)


class EvidenceRecord(Record):
    """One request's evidence, without the body (what ``list`` returns). Fields in the order
    its JSON shows them; times are epoch seconds here and ISO 8601 (UTC) in the JSON."""

    request_id: str
    prepared_at: float
    outcome: str
    reason: str | None
    scope_id: str | None
    bank_ids: tuple[str, ...]
    session_id: str | None
    transcript_path: str | None
    entry_id: str | None
    recall_ms: float | None
    total_ms: float | None
    record_count: int
    omitted: int
    # Recalled records left out, by why: budget, duplicate, alreadyDelivered, inMemo ({}: none
    # recorded — a record from before this was kept, or nothing was left out).
    omitted_by: dict[str, int] = Field(default_factory=dict)
    # The query each recall was sent, redacted as sent ({"project": …, "user": …}; {}: kept
    # before queries were, or no recall ran).
    queries: dict[str, str] = Field(default_factory=dict)
    # What retain did with the completed request: "queued" (to the outbox), "skipped" with
    # ``retain_reason`` (no knowledge in it: empty, acknowledgement, aborted, memory tools
    # only), or None (not decided: the request did not complete, retain is off here, or the
    # record is older than the decision is). The JSON shows both as ``retain``.
    retain: str | None = None
    tokens: int | None
    body_bytes: int
    record_ids: tuple[str, ...]
    memo: MemoInfo | None
    attached: bool | None  # None: unknown (not reported)
    attached_at: float | None
    confirmed: bool | None  # None: unknown (no payload check reported)
    confirmed_at: float | None
    payload_bytes: int | None
    source: str  # "live", or "legacy:<format>" for migrated lines
    meta: dict[str, Any] = Field(default_factory=dict)
    retain_reason: str | None = Field(default=None, exclude=True)  # shown in ``retain``
    seq: int = Field(default=0, exclude=True)  # the ledger's row order

    @field_serializer("prepared_at", "attached_at", "confirmed_at")
    def _iso(self, timestamp: float | None) -> str | None:
        return iso(timestamp)

    @field_serializer("retain")
    def _retain(self, decision: str | None) -> dict[str, str | None] | None:
        return None if decision is None else {"decision": decision, "reason": self.retain_reason}


class EvidenceDetail(Record):
    """A record with what it delivered; its JSON is the record's, flat, and these."""

    record: EvidenceRecord
    items: tuple[DeliveredItem, ...] = Field(default=(), alias="records")  # none for older
    held: tuple[HeldItem, ...] = Field(default=(), alias="heldBack")  # recalled, held back
    body: str | None  # the memory text delivered; None when nothing was delivered

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {**data.pop("record"), **data}


@dataclass(frozen=True)
class EvidencePage:
    records: tuple[EvidenceRecord, ...]
    next_cursor: str | None  # pass as ``before`` for the next (older) page


class LegacySource(Record):
    """A legacy file being (or already) migrated: identity and resumable cursor. Its JSON is
    what ``evidence stats`` shows of it (times of its own are kept, not shown)."""

    identity: str
    path: str
    size: int
    next_offset: int  # byte offset of the first line not yet consumed
    next_line: int  # number of lines consumed (the next line is next_line + 1)
    formats: dict[str, int] = Field(default_factory=dict)
    imported: int = 0
    duplicates: int = 0
    skipped: dict[str, int] = Field(default_factory=dict)
    bad: int = 0
    bad_lines: tuple[tuple[int, str], ...] = ()  # (line number, why), the first ones only
    started_at: float = Field(default=0.0, exclude=True)
    updated_at: float = Field(default=0.0, exclude=True)
    completed_at: float | None = None

    @field_serializer("bad_lines")
    def _bad_lines(self, lines: tuple[tuple[int, str], ...]) -> list[dict[str, int | str]]:
        return [{"line": line, "reason": why} for line, why in lines]

    @field_serializer("completed_at")
    def _iso(self, timestamp: float | None) -> str | None:
        return iso(timestamp)


@dataclass(frozen=True)
class RequestRow:
    """One request's record as it is stored: prepared live by the engine (``source`` "live"),
    or imported from a legacy evidence line (``source`` "legacy:<format>",
    ``legacy/evidence_formats.py``)."""

    request_id: str
    prepared_at: float
    outcome: Outcome
    source: str
    reason: str | None = None
    scope_id: str | None = None
    bank_ids: tuple[str, ...] = ()
    session_id: str | None = None
    transcript_path: str | None = None
    entry_id: str | None = None
    recall_ms: float | None = None
    total_ms: float | None = None
    record_count: int = 0
    omitted: int = 0
    tokens: int | None = None
    body: str | None = None
    record_ids: tuple[str, ...] = ()
    memo: MemoInfo | None = None
    attached: bool | None = None
    confirmed: bool | None = None
    payload_bytes: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    items: tuple[DeliveredItem, ...] = ()
    omitted_by: Mapping[str, int] = field(default_factory=dict)
    queries: Mapping[str, str] = field(default_factory=dict)
    held: tuple[HeldItem, ...] = ()

    @property
    def legacy_format(self) -> str | None:
        return self.source.removeprefix("legacy:") if self.source.startswith("legacy:") else None


@dataclass(frozen=True)
class PreparedRecord:
    """What the engine records for one request when memory was prepared (or why not): the
    ledger's input. ``body`` is the memory text actually handed to the host (delivered only)."""

    request_id: str
    outcome: Outcome
    session_id: str | None
    scope_id: str | None = None
    bank_ids: tuple[str, ...] = ()
    transcript_path: str | None = None
    reason: str | None = None
    body: str | None = None
    record_ids: tuple[str, ...] = ()
    omitted: int = 0
    tokens: int | None = None
    recall_ms: float | None = None
    total_ms: float | None = None
    memo: MemoInfo | None = None
    prepared_at: float | None = None
    items: tuple[DeliveredItem, ...] = ()  # per delivered record, in block order
    omitted_by: Mapping[str, int] = field(default_factory=dict)  # left out, by why
    queries: Mapping[str, str] = field(default_factory=dict)  # sent to recall, by section
    held: tuple[HeldItem, ...] = ()  # recalled, held back by the relevance policy

    def row(self, now: float) -> RequestRow:
        return RequestRow(
            request_id=self.request_id,
            prepared_at=now if self.prepared_at is None else self.prepared_at,
            outcome=self.outcome,
            source="live",
            reason=self.reason,
            scope_id=self.scope_id,
            bank_ids=tuple(self.bank_ids),
            session_id=self.session_id,
            transcript_path=self.transcript_path,
            recall_ms=self.recall_ms,
            total_ms=self.total_ms,
            record_count=len(self.record_ids),
            omitted=self.omitted,
            tokens=self.tokens,
            body=self.body,
            record_ids=tuple(self.record_ids),
            memo=self.memo,
            items=tuple(self.items),
            omitted_by=dict(self.omitted_by),
            queries=dict(self.queries),
            held=tuple(self.held),
        )
