"""The engine's typed contract: what a host hands in and what it gets back.

Frozen records, host-neutral: a host adapter (``hosts/…``) builds the inputs from its own shapes
and turns the outputs into its own; JSON exists only at the edges. The records a host persists
or sends (``DeliveryDetails`` and what it holds) are pydantic models (``serialisation.py``):
``to_json`` where a host persists or sends one, ``load`` where it reads one back — tolerant, since
a host's files outlive versions. docs/adr/0008-typed-engine-contract.md and 0010 say why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import Field, StrictInt, ValidationInfo, field_serializer, model_validator

from pi_hindsight.backend.resources import RecallScores
from pi_hindsight.engine.scope import Scope
from pi_hindsight.engine.turn_text import TurnMessage
from pi_hindsight.serialisation import Record, is_tolerant

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
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
NoticeLevel = Literal["info", "warning", "error"]


class Notice(Record):
    """Something the user should see (a warning, a hint); each host shows it its own way. Its
    JSON (``to_json``) is ``{"level", "message"}``, the shape hosts' wires carry."""

    level: NoticeLevel
    message: str

    @classmethod
    def info(cls, message: str) -> Notice:
        return cls(level="info", message=message)

    @classmethod
    def warning(cls, message: str) -> Notice:
        return cls(level="warning", message=message)

    @classmethod
    def error(cls, message: str) -> Notice:
        return cls(level="error", message=message)


@dataclass(frozen=True)
class HostFacts:
    """What the engine needs to know of its host: names, nothing else.

    ``name`` keys the host's documents (``<name>-session-<session id>``, one per session, appended
    per request; ``<name>-<note id>`` for explicit notes) and is the ``source`` in retain
    metadata; ``label`` is how retain context names it.
    """

    name: str  # "pi", "claude-code"
    label: str  # how retain context names the host
    # The most characters of memory the host passes to the model intact (Claude Code persists
    # a hook's context over 10,000 characters to a file and sends a preview): the block's
    # ceiling is clamped to it. None: the configured ceiling alone.
    max_block_chars: int | None = None
    # How a user turns memory on from inside the host (besides ``pi-hindsight scope register``).
    register_in_host: str = "answer the consent prompt in your agent"

    def block_ceiling_tokens(self, configured: int) -> int:
        """The per-request token ceiling: the configured one, within the host's limit (the
        block's estimate is about four characters per token, never fewer)."""
        if self.max_block_chars is None:
            return configured
        return max(100, min(configured, self.max_block_chars // 4))

    def register_hint(self, cwd: Path) -> str:
        """How to turn memory on for ``cwd``: the one wording every host and status uses."""
        return f"run `pi-hindsight scope register {cwd}` (or {self.register_in_host})"

    def session_document(self, session_id: str) -> str:
        return f"{self.name}-session-{session_id}"

    def note_document(self, note_id: str) -> str:
        return f"{self.name}-{note_id}"

    def session_context(self, project_id: str) -> str:
        return f"{self.label} coding session in project {project_id}"

    def note_context(self, kind: str) -> str:
        return f"{kind} from a {self.label} session"

    def is_default_context(self, context: str, project_id: str) -> bool:
        """Whether ``context`` is this host's own retain wording for the scope (the same on every
        record of it, so it tells the model nothing): a session of the project, or an explicit
        note without a context of its own. Another host's or another project's wording is not."""
        if context == self.session_context(project_id):
            return True
        kind, separator, rest = context.partition(" ")
        return bool(separator) and bool(kind) and rest == f"from a {self.label} session"


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    cwd: Path  # the directory the session started in (kept for the session's life)
    transcript_path: str | None
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
    # The host states the framing (R-RECALL-5) itself on every request, where it stays in the
    # cached prefix (a system prompt section, say), so no block needs to carry it.
    host_states_framing: bool = False


def scores_json(scores: RecallScores | None) -> dict[str, float] | None:
    """Scores as the ledger keeps them: the arms that have one."""
    if scores is None:
        return None
    values = {
        "final": scores.final,
        "reranker": scores.reranker,
        "semantic": scores.semantic,
        "keyword": scores.keyword,
    }
    return {key: value for key, value in values.items() if value is not None}


Count = Annotated[StrictInt, Field(ge=0)]


def _is_none(value: object) -> bool:
    return value is None


def _is_empty(value: Sized) -> bool:
    return not value


# What a host's copy of the details leaves out (``DeliveryDetails``): a None, an empty list. Said
# per field, so the details serialise straight to JSON inside a host's answer (issue 19).
Absent = Field(exclude_if=_is_none)
Empty = Field(exclude_if=_is_empty)


class Omitted(Record):
    """Recalled records left out of a delivery, by why."""

    budget: Count = 0
    duplicate: Count = 0  # the same text twice in one recall
    already_delivered: Count = 0  # in the visible session context already
    in_memo: Count = 0  # stated by the startup memo in the block, or by the one already visible
    corrected: Count = 0  # held back by a correction in force in this scope
    relevance: Count = 0  # held back by the relevance policy (relevance.py)


class DeliveredRecord(Record):
    """One record a delivery gave the model, with what its recall carried (R-RECALL-4).

    The block shows the model only what informs it (the text, when it happened, an informative
    context or source); everything else is kept here — in the host's message details and in the
    evidence ledger. New fields (scores, …) get a default: hosts keep these records in their
    files across versions, and older ones must still load (``DeliveryDetails.load``).
    """

    id: str
    key: str = ""  # engine/memory_block.py record_key of the text
    section: str = ""  # "project", "user"
    type: Annotated[str | None, Absent] = None  # world, experience, observation
    document_id: Annotated[str | None, Absent] = None
    chunk_id: Annotated[str | None, Absent] = None
    # When it happened (occurred_start, else mentioned_at), as recalled.
    occurred: Annotated[str | None, Absent] = None
    context: Annotated[str | None, Absent] = None  # as recalled, redacted
    shown: tuple[str, ...] = ()  # what of it besides the text the block showed: "context", "source"
    # Records of the same text left out as duplicates of this one (a fact and its observation);
    # their provenance fills what this one lacks.
    duplicate_ids: tuple[str, ...] = ()
    # Why recall returned it (issue 13), as recalled; in JSON the arms that have a score.
    scores: Annotated[RecallScores | None, Absent] = None

    @field_serializer("scores")
    def _scores_json(self, scores: RecallScores | None) -> dict[str, float] | None:
        return scores_json(scores)


@dataclass(frozen=True)
class HeldRecord:
    """A recalled record the relevance policy held back: never shown to the model, kept in the
    evidence ledger with its scores and why, so "why didn't it remember X?" has an answer. Not
    part of the host's message details (``DeliveryDetails.to_json``): a host's session file
    keeps what was delivered, not memory that was not."""

    id: str
    key: str  # engine/memory_block.py record_key of the text
    section: str  # "project", "user"
    text: str  # redacted, on one line, trimmed like a delivered record
    reason: str  # relevance.BELOW_RELEVANCE
    detail: str | None = None  # the numbers ("strength 0.31 < floor 0.40")
    type: str | None = None
    occurred: str | None = None
    scores: RecallScores | None = None
    duplicate_ids: tuple[str, ...] = ()  # records of the same text held back with it


@dataclass(frozen=True)
class MemoUse:
    """The startup memo as one delivery included it."""

    memo_id: str
    refreshed_at: str | None


class DeliveryDetails(Record):
    """What a delivery carries besides its text: kept with the host's message (never sent to the
        model), read back from the host's session record on resume (:meth:`load`: tolerant, as a
        host's file outlives versions), and recorded as evidence. Its JSON (``to_json``) leaves out
        what is empty (each such field says so: ``Absent``, ``Empty``), so a host's answer carries
    the details typed and serialises them in one pass with the rest; ``held`` is evidence only
    and never in it."""

    request_id: str
    scope_id: Annotated[str | None, Absent] = None
    bank_id: Annotated[str | None, Absent] = None
    bank_ids: Annotated[tuple[str, ...], Empty] = ()  # every bank recall asked
    record_ids: Annotated[tuple[str, ...], Empty] = ()
    # engine/memory_block.py record_key, per delivered record
    record_keys: Annotated[tuple[str, ...], Empty] = ()
    records: Annotated[tuple[DeliveredRecord, ...], Empty] = ()  # per delivered record, in order
    framed: bool = False  # the block carries the full framing (R-RECALL-5), not only the mark
    # engine/startup_memo.py MemoStatus, when the memo was fetched ("memo" in the JSON)
    memo_status: str | None = Field(default=None, alias="memo", exclude_if=_is_none)
    memo_version: Annotated[str | None, Absent] = None  # of the memo this delivery included
    # The memo this delivery included, and when it was refreshed.
    memo_id: Annotated[str | None, Absent] = None
    memo_refreshed_at: Annotated[str | None, Absent] = None
    # None: recall did not run (or found nothing to compose)
    omitted: Annotated[Omitted | None, Absent] = None
    tokens: Annotated[StrictInt | None, Absent] = None
    recall_ms: Annotated[float | None, Absent] = None
    total_ms: Annotated[float | None, Absent] = None
    # The query each recall was sent, redacted as sent ({"project": …, "user": …}).
    queries: dict[str, str] = Field(default_factory=dict, exclude_if=_is_empty)
    # Recalled records the relevance policy held back (evidence only; not in ``to_json``).
    held: tuple[HeldRecord, ...] = Field(default=(), exclude=True)

    @property
    def memo(self) -> MemoUse | None:
        return None if self.memo_id is None else MemoUse(self.memo_id, self.memo_refreshed_at)

    # The two steps every recall's details take. Their values are typed by these signatures (and
    # were validated where they were made), so the copy is not validated again: a validation of
    # twenty records was the slowest step of composing a delivery (issue 19).
    def recalled(
        self,
        *,
        recall_ms: float,
        total_ms: float,
        bank_ids: tuple[str, ...],
        memo_status: str | None,
        omitted: Omitted,
        held: tuple[HeldRecord, ...],
    ) -> DeliveryDetails:
        """These details with what the recall found (every outcome after a recall)."""
        return self.model_copy(
            update={
                "recall_ms": recall_ms,
                "total_ms": total_ms,
                "bank_ids": bank_ids,
                "memo_status": memo_status,
                "omitted": omitted,
                "held": held,
            }
        )

    def delivered(
        self,
        *,
        records: tuple[DeliveredRecord, ...],
        framed: bool,
        tokens: int,
        memo: MemoUse | None,
        memo_version: str | None,
    ) -> DeliveryDetails:
        """These details with the block that was delivered."""
        return self.model_copy(
            update={
                "record_ids": tuple(record.id for record in records),
                "record_keys": tuple(record.key for record in records),
                "records": records,
                "framed": framed,
                "tokens": tokens,
                "memo_id": None if memo is None else memo.memo_id,
                "memo_refreshed_at": None if memo is None else memo.refreshed_at,
                "memo_version": memo_version,
            }
        )

    @model_validator(mode="before")
    @classmethod
    def _as_older_versions_wrote_it(cls, data: object, info: ValidationInfo) -> object:
        """Details read back: a record that cannot be read is skipped (not the whole list), and
        details written before blocks were framed once carry no "framed": every one of those
        blocks carried the full framing."""
        if not (is_tolerant(info) and isinstance(data, dict)):
            return data
        data = {"requestId": "", **data}
        records = data.get("records")
        if isinstance(records, list):
            data["records"] = [
                item for item in records if DeliveredRecord.load_or_none(item) is not None
            ]
        if "framed" not in data:
            data["framed"] = True
        return data


@dataclass(frozen=True)
class Delivery:
    """One request's memory: its outcome, the text for the model (when delivered) and the
    details. Every request ends in exactly one of these, and it is what evidence records."""

    outcome: Outcome
    text: str | None
    details: DeliveryDetails
    notices: tuple[Notice, ...] = ()
    reason: str | None = None
    # What the block adds to the session's visible context (the session takes it in).
    shown: Shown | None = None

    def with_notices(self, notices: Sequence[Notice]) -> Delivery:
        if not notices:
            return self
        return dataclasses.replace(self, notices=(*self.notices, *notices))


@dataclass(frozen=True)
class CompletedTurn:
    request_id: str
    session_id: str
    messages: Sequence[TurnMessage]
    memory_entry_id: str | None = None  # the host's record of this request's memory message
    transcript_path: str | None = None
    aborted: bool = False  # the user aborted it (engine/trivial.py)


@dataclass
class VisibleContext:
    """What this session's visible context already holds (so nothing is delivered twice).

    Mutable on purpose: the session updates it as it delivers, and replaces it when the host
    says the context changed (resume, compaction)."""

    record_ids: set[str] = field(default_factory=set)
    record_keys: set[str] = field(default_factory=set)  # engine/memory_block.py record_key
    memo_version: str | None = None
    memo_text: str | None = None  # the memo's text as that delivery showed it
    framed: bool = False  # a delivered block there carries the full framing
    recent: list[tuple[str, str]] = field(default_factory=list)  # (role, text), oldest first

    def take_in(self, shown: Shown | None) -> None:
        """A delivered block is in the context now: nothing of it is delivered again."""
        if shown is None:
            return
        self.record_ids.update(shown.record_ids)
        self.record_keys.update(shown.record_keys)
        self.framed = self.framed or shown.framed
        if shown.memo_version is not None:
            self.memo_version = shown.memo_version
            # The earlier memo stays in the visible context too: both state what they state.
            self.memo_text = "\n".join(text for text in (self.memo_text, shown.memo_text) if text)


@dataclass(frozen=True)
class Shown:
    """What one delivered block put into the visible context (``Delivery.shown``): the
    deliverer reports it, the session takes it in (``VisibleContext.take_in``)."""

    record_ids: frozenset[str]
    record_keys: frozenset[str]
    framed: bool
    memo_version: str | None = None  # set when the block carried the memo
    memo_text: str | None = None


def warm_up() -> None:
    """Build the delivery records' validators ahead of the first prompt (the sidecar's warm-up
    thread calls this; ``serialisation.py`` defers building them to first use)."""
    for model in (DeliveryDetails, DeliveredRecord, Omitted, Notice):
        model.model_rebuild()
