"""The outbox's records and states (``outbox.py`` is the store): an item, a batch, the health
counts, and the lease owner a recovering worker checks is still alive."""

from __future__ import annotations

import os
import socket
import sqlite3
import uuid
from dataclasses import dataclass
from typing import Literal

from pi_hindsight.backend.resources import RetainItem
from pi_hindsight.stores.outbox_items import decode_item

ItemState = Literal["ready", "sending", "submitted", "done", "dead"]
BatchState = Literal["sending", "submitted", "done", "dead"]
ITEM_STATES: tuple[ItemState, ...] = ("ready", "sending", "submitted", "done", "dead")
UNFINISHED: tuple[ItemState, ...] = ("ready", "sending", "submitted")


_HOST = socket.gethostname()


@dataclass(frozen=True)
class OutboxItem:
    item_id: str
    session_id: str
    request_id: str | None
    bank_id: str
    retain: RetainItem
    payload_bytes: int
    state: ItemState
    batch_id: str | None
    last_error: str | None
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class Batch:
    """What one retain call sends: consecutive items of one session, fixed at claim time."""

    batch_id: str
    session_id: str
    bank_id: str
    state: BatchState
    generation: int
    attempts: int
    failures: int
    server_operation_id: str | None
    last_error: str | None
    items: tuple[OutboxItem, ...]

    @property
    def idempotency_key(self) -> str:
        """Hindsight's ``operation_id`` (it must be a UUID). A new generation only after
        Hindsight reported the operation *failed*: replaying that id would return the failed
        operation again instead of doing the work."""
        if self.generation == 0:
            return self.batch_id
        return str(uuid.uuid5(uuid.UUID(self.batch_id), f"generation-{self.generation}"))


@dataclass(frozen=True)
class OutboxHealth:
    pending: int  # not yet accepted by Hindsight (ready or sending)
    submitted: int  # accepted, awaiting Hindsight's confirmation
    dead: int
    done: int
    oldest_pending_age_s: float | None  # oldest unfinished item
    last_error: str | None  # of an unfinished or dead item
    last_error_at: float | None

    def counts_line(self) -> str:
        return counts_line(self.pending, self.submitted, self.dead, self.done)


def counts_line(pending: int, submitted: int, dead: int, done: int | None = None) -> str:
    """The outbox's counts as every surface says them (status, commands, tools, CLI)."""
    line = f"{pending} pending, {submitted} awaiting confirmation, {dead} dead"
    return line if done is None else f"{line}, {done} done"


@dataclass(frozen=True)
class PurgeResult:
    items: int
    batches: int


def owner_id(tag: str) -> str:
    """A lease owner: ``host:pid:tag``. Recovery checks whether that process is still alive."""
    return f"{_HOST}:{os.getpid()}:{tag}"


def owner_is_gone(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != _HOST or not pid_text.isdigit():
        return False  # another machine's process: only its lease expiry tells
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def item_from_row(row: sqlite3.Row) -> OutboxItem:
    return OutboxItem(
        item_id=row["item_id"],
        session_id=row["session_id"],
        request_id=row["request_id"],
        bank_id=row["bank_id"],
        retain=decode_item(row["payload"]),
        payload_bytes=row["payload_bytes"],
        state=row["state"],
        batch_id=row["batch_id"],
        last_error=row["last_error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )
