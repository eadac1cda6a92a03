"""Legacy evidence line formats → :class:`~pi_hindsight.stores.evidence.tables.RequestRow`.

Accepted (one JSON object per line; ``docs/evidence.md`` documents every field):

- ``pi-hindsight-v1`` — the documented line format: ``requestId``, ``preparedAt``, ``outcome``,
  ``body``, ``recordIds``, ``attached``, ``confirmed``… with common aliases (``status``,
  ``timestamp``/``ts``, ``bankId``, ``rendered``, ``injectedIds``…).
- ``abix5-log`` — the operation log of abix5/pi-hindsight (``.pi/hindsight/log.jsonl``,
  ``HINDSIGHT_LOG_PATH``): ``{ts, type: recall|reflect|retain|invalidate|error, injectedText,
  found, injected, …}``. Only recall entries (and recall errors) are request evidence.
- ``luxus-last-recall`` — luxus/pi-hindsight's opt-in last-recall snapshot
  (``.pi/hindsight/last-recall.json``, ``recall.storeLastRecall``): ``{createdAt, query,
  rendered, blocks: [{bankId, memoryCount, results: [{id}]}], failed, failures}``, as one
  pretty-printed document or one snapshot per line.

Tolerance: unknown fields are kept as metadata; fields that carry conversation text (``user``,
``prompt``, ``documentText``…) are dropped and only their names kept, and a recall query is kept
as a hash and a length (R-EVID-2). Lines older than the retention period are skipped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast, get_args

from pi_hindsight.safe_files import BadJson, loads_line
from pi_hindsight.stores.evidence.tables import Outcome, RequestRow

# Legacy records are a few levels deep; deeper lines are bad lines, never a RecursionError.
LEGACY_MAX_DEPTH = 64

_CLIP = 2_000

CONVERSATION_FIELDS = frozenset(
    {
        "user",
        "prompt",
        "userMessage",
        "user_message",
        "documentText",
        "document_text",
        "messages",
        "transcript",
        "conversation",
        "assistant",
        "response",
        "answer",
    }
)
_ABIX5_TYPES = frozenset({"recall", "reflect", "retain", "invalidate", "error"})
_OUTCOMES: tuple[str, ...] = get_args(Outcome)
_STATUS = {
    "success": "delivered",
    "injected": "delivered",
    "ok": "delivered",
    "empty": "nothing_found",
    "none": "nothing_found",
    "no_results": "nothing_found",
    "timeout": "backend_unavailable",
    "unavailable": "backend_unavailable",
    "failed": "error",
    "failure": "error",
}
_UNAVAILABLE = re.compile(
    r"time[d ]?\s*out|timeout|econn|fetch failed|network|unavailable|50[234]", re.I
)
_ALIASES: Mapping[str, tuple[str, ...]] = {
    "request_id": ("requestId", "request_id", "retrievalId", "retrieval_id", "id"),
    "prepared_at": (
        "preparedAt",
        "prepared_at",
        "timestamp",
        "ts",
        "time",
        "createdAt",
        "created_at",
        "recordedAt",
        "startedAt",
    ),
    "outcome": ("outcome", "status"),
    "reason": ("reason", "error", "message"),
    "scope_id": ("scopeId", "scope_id", "scope"),
    "bank_ids": ("bankIds", "bank_ids", "banks", "bankId", "bank_id", "bank"),
    "session_id": ("sessionId", "session_id", "sessionKey"),
    "session_file": ("sessionFile", "session_file"),
    "entry_id": ("entryId", "entry_id"),
    "body": ("body", "rendered", "injectedText", "content", "text", "memory"),
    "record_ids": ("recordIds", "record_ids", "injectedIds", "memoryIds", "keptIds"),
    "record_count": ("recordCount", "record_count", "injectedCount", "memoryCount"),
    "omitted": ("omitted",),
    "tokens": ("tokens",),
    "recall_ms": ("recallMs", "recall_ms", "durationMs", "tookMs"),
    "total_ms": ("totalMs", "total_ms"),
    "attached": ("attached", "injected"),
    "confirmed": ("confirmed",),
    "payload_bytes": ("payloadBytes", "payload_bytes"),
}


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class Bad:
    reason: str


def _epoch(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        number = float(value)
        return number / 1000 if number > 1e11 else number  # milliseconds vs seconds
    if isinstance(value, str):
        try:
            return _epoch(float(value))
        except ValueError:
            pass
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    return None


def _clip(value: object, depth: int = 0) -> object:
    if isinstance(value, str):
        return value if len(value) <= _CLIP else value[:_CLIP] + "…"
    if depth > 4:
        return "…"
    if isinstance(value, list):
        return [_clip(item, depth + 1) for item in value[:100]]
    if isinstance(value, dict):
        return {str(key): _clip(item, depth + 1) for key, item in list(value.items())[:100]}
    return value


def _pick(obj: dict[str, Any], name: str) -> object:
    """Take (and remove) the first alias of ``name`` present in ``obj``."""
    for alias in _ALIASES[name]:
        if alias in obj:
            return obj.pop(alias)
    return None


def _str(value: object) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text or None


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(text for item in value if (text := _str(item)))
    text = _str(value)
    return (text,) if text else ()


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    """What is left of a line after mapping: kept as metadata, minus conversation text."""
    meta: dict[str, Any] = {}
    dropped = sorted(key for key in obj if key in CONVERSATION_FIELDS)
    query = obj.pop("query", None)
    if isinstance(query, str) and query:
        meta["queryHash"] = hashlib.sha256(query.encode()).hexdigest()[:16]
        meta["queryChars"] = len(query)
    for key, value in obj.items():
        if key not in CONVERSATION_FIELDS:
            meta[key] = _clip(value)
    if dropped:
        meta["droppedFields"] = dropped
    return meta


def _line_id(raw: bytes) -> str:
    return "legacy-" + hashlib.sha256(raw.strip()).hexdigest()[:32]


def _from_abix5(obj: dict[str, Any], raw: bytes, at: float) -> RequestRow | Skip:
    kind = obj.pop("type")
    operation = obj.get("operation")
    if kind == "error" and operation in (None, "recall"):
        failure = _str(obj.pop("message", None)) or _str(obj.get("stage")) or "recall failed"
        return RequestRow(
            _line_id(raw), at, "error", "legacy:abix5-log", reason=failure, meta=_meta(obj)
        )
    if kind != "recall":
        return Skip(f"abix5 {kind} entry (not request evidence)")
    body = _str(obj.pop("injectedText", None))
    injected = _int(obj.get("injected")) or 0
    found = _int(obj.get("found"))
    delivered = body is not None or injected > 0
    reason: str | None = None
    if not delivered and found:
        reason = f"{found} found, none injected (filtered out)"
    return RequestRow(
        request_id=_line_id(raw),
        prepared_at=at,
        outcome="delivered" if delivered else "nothing_found",
        source="legacy:abix5-log",
        reason=reason,
        record_count=injected,
        body=body if delivered else None,
        meta=_meta(obj),
    )


def _from_last_recall(obj: dict[str, Any], raw: bytes, at: float) -> RequestRow:
    blocks = [block for block in obj.pop("blocks", []) if isinstance(block, dict)]
    failures = [item for item in obj.pop("failures", []) or [] if isinstance(item, dict)]
    failed = _int(obj.pop("failed", 0)) or 0
    body = _str(obj.pop("rendered", None))
    banks = tuple(dict.fromkeys(bank for b in blocks if (bank := _str(b.get("bankId")))))
    ids = tuple(
        rid
        for block in blocks
        for result in block.get("results") or []
        if isinstance(result, dict) and (rid := _str(result.get("id")))
    )
    count = sum(_int(block.get("memoryCount")) or 0 for block in blocks) or len(ids)
    errors = "; ".join(str(item.get("error")) for item in failures if item.get("error"))
    outcome: Outcome = "delivered" if body else "nothing_found"
    if not body and (failed or failures):
        outcome = "backend_unavailable" if _UNAVAILABLE.search(errors) else "error"
    obj["blockCount"] = len(blocks)
    for block in blocks:  # the block queries are conversation-derived: keep a hash only
        if isinstance(block.get("query"), str):
            obj.setdefault("query", block["query"])
    return RequestRow(
        request_id=_line_id(raw),
        prepared_at=at,
        outcome=outcome,
        source="legacy:luxus-last-recall",
        reason=errors or None,
        bank_ids=banks,
        record_count=count,
        record_ids=ids,
        body=body,
        meta=_meta(obj),
    )


def _from_v1(obj: dict[str, Any], raw: bytes, at: float) -> RequestRow | Bad:
    request_id = _str(_pick(obj, "request_id")) or _line_id(raw)
    status = _str(_pick(obj, "outcome"))
    body = _pick(obj, "body")
    body_text = body if isinstance(body, str) and body.strip() else None
    outcome = None if status is None else _STATUS.get(status.lower(), status.lower())
    if outcome is None:
        if body_text is None:
            return Bad("no outcome and no delivered body: what happened cannot be told")
        outcome = "delivered"
    if outcome not in _OUTCOMES:
        return Bad(f"unknown outcome {status!r}")
    attached = _pick(obj, "attached")
    confirmed = _pick(obj, "confirmed")
    record_ids = _strings(_pick(obj, "record_ids"))
    return RequestRow(
        request_id=request_id,
        prepared_at=at,
        outcome=cast(Outcome, outcome),
        source="legacy:pi-hindsight-v1",
        reason=_str(_pick(obj, "reason")),
        scope_id=_str(_pick(obj, "scope_id")),
        bank_ids=_strings(_pick(obj, "bank_ids")),
        session_id=_str(_pick(obj, "session_id")),
        transcript_path=_str(_pick(obj, "session_file")),
        entry_id=_str(_pick(obj, "entry_id")),
        recall_ms=_float(_pick(obj, "recall_ms")),
        total_ms=_float(_pick(obj, "total_ms")),
        record_count=_int(_pick(obj, "record_count")) or len(record_ids),
        omitted=_int(_pick(obj, "omitted")) or 0,
        tokens=_int(_pick(obj, "tokens")),
        body=body_text if outcome == "delivered" else None,
        record_ids=record_ids,
        attached=attached if isinstance(attached, bool) else None,
        confirmed=confirmed if isinstance(confirmed, bool) else None,
        payload_bytes=_int(_pick(obj, "payload_bytes")),
        meta=_meta(obj),
    )


def parse_line(raw: bytes, *, not_before: float) -> RequestRow | Skip | Bad:
    """One legacy line (or document item, as bytes of JSON) → a row, a skip or a bad line."""
    try:
        obj = loads_line(raw, max_depth=LEGACY_MAX_DEPTH)
    except BadJson as error:
        return Bad(str(error))
    return parse_object(obj, raw, not_before=not_before)


def parse_object(obj: object, raw: bytes, *, not_before: float) -> RequestRow | Skip | Bad:
    if not isinstance(obj, dict):
        return Bad(f"not a JSON object but {type(obj).__name__}")
    obj = dict(obj)
    convert: Callable[[dict[str, Any], bytes, float], RequestRow | Skip | Bad]
    if "ts" in obj and obj.get("type") in _ABIX5_TYPES:
        at, convert = _epoch(obj.pop("ts")), _from_abix5
    elif isinstance(obj.get("blocks"), list):
        at, convert = _epoch(obj.pop("createdAt", None)), _from_last_recall
    else:
        at, convert = _epoch(_pick(obj, "prepared_at")), _from_v1
    if at is None:
        return Bad("no readable timestamp")
    if at < not_before:
        return Skip("older than the retention period")
    row: RequestRow | Skip | Bad = convert(obj, raw, at)
    return row
