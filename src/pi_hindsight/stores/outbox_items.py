"""What the outbox takes in (``RetainRequest``) and how one item is stored and read back."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pi_hindsight.backend.resources import RetainItem

__all__ = ["RetainRequest", "decode_item", "encode_item"]


@dataclass(frozen=True)
class RetainRequest:
    """One completed request (or an explicit note) to retain: what the outbox takes in."""

    session_id: str
    bank_id: str
    item: RetainItem
    request_id: str | None = None  # the host's request id: enqueueing it twice stores it once


def encode_item(item: RetainItem) -> str:
    """The stored form: a retain call's ``{"items": [...]}`` with this one item (the format of
    every outbox file so far, so older files and ``state restore`` keep working)."""
    entry: dict[str, Any] = {
        "content": item.content,
        "document_id": item.document_id,
        "tags": list(item.tags),
        "context": item.context,
        "update_mode": item.update_mode,
        "timestamp": item.timestamp,
        "metadata": dict(item.metadata),
    }
    return json.dumps({"items": [entry]}, ensure_ascii=False, separators=(",", ":"))


def decode_item(stored: str) -> RetainItem:
    """The stored form back (tolerant of older or partial rows: what is missing is empty)."""
    try:
        payload = json.loads(stored)
    except ValueError:
        payload = {}
    entries = payload.get("items") if isinstance(payload, dict) else None
    entry = entries[0] if isinstance(entries, list) and entries else {}
    if not isinstance(entry, dict):
        entry = {}
    tags = entry.get("tags")
    metadata = entry.get("metadata")
    mode = entry.get("update_mode")
    return RetainItem(
        content=str(entry.get("content") or ""),
        document_id=str(entry.get("document_id") or ""),
        tags=tuple(str(tag) for tag in tags) if isinstance(tags, list) else (),
        timestamp=entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else None,
        context=entry.get("context") if isinstance(entry.get("context"), str) else None,
        metadata={str(k): str(v) for k, v in metadata.items()}
        if isinstance(metadata, dict)
        else {},
        update_mode="replace" if mode == "replace" else "append",
    )
