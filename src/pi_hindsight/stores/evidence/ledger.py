"""The evidence ledger (``evidence.sqlite``): what memory each request got and how far it went.

Per request it records three separate facts (R-EVID-3)::

    prepared   the sidecar built (or failed to build) the memory for this request: outcome, body
    attached   the hidden message was in the agent's context for this request (and its entry id)
    confirmed  the memory text was found in the outgoing provider payload

Being in the payload proves neither that the provider received it nor that the model used it. The
ledger is a diagnostic record, not a knowledge store (R-EVID-2): it keeps the delivered memory body
(in a separate table, so listing never reads bodies) and ids that link to the host's session
record, never the conversation itself, and nothing here is ever sent to Hindsight.

Limits (R-EVID-6): a retention period and a capacity cap, both enforced. The cap counts the whole
file on disk (main file + WAL + shared memory) plus the legacy originals that were migrated (they
are kept, never deleted automatically, R-EVID-7). Enforcement is cheap: a ``stat`` after each
write, a time-range delete every few hundred writes, and the oldest records evicted only when the
file crosses 98 % of the budget. Evictions by the cap can shorten retention below the configured
period; :meth:`EvidenceLedger.stats` says so.

Every method raises only :class:`~pi_hindsight.errors.StateError` (and its subclasses), so the
engine can warn and carry on (R-EVID-5).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from pi_hindsight.errors import StateError
from pi_hindsight.stores.evidence import held, tables
from pi_hindsight.stores.evidence.shapes import RetainDecision
from pi_hindsight.stores.evidence.stats import EvidenceStats
from pi_hindsight.stores.evidence.tables import (
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
)
from pi_hindsight.stores.sqlite import SetAside, open_store, transaction, translated_errors

__all__ = [
    "EVIDENCE_FILE_NAME",
    "DeliveredItem",
    "EnforcementResult",
    "EvidenceDetail",
    "EvidenceLedger",
    "EvidencePage",
    "EvidenceRecord",
    "EvidenceSpaceError",
    "EvidenceStats",
    "LegacySource",
    "MemoInfo",
    "Outcome",
    "PreparedRecord",
    "RequestRow",
]

EVIDENCE_FILE_NAME = "evidence.sqlite"
OUTCOMES: tuple[str, ...] = get_args(Outcome)

HIGH_WATER = 0.98  # enforce the cap when the file reaches this share of the budget...
LOW_WATER = 0.90  # ...and evict the oldest records until the data fits in this share
MIN_BUDGET_SHARE = 0.10  # legacy originals never leave the live ledger less than this share
RETENTION_SWEEP_WRITES = 256
RETENTION_SWEEP_SECONDS = 600.0
WRITE_BUSY_TIMEOUT_MS = 1_000  # on the request path: a record may fail, a prompt must not wait


class EvidenceSpaceError(StateError):
    """A legacy migration stopped because the evidence cap has no room left (nothing deleted)."""


@dataclass(frozen=True)
class EnforcementResult:
    expired: int  # removed because they were older than the retention period
    evicted: int  # removed, oldest first, to keep the file under the cap
    disk_before: int
    disk_after: int


class EvidenceLedger:
    """``<state_dir>/evidence.sqlite``. Safe to share between threads: every call holds the
    ledger's lock. Every method raises only StateError."""

    def __init__(
        self,
        state_dir: Path,
        *,
        retention_days: float,
        cap_bytes: int,
        busy_timeout_ms: int = WRITE_BUSY_TIMEOUT_MS,
    ) -> None:
        if retention_days <= 0 or cap_bytes <= 0:
            raise StateError("evidence retention and cap must be positive")
        self.path = state_dir / EVIDENCE_FILE_NAME
        self.retention_days = float(retention_days)
        self.cap_bytes = int(cap_bytes)
        self._lock = threading.RLock()
        self._connection: sqlite3.Connection
        self.set_aside: SetAside | None
        self._connection, self.set_aside = open_store(
            self.path, tables.SCHEMA, busy_timeout_ms=busy_timeout_ms
        )
        self._writes = 0
        self._next_sweep_at = 0.0
        self._next_check_bytes = 0
        try:
            with self._guard():
                self._page_size = int(self._connection.execute("PRAGMA page_size").fetchone()[0])
                self._legacy_bytes = self._measure_legacy()
                self._apply_wal_limit()
                self._sweep_retention(time.time())
        except StateError:
            self._connection.close()
            raise

    def close(self) -> None:
        with self._guard():
            self._connection.close()

    # -- plumbing --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Hold the lock; translate sqlite3 and OS errors into StateError (nothing else leaks)."""
        with self._lock:
            try:
                with translated_errors("evidence", self.path):
                    yield
            except OSError as error:
                raise StateError(f"evidence store {self.path}: {error}") from error
            except (
                TypeError,
                ValueError,
            ) as error:  # values the caller passed that cannot be stored
                raise StateError(f"evidence store {self.path}: bad value: {error}") from error

    def _budget(self) -> int:
        """Bytes the ledger file may use: the cap minus the kept legacy originals (floored)."""
        return max(self.cap_bytes - self._legacy_bytes, int(self.cap_bytes * MIN_BUDGET_SHARE))

    def _apply_wal_limit(self) -> None:
        # After a checkpoint the WAL is truncated to this size, so it never sits on the budget.
        limit = max(64 * 1024, self._budget() // 100)
        self._connection.execute(f"PRAGMA journal_size_limit = {limit}")

    def _disk_bytes(self) -> int:
        """What the ledger occupies on disk: the main file, its WAL and its shared-memory file."""
        total = 0
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                total += self.path.with_name(self.path.name + suffix).stat().st_size
        return total

    def _used_bytes(self) -> int:
        """Bytes of live pages (free pages excluded), as this connection sees the database."""
        pages = int(self._connection.execute("PRAGMA page_count").fetchone()[0])
        free = int(self._connection.execute("PRAGMA freelist_count").fetchone()[0])
        return (pages - free) * self._page_size

    def _measure_legacy(self) -> int:
        """Current size of the legacy originals that were (at least partly) migrated."""
        total = 0
        for row in self._connection.execute(
            "SELECT path FROM legacy_sources WHERE next_offset > 0 OR next_line > 0"
        ):
            # An original the user deleted (or moved away) no longer takes room.
            with contextlib.suppress(OSError):
                total += Path(row["path"]).stat().st_size
        return total

    def _state(self, key: str) -> str | None:
        row = self._connection.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row["value"])

    def _set_state(self, key: str, value: object) -> None:
        self._connection.execute(
            "INSERT INTO state (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, str(value)),
        )

    # -- writes ----------------------------------------------------------------------------

    def record_prepared(self, record: PreparedRecord) -> bool:
        """Record what was prepared for one user request. Returns False if the id was already
        recorded (the first record wins)."""
        if record.outcome not in OUTCOMES:
            raise StateError(f"unknown evidence outcome {record.outcome!r}")
        row = record.row(time.time())
        with self._guard():
            with transaction(self._connection):
                inserted = self._connection.execute(
                    tables.INSERT_REQUEST, tables.request_params(row)
                ).fetchone()
                if inserted is not None:
                    self._insert_children(inserted[0], row)
            self._after_write()
        return inserted is not None

    def _insert_children(self, seq: int, row: RequestRow) -> None:
        """The body and the per-record rows of a request just inserted."""
        if row.body is not None:
            self._connection.execute(
                "INSERT INTO bodies (seq, body) VALUES (?, ?)", (seq, row.body)
            )
        if row.items:
            self._connection.executemany(
                tables.INSERT_DELIVERED, tables.delivered_params(seq, row.items)
            )
        if row.held:
            self._connection.executemany(held.INSERT_HELD, held.held_params(seq, row.held))

    def mark_attached(
        self,
        request_id: str,
        entry_id: str | None = None,
        transcript_path: str | None = None,
        *,
        attached: bool = True,
    ) -> bool:
        """The hidden message was (or, with ``attached=False``, was not) in the agent's context.
        The host's entry id and session file may arrive later; known values are never erased.
        Returns whether a record matched."""
        with self._guard():
            with transaction(self._connection):
                changed = self._connection.execute(
                    "UPDATE requests SET attached = ?, "
                    "attached_at = CASE WHEN attached IS ? THEN attached_at ELSE ? END, "
                    "entry_id = coalesce(?, entry_id), "
                    "transcript_path = coalesce(?, transcript_path) "
                    "WHERE request_id = ?",
                    (
                        int(attached),
                        int(attached),
                        time.time(),
                        entry_id,
                        transcript_path,
                        request_id,
                    ),
                ).rowcount
            self._after_write()
        return changed == 1

    def mark_confirmed(self, request_id: str, confirmed: bool, payload_bytes: int | None) -> bool:
        """Whether the memory text was in the outgoing provider payload. A confirmed payload also
        proves the message was attached (the payload is built from the agent's context), so an
        unknown ``attached`` becomes true; an explicit ``attached = false`` is kept as recorded."""
        now = time.time()
        with self._guard():
            with transaction(self._connection):
                changed = self._connection.execute(
                    "UPDATE requests SET confirmed = ?, confirmed_at = ?, payload_bytes = ?, "
                    "attached = CASE WHEN attached IS NULL AND ? THEN 1 ELSE attached END, "
                    "attached_at = CASE WHEN attached IS NULL AND ? THEN ? ELSE attached_at END "
                    "WHERE request_id = ?",
                    (int(confirmed), now, payload_bytes, confirmed, confirmed, now, request_id),
                ).rowcount
            self._after_write()
        return changed == 1

    def mark_retain(
        self, request_id: str, decision: RetainDecision, reason: str | None = None
    ) -> bool:
        """What retain did with the completed request: queued it, or skipped it and why (issue
        21). The latest decision stands. Returns whether a record matched (a request prepared
        without evidence, or expired, has none)."""
        with self._guard():
            with transaction(self._connection):
                changed = self._connection.execute(
                    "UPDATE requests SET retain = ?, retain_reason = ? WHERE request_id = ?",
                    (decision, reason, request_id),
                ).rowcount
            self._after_write()
        return changed == 1

    def _after_write(self) -> None:
        """Cheap limit checks after every write: a stat, and now and then a time-range delete."""
        self._writes += 1
        now = time.time()
        if self._writes % RETENTION_SWEEP_WRITES == 0 or now >= self._next_sweep_at:
            self._sweep_retention(now)
        disk = self._disk_bytes()
        if disk >= max(self._budget() * HIGH_WATER, self._next_check_bytes):
            self._enforce_cap()

    # -- limits ----------------------------------------------------------------------------

    def _sweep_retention(self, now: float) -> int:
        self._next_sweep_at = now + RETENTION_SWEEP_SECONDS
        cutoff = now - self.retention_days * 86_400
        with transaction(self._connection):
            return int(
                self._connection.execute(
                    "DELETE FROM requests WHERE prepared_at < ?", (cutoff,)
                ).rowcount
            )

    def _checkpoint(self) -> None:
        self._connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def _enforce_cap(self) -> int:
        """Checkpoint, evict the oldest records until the data fits under the low-water mark,
        give free pages back to the filesystem. Returns how many records were evicted."""
        self._legacy_bytes = self._measure_legacy()
        self._apply_wal_limit()
        budget = self._budget()
        self._checkpoint()
        evicted = 0
        for _ in range(8):
            used = self._used_bytes()
            if used <= budget * LOW_WATER:
                break
            count = int(self._connection.execute("SELECT count(*) FROM requests").fetchone()[0])
            if count == 0:
                break
            per_record = max(1.0, used / count)
            batch = min(count, math.ceil((used - budget * LOW_WATER) / per_record) + 1)
            with transaction(self._connection):
                newest = self._connection.execute(
                    "SELECT max(prepared_at), count(*) FROM (SELECT prepared_at FROM requests "
                    "ORDER BY prepared_at, seq LIMIT ?)",
                    (batch,),
                ).fetchone()
                removed = self._connection.execute(
                    "DELETE FROM requests WHERE seq IN (SELECT seq FROM requests "
                    "ORDER BY prepared_at, seq LIMIT ?)",
                    (batch,),
                ).rowcount
                cutoff = max(float(self._state("cap_cutoff") or 0.0), float(newest[0]))
                self._set_state("cap_cutoff", repr(cutoff))
                total = int(self._state("cap_evicted") or 0) + removed
                self._set_state("cap_evicted", total)
                self._set_state("cap_evicted_at", repr(time.time()))
            evicted += removed
        free = int(self._connection.execute("PRAGMA freelist_count").fetchone()[0])
        if free:
            # executescript steps the pragma to completion (execute would free a single page).
            self._connection.executescript(f"PRAGMA incremental_vacuum({free});")
        self._checkpoint()
        disk_after = self._disk_bytes()
        # If another process keeps the WAL from shrinking, do not retry on every write.
        self._next_check_bytes = max(int(budget * HIGH_WATER), disk_after + budget // 100)
        if disk_after < budget * HIGH_WATER:
            self._next_check_bytes = 0
        return evicted

    def enforce_limits(self) -> EnforcementResult:
        """Apply the retention period and the cap now (they are also applied as records arrive)."""
        with self._guard():
            disk_before = self._disk_bytes()
            expired = self._sweep_retention(time.time())
            evicted = self._enforce_cap()
            return EnforcementResult(expired, evicted, disk_before, self._disk_bytes())

    # -- reads -----------------------------------------------------------------------------

    def resolve_id(self, prefix: str) -> str | None:
        """The full request id for an id or a unique prefix of at least 8 characters."""
        with self._guard():
            exact = self._connection.execute(
                "SELECT request_id FROM requests WHERE request_id = ?", (prefix,)
            ).fetchone()
            if exact is not None or len(prefix) < 8:
                return None if exact is None else str(exact[0])
            rows = self._connection.execute(
                "SELECT request_id FROM requests WHERE request_id >= ? AND request_id < ? LIMIT 2",
                (prefix, prefix + "\U0010ffff"),
            ).fetchall()
        if len(rows) > 1:
            raise StateError(f"request id prefix {prefix!r} is ambiguous", hint="give more of it")
        return str(rows[0][0]) if rows else None

    def show(self, request_id: str) -> EvidenceDetail | None:
        """One request with its delivered body (``None`` when there is no such record)."""
        with self._guard():
            row = self._connection.execute(
                f"SELECT {tables.RECORD_COLUMNS}, b.body AS body FROM requests "  # noqa: S608 - constant columns
                "LEFT JOIN bodies AS b USING (seq) WHERE request_id = ?",
                (request_id,),
            ).fetchone()
            if row is None:
                return None
            items = tuple(
                tables.item_from_row(item)
                for item in self._connection.execute(tables.SELECT_DELIVERED, (row["seq"],))
            )
            held_back = tuple(
                held.held_from_row(item)
                for item in self._connection.execute(held.SELECT_HELD, (row["seq"],))
            )
            return EvidenceDetail(
                record=tables.record_from_row(row), body=row["body"], items=items, held=held_back
            )

    def list(
        self,
        *,
        scope: str | None = None,
        session: str | None = None,
        since: float | None = None,
        outcome: Outcome | None = None,
        limit: int = 20,
        before: str | None = None,
    ) -> EvidencePage:
        """Records newest first, without bodies. ``before`` is the ``next_cursor`` of the previous
        page (keyset pagination: each page is an index range scan, however many records exist)."""
        clauses: builtins.list[str] = []
        params: builtins.list[object] = []
        for clause, value in (
            ("scope_id = ?", scope),
            ("session_id = ?", session),
            ("prepared_at >= ?", since),
            ("outcome = ?", outcome),
        ):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        if before is not None:
            clauses.append("(prepared_at, seq) < (?, ?)")
            params.extend(tables.parse_cursor(before))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        limit = max(1, min(int(limit), 10_000))
        with self._guard():
            rows = self._connection.execute(
                f"SELECT {tables.RECORD_COLUMNS} FROM requests {where} "  # noqa: S608 - constant columns, placeholders only
                "ORDER BY prepared_at DESC, seq DESC LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        records = tuple(tables.record_from_row(row) for row in rows[:limit])
        more = len(rows) > limit
        cursor = tables.make_cursor(rows[limit - 1]) if more else None
        return EvidencePage(records=records, next_cursor=cursor)

    def delivered_record_ids(self, session_id: str) -> frozenset[str]:
        """Memory record ids already delivered in a session: prepared as ``delivered`` and not
        known to have missed the context or the payload (unknown counts as delivered)."""
        with self._guard():
            rows = self._connection.execute(
                "SELECT record_ids FROM requests WHERE session_id = ? AND outcome = 'delivered' "
                "AND coalesce(attached, 1) = 1 AND coalesce(confirmed, 1) = 1",
                (session_id,),
            ).fetchall()
        return frozenset(record for row in rows for record in json.loads(row[0]))

    def held_share(self, since: float) -> tuple[int, int]:
        """(records the relevance policy held back, records recall returned) over the requests
        prepared since ``since`` (epoch seconds): delivered ones and every omission counted."""
        held = recalled = 0
        with self._guard():
            for row in self._connection.execute(
                "SELECT record_count, omitted_by FROM requests WHERE prepared_at >= ? "
                "AND source = 'live'",
                (since,),
            ):
                omitted = json.loads(row["omitted_by"] or "{}")
                counts = [v for v in omitted.values() if isinstance(v, int) and v > 0]
                held += max(0, int(omitted.get("relevance", 0) or 0))
                recalled += int(row["record_count"]) + sum(counts)
        return held, recalled

    def stats(self, *, counts: bool = True) -> EvidenceStats:
        """Sizes, limits and the retention in force; with ``counts`` also the number of records
        by outcome and state, which reads every metadata row once (never a body). ``status`` on
        the request path should pass ``counts=False``."""
        with self._guard():
            self._legacy_bytes = self._measure_legacy()
            total: int | None = None
            by_outcome: dict[str, int] | None = None
            attached: dict[str, int] | None = None
            confirmed: dict[str, int] | None = None
            if counts:
                total, by_outcome = 0, {}
                attached = {"true": 0, "false": 0, "unknown": 0}
                confirmed = {"true": 0, "false": 0, "unknown": 0}
                for row in self._connection.execute(
                    "SELECT outcome, attached, confirmed, count(*) AS n FROM requests "
                    "GROUP BY outcome, attached, confirmed"
                ):
                    count = int(row["n"])
                    total += count
                    by_outcome[row["outcome"]] = by_outcome.get(row["outcome"], 0) + count
                    if row["outcome"] == "delivered":
                        attached[tables.tri(row["attached"])] += count
                        confirmed[tables.tri(row["confirmed"])] += count
            span = self._connection.execute(
                "SELECT min(prepared_at), max(prepared_at) FROM requests"
            ).fetchone()
            cap_cutoff = self._state("cap_cutoff")
            return EvidenceStats(
                path=str(self.path),
                records=total,
                by_outcome=by_outcome,
                delivered_attached=attached,
                delivered_confirmed=confirmed,
                disk_bytes=self._disk_bytes(),
                used_bytes=self._used_bytes(),
                cap_bytes=self.cap_bytes,
                budget_bytes=self._budget(),
                legacy_bytes=self._legacy_bytes,
                legacy_sources=self._legacy_sources(),
                retention_days=self.retention_days,
                oldest_at=span[0],
                newest_at=span[1],
                cap_cutoff=None if cap_cutoff is None else float(cap_cutoff),
                cap_evicted=int(self._state("cap_evicted") or 0),
                now=time.time(),
            )

    # -- legacy migration (driven by legacy/evidence_import) ---------------------------------------

    def _legacy_sources(self) -> tuple[LegacySource, ...]:
        return tuple(
            tables.source_from_row(row)
            for row in self._connection.execute("SELECT * FROM legacy_sources ORDER BY started_at")
        )

    def legacy_source(self, identity: str) -> LegacySource | None:
        with self._guard():
            row = self._connection.execute(
                "SELECT * FROM legacy_sources WHERE identity = ?", (identity,)
            ).fetchone()
        return None if row is None else tables.source_from_row(row)

    def legacy_room(self, extra_original_bytes: int) -> tuple[int, int]:
        """(bytes a migration may still add, the limit it works against), counting the kept
        originals plus ``extra_original_bytes`` (the file being migrated, not yet counted)."""
        with self._guard():
            self._legacy_bytes = self._measure_legacy()
            limit = int((self.cap_bytes - self._legacy_bytes - extra_original_bytes) * LOW_WATER)
            return limit - self._used_bytes(), limit

    def import_legacy_batch(
        self, source: LegacySource, rows: Sequence[RequestRow], *, limit_bytes: int
    ) -> tuple[int, int]:
        """Insert ``rows`` and advance ``source``'s cursor in one transaction, so an interrupted
        migration resumes exactly after the last committed batch. Returns (imported, duplicates).
        Raises :class:`EvidenceSpaceError` (and commits nothing) if the data would exceed
        ``limit_bytes``; nothing is ever evicted or deleted to make room."""
        imported = 0
        with self._guard(), transaction(self._connection):
            for row in rows:
                inserted = self._connection.execute(
                    tables.INSERT_REQUEST,
                    tables.request_params(row),
                ).fetchone()
                if inserted is None:
                    continue
                imported += 1
                self._insert_children(inserted[0], row)
            used = self._used_bytes()
            if imported and used > limit_bytes:
                raise EvidenceSpaceError(
                    f"the batch would bring the ledger to {format_bytes(used)}, over the "
                    f"{format_bytes(limit_bytes)} left for it"
                )
            self._connection.execute(
                tables.UPSERT_SOURCE, tables.source_params(source, imported, len(rows))
            )
        return imported, len(rows) - imported
