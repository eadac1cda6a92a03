"""The durable retain outbox (``outbox.sqlite``): a SQL state machine shared by every agent process.

An *item* is one completed agent request; a *batch* is what one retain call sends: consecutive ready
items of one session, composed at claim time and recorded durably, so that every replay of the
batch (after a timeout, a crash, a restart) sends exactly the same items under the same
idempotency key. ::

    item:   ready ──claim──▶ sending ──accepted──▶ submitted ──operation completed──▶ done
    batch:           (composed) sending ──────────▶ submitted ──────────────────────▶ done
                                 ▲   │                  │
                                 └───┴──────────────────┘   transport error, 429, 5xx: same key;
                                                            operation failed: next generation key
                          sending/submitted ──never succeeds──▶ dead (reason kept; ``retry``)

- A completed request is committed here *before* any network call (R-RETAIN-1); ``enqueue`` is
  idempotent per (session, request id), so a host that re-sends a request stores it once.
- Delivery is at-least-once; the batch's idempotency key is sent as Hindsight's ``operation_id``
  (a UUID: the batch id, or for a later generation a UUIDv5 derived from it), so a replay stores
  nothing twice.
- A claim is one ``BEGIN IMMEDIATE`` transaction that leases batches to one worker. Leases that
  expire, or whose owner process on this host is gone, are recovered by any worker.
- Per-session order: a session has at most one open batch; the next batch of a session is
  composed only after the previous one is done (or dead), so appends to one session document
  never race (Hindsight's append is read-modify-write).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from pi_hindsight.stores import outbox_skipped
from pi_hindsight.stores.outbox_items import RetainRequest, decode_item, encode_item
from pi_hindsight.stores.outbox_records import (
    ITEM_STATES,
    UNFINISHED,
    Batch,
    BatchState,
    ItemState,
    OutboxHealth,
    OutboxItem,
    PurgeResult,
    counts_line,
    item_from_row,
    owner_id,
    owner_is_gone,
)
from pi_hindsight.stores.outbox_requeue import (
    RestoreResult,
    SalvagedBatch,
    SalvagedItem,
    restore_rows,
)
from pi_hindsight.stores.outbox_schema import SCHEMA
from pi_hindsight.stores.outbox_skipped import SkippedRequest
from pi_hindsight.stores.sqlite import (
    SetAside,
    StoreConnection,
    new_id,
    open_store,
    transaction,
    translated_errors,
)

# The records live in outbox_records.py; they are importable from here, with the store.
__all__ = [
    "BATCH_MAX_BYTES",
    "BATCH_MAX_ITEMS",
    "ITEM_STATES",
    "OUTBOX_FILE_NAME",
    "UNFINISHED",
    "Batch",
    "BatchState",
    "ItemState",
    "Outbox",
    "OutboxHealth",
    "OutboxItem",
    "PurgeResult",
    "counts_line",
    "owner_id",
]

OUTBOX_FILE_NAME = "outbox.sqlite"

# Batch composition limits: bounded so one retain call stays one Hindsight sub-batch.
BATCH_MAX_ITEMS = 32
BATCH_MAX_BYTES = 256 * 1024


def _merge_key(stored: str) -> tuple[str, tuple[str, ...], str]:
    """Items merge into one retain item only when they go to the same document the same way."""
    item = decode_item(stored)
    return item.document_id, tuple(sorted(item.tags)), item.update_mode


def _placeholders(values: Sequence[object]) -> str:
    return ",".join("?" for _ in values)


class Outbox:
    def __init__(self, state_dir: Path, *, lease_s: float = 60.0) -> None:
        self.path = state_dir / OUTBOX_FILE_NAME
        self.lease_s = lease_s
        self._connection: StoreConnection
        self.set_aside: SetAside | None
        self._connection, self.set_aside = open_store(self.path, SCHEMA)

    def close(self) -> None:
        self._connection.close()

    def _follow_live_file(self) -> None:
        """Reopen first if another process set this file aside (its path now names a fresh
        outbox), so new work goes to the live outbox, not the set-aside file."""
        mark = self._connection.commit_mark
        if mark is not None and mark.replaced():
            self._connection.close()
            self._connection, aside = open_store(self.path, SCHEMA)
            self.set_aside = aside or self.set_aside

    # -- enqueue ---------------------------------------------------------------------------

    def enqueue(self, request: RetainRequest) -> str:
        """Durably record one completed request; returns its item id. Committed before anything
        is sent. The same (session, request id) again returns the first item's id."""
        self._follow_live_file()
        item_id = new_id()
        encoded = encode_item(request.item)
        session_id, bank_id, request_id = request.session_id, request.bank_id, request.request_id
        now = time.time()
        with translated_errors("outbox", self.path), transaction(self._connection):
            cursor = self._connection.execute(
                "INSERT OR IGNORE INTO items (item_id, session_id, request_id, bank_id, payload, "
                "payload_bytes, state, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, 'ready', ?, ?)",
                (
                    item_id,
                    session_id,
                    request_id,
                    bank_id,
                    encoded,
                    len(encoded.encode()),
                    now,
                    now,
                ),
            )
            if cursor.rowcount == 0 and request_id is not None:
                row = self._connection.execute(
                    "SELECT item_id FROM items WHERE session_id = ? AND request_id = ?",
                    (session_id, request_id),
                ).fetchone()
                if row is not None:
                    return str(row[0])
        return item_id

    def record_skipped(self, skipped: SkippedRequest) -> None:
        """A request not sent because it carries no knowledge (``outbox_skipped.py``)."""
        self._follow_live_file()
        with translated_errors("outbox", self.path):
            outbox_skipped.record(self._connection, skipped)

    def skipped(self, limit: int = 50) -> list[SkippedRequest]:
        with translated_errors("outbox", self.path):
            return outbox_skipped.listed(self._connection, limit)

    # -- leases ----------------------------------------------------------------------------

    def recover_stale_leases(self) -> int:
        """Free leases that expired or whose owner process (on this host) is gone."""
        with translated_errors("outbox", self.path), transaction(self._connection):
            now = time.time()
            owners = [
                row[0]
                for row in self._connection.execute(
                    "SELECT DISTINCT lease_owner FROM batches WHERE lease_owner IS NOT NULL"
                )
            ]
            gone = [owner for owner in owners if owner_is_gone(owner)]
            freed = self._expire_leases(now)
            if gone:
                freed += self._connection.execute(
                    f"UPDATE batches SET lease_owner = NULL, lease_expires_at = NULL, "  # noqa: S608 - placeholders only
                    f"updated_at = ? WHERE lease_owner IN ({_placeholders(gone)})",
                    (now, *gone),
                ).rowcount
            return freed

    def _expire_leases(self, now: float) -> int:
        return self._connection.execute(
            "UPDATE batches SET lease_owner = NULL, lease_expires_at = NULL, updated_at = ? "
            "WHERE lease_owner IS NOT NULL AND lease_expires_at < ?",
            (now, now),
        ).rowcount

    # -- claim -----------------------------------------------------------------------------

    def claim(
        self,
        owner: str,
        *,
        limit: int = 2,
        include_submitted: bool = True,
        max_items: int = BATCH_MAX_ITEMS,
        max_bytes: int = BATCH_MAX_BYTES,
        sessions: str = "%",  # a LIKE pattern: only these sessions' work (forced notes)
    ) -> list[Batch]:
        """Lease up to ``limit`` due batches: open ones first (a replay keeps its composition and
        key), then new ones composed from each waiting session's consecutive ready items.

        ``include_submitted=False`` leaves batches awaiting confirmation alone (shutdown flush).
        """
        self._follow_live_file()
        now = time.time()
        states = ("sending", "submitted") if include_submitted else ("sending",)
        with translated_errors("outbox", self.path):
            if not self._anything_due(now, states, sessions):
                return []  # the common idle case takes no write lock
        with translated_errors("outbox", self.path), transaction(self._connection):
            self._expire_leases(now)
            # At most one batch per session in flight: a revived dead batch may be open next
            # to a later one of the same session, and two appends to one document must not race.
            busy = {
                row[0]
                for row in self._connection.execute(
                    "SELECT session_id FROM batches WHERE lease_owner IS NOT NULL"
                )
            }
            batch_ids: list[str] = []
            for batch_id, session_id in self._connection.execute(
                "SELECT batch_id, session_id FROM batches "  # noqa: S608 - placeholders only
                f"WHERE state IN ({_placeholders(states)}) AND lease_owner IS NULL "
                "AND next_attempt_at <= ? AND session_id LIKE ? ORDER BY next_attempt_at, seq",
                (*states, now, sessions),
            ):
                if len(batch_ids) == limit:
                    break
                if session_id not in busy:
                    busy.add(session_id)
                    batch_ids.append(batch_id)
            if len(batch_ids) < limit:
                batch_ids += self._compose(
                    now, limit - len(batch_ids), max_items, max_bytes, sessions
                )
            if not batch_ids:
                return []
            self._connection.execute(
                f"UPDATE batches SET lease_owner = ?, lease_expires_at = ?, updated_at = ? "  # noqa: S608 - placeholders only
                f"WHERE batch_id IN ({_placeholders(batch_ids)})",
                (owner, now + self.lease_s, now, *batch_ids),
            )
            return self._batches(batch_ids)

    def _anything_due(self, now: float, states: Sequence[str], sessions: str = "%") -> bool:
        """A read (no lock under WAL): is there a ready item, a due batch or an expired lease?"""
        row = self._connection.execute(
            "SELECT EXISTS (SELECT 1 FROM items WHERE state = 'ready' AND session_id LIKE ?) OR "  # noqa: S608 - placeholders only
            f"EXISTS (SELECT 1 FROM batches WHERE state IN ({_placeholders(states)}) AND "
            "((lease_owner IS NULL AND next_attempt_at <= ?) OR lease_expires_at < ?))",
            (sessions, *states, now, now),
        ).fetchone()
        return bool(row[0])

    def _compose(
        self, now: float, limit: int, max_items: int, max_bytes: int, sessions: str = "%"
    ) -> list[str]:
        """New batches for sessions that have ready items and no open batch (oldest first)."""
        heads = self._connection.execute(
            "SELECT session_id FROM items WHERE state = 'ready' AND session_id LIKE ? AND "
            "session_id NOT IN (SELECT session_id FROM batches WHERE state IN "
            "('sending', 'submitted')) GROUP BY session_id ORDER BY min(seq) LIMIT ?",
            (sessions, limit),
        ).fetchall()
        created: list[str] = []
        for (session_id,) in heads:
            rows = self._connection.execute(
                "SELECT item_id, bank_id, payload, payload_bytes FROM items "
                "WHERE session_id = ? AND state = 'ready' ORDER BY seq LIMIT ?",
                (session_id, max_items),
            ).fetchall()
            members = [rows[0]["item_id"]]
            size = rows[0]["payload_bytes"]
            key = _merge_key(rows[0]["payload"])
            for row in rows[1:]:
                size += row["payload_bytes"]
                if (
                    size > max_bytes
                    or row["bank_id"] != rows[0]["bank_id"]
                    or _merge_key(row["payload"]) != key
                ):
                    break
                members.append(row["item_id"])
            batch_id = new_id()
            self._connection.execute(
                "INSERT INTO batches (batch_id, session_id, bank_id, state, next_attempt_at, "
                "created_at, updated_at) VALUES (?, ?, ?, 'sending', ?, ?, ?)",
                (batch_id, session_id, rows[0]["bank_id"], now, now, now),
            )
            self._connection.execute(
                f"UPDATE items SET state = 'sending', batch_id = ?, updated_at = ? "  # noqa: S608 - placeholders only
                f"WHERE item_id IN ({_placeholders(members)})",
                (batch_id, now, *members),
            )
            created.append(batch_id)
        return created

    def _batches(self, batch_ids: Sequence[str]) -> list[Batch]:
        marks = _placeholders(batch_ids)
        rows = self._connection.execute(
            f"SELECT * FROM batches WHERE batch_id IN ({marks}) ORDER BY seq",  # noqa: S608 - placeholders only
            tuple(batch_ids),
        ).fetchall()
        members: dict[str, list[OutboxItem]] = {}
        for row in self._connection.execute(
            f"SELECT * FROM items WHERE batch_id IN ({marks}) ORDER BY seq",  # noqa: S608 - placeholders only
            tuple(batch_ids),
        ):
            members.setdefault(row["batch_id"], []).append(item_from_row(row))
        return [
            Batch(
                batch_id=row["batch_id"],
                session_id=row["session_id"],
                bank_id=row["bank_id"],
                state=row["state"],
                generation=row["generation"],
                attempts=row["attempts"],
                failures=row["failures"],
                server_operation_id=row["server_operation_id"],
                last_error=row["last_error"],
                items=tuple(members.get(row["batch_id"], ())),
            )
            for row in rows
        ]

    # -- transitions (each reports whether the lease holder's row changed) -----------------

    def _transition(
        self,
        batch_id: str,
        owner: str,
        batch_sql: str,
        params: Sequence[object],
        *,
        item_state: ItemState | None,
        error: str | None = None,
        keep_lease: bool = False,
    ) -> bool:
        now = time.time()
        lease = (
            "lease_expires_at = ?" if keep_lease else "lease_owner = NULL, lease_expires_at = NULL"
        )
        lease_params: tuple[object, ...] = (now + self.lease_s,) if keep_lease else ()
        with translated_errors("outbox", self.path), transaction(self._connection):
            changed = self._connection.execute(
                f"UPDATE batches SET {batch_sql}, {lease}, updated_at = ? "  # noqa: S608 - our own SQL fragments
                "WHERE batch_id = ? AND lease_owner = ?",
                (*params, *lease_params, now, batch_id, owner),
            ).rowcount
            if changed and item_state is not None:
                self._connection.execute(
                    "UPDATE items SET state = ?, last_error = ?, updated_at = ? WHERE batch_id = ?",
                    (item_state, error, now, batch_id),
                )
        return changed == 1

    def mark_submitted(self, batch_id: str, owner: str, server_operation_id: str) -> bool:
        """Hindsight accepted the batch; the lease is kept (and renewed) to follow it."""
        return self._transition(
            batch_id,
            owner,
            "state = 'submitted', server_operation_id = ?, attempts = attempts + 1, "
            "last_error = NULL",
            (server_operation_id,),
            item_state="submitted",
            keep_lease=True,
        )

    def renew(self, batch_id: str, owner: str) -> bool:
        """Extend the lease while following a long operation."""
        return self._transition(
            batch_id, owner, "state = state", (), item_state=None, keep_lease=True
        )

    def mark_done(self, batch_id: str, owner: str) -> bool:
        return self._transition(
            batch_id, owner, "state = 'done', last_error = NULL", (), item_state="done"
        )

    def retry_later(
        self,
        batch_id: str,
        owner: str,
        *,
        error: str,
        delay_s: float,
        new_generation: bool = False,
        failure: bool = False,
    ) -> bool:
        """Back to ``sending`` after ``delay_s``, same composition. ``new_generation`` (after a
        failed operation) switches to the next idempotency key; ``failure`` counts the attempt
        against the dead-letter budget (server failures do, transport errors and 429 do not)."""
        return self._transition(
            batch_id,
            owner,
            "state = 'sending', attempts = attempts + 1, last_error = ?, next_attempt_at = ?, "
            "server_operation_id = CASE WHEN ? THEN NULL ELSE server_operation_id END, "
            "generation = generation + ?, failures = failures + ?",
            (error, time.time() + delay_s, new_generation, int(new_generation), int(failure)),
            item_state="sending",
            error=error,
        )

    def poll_later(self, batch_id: str, owner: str, *, error: str, delay_s: float) -> bool:
        """An accepted batch could not be confirmed now (e.g. Hindsight unreachable): look again
        after ``delay_s``, keeping its state and operation id."""
        return self._transition(
            batch_id,
            owner,
            "last_error = ?, next_attempt_at = ?",
            (error, time.time() + delay_s),
            item_state=None,
        )

    def dead_letter(self, batch_id: str, owner: str, *, error: str) -> bool:
        """Give up on a batch that can never succeed; the reason stays with every item."""
        return self._transition(
            batch_id,
            owner,
            "state = 'dead', attempts = attempts + 1, last_error = ?",
            (error,),
            item_state="dead",
            error=error,
        )

    def release(self, batch_id: str, owner: str) -> bool:
        """Give a claimed batch back untouched (its state and key stay)."""
        return self._transition(batch_id, owner, "state = state", (), item_state=None)

    # -- operations ------------------------------------------------------------------------

    def retry_dead(self, item_ids: Sequence[str] | None = None) -> int:
        """Re-open dead batches (all, or those holding ``item_ids``); returns items revived.

        A batch keeps its composition and idempotency key, so retrying something Hindsight did
        store in fact stores nothing twice."""
        now = time.time()
        with translated_errors("outbox", self.path), transaction(self._connection):
            if item_ids:
                batch_ids = [
                    row[0]
                    for row in self._connection.execute(
                        f"SELECT DISTINCT batch_id FROM items WHERE state = 'dead' "  # noqa: S608 - placeholders only
                        f"AND (item_id IN ({_placeholders(item_ids)}) OR batch_id IN "
                        f"({_placeholders(item_ids)}))",
                        (*item_ids, *item_ids),
                    )
                ]
            else:
                batch_ids = [
                    row[0]
                    for row in self._connection.execute(
                        "SELECT batch_id FROM batches WHERE state = 'dead'"
                    )
                ]
            if not batch_ids:
                return 0
            marks = _placeholders(batch_ids)
            self._connection.execute(
                f"UPDATE batches SET state = 'sending', failures = 0, next_attempt_at = ?, "  # noqa: S608 - placeholders only
                f"lease_owner = NULL, lease_expires_at = NULL, updated_at = ? "
                f"WHERE batch_id IN ({marks})",
                (now, now, *batch_ids),
            )
            return self._connection.execute(
                f"UPDATE items SET state = 'sending', updated_at = ? "  # noqa: S608 - placeholders only
                f"WHERE state = 'dead' AND batch_id IN ({marks})",
                (now, *batch_ids),
            ).rowcount

    def purge(
        self,
        states: Sequence[ItemState],
        *,
        older_than_s: float | None = None,
        dry_run: bool = False,
    ) -> PurgeResult:
        """Delete items in ``states`` last changed at least ``older_than_s`` ago (and batches
        left without items). The caller decides whether unfinished states may be purged; this
        method does what it is told. ``dry_run`` only counts the items."""
        if not states:
            return PurgeResult(0, 0)
        cutoff = time.time() - (older_than_s or 0.0)
        with translated_errors("outbox", self.path), transaction(self._connection):
            if dry_run:
                counted = self._connection.execute(
                    f"SELECT count(*) FROM items WHERE state IN ({_placeholders(states)}) "  # noqa: S608 - placeholders only
                    "AND updated_at <= ?",
                    (*states, cutoff),
                ).fetchone()[0]
                return PurgeResult(int(counted), 0)
            items = self._connection.execute(
                f"DELETE FROM items WHERE state IN ({_placeholders(states)}) "  # noqa: S608 - placeholders only
                "AND updated_at <= ?",
                (*states, cutoff),
            ).rowcount
            batches = self._connection.execute(
                "DELETE FROM batches WHERE NOT EXISTS "
                "(SELECT 1 FROM items WHERE items.batch_id = batches.batch_id)"
            ).rowcount
        return PurgeResult(items, batches)

    # -- restore -----------------------------------------------------------------------------

    def restore(
        self, items: Sequence[SalvagedItem], batches: Sequence[SalvagedBatch]
    ) -> RestoreResult:
        """Queue the unfinished items (and their batches) read from a set-aside outbox
        (``stores/outbox_requeue.py``); idempotent."""
        return restore_rows(self._connection, self.path, items, batches)

    # -- reading ---------------------------------------------------------------------------

    def health(self) -> OutboxHealth:
        with translated_errors("outbox", self.path):
            counts = dict(
                self._connection.execute(
                    "SELECT state, count(*) FROM items GROUP BY state"
                ).fetchall()
            )
            oldest = self._connection.execute(
                "SELECT min(created_at) FROM items WHERE state IN ('ready', 'sending', 'submitted')"
            ).fetchone()[0]
            last_error = self._connection.execute(
                "SELECT last_error, updated_at FROM batches WHERE last_error IS NOT NULL "
                "AND state != 'done' ORDER BY updated_at DESC LIMIT 1"
            ).fetchone()
        return OutboxHealth(
            pending=counts.get("ready", 0) + counts.get("sending", 0),
            submitted=counts.get("submitted", 0),
            dead=counts.get("dead", 0),
            done=counts.get("done", 0),
            oldest_pending_age_s=None if oldest is None else max(0.0, time.time() - oldest),
            last_error=None if last_error is None else last_error[0],
            last_error_at=None if last_error is None else last_error[1],
        )

    def items(
        self,
        *,
        states: Sequence[ItemState] | None = None,
        session_id: str | None = None,
        limit: int = 100,
    ) -> list[OutboxItem]:
        clauses: list[str] = []
        params: list[object] = []
        if states:
            clauses.append(f"state IN ({_placeholders(states)})")
            params.extend(states)
        if session_id is not None:
            clauses.append("session_id = ?")
            params.append(session_id)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        with translated_errors("outbox", self.path):
            rows = self._connection.execute(
                f"SELECT * FROM items {where} ORDER BY seq LIMIT ?",  # noqa: S608 - placeholders only
                (*params, limit),
            ).fetchall()
        return [item_from_row(row) for row in rows]

    def batch(self, batch_id: str) -> Batch | None:
        with translated_errors("outbox", self.path):
            found = self._batches([batch_id])
        return found[0] if found else None

    def unfinished_count(self) -> int:
        with translated_errors("outbox", self.path):
            return int(
                self._connection.execute(
                    "SELECT count(*) FROM items WHERE state IN ('ready', 'sending', 'submitted')"
                ).fetchone()[0]
            )
