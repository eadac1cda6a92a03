"""Tests write outbox items from payload dicts (the stored form, often partial on purpose)."""

from __future__ import annotations

import json
from typing import Any

from pi_hindsight.stores.outbox_items import RetainRequest, decode_item


def retain_request(
    *, session_id: str, bank_id: str, payload: dict[str, Any], request_id: str | None = None
) -> RetainRequest:
    """A retain request whose item is ``payload``'s first item, read as the outbox reads it."""
    return RetainRequest(session_id, bank_id, decode_item(json.dumps(payload)), request_id)
