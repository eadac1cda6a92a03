"""The evidence ledger's schema, records and row conversions (the SQL lives here, the policy in
``evidence.py``).

Tables::

    requests        one row per user request: list metadata only (never a body)
    bodies          the delivered memory text, keyed by the request's seq (ON DELETE CASCADE)
    state           small key/values: how far the cap has cut into retention
    legacy_sources  one row per migrated legacy file: its identity and resumable cursor
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pi_hindsight.errors import StateError
from pi_hindsight.stores.sqlite import Migration, StoreSchema

Outcome = Literal[
    "delivered",
    "nothing_found",
    "skipped",
    "backend_unavailable",
    "not_registered",
    "not_user_request",
    "error",
]

SCHEMA = StoreSchema(
    name="evidence",
    application_id=0x50484531,  # "PHE1"
    incremental_vacuum=True,
    migrations=(
        Migration(
            "create requests, bodies, state and legacy sources",
            """
            CREATE TABLE requests (
                seq INTEGER PRIMARY KEY,
                request_id TEXT NOT NULL UNIQUE,
                prepared_at REAL NOT NULL,
                outcome TEXT NOT NULL,
                reason TEXT,
                scope_id TEXT,
                bank_ids TEXT NOT NULL DEFAULT '[]',
                session_id TEXT,
                session_file TEXT,
                entry_id TEXT,
                recall_ms REAL,
                total_ms REAL,
                record_count INTEGER NOT NULL DEFAULT 0,
                omitted INTEGER NOT NULL DEFAULT 0,
                tokens INTEGER,
                body_bytes INTEGER NOT NULL DEFAULT 0,
                record_ids TEXT NOT NULL DEFAULT '[]',
                memo_id TEXT,
                memo_refreshed_at TEXT,
                attached INTEGER,
                attached_at REAL,
                confirmed INTEGER,
                confirmed_at REAL,
                payload_bytes INTEGER,
                source TEXT NOT NULL DEFAULT 'live',
                meta TEXT
            );
            CREATE INDEX requests_by_time ON requests(prepared_at);
            CREATE INDEX requests_by_scope ON requests(scope_id, prepared_at);
            CREATE INDEX requests_by_session ON requests(session_id, prepared_at);
            CREATE TABLE bodies (
                seq INTEGER PRIMARY KEY REFERENCES requests(seq) ON DELETE CASCADE,
                body TEXT NOT NULL
            );
            CREATE TABLE state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE legacy_sources (
                identity TEXT PRIMARY KEY,
                path TEXT NOT NULL,
                formats TEXT NOT NULL DEFAULT '{}',
                size INTEGER NOT NULL,
                next_offset INTEGER NOT NULL DEFAULT 0,
                next_line INTEGER NOT NULL DEFAULT 0,
                imported INTEGER NOT NULL DEFAULT 0,
                duplicates INTEGER NOT NULL DEFAULT 0,
                skipped TEXT NOT NULL DEFAULT '{}',
                bad INTEGER NOT NULL DEFAULT 0,
                bad_lines TEXT NOT NULL DEFAULT '[]',
                started_at REAL NOT NULL,
                updated_at REAL NOT NULL,
                completed_at REAL
            )
            """,
        ),
    ),
)

_REQUEST_FIELDS = (
    "request_id",
    "prepared_at",
    "outcome",
    "reason",
    "scope_id",
    "bank_ids",
    "session_id",
    "session_file",
    "entry_id",
    "recall_ms",
    "total_ms",
    "record_count",
    "omitted",
    "tokens",
    "body_bytes",
    "record_ids",
    "memo_id",
    "memo_refreshed_at",
    "attached",
    "confirmed",
    "payload_bytes",
    "source",
    "meta",
)
INSERT_REQUEST = (
    f"INSERT INTO requests ({', '.join(_REQUEST_FIELDS)}) "  # noqa: S608 - constant names
    f"VALUES ({', '.join('?' for _ in _REQUEST_FIELDS)}) "
    "ON CONFLICT(request_id) DO NOTHING RETURNING seq"
)
RECORD_COLUMNS = (
    "seq, request_id, prepared_at, outcome, reason, scope_id, bank_ids, session_id, "
    "session_file, entry_id, recall_ms, total_ms, record_count, omitted, tokens, body_bytes, "
    "record_ids, memo_id, memo_refreshed_at, attached, attached_at, confirmed, confirmed_at, "
    "payload_bytes, source, meta"
)
UPSERT_SOURCE = """
INSERT INTO legacy_sources (identity, path, formats, size, next_offset, next_line, imported,
    duplicates, skipped, bad, bad_lines, started_at, updated_at, completed_at)
VALUES (:identity, :path, :formats, :size, :next_offset, :next_line, :imported, :duplicates,
    :skipped, :bad, :bad_lines, :started_at, :updated_at, :completed_at)
ON CONFLICT(identity) DO UPDATE SET
    path = excluded.path, formats = excluded.formats, size = excluded.size,
    next_offset = excluded.next_offset, next_line = excluded.next_line,
    imported = legacy_sources.imported + excluded.imported,
    duplicates = legacy_sources.duplicates + excluded.duplicates,
    skipped = excluded.skipped, bad = excluded.bad, bad_lines = excluded.bad_lines,
    updated_at = excluded.updated_at, completed_at = excluded.completed_at
"""


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


def _bool(value: object) -> bool | None:
    return None if value is None else bool(value)


@dataclass(frozen=True)
class MemoInfo:
    """The startup memo that was part of a delivery: its id and the backend's refresh time."""

    memo_id: str
    refreshed_at: str | None = None


@dataclass(frozen=True)
class EvidenceRecord:
    """One request's evidence, without the body (what ``list`` returns)."""

    request_id: str
    prepared_at: float
    outcome: str
    reason: str | None
    scope_id: str | None
    bank_ids: tuple[str, ...]
    session_id: str | None
    session_file: str | None
    entry_id: str | None
    recall_ms: float | None
    total_ms: float | None
    record_count: int
    omitted: int
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
    meta: Mapping[str, Any] = field(default_factory=dict)
    seq: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "requestId": self.request_id,
            "preparedAt": iso(self.prepared_at),
            "outcome": self.outcome,
            "reason": self.reason,
            "scopeId": self.scope_id,
            "bankIds": list(self.bank_ids),
            "sessionId": self.session_id,
            "sessionFile": self.session_file,
            "entryId": self.entry_id,
            "recallMs": self.recall_ms,
            "totalMs": self.total_ms,
            "recordCount": self.record_count,
            "omitted": self.omitted,
            "tokens": self.tokens,
            "bodyBytes": self.body_bytes,
            "recordIds": list(self.record_ids),
            "memo": None
            if self.memo is None
            else {"id": self.memo.memo_id, "refreshedAt": self.memo.refreshed_at},
            "attached": self.attached,
            "attachedAt": iso(self.attached_at),
            "confirmed": self.confirmed,
            "confirmedAt": iso(self.confirmed_at),
            "payloadBytes": self.payload_bytes,
            "source": self.source,
            "meta": dict(self.meta),
        }


@dataclass(frozen=True)
class EvidenceDetail:
    record: EvidenceRecord
    body: str | None  # the memory text delivered; None when nothing was delivered

    def to_json(self) -> dict[str, Any]:
        return {**self.record.to_json(), "body": self.body}


@dataclass(frozen=True)
class EvidencePage:
    records: tuple[EvidenceRecord, ...]
    next_cursor: str | None  # pass as ``before`` for the next (older) page


@dataclass(frozen=True)
class LegacySource:
    """A legacy file being (or already) migrated: identity and resumable cursor."""

    identity: str
    path: str
    size: int
    next_offset: int  # byte offset of the first line not yet consumed
    next_line: int  # number of lines consumed (the next line is next_line + 1)
    formats: Mapping[str, int] = field(default_factory=dict)
    imported: int = 0
    duplicates: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    bad: int = 0
    bad_lines: tuple[tuple[int, str], ...] = ()  # (line number, why), the first ones only
    started_at: float = 0.0
    updated_at: float = 0.0
    completed_at: float | None = None


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
    session_file: str | None = None
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
    session_file: str | None = None
    reason: str | None = None
    body: str | None = None
    record_ids: tuple[str, ...] = ()
    omitted: int = 0
    tokens: int | None = None
    recall_ms: float | None = None
    total_ms: float | None = None
    memo: MemoInfo | None = None
    prepared_at: float | None = None

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
            session_file=self.session_file,
            recall_ms=self.recall_ms,
            total_ms=self.total_ms,
            record_count=len(self.record_ids),
            omitted=self.omitted,
            tokens=self.tokens,
            body=self.body,
            record_ids=tuple(self.record_ids),
            memo=self.memo,
        )


@dataclass(frozen=True)
class EvidenceStats:
    path: str
    # Counts read every metadata row; ``stats(counts=False)`` leaves them None (cheap status).
    records: int | None
    by_outcome: Mapping[str, int] | None
    delivered_attached: Mapping[str, int] | None  # true / false / unknown, of delivered records
    delivered_confirmed: Mapping[str, int] | None
    disk_bytes: int  # main file + WAL + shared memory
    used_bytes: int  # live pages (the rest of the file is free space SQLite reuses)
    cap_bytes: int
    budget_bytes: int  # what the ledger may use: the cap minus kept legacy originals
    legacy_bytes: int
    legacy_sources: tuple[LegacySource, ...]
    retention_days: float
    oldest_at: float | None
    newest_at: float | None
    cap_cutoff: float | None  # the newest record the cap evicted
    cap_evicted: int
    now: float

    @property
    def effective_retention_days(self) -> float:
        """The retention in force: the configured period, or less where the cap cut into it."""
        configured = self.retention_days
        if self.cap_cutoff is None:
            return configured
        return min(configured, max(0.0, (self.now - self.cap_cutoff) / 86_400))

    @property
    def retention_shortened(self) -> bool:
        return self.effective_retention_days < self.retention_days

    @property
    def retention_note(self) -> str:
        cap = format_bytes(self.cap_bytes)
        if self.retention_shortened:
            days = self.effective_retention_days
            span = f"{days:.1f} days" if days >= 1 else f"{days * 24:.1f} hours"
            return (
                f"retention shortened to {span} by the {cap} cap "
                f"({self.retention_days:g} days configured; {self.cap_evicted} records evicted)"
            )
        return f"retention {self.retention_days:g} days, cap {cap}"

    @property
    def problems(self) -> tuple[str, ...]:
        found: list[str] = []
        if self.legacy_bytes and self.cap_bytes - self.legacy_bytes < self.budget_bytes:
            found.append(
                f"kept legacy originals ({format_bytes(self.legacy_bytes)}) leave less than 10% "
                f"of the {format_bytes(self.cap_bytes)} cap for evidence; delete the originals "
                "you have checked, or raise evidence.capBytes"
            )
        return tuple(found)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "records": self.records,
            "byOutcome": None if self.by_outcome is None else dict(self.by_outcome),
            "deliveredAttached": None
            if self.delivered_attached is None
            else dict(self.delivered_attached),
            "deliveredConfirmed": None
            if self.delivered_confirmed is None
            else dict(self.delivered_confirmed),
            "diskBytes": self.disk_bytes,
            "usedBytes": self.used_bytes,
            "capBytes": self.cap_bytes,
            "budgetBytes": self.budget_bytes,
            "legacyBytes": self.legacy_bytes,
            "retentionDays": self.retention_days,
            "effectiveRetentionDays": round(self.effective_retention_days, 3),
            "retentionShortened": self.retention_shortened,
            "retentionNote": self.retention_note,
            "capEvicted": self.cap_evicted,
            "oldestAt": iso(self.oldest_at),
            "newestAt": iso(self.newest_at),
            "problems": list(self.problems),
            "legacySources": [source_json(source) for source in self.legacy_sources],
        }


def source_json(source: LegacySource) -> dict[str, Any]:
    return {
        "identity": source.identity,
        "path": source.path,
        "size": source.size,
        "nextOffset": source.next_offset,
        "nextLine": source.next_line,
        "formats": dict(source.formats),
        "imported": source.imported,
        "duplicates": source.duplicates,
        "skipped": dict(source.skipped),
        "bad": source.bad,
        "badLines": [{"line": line, "reason": why} for line, why in source.bad_lines],
        "completedAt": iso(source.completed_at),
    }


def request_params(row: RequestRow) -> tuple[object, ...]:
    """Parameters for :data:`INSERT_REQUEST`, in its column order."""
    return (
        str(row.request_id),
        float(row.prepared_at),
        row.outcome,
        row.reason,
        row.scope_id,
        json.dumps([str(bank) for bank in row.bank_ids]),
        row.session_id,
        row.session_file,
        row.entry_id,
        row.recall_ms,
        row.total_ms,
        int(row.record_count),
        int(row.omitted),
        row.tokens,
        0 if row.body is None else len(row.body.encode()),
        json.dumps([str(record) for record in row.record_ids]),
        None if row.memo is None else row.memo.memo_id,
        None if row.memo is None else row.memo.refreshed_at,
        None if row.attached is None else int(row.attached),
        None if row.confirmed is None else int(row.confirmed),
        row.payload_bytes,
        row.source,
        json.dumps(dict(row.meta), ensure_ascii=False, default=str) if row.meta else None,
    )


def source_params(source: LegacySource, imported: int, rows: int) -> dict[str, object]:
    """Parameters for :data:`UPSERT_SOURCE`; ``imported`` / ``rows`` are this batch's counts."""
    return {
        "identity": source.identity,
        "path": source.path,
        "formats": json.dumps(dict(source.formats)),
        "size": source.size,
        "next_offset": source.next_offset,
        "next_line": source.next_line,
        "imported": imported,
        "duplicates": rows - imported,
        "skipped": json.dumps(dict(source.skipped)),
        "bad": source.bad,
        "bad_lines": json.dumps([list(item) for item in source.bad_lines]),
        "started_at": source.started_at,
        "updated_at": source.updated_at,
        "completed_at": source.completed_at,
    }


def record_from_row(row: sqlite3.Row) -> EvidenceRecord:
    memo = None
    if row["memo_id"] is not None:
        memo = MemoInfo(memo_id=row["memo_id"], refreshed_at=row["memo_refreshed_at"])
    return EvidenceRecord(
        request_id=row["request_id"],
        prepared_at=row["prepared_at"],
        outcome=row["outcome"],
        reason=row["reason"],
        scope_id=row["scope_id"],
        bank_ids=tuple(json.loads(row["bank_ids"])),
        session_id=row["session_id"],
        session_file=row["session_file"],
        entry_id=row["entry_id"],
        recall_ms=row["recall_ms"],
        total_ms=row["total_ms"],
        record_count=row["record_count"],
        omitted=row["omitted"],
        tokens=row["tokens"],
        body_bytes=row["body_bytes"],
        record_ids=tuple(json.loads(row["record_ids"])),
        memo=memo,
        attached=_bool(row["attached"]),
        attached_at=row["attached_at"],
        confirmed=_bool(row["confirmed"]),
        confirmed_at=row["confirmed_at"],
        payload_bytes=row["payload_bytes"],
        source=row["source"],
        meta=json.loads(row["meta"]) if row["meta"] else {},
        seq=row["seq"],
    )


def source_from_row(row: sqlite3.Row) -> LegacySource:
    return LegacySource(
        identity=row["identity"],
        path=row["path"],
        size=row["size"],
        next_offset=row["next_offset"],
        next_line=row["next_line"],
        formats=json.loads(row["formats"]),
        imported=row["imported"],
        duplicates=row["duplicates"],
        skipped=json.loads(row["skipped"]),
        bad=row["bad"],
        bad_lines=tuple((int(line), str(why)) for line, why in json.loads(row["bad_lines"])),
        started_at=row["started_at"],
        updated_at=row["updated_at"],
        completed_at=row["completed_at"],
    )


def make_cursor(row: sqlite3.Row) -> str:
    """An opaque keyset cursor: the (prepared_at, seq) of the last record of a page."""
    return f"{row['prepared_at']!r}_{row['seq']}"


def parse_cursor(cursor: str) -> tuple[float, int]:
    at, _, seq = cursor.rpartition("_")
    try:
        return float(at), int(seq)
    except ValueError as error:
        raise StateError(
            f"not a list cursor: {cursor!r}", hint="pass the cursor a previous page printed"
        ) from error
