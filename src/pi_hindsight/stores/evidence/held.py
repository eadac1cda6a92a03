"""Held back, never hidden (issue 17): the recalled records a delivery did not deliver, as the
evidence ledger keeps them (table ``held_records``, created by ``schema.SCHEMA``'s fourth
migration) — their text (redacted), recall's scores, and why."""

from __future__ import annotations

import json
import sqlite3

from pydantic import Field

from pi_hindsight.serialisation import Record

INSERT_HELD = (
    "INSERT INTO held_records (seq, position, record_id, section, record_key, type, occurred, "
    "text, scores, reason, detail, duplicate_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT_HELD = (
    "SELECT record_id, section, record_key, type, occurred, text, scores, reason, detail, "
    "duplicate_ids FROM held_records WHERE seq = ? ORDER BY position"
)


class HeldItem(Record):
    """A recalled record a delivery held back (the engine's ``HeldRecord``, in the store's
    terms): never shown to the model, kept here so a missing fact can be explained."""

    record_id: str = Field(alias="id")
    section: str
    text: str  # redacted
    reason: str  # "below relevance"
    detail: str | None = None  # the numbers
    key: str | None = None
    type: str | None = None
    occurred: str | None = None
    scores: dict[str, float] = Field(default_factory=dict)
    duplicate_ids: tuple[str, ...] = ()


def held_params(seq: int, items: tuple[HeldItem, ...]) -> list[tuple[object, ...]]:
    """Parameters for :data:`INSERT_HELD`, one tuple per item, in recall's order."""
    return [
        (
            seq,
            position,
            str(item.record_id),
            str(item.section),
            item.key,
            item.type,
            item.occurred,
            str(item.text),
            json.dumps(dict(item.scores)) if item.scores else None,
            str(item.reason),
            item.detail,
            json.dumps(list(item.duplicate_ids)),
        )
        for position, item in enumerate(items)
    ]


def held_from_row(row: sqlite3.Row) -> HeldItem:
    return HeldItem(
        record_id=row["record_id"],
        section=row["section"],
        text=row["text"],
        reason=row["reason"],
        detail=row["detail"],
        key=row["record_key"],
        type=row["type"],
        occurred=row["occurred"],
        scores=json.loads(row["scores"]) if row["scores"] else {},
        duplicate_ids=tuple(json.loads(row["duplicate_ids"])),
    )
