"""The engine's typed contract: what a host hands in and what it gets back.

Frozen records, host-neutral: a host adapter (``hosts/…``) builds the inputs from its own shapes
and turns the outputs into its own; JSON exists only at the edges (``to_json`` where a host
persists or sends a record, ``from_json`` where it reads one back — tolerant, since a host's files
outlive versions). docs/adr/0008-typed-engine-contract.md says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pi_hindsight.engine.scope import Scope
from pi_hindsight.engine.transcript import TurnMessage

# Every request ends in exactly one of these (R-RECALL-6 / issue 5): visible in status and evidence.
# ``not_user_request``: a run the host started for something other than the user (another
# extension's message): not a failure, and no automatic recall (R-RECALL-1 is about user requests).
Outcome = Literal[
    "delivered",
    "nothing_found",
    "skipped",
    "backend_unavailable",
    "not_registered",
    "not_user_request",
    "error",
]
OUTCOMES: tuple[Outcome, ...] = (
    "delivered",
    "nothing_found",
    "skipped",
    "backend_unavailable",
    "not_registered",
    "not_user_request",
    "error",
)
NoticeLevel = Literal["info", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    level: NoticeLevel
    message: str

    def to_json(self) -> dict[str, str]:
        return {"level": self.level, "message": self.message}


@dataclass(frozen=True)
class HostFacts:
    """What the engine needs to know of its host: names, nothing else.

    ``name`` keys the host's documents (``<name>-session-<session id>``, one per session, appended
    per request; ``<name>-<note id>`` for explicit notes) and is the ``source`` in retain
    metadata; ``label`` is how retain context names it.
    """

    name: str  # "pi", "claude-code"
    label: str  # how retain context names the host

    def session_document(self, session_id: str) -> str:
        return f"{self.name}-session-{session_id}"

    def note_document(self, note_id: str) -> str:
        return f"{self.name}-{note_id}"

    def session_context(self, project_id: str) -> str:
        return f"{self.label} coding session in project {project_id}"

    def note_context(self, kind: str) -> str:
        return f"{kind} from a {self.label} session"


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    cwd: Path  # the directory the session started in (kept for the session's life)
    session_file: str | None
    has_ui: bool
    reason: str


@dataclass(frozen=True)
class ConsentQuestion:
    title: str
    message: str


@dataclass(frozen=True)
class SessionView:
    """What the host shows after a session opened (or consent was answered)."""

    enabled: bool
    status_line: str
    notices: tuple[Notice, ...]
    consent: ConsentQuestion | None
    scope: Scope | None
    off_reason: str | None


RequestOrigin = Literal["user", "extension"]


@dataclass(frozen=True)
class UserRequest:
    """A run of the agent about to start: for the user's prompt, or (``origin="extension"``)
    started by something else in the host, e.g. another extension's message."""

    request_id: str
    session_id: str
    prompt: str
    origin: RequestOrigin = "user"
    origin_detail: str | None = None  # what started it, when not the user (e.g. a message type)


def _ints(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _strs(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key)
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str) and item)


def _number(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass(frozen=True)
class Omitted:
    """Recalled records left out of a delivery, by why."""

    budget: int = 0
    duplicate: int = 0
    already_delivered: int = 0
    corrected: int = 0  # held back by a correction in force in this scope

    def to_json(self) -> dict[str, int]:
        data = {
            "budget": self.budget,
            "duplicate": self.duplicate,
            "alreadyDelivered": self.already_delivered,
        }
        if self.corrected:
            data["corrected"] = self.corrected
        return data

    @classmethod
    def from_json(cls, data: object) -> Omitted:
        if not isinstance(data, Mapping):
            return cls()
        return cls(
            _ints(data, "budget"),
            _ints(data, "duplicate"),
            _ints(data, "alreadyDelivered"),
            _ints(data, "corrected"),
        )


@dataclass(frozen=True)
class MemoUse:
    """The startup memo as one delivery included it."""

    memo_id: str
    refreshed_at: str | None


@dataclass(frozen=True)
class DeliveryDetails:
    """What a delivery carries besides its text: kept with the host's message (never sent to the
    model), read back from the host's session record on resume, and recorded as evidence."""

    request_id: str
    scope_id: str | None = None
    bank_id: str | None = None
    bank_ids: tuple[str, ...] = ()  # every bank recall asked
    record_ids: tuple[str, ...] = ()
    record_keys: tuple[str, ...] = ()  # engine/render.py record_key, per delivered record
    memo_status: str | None = None  # engine/memo.py MemoStatus, when the memo was fetched
    memo_version: str | None = None  # of the memo this delivery included
    memo: MemoUse | None = None
    omitted: Omitted | None = None  # None: recall did not run (or found nothing to compose)
    tokens: int | None = None
    recall_ms: float | None = None
    total_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"requestId": self.request_id}
        if self.scope_id is not None:
            data.update(scopeId=self.scope_id, bankId=self.bank_id)
        optional: dict[str, Any] = {
            "bankIds": list(self.bank_ids) or None,
            "memo": self.memo_status,
            "memoVersion": self.memo_version,
            "memoId": None if self.memo is None else self.memo.memo_id,
            "memoRefreshedAt": None if self.memo is None else self.memo.refreshed_at,
            "omitted": None if self.omitted is None else self.omitted.to_json(),
            "recordIds": list(self.record_ids) or None,
            "recordKeys": list(self.record_keys) or None,
            "tokens": self.tokens,
            "recallMs": self.recall_ms,
            "totalMs": self.total_ms,
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        return data

    @classmethod
    def from_json(cls, data: object) -> DeliveryDetails | None:
        """Read details back (from a host's session record): whatever is readable is kept, an
        unreadable field is left at its default; None when ``data`` is not an object."""
        if not isinstance(data, Mapping):
            return None
        memo_id = _str(data, "memoId")
        tokens = data.get("tokens")
        return cls(
            request_id=_str(data, "requestId") or "",
            scope_id=_str(data, "scopeId"),
            bank_id=_str(data, "bankId"),
            bank_ids=_strs(data, "bankIds"),
            record_ids=_strs(data, "recordIds"),
            record_keys=_strs(data, "recordKeys"),
            memo_status=_str(data, "memo"),
            memo_version=_str(data, "memoVersion"),
            memo=None if memo_id is None else MemoUse(memo_id, _str(data, "memoRefreshedAt")),
            omitted=Omitted.from_json(data["omitted"]) if "omitted" in data else None,
            tokens=tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None,
            recall_ms=_number(data, "recallMs"),
            total_ms=_number(data, "totalMs"),
        )


@dataclass(frozen=True)
class Delivery:
    """One request's memory: its outcome, the text for the model (when delivered) and the
    details. Every request ends in exactly one of these, and it is what evidence records."""

    outcome: Outcome
    text: str | None
    details: DeliveryDetails
    notices: tuple[Notice, ...] = ()
    reason: str | None = None

    def with_notices(self, notices: Sequence[Notice]) -> Delivery:
        if not notices:
            return self
        return Delivery(
            self.outcome, self.text, self.details, (*self.notices, *notices), self.reason
        )


@dataclass(frozen=True)
class CompletedTurn:
    request_id: str
    session_id: str
    messages: Sequence[TurnMessage]
    memory_entry_id: str | None = None  # the host's record of this request's memory message
    session_file: str | None = None


@dataclass
class VisibleContext:
    """What this session's visible context already holds (so nothing is delivered twice).

    Mutable on purpose: the session updates it as it delivers, and replaces it when the host
    says the context changed (resume, compaction)."""

    record_ids: set[str] = field(default_factory=set)
    record_keys: set[str] = field(default_factory=set)  # engine/render.py record_key
    memo_version: str | None = None
    recent: list[tuple[str, str]] = field(default_factory=list)  # (role, text), oldest first
