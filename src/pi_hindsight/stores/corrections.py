"""What the catalogue keeps about a scope's memory over its life: corrections in force (records
kept out of deliveries) and the log of every forget and correct (who, when, which ids).

Both live in ``catalog.sqlite`` (the catalogue's migration "corrections and the lifecycle log"),
next to the registration they belong to: user-owned, 0600, nothing in a repository can write it.
A correction is keyed by (scope, record id) and carries the record's text key
(``engine/memory_block.py`` ``record_key``), so the same text under another id — an observation
stating it — is held back too. Corrections outlive an ``unregister`` (registering again brings them
back); they end only when removed (``pi-hindsight memory corrections --remove ID``).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pi_hindsight.serialisation import Record
from pi_hindsight.stores.sqlite import Migration, StoreConnection, transaction, translated_errors

LifecycleAction = Literal["forget", "correct", "uncorrect"]

MIGRATION = Migration(
    "corrections and the lifecycle log",
    """
    CREATE TABLE corrections (
        scope_id TEXT NOT NULL,
        record_id TEXT NOT NULL,
        text_key TEXT NOT NULL,
        record_text TEXT NOT NULL,
        correction TEXT NOT NULL,
        note_id TEXT,
        actor TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (scope_id, record_id)
    );
    CREATE INDEX corrections_by_key ON corrections(scope_id, text_key);
    CREATE TABLE lifecycle_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        scope_id TEXT NOT NULL,
        bank_id TEXT NOT NULL,
        action TEXT NOT NULL,
        record_ids TEXT NOT NULL,
        document_ids TEXT NOT NULL,
        actor TEXT NOT NULL,
        at REAL NOT NULL,
        detail TEXT
    );
    CREATE INDEX lifecycle_by_scope ON lifecycle_log(scope_id, seq)
    """,
)


@dataclass(frozen=True)
class CorrectionRecord:
    scope_id: str
    record_id: str
    text_key: str
    record_text: str  # the wrong record's text as it was (redacted, trimmed)
    correction: str  # what is right (redacted)
    note_id: str | None  # the correction note queued for Hindsight
    actor: str  # who: the host ("pi") or the command line ("cli")
    created_at: float


@dataclass(frozen=True)
class Corrected:
    """What a delivery in one scope must leave out."""

    record_ids: frozenset[str] = frozenset()
    text_keys: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.record_ids or self.text_keys)


@dataclass(frozen=True)
class LifecycleEntry:
    seq: int
    scope_id: str
    bank_id: str
    action: LifecycleAction
    record_ids: tuple[str, ...]
    document_ids: tuple[str, ...]
    actor: str
    at: float
    detail: str | None


class LifecycleCounts(Record):
    """Shown in status (``lifecycle``) and by ``memory corrections``."""

    corrections: int  # in force
    forgotten_documents: int  # deleted through forget, ever


def _strings(raw: str) -> tuple[str, ...]:
    try:
        value = json.loads(raw)
    except ValueError:
        return ()
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def _correction(row: sqlite3.Row) -> CorrectionRecord:
    return CorrectionRecord(
        scope_id=row["scope_id"],
        record_id=row["record_id"],
        text_key=row["text_key"],
        record_text=row["record_text"],
        correction=row["correction"],
        note_id=row["note_id"],
        actor=row["actor"],
        created_at=row["created_at"],
    )


class LifecycleRecords:
    """The corrections and the lifecycle log: mixed into :class:`~.catalog.Catalog`."""

    path: Path
    _connection: StoreConnection

    def _follow_live_file(self) -> None:  # pragma: no cover - Catalog provides it
        raise NotImplementedError

    def add_correction(self, correction: CorrectionRecord, *, bank_id: str) -> None:
        """Keep ``correction`` in force (replacing one for the same record) and log it."""
        self._follow_live_file()
        with translated_errors("catalog", self.path), transaction(self._connection):
            self._connection.execute(
                "INSERT OR REPLACE INTO corrections VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    correction.scope_id,
                    correction.record_id,
                    correction.text_key,
                    correction.record_text,
                    correction.correction,
                    correction.note_id,
                    correction.actor,
                    correction.created_at,
                ),
            )
            self._log(
                correction.scope_id,
                bank_id,
                "correct",
                (correction.record_id,),
                (),
                correction.actor,
                correction.note_id,
            )

    def remove_correction(self, scope_id: str, record_id: str, *, bank_id: str, actor: str) -> bool:
        """Lift a correction; the record may be delivered again. False when there was none."""
        self._follow_live_file()
        with translated_errors("catalog", self.path), transaction(self._connection):
            removed = self._connection.execute(
                "DELETE FROM corrections WHERE scope_id = ? AND record_id = ?",
                (scope_id, record_id),
            ).rowcount
            if removed:
                self._log(scope_id, bank_id, "uncorrect", (record_id,), (), actor, None)
        return removed > 0

    def corrections(self, scope_id: str) -> list[CorrectionRecord]:
        with translated_errors("catalog", self.path):
            rows = self._connection.execute(
                "SELECT * FROM corrections WHERE scope_id = ? ORDER BY created_at", (scope_id,)
            ).fetchall()
        return [_correction(row) for row in rows]

    def corrected(self, scope_id: str) -> Corrected:
        """The record ids and text keys a delivery in ``scope_id`` leaves out (one query)."""
        with translated_errors("catalog", self.path):
            rows = self._connection.execute(
                "SELECT record_id, text_key FROM corrections WHERE scope_id = ?", (scope_id,)
            ).fetchall()
        if not rows:
            return Corrected()
        return Corrected(
            frozenset(row["record_id"] for row in rows), frozenset(row["text_key"] for row in rows)
        )

    def log_forget(
        self,
        scope_id: str,
        bank_id: str,
        *,
        record_ids: Sequence[str],
        document_ids: Sequence[str],
        actor: str,
        detail: str | None = None,
    ) -> None:
        self._follow_live_file()
        with translated_errors("catalog", self.path), transaction(self._connection):
            self._log(scope_id, bank_id, "forget", record_ids, document_ids, actor, detail)

    def _log(
        self,
        scope_id: str,
        bank_id: str,
        action: LifecycleAction,
        record_ids: Sequence[str],
        document_ids: Sequence[str],
        actor: str,
        detail: str | None,
    ) -> None:
        self._connection.execute(
            "INSERT INTO lifecycle_log (scope_id, bank_id, action, record_ids, document_ids, "
            "actor, at, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                scope_id,
                bank_id,
                action,
                json.dumps(list(record_ids)),
                json.dumps(list(document_ids)),
                actor,
                time.time(),
                detail,
            ),
        )

    def lifecycle_log(self, scope_id: str, *, limit: int = 50) -> list[LifecycleEntry]:
        """The newest ``limit`` forgets and corrections of ``scope_id``, newest first."""
        with translated_errors("catalog", self.path):
            rows = self._connection.execute(
                "SELECT * FROM lifecycle_log WHERE scope_id = ? ORDER BY seq DESC LIMIT ?",
                (scope_id, limit),
            ).fetchall()
        return [
            LifecycleEntry(
                seq=row["seq"],
                scope_id=row["scope_id"],
                bank_id=row["bank_id"],
                action=row["action"],
                record_ids=_strings(row["record_ids"]),
                document_ids=_strings(row["document_ids"]),
                actor=row["actor"],
                at=row["at"],
                detail=row["detail"],
            )
            for row in rows
        ]

    def lifecycle_counts(self, scope_id: str) -> LifecycleCounts:
        with translated_errors("catalog", self.path):
            corrections = self._connection.execute(
                "SELECT count(*) FROM corrections WHERE scope_id = ?", (scope_id,)
            ).fetchone()[0]
            documents = self._connection.execute(
                "SELECT document_ids FROM lifecycle_log WHERE scope_id = ? AND action = 'forget'",
                (scope_id,),
            ).fetchall()
        forgotten = {doc for row in documents for doc in _strings(row["document_ids"])}
        return LifecycleCounts(corrections=int(corrections), forgotten_documents=len(forgotten))
