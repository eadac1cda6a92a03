"""The outbox's record of requests not sent to retain because they carry no knowledge
(``retain.skipTrivial``, ``engine/trivial.py``): which request, why, how many characters."""

from __future__ import annotations

import time

from pi_hindsight.serialisation import Record
from pi_hindsight.stores.sqlite import StoreConnection, transaction


class SkippedRequest(Record):
    """A request not sent to retain, and why (``outbox skipped --json`` shows these)."""

    session_id: str
    request_id: str
    bank_id: str
    reason: str
    chars: int
    created_at: float


def record(connection: StoreConnection, skipped: SkippedRequest) -> None:
    with transaction(connection):
        connection.execute(
            "INSERT OR IGNORE INTO skipped (session_id, request_id, bank_id, reason, chars, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (
                skipped.session_id,
                skipped.request_id,
                skipped.bank_id,
                skipped.reason,
                skipped.chars,
                skipped.created_at or time.time(),
            ),
        )


def listed(connection: StoreConnection, limit: int) -> list[SkippedRequest]:
    rows = connection.execute(
        "SELECT session_id, request_id, bank_id, reason, chars, created_at FROM skipped "
        "ORDER BY seq DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [SkippedRequest.model_validate(dict(row)) for row in rows]
