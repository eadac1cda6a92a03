"""Restoring a set-aside outbox: its unfinished rows, salvaged (``stores/salvage.py``), queued in
the live outbox with their ids, states, batches and idempotency keys (docs/operations.md)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pi_hindsight.serialisation import SnakeRecord
from pi_hindsight.stores.sqlite import transaction, translated_errors


@dataclass(frozen=True)
class RestoreResult:
    """Unfinished work salvaged from a set-aside outbox into this one."""

    added: int  # items now waiting here (ready, sending, submitted, dead)
    already_present: int  # the same item (or the same session's request) was already here
    finished: int  # done in the old file: delivered, nothing to do
    unusable: int  # rows read but not whole enough to queue (a required value missing)


class SalvagedItem(SnakeRecord):
    """An ``items`` row as read from a set-aside outbox: any column may be missing or odd in a
    damaged file (read tolerantly: such a value is None); :func:`_restorable` says whether the
    row is whole enough to queue."""

    item_id: str | None = None
    session_id: str | None = None
    request_id: str | None = None
    bank_id: str | None = None
    payload: str | None = None
    payload_bytes: int | None = None
    state: str | None = None
    batch_id: str | None = None
    last_error: str | None = None
    created_at: float | None = None
    updated_at: float | None = None


class SalvagedBatch(SnakeRecord):
    """A ``batches`` row as read from a set-aside outbox (read tolerantly, as an item is)."""

    batch_id: str | None = None
    session_id: str | None = None
    bank_id: str | None = None
    state: str | None = None
    generation: int | None = None
    attempts: int | None = None
    failures: int | None = None
    next_attempt_at: float | None = None
    server_operation_id: str | None = None
    last_error: str | None = None
    created_at: float | None = None
    updated_at: float | None = None


_BATCH_COLUMNS = (
    "batch_id",
    "session_id",
    "bank_id",
    "state",
    "generation",
    "attempts",
    "failures",
    "next_attempt_at",
    "server_operation_id",
    "last_error",
    "created_at",
    "updated_at",
)
_ITEM_COLUMNS = (
    "item_id",
    "session_id",
    "request_id",
    "bank_id",
    "payload",
    "payload_bytes",
    "state",
    "batch_id",
    "last_error",
    "created_at",
    "updated_at",
)


def restore_rows(
    connection: sqlite3.Connection,
    path: Path,
    items: Sequence[SalvagedItem],
    batches: Sequence[SalvagedBatch],
) -> RestoreResult:
    """Queue the unfinished items (and their batches) read from a set-aside outbox.

    Idempotent: ids are kept, so a second restore adds nothing, and a request the host sent
    again meanwhile is not stored twice. A batch keeps its composition and idempotency key,
    so what Hindsight already accepted is confirmed, not stored again; an item whose batch
    could not be read is queued as ready (Hindsight may then store it a second time).
    """
    now = time.time()
    open_batches = {
        row.batch_id: row for row in batches if row.state in ("sending", "submitted", "dead")
    }
    added = present = finished = unusable = 0
    used_batches: set[str] = set()
    with translated_errors("outbox", path), transaction(connection):
        for row in items:
            state = row.state
            if state == "done":
                finished += 1
                continue
            values: dict[str, Any] = row.model_dump()
            if values["batch_id"] not in open_batches or state not in (
                "sending",
                "submitted",
                "dead",
            ):
                values.update(state="ready", batch_id=None)
            else:
                used_batches.add(str(values["batch_id"]))
            if not _restorable(values):
                unusable += 1
                continue
            cursor = connection.execute(
                f"INSERT OR IGNORE INTO items ({', '.join(_ITEM_COLUMNS)}) "  # noqa: S608 - our column names
                f"VALUES ({_placeholders(_ITEM_COLUMNS)})",
                tuple(values[column] for column in _ITEM_COLUMNS),
            )
            if cursor.rowcount:
                added += 1
            else:
                present += 1
        for batch_id in used_batches:
            batch = open_batches[batch_id].model_dump()
            batch["next_attempt_at"] = now  # due at once; the lease is not carried over
            for counter in ("generation", "attempts", "failures"):
                if not isinstance(batch[counter], int):
                    batch[counter] = 0
            for stamp in ("created_at", "updated_at"):
                if not isinstance(batch[stamp], (int, float)):
                    batch[stamp] = now
            connection.execute(
                f"INSERT OR IGNORE INTO batches ({', '.join(_BATCH_COLUMNS)}) "  # noqa: S608 - our column names
                f"VALUES ({_placeholders(_BATCH_COLUMNS)})",
                tuple(batch[column] for column in _BATCH_COLUMNS),
            )
    return RestoreResult(added, present, finished, unusable)


def _restorable(values: dict[str, Any]) -> bool:
    """Whether a salvaged item row is whole: ids present and a payload that is a JSON object."""
    if not all(isinstance(values[key], str) for key in ("item_id", "session_id", "bank_id")):
        return False
    try:
        payload = json.loads(values["payload"])
    except (TypeError, ValueError):
        return False
    if not isinstance(payload, dict):
        return False
    values["payload_bytes"] = len(str(values["payload"]).encode())
    for key in ("created_at", "updated_at"):
        if not isinstance(values[key], (int, float)):
            values[key] = time.time()
    return True


def _placeholders(values: Sequence[object]) -> str:
    return ",".join("?" for _ in values)
