"""The evidence ledger's schema and row conversions (the SQL lives here, the records in
``shapes.py``, the policy in ``ledger.py``).

Tables::

    requests          one row per user request: list metadata only (never a body)
    bodies            the delivered memory text, keyed by the request's seq (ON DELETE CASCADE)
    delivered_records one row per record a delivery gave the model, in block order: ids,
                      document and chunk, when, context, recall's scores
                      (ON DELETE CASCADE)
    held_records    one row per recalled text a delivery held back (relevance.py): its
                      text (redacted), scores, the reason and its numbers (ON DELETE CASCADE)
    state           small key/values: how far the cap has cut into retention
    legacy_sources  one row per migrated legacy file: its identity and resumable cursor
"""

from __future__ import annotations

import json
import sqlite3

from pi_hindsight.errors import StateError
from pi_hindsight.stores.evidence.shapes import (
    DeliveredItem,
    EvidenceDetail,
    EvidencePage,
    EvidenceRecord,
    LegacySource,
    MemoInfo,
    Outcome,
    PreparedRecord,
    RequestRow,
    format_bytes,
    iso,
    tri,
)
from pi_hindsight.stores.sqlite import Migration, StoreSchema

# The records live in shapes.py; they are importable from here, with the SQL.
__all__ = [
    "INSERT_DELIVERED",
    "INSERT_REQUEST",
    "RECORD_COLUMNS",
    "SCHEMA",
    "SELECT_DELIVERED",
    "UPSERT_SOURCE",
    "DeliveredItem",
    "EvidenceDetail",
    "EvidencePage",
    "EvidenceRecord",
    "LegacySource",
    "MemoInfo",
    "Outcome",
    "PreparedRecord",
    "RequestRow",
    "delivered_params",
    "format_bytes",
    "iso",
    "item_from_row",
    "make_cursor",
    "parse_cursor",
    "record_from_row",
    "request_params",
    "source_from_row",
    "source_params",
    "tri",
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
        Migration(
            "per-record delivery data and omissions by reason",
            """
            CREATE TABLE delivered_records (
                seq INTEGER NOT NULL REFERENCES requests(seq) ON DELETE CASCADE,
                position INTEGER NOT NULL,
                record_id TEXT NOT NULL,
                section TEXT NOT NULL,
                record_key TEXT,
                type TEXT,
                document_id TEXT,
                chunk_id TEXT,
                occurred TEXT,
                context TEXT,
                shown TEXT NOT NULL DEFAULT '[]',
                duplicate_ids TEXT NOT NULL DEFAULT '[]',
                PRIMARY KEY (seq, position)
            ) WITHOUT ROWID;
            ALTER TABLE requests ADD COLUMN omitted_by TEXT NOT NULL DEFAULT '{}'
            """,
        ),
        Migration(
            "why each record came: recall scores per record, the queries sent",
            """
            ALTER TABLE delivered_records ADD COLUMN scores TEXT;
            ALTER TABLE requests ADD COLUMN queries TEXT NOT NULL DEFAULT '{}'
            """,
        ),
        Migration(
            "held back, never hidden: the recalled records a delivery did not deliver",
            """
            CREATE TABLE held_records (
                seq INTEGER NOT NULL REFERENCES requests(seq) ON DELETE CASCADE,
                position INTEGER NOT NULL,
                record_id TEXT NOT NULL,
                section TEXT NOT NULL,
                record_key TEXT,
                type TEXT,
                occurred TEXT,
                text TEXT NOT NULL,
                scores TEXT,
                reason TEXT NOT NULL,
                detail TEXT,
                duplicate_ids TEXT NOT NULL DEFAULT '[]',
                PRIMARY KEY (seq, position)
            ) WITHOUT ROWID
            """,
        ),
        Migration(
            "the retain decision: queued, or skipped and why",
            """
            ALTER TABLE requests ADD COLUMN retain TEXT;
            ALTER TABLE requests ADD COLUMN retain_reason TEXT
            """,
        ),
        Migration(
            "host-neutral names: the host's conversation record is a transcript path",
            "ALTER TABLE requests RENAME COLUMN session_file TO transcript_path",
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
    "transcript_path",
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
    "omitted_by",
    "queries",
)
INSERT_REQUEST = (
    f"INSERT INTO requests ({', '.join(_REQUEST_FIELDS)}) "  # noqa: S608 - constant names
    f"VALUES ({', '.join('?' for _ in _REQUEST_FIELDS)}) "
    "ON CONFLICT(request_id) DO NOTHING RETURNING seq"
)
RECORD_COLUMNS = (
    "seq, request_id, prepared_at, outcome, reason, scope_id, bank_ids, session_id, "
    "transcript_path, entry_id, recall_ms, total_ms, record_count, omitted, tokens, body_bytes, "
    "record_ids, memo_id, memo_refreshed_at, attached, attached_at, confirmed, confirmed_at, "
    "payload_bytes, source, meta, omitted_by, queries, retain, retain_reason"
)
INSERT_DELIVERED = (
    "INSERT INTO delivered_records (seq, position, record_id, section, record_key, type, "
    "document_id, chunk_id, occurred, context, shown, duplicate_ids, scores) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT_DELIVERED = (
    "SELECT record_id, section, record_key, type, document_id, chunk_id, occurred, context, "
    "shown, duplicate_ids, scores FROM delivered_records WHERE seq = ? ORDER BY position"
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


def _bool(value: object) -> bool | None:
    return None if value is None else bool(value)


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
        row.transcript_path,
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
        json.dumps({str(key): int(value) for key, value in row.omitted_by.items()}),
        json.dumps(
            {str(key): str(value) for key, value in row.queries.items()}, ensure_ascii=False
        ),
    )


def delivered_params(seq: int, items: tuple[DeliveredItem, ...]) -> list[tuple[object, ...]]:
    """Parameters for :data:`INSERT_DELIVERED`, one tuple per item, in block order."""
    return [
        (
            seq,
            position,
            str(item.record_id),
            str(item.section),
            item.key,
            item.type,
            item.document_id,
            item.chunk_id,
            item.occurred,
            item.context,
            json.dumps(list(item.shown)),
            json.dumps(list(item.duplicate_ids)),
            json.dumps(dict(item.scores)) if item.scores else None,
        )
        for position, item in enumerate(items)
    ]


def item_from_row(row: sqlite3.Row) -> DeliveredItem:
    return DeliveredItem(
        record_id=row["record_id"],
        section=row["section"],
        key=row["record_key"],
        type=row["type"],
        document_id=row["document_id"],
        chunk_id=row["chunk_id"],
        occurred=row["occurred"],
        context=row["context"],
        shown=tuple(json.loads(row["shown"])),
        duplicate_ids=tuple(json.loads(row["duplicate_ids"])),
        # NULL: kept before scores were (migration 3), or recall returned none.
        scores=json.loads(row["scores"]) if row["scores"] else {},
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
        transcript_path=row["transcript_path"],
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
        omitted_by=json.loads(row["omitted_by"]),
        queries=json.loads(row["queries"]),
        retain=row["retain"],
        retain_reason=row["retain_reason"],
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
