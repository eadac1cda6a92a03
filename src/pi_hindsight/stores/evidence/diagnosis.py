"""``evidence explain``: what the ledger recorded for a request, and what it says about the case.

The conversation itself is never copied into the ledger (R-EVID-2): a host reads it from its own
record when ``explain`` runs (each host adapter has its own reader) and hands the
request's entries over as a :class:`ConversationTrace`. From the recorded states only,
:func:`diagnose` says which case a suspect answer is: nothing was prepared, a search miss, a
delivery exclusion, or memory that reached the payload, whose use a person then judges by
comparing the two (R-EVID-4). Nothing is scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, computed_field

from pi_hindsight.serialisation import Record
from pi_hindsight.stores.evidence.held import HeldItem
from pi_hindsight.stores.evidence.tables import (
    DeliveredItem,
    EvidenceDetail,
    EvidenceRecord,
)

Reading = Literal[
    "not_prepared", "search_miss", "delivery_exclusion", "delivered_unconfirmed", "delivered"
]


class TranscriptEntry(Record):
    """One entry of a host's conversation record, as ``explain`` shows it."""

    entry_id: str
    kind: str = Field(alias="type")  # the host's entry type (a message, a compaction, …)
    role: str | None
    message_kind: str | None  # the host's type of a message of its own
    timestamp: str | None
    line: int
    text: str  # readable: text, with tool calls and results as one-line mentions


@dataclass(frozen=True)
class ConversationTrace:
    """The request's entries in the host's conversation record."""

    memory_entry: TranscriptEntry | None  # our hidden message for this request
    user_entry: TranscriptEntry | None
    replies: tuple[TranscriptEntry, ...]  # after the memory (or the user message), up to the next
    matched_by: Literal["requestId", "time", "none"]
    branches: int  # alternative continuations in the host's tree (only the first is shown)
    compacted_later: bool


@dataclass(frozen=True)
class Diagnosis:
    reading: Reading
    summary: str
    notes: tuple[str, ...]


class Explanation(Record):
    """What ``explain`` shows: the evidence, the diagnosis and the conversation's entries, one
    flat JSON object (the diagnosis's and the trace's parts are computed fields)."""

    detail: EvidenceDetail = Field(alias="evidence")
    diagnosis: Diagnosis = Field(exclude=True)  # shown as reading, summary, notes
    transcript_path: str | None
    session_problem: str | None  # why the conversation cannot be shown
    trace: ConversationTrace | None = Field(exclude=True)  # shown as its entries
    body_matches_session: bool | None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def reading(self) -> Reading:
        return self.diagnosis.reading

    @computed_field  # type: ignore[prop-decorator]
    @property
    def summary(self) -> str:
        return self.diagnosis.summary

    @computed_field  # type: ignore[prop-decorator]
    @property
    def notes(self) -> tuple[str, ...]:
        return self.diagnosis.notes

    @computed_field  # type: ignore[prop-decorator]
    @property
    def matched_by(self) -> str | None:
        return None if self.trace is None else self.trace.matched_by

    @computed_field  # type: ignore[prop-decorator]
    @property
    def user_message(self) -> TranscriptEntry | None:
        return None if self.trace is None else self.trace.user_entry

    @computed_field  # type: ignore[prop-decorator]
    @property
    def memory_message(self) -> TranscriptEntry | None:
        return None if self.trace is None else self.trace.memory_entry

    @computed_field  # type: ignore[prop-decorator]
    @property
    def replies(self) -> tuple[TranscriptEntry, ...]:
        return () if self.trace is None else self.trace.replies


_NOT_PREPARED = {
    "not_registered": "the location is not registered for memory, so recall never ran",
    "not_user_request": "the run was not started by the user (another extension's message), so "
    "no automatic recall ran",
    "backend_unavailable": "Hindsight could not be reached or did not answer in time",
    "skipped": "recall was skipped",
    "error": "preparing memory failed",
}


def diagnose(record: EvidenceRecord) -> Diagnosis:
    """What the recorded states say, without judging the answer (no quality score, R-EVID-4)."""
    notes: list[str] = []
    scope = f"scope {record.scope_id} (bank {', '.join(record.bank_ids) or '?'})"
    if record.outcome in _NOT_PREPARED:
        why = _NOT_PREPARED[record.outcome] + (f": {record.reason}" if record.reason else "")
        return Diagnosis(
            "not_prepared",
            f"No memory was prepared — {why}. Neither a search miss nor ignored memory: "
            "recall did not run or did not finish.",
            (),
        )
    held = record.omitted_by.get("relevance", 0)
    if held:
        notes.append(
            f"{held} recalled record(s) were held back as below relevance (recall.relevance) "
            "and never shown to the model; they are listed under the delivered ones with their "
            "scores. If the answer needed one, the relevance bars cut it."
        )
    if record.outcome == "nothing_found":
        return Diagnosis(
            "search_miss",
            f"Recall ran in {scope} and found nothing to deliver. If the answer needed a "
            "remembered fact, this is a search miss: check that the fact exists in this scope "
            "(its exact tags) and how the request was worded.",
            tuple(notes),
        )
    if record.omitted:
        notes.append(
            f"{record.omitted} recalled record(s) were left out by the token budget and never "
            "delivered: a relevant fact may be among them (a delivery exclusion by budget)."
        )
    in_memo = record.omitted_by.get("inMemo", 0)
    if in_memo:
        notes.append(
            f"{in_memo} recalled record(s) were left out because the startup memo in the "
            "context (this block's or an earlier one's) states them."
        )
    already = record.omitted_by.get("alreadyDelivered", 0)
    if already:
        notes.append(
            f"{already} recalled record(s) were left out as already delivered in the visible "
            "session context."
        )
    if record.memo is not None:
        notes.append(
            f"the startup memo {record.memo.memo_id} was included (refreshed "
            f"{record.memo.refreshed_at or 'at an unknown time'})."
        )
    if record.attached is False or record.confirmed is False:
        where = (
            "it was not in the agent's context"
            if record.attached is False
            else f"its text was not found in the provider payload ({record.payload_bytes} bytes)"
        )
        return Diagnosis(
            "delivery_exclusion",
            f"Memory was prepared ({record.record_count} record(s)) but did not reach the "
            f"model: {where}. A delivery exclusion, not a search miss.",
            tuple(notes),
        )
    if record.confirmed is None:
        attached = " and attached to the agent's context" if record.attached else ""
        return Diagnosis(
            "delivered_unconfirmed",
            f"Memory was prepared ({record.record_count} record(s)){attached}; no payload check "
            "was reported, so whether it reached the provider is unknown.",
            tuple(notes),
        )
    return Diagnosis(
        "delivered",
        f"Memory ({record.record_count} record(s)) was in the provider payload — which proves "
        "neither that the provider received it nor that the model used it. Compare it with the "
        "reply: a reply that contradicts or ignores a relevant record ignored memory; if no "
        "record was relevant, it is a search miss.",
        tuple(notes),
    )


# -- why a record came (issue 13) -------------------------------------------------------------

_RECORD_SECTIONS = ("## Project memory", "## User preferences")


def delivered_lines(body: str | None, count: int) -> tuple[str | None, ...]:
    """The line of ``body`` that showed each of the ``count`` delivered records, in block order
    (the records of the project and User sections, one ``- …`` line each); all None when the
    body does not hold exactly that many (a record kept before its block's layout was)."""
    lines: list[str] = []
    in_records = False
    for line in (body or "").splitlines():
        if line.startswith("## "):
            in_records = line.startswith(_RECORD_SECTIONS)
        elif in_records and line.startswith("- "):
            lines.append(line)
    if len(lines) != count:
        return (None,) * count
    return tuple(lines)


def _score(value: float) -> str:
    return f"{value:.2f}"


def why_it_came(item: DeliveredItem) -> str:
    """What Hindsight's recall said about a delivered record, in one line: its type, its final
    score and the retrieval arms that found it (``semantic``/``keyword`` carry a score only when
    that arm surfaced it; a result with neither came by a graph or temporal link)."""
    parts = [item.type or "type unknown"]
    scores = item.scores
    final = scores.get("final")
    if final is None:
        parts.append("no recall scores kept")
        return " · ".join(parts)
    detail = [f"{arm} {_score(scores[arm])}" for arm in ("reranker",) if arm in scores]
    parts.append(f"score {_score(final)}" + (f" ({', '.join(detail)})" if detail else ""))
    arms = [f"{arm} {_score(scores[arm])}" for arm in ("semantic", "keyword") if arm in scores]
    parts.append(f"found by {' + '.join(arms)}" if arms else "found by a graph or temporal link")
    return " · ".join(parts)


def held_as_item(item: HeldItem) -> DeliveredItem:
    """A held-back record in the shape :func:`why_it_came` reads (its type and scores)."""
    return DeliveredItem(
        record_id=item.record_id, section=item.section, type=item.type, scores=item.scores
    )
