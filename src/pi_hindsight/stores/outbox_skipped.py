"""The outbox's record of requests not sent to retain because they carry no knowledge
(``retain.skipTrivial``, ``engine/trivial.py``): which request, why, how many characters."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pi_hindsight.stores.sqlite import StoreConnection, transaction


@dataclass(frozen=True)
class SkippedRequest:
    session_id: str
    request_id: str
    bank_id: str
    reason: str
    chars: int
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "requestId": self.request_id,
            "bankId": self.bank_id,
            "reason": self.reason,
            "chars": self.chars,
            "createdAt": self.created_at,
        }


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
    return [SkippedRequest(*row) for row in rows]
