"""The durable retain outbox (``outbox.sqlite``): a SQL state machine shared by every Pi process.

::

    ready ──claim──▶ leased ──accepted──▶ submitted ──operation completed──▶ done
      ▲                │                     │
      └──retry (backoff)┴─────────────────────┘  (transport errors, 5xx, 429, failed operation)
                       └──rejected as invalid──▶ dead   (never dropped silently: reason kept)

A completed Pi request is committed here *before* any network call (R-RETAIN-1). Delivery is
at-least-once; each item carries a stable idempotency key sent as Hindsight's ``operation_id``, so a
replay after a crash stores nothing twice. A claim is one ``BEGIN IMMEDIATE`` transaction that
leases the row; leases that expire (a crashed sidecar) return the row to ``ready``. Items of one
session are delivered strictly in order: only the oldest unfinished item of a session is claimable.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pi_hindsight.stores.sqlite import (
    Migration,
    SetAside,
    StoreSchema,
    new_id,
    open_store,
    transaction,
    translated_errors,
)

OUTBOX_FILE_NAME = "outbox.sqlite"

ItemState = Literal["ready", "leased", "submitted", "done", "dead"]

SCHEMA = StoreSchema(
    application_id=0x50484F31,  # "PHO1"
    migrations=(
        Migration(
            "create items",
            """
            CREATE TABLE items (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                item_id TEXT NOT NULL UNIQUE,
                session_id TEXT NOT NULL,
                bank_id TEXT NOT NULL,
                payload TEXT NOT NULL,
                payload_bytes INTEGER NOT NULL,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                generation INTEGER NOT NULL DEFAULT 0,
                next_attempt_at REAL NOT NULL,
                lease_owner TEXT,
                lease_expires_at REAL,
                server_operation_id TEXT,
                last_error TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            );
            CREATE INDEX items_by_state ON items(state, next_attempt_at);
            CREATE INDEX items_by_session ON items(session_id, seq)
            """,
        ),
    ),
)

UNFINISHED = ("ready", "leased", "submitted")


@dataclass(frozen=True)
class OutboxItem:
    item_id: str
    session_id: str
    bank_id: str
    payload: dict[str, Any]
    state: ItemState
    attempts: int
    generation: int
    server_operation_id: str | None
    last_error: str | None
    created_at: float

    @property
    def idempotency_key(self) -> str:
        """Sent as Hindsight's ``operation_id``; a new generation only after a failed operation."""
        return self.item_id if self.generation == 0 else f"{self.item_id}.g{self.generation}"


@dataclass(frozen=True)
class OutboxHealth:
    pending: int
    submitted: int
    dead: int
    done: int
    oldest_pending_age_s: float | None
    last_error: str | None


@dataclass(frozen=True)
class Backoff:
    base_s: float = 1.0
    cap_s: float = 300.0

    def delay(self, attempts: int, retry_after: float | None = None) -> float:
        """Exponential backoff with full jitter; a server's Retry-After is a floor."""
        ceiling = min(self.cap_s, self.base_s * (2 ** max(0, attempts - 1)))
        delay = random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not security
        return max(delay, retry_after or 0.0)


class Outbox:
    def __init__(self, state_dir: Path, *, lease_s: float = 60.0) -> None:
        self.path = state_dir / OUTBOX_FILE_NAME
        self.lease_s = lease_s
        self._connection: sqlite3.Connection
        self.set_aside: SetAside | None
        self._connection, self.set_aside = open_store(self.path, SCHEMA)

    def close(self) -> None:
        self._connection.close()

    def _item(self, row: sqlite3.Row) -> OutboxItem:
        return OutboxItem(
            item_id=row["item_id"],
            session_id=row["session_id"],
            bank_id=row["bank_id"],
            payload=json.loads(row["payload"]),
            state=row["state"],
            attempts=row["attempts"],
            generation=row["generation"],
            server_operation_id=row["server_operation_id"],
            last_error=row["last_error"],
            created_at=row["created_at"],
        )

    def enqueue(self, *, session_id: str, bank_id: str, payload: dict[str, Any]) -> str:
        """Durably record one retain; returns its id. Committed before anything is sent."""
        item_id = new_id()
        encoded = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        now = time.time()
        with translated_errors("outbox", self.path), transaction(self._connection):
            self._connection.execute(
                "INSERT INTO items (item_id, session_id, bank_id, payload, payload_bytes, state, "
                "next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'ready', ?, ?, ?)",
                (item_id, session_id, bank_id, encoded, len(encoded.encode()), now, now, now),
            )
        return item_id

    def recover_stale_leases(self) -> int:
        """Return leased rows whose lease expired (their sidecar died) to ``ready``."""
        with translated_errors("outbox", self.path), transaction(self._connection):
            return self._expire_leases(time.time())

    def _expire_leases(self, now: float) -> int:
        # A leased row goes back to ready; a submitted row keeps its state (its operation is
        # still known to Hindsight) and only loses the dead owner.
        cursor = self._connection.execute(
            "UPDATE items SET state = CASE state WHEN 'leased' THEN 'ready' ELSE state END, "
            "lease_owner = NULL, lease_expires_at = NULL, updated_at = ? "
            "WHERE lease_owner IS NOT NULL AND lease_expires_at < ?",
            (now, now),
        )
        return cursor.rowcount

    def claim(self, owner: str, *, limit: int = 4) -> list[OutboxItem]:
        """Lease up to ``limit`` deliverable items, at most one per session (the session's head).

        Also claims ``submitted`` heads whose operation is due for a status check.
        """
        now = time.time()
        with translated_errors("outbox", self.path), transaction(self._connection):
            self._expire_leases(now)
            rows = self._connection.execute(
                """
                SELECT item_id FROM items AS head
                WHERE head.state IN ('ready', 'submitted') AND head.next_attempt_at <= ?
                  AND head.lease_owner IS NULL
                  AND NOT EXISTS (
                      SELECT 1 FROM items AS earlier
                      WHERE earlier.session_id = head.session_id
                        AND earlier.seq < head.seq
                        AND earlier.state IN ('ready', 'leased', 'submitted')
                  )
                ORDER BY head.next_attempt_at, head.seq
                LIMIT ?
                """,
                (now, limit),
            ).fetchall()
            ids = [row["item_id"] for row in rows]
            if not ids:
                return []
            placeholders = ",".join("?" for _ in ids)
            claimed = self._connection.execute(
                f"UPDATE items SET lease_owner = ?, lease_expires_at = ?, updated_at = ?, "  # noqa: S608 - placeholders only
                f"state = CASE state WHEN 'ready' THEN 'leased' ELSE state END "
                f"WHERE item_id IN ({placeholders}) RETURNING *",
                (owner, now + self.lease_s, now, *ids),
            ).fetchall()
        return [self._item(row) for row in sorted(claimed, key=lambda row: row["seq"])]

    def _finish(self, item_id: str, owner: str, sql: str, params: Sequence[object]) -> bool:
        with translated_errors("outbox", self.path), transaction(self._connection):
            cursor = self._connection.execute(
                f"{sql}, lease_owner = NULL, lease_expires_at = NULL, updated_at = ? "
                "WHERE item_id = ? AND lease_owner = ?",
                (*params, time.time(), item_id, owner),
            )
        return cursor.rowcount == 1

    def mark_submitted(
        self, item_id: str, owner: str, server_operation_id: str | None, *, poll_in_s: float
    ) -> bool:
        """Hindsight accepted the retain; poll its operation from ``poll_in_s`` on."""
        return self._finish(
            item_id,
            owner,
            "UPDATE items SET state = 'submitted', server_operation_id = ?, "
            "attempts = attempts + 1, last_error = NULL, next_attempt_at = ?",
            (server_operation_id, time.time() + poll_in_s),
        )

    def mark_done(self, item_id: str, owner: str) -> bool:
        return self._finish(
            item_id, owner, "UPDATE items SET state = 'done', last_error = NULL", ()
        )

    def poll_later(self, item_id: str, owner: str, *, delay_s: float) -> bool:
        """A submitted operation is still running: look again later (keeps ``submitted``)."""
        return self._finish(
            item_id, owner, "UPDATE items SET next_attempt_at = ?", (time.time() + delay_s,)
        )

    def retry_later(
        self, item_id: str, owner: str, *, error: str, delay_s: float, new_generation: bool = False
    ) -> bool:
        """Back to ``ready``. ``new_generation`` after Hindsight reported the operation *failed*:
        replaying the same ``operation_id`` would just return the failed operation again."""
        return self._finish(
            item_id,
            owner,
            "UPDATE items SET state = 'ready', attempts = attempts + 1, last_error = ?, "
            "next_attempt_at = ?, server_operation_id = NULL, generation = generation + ?",
            (error, time.time() + delay_s, 1 if new_generation else 0),
        )

    def dead_letter(self, item_id: str, owner: str, *, error: str) -> bool:
        return self._finish(
            item_id,
            owner,
            "UPDATE items SET state = 'dead', attempts = attempts + 1, last_error = ?",
            (error,),
        )

    def release(self, item_id: str, owner: str) -> bool:
        """Give a claimed item back untouched (e.g. on shutdown before it was sent)."""
        return self._finish(
            item_id,
            owner,
            "UPDATE items SET state = CASE state WHEN 'leased' THEN 'ready' ELSE state END",
            (),
        )

    def health(self) -> OutboxHealth:
        with translated_errors("outbox", self.path):
            counts = dict(
                self._connection.execute(
                    "SELECT state, count(*) FROM items GROUP BY state"
                ).fetchall()
            )
            oldest = self._connection.execute(
                "SELECT min(created_at) FROM items WHERE state IN ('ready', 'leased', 'submitted')"
            ).fetchone()[0]
            last_error = self._connection.execute(
                "SELECT last_error FROM items WHERE last_error IS NOT NULL "
                "ORDER BY updated_at DESC LIMIT 1"
            ).fetchone()
        return OutboxHealth(
            pending=counts.get("ready", 0) + counts.get("leased", 0),
            submitted=counts.get("submitted", 0),
            dead=counts.get("dead", 0),
            done=counts.get("done", 0),
            oldest_pending_age_s=None if oldest is None else max(0.0, time.time() - oldest),
            last_error=None if last_error is None else last_error[0],
        )

    def items(
        self, *, states: Sequence[ItemState] | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        with translated_errors("outbox", self.path):
            if states:
                placeholders = ",".join("?" for _ in states)
                rows = self._connection.execute(
                    f"SELECT * FROM items WHERE state IN ({placeholders}) ORDER BY seq LIMIT ?",  # noqa: S608 - placeholders only
                    (*states, limit),
                ).fetchall()
            else:
                rows = self._connection.execute(
                    "SELECT * FROM items ORDER BY seq LIMIT ?", (limit,)
                ).fetchall()
        return [self._item(row) for row in rows]

    def unfinished_count(self) -> int:
        with translated_errors("outbox", self.path):
            return int(
                self._connection.execute(
                    "SELECT count(*) FROM items WHERE state IN ('ready', 'leased', 'submitted')"
                ).fetchone()[0]
            )
