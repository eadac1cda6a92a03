"""``evidence explain``: a request's delivered memory next to its conversation in Pi's session file.

A Pi session file (``<agent dir>/sessions/--<cwd>--/<time>_<session id>.jsonl``, format version 3)
is one JSON object per line: a ``session`` header, then entries linked into a tree by ``id`` /
``parentId``. For one user request the layer leaves::

    message (role user)                 the request
    └─ custom_message                   our hidden memory: customType "hindsight-memory",
       │                                details.requestId = the ledger's request id
       └─ message (role assistant) …    the reply, tool calls and results, up to the next request

The conversation is read when ``explain`` runs (the ledger never copies it, R-EVID-2). From the
recorded states only, :func:`diagnose` says which case a suspect answer is: nothing was prepared,
a search miss, a delivery exclusion, or memory that reached the payload, whose use a person then
judges by comparing the two (R-EVID-4). Nothing is scored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pi_hindsight.engine.render import CUSTOM_TYPE
from pi_hindsight.errors import InputFileError, StateError
from pi_hindsight.safe_files import read_json_lines
from pi_hindsight.stores.evidence_schema import EvidenceDetail, EvidenceRecord

_MAX_REPLY_ENTRIES = 60
_TIME_MATCH_BEFORE_S = 5.0
_TIME_MATCH_AFTER_S = 120.0

Reading = Literal[
    "not_prepared", "search_miss", "delivery_exclusion", "delivered_unconfirmed", "delivered"
]


@dataclass(frozen=True)
class SessionEntry:
    entry_id: str
    parent_id: str | None
    kind: str  # the entry type: message, custom_message, compaction, branch_summary, …
    timestamp: str | None
    role: str | None  # for messages: user, assistant, toolResult, bashExecution, custom, …
    custom_type: str | None
    text: str  # readable content: text blocks; tool calls and results as one-line mentions
    details: Mapping[str, Any] = field(default_factory=dict)
    line: int = 0

    @property
    def is_user_message(self) -> bool:
        return self.kind == "message" and self.role == "user"

    def to_json(self) -> dict[str, Any]:
        return {
            "entryId": self.entry_id,
            "type": self.kind,
            "role": self.role,
            "customType": self.custom_type,
            "timestamp": self.timestamp,
            "line": self.line,
            "text": self.text,
        }


@dataclass(frozen=True)
class PiSession:
    path: Path
    session_id: str | None
    cwd: str | None
    entries: tuple[SessionEntry, ...]
    bad_lines: tuple[int, ...]

    def children(self, entry_id: str) -> tuple[SessionEntry, ...]:
        return tuple(entry for entry in self.entries if entry.parent_id == entry_id)

    def get(self, entry_id: str | None) -> SessionEntry | None:
        return next((entry for entry in self.entries if entry.entry_id == entry_id), None)


@dataclass(frozen=True)
class RequestTrace:
    """The request's entries in one session file."""

    memory_entry: SessionEntry | None  # our hidden message for this request
    user_entry: SessionEntry | None
    replies: tuple[SessionEntry, ...]  # after the memory (or the user message), up to the next
    matched_by: Literal["requestId", "time", "none"]
    branches: int  # alternative continuations in Pi's tree (only the first is shown)
    compacted_later: bool


@dataclass(frozen=True)
class Diagnosis:
    reading: Reading
    summary: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Explanation:
    detail: EvidenceDetail
    diagnosis: Diagnosis
    session_file: str | None
    session_problem: str | None  # why the conversation cannot be shown
    trace: RequestTrace | None
    body_matches_session: bool | None

    def to_json(self) -> dict[str, Any]:
        trace = self.trace
        user = None if trace is None or trace.user_entry is None else trace.user_entry
        memory = None if trace is None or trace.memory_entry is None else trace.memory_entry
        return {
            "evidence": self.detail.to_json(),
            "reading": self.diagnosis.reading,
            "summary": self.diagnosis.summary,
            "notes": list(self.diagnosis.notes),
            "sessionFile": self.session_file,
            "sessionProblem": self.session_problem,
            "matchedBy": None if trace is None else trace.matched_by,
            "userMessage": None if user is None else user.to_json(),
            "memoryMessage": None if memory is None else memory.to_json(),
            "bodyMatchesSession": self.body_matches_session,
            "replies": [] if trace is None else [entry.to_json() for entry in trace.replies],
        }


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "image":
            parts.append("[image]")
        elif kind == "toolCall":
            arguments = json.dumps(block.get("arguments"), ensure_ascii=False)
            parts.append(f"[tool call: {block.get('name')} {arguments[:200]}]")
        elif kind == "thinking":
            parts.append("[thinking]")
    return "\n".join(parts)


def _entry(raw: Mapping[str, Any], line: int) -> SessionEntry | None:
    entry_id = raw.get("id")
    if not isinstance(entry_id, str):
        return None
    kind = str(raw.get("type"))
    role = custom_type = None
    details: Mapping[str, Any] = {}
    text = ""
    if kind == "message" and isinstance(raw.get("message"), dict):
        message = raw["message"]
        role = str(message.get("role"))
        if role == "toolResult":
            body = _text(message.get("content"))
            failed = ", failed" if message.get("isError") else ""
            text = f"[tool result: {message.get('toolName')}, {len(body)} chars{failed}]"
        elif role == "bashExecution":
            text = f"[bash: {message.get('command')}]"
        else:
            text = _text(message.get("content"))
            custom_type = message.get("customType")
    elif kind == "custom_message":
        custom_type = raw.get("customType")
        text = _text(raw.get("content"))
        details = raw["details"] if isinstance(raw.get("details"), dict) else {}
    elif kind in ("compaction", "branch_summary"):
        text = str(raw.get("summary") or "")
    parent = raw.get("parentId")
    timestamp = raw.get("timestamp")
    return SessionEntry(
        entry_id=entry_id,
        parent_id=parent if isinstance(parent, str) else None,
        kind=kind,
        timestamp=timestamp if isinstance(timestamp, str) else None,
        role=role,
        custom_type=custom_type if isinstance(custom_type, str) else None,
        text=text,
        details=details,
        line=line,
    )


def read_session(path: Path) -> PiSession:
    """Parse a Pi session file (through ``safe_files``: a regular file, bounded lines and
    size); unreadable lines are skipped and their numbers kept."""
    try:
        lines = read_json_lines(path)
    except InputFileError as error:
        raise StateError(f"cannot read Pi session file: {error}", hint=error.hint) from error
    entries: list[SessionEntry] = []
    bad = [number for number, _ in lines.bad_lines]
    session_id = cwd = None
    for number, raw in lines.values:
        if not isinstance(raw, dict):
            bad.append(number)
        elif raw.get("type") == "session":
            session_id, cwd = raw.get("id"), raw.get("cwd")
        elif (entry := _entry(raw, number)) is not None:
            entries.append(entry)
    return PiSession(
        path=path,
        session_id=session_id if isinstance(session_id, str) else None,
        cwd=cwd if isinstance(cwd, str) else None,
        entries=tuple(entries),
        bad_lines=tuple(sorted(bad)),
    )


def find_session_file(agent_dir: Path, session_id: str) -> Path | None:
    """Pi names session files ``<timestamp>_<session id>.jsonl`` under ``sessions/<cwd>/``."""
    matches = sorted((agent_dir / "sessions").glob(f"*/*_{session_id}.jsonl"))
    return matches[-1] if matches else None


def _epoch(timestamp: str | None) -> float | None:
    if timestamp is None:
        return None
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return None


def trace_request(session: PiSession, record: EvidenceRecord) -> RequestTrace:
    """Find the request's entries: by the hidden message's ``details.requestId``, or, when there
    is no hidden message (nothing delivered), the user message entered right after preparing."""
    memory = next(
        (
            entry
            for entry in session.entries
            if entry.kind == "custom_message"
            and entry.custom_type == CUSTOM_TYPE
            and entry.details.get("requestId") == record.request_id
        ),
        None,
    )
    user: SessionEntry | None = None
    matched: Literal["requestId", "time", "none"] = "none"
    if memory is not None:
        matched = "requestId"
        parent = session.get(memory.parent_id)
        user = parent if parent is not None and parent.is_user_message else None
    else:
        window = (record.total_ms or 0.0) / 1000 + _TIME_MATCH_AFTER_S
        candidates = [
            (at - record.prepared_at, entry)
            for entry in session.entries
            if entry.is_user_message
            and (at := _epoch(entry.timestamp)) is not None
            and -_TIME_MATCH_BEFORE_S <= at - record.prepared_at <= window
        ]
        if candidates:
            user = min(candidates, key=lambda item: abs(item[0]))[1]
            matched = "time"
    start = memory or user
    replies: list[SessionEntry] = []
    branches = 0
    cursor = start
    while cursor is not None and len(replies) < _MAX_REPLY_ENTRIES:
        children = session.children(cursor.entry_id)
        branches += max(0, len(children) - 1)
        cursor = children[0] if children else None
        if cursor is None or cursor.is_user_message:
            break
        if cursor.kind in {"message", "compaction"}:
            replies.append(cursor)
    compacted = start is not None and any(
        entry.kind == "compaction" and entry.line > start.line for entry in session.entries
    )
    return RequestTrace(memory, user, tuple(replies), matched, branches, compacted)


_NOT_PREPARED = {
    "not_registered": "the location is not registered for memory, so recall never ran",
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
    if record.outcome == "nothing_found":
        return Diagnosis(
            "search_miss",
            f"Recall ran in {scope} and found nothing to deliver. If the answer needed a "
            "remembered fact, this is a search miss: check that the fact exists in this scope "
            "(its exact tags) and how the request was worded.",
            (),
        )
    if record.omitted:
        notes.append(
            f"{record.omitted} recalled record(s) were left out by the token budget and never "
            "delivered: a relevant fact may be among them (a delivery exclusion by budget)."
        )
    if record.memo is not None:
        notes.append(
            f"the startup memo {record.memo.memo_id} was included (refreshed "
            f"{record.memo.refreshed_at or 'at an unknown time'})."
        )
    if record.attached is False or record.confirmed is False:
        where = (
            "it was not in Pi's context"
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
        attached = " and attached to Pi's context" if record.attached else ""
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


def explain(detail: EvidenceDetail, *, session_file: Path | None, agent_dir: Path) -> Explanation:
    """Pair a ledger record with its Pi conversation (read now, never stored)."""
    record = detail.record
    diagnosis = diagnose(record)
    path = session_file
    if path is None and record.session_file:
        path = Path(record.session_file)
    if (path is None or not path.exists()) and record.session_id:
        path = find_session_file(agent_dir, record.session_id) or path
    if path is None:
        return Explanation(detail, diagnosis, None, "no session file is known", None, None)
    if not path.exists():
        problem = "the session file does not exist (deleted, or the session was never saved)"
        return Explanation(detail, diagnosis, str(path), problem, None, None)
    try:
        session = read_session(path)
    except StateError as error:
        return Explanation(detail, diagnosis, str(path), error.describe(), None, None)
    trace = trace_request(session, record)
    notes = list(diagnosis.notes)
    matches: bool | None = None
    if trace.memory_entry is not None and detail.body is not None:
        matches = trace.memory_entry.text == detail.body
        if not matches:
            notes.append("the hidden message in the session differs from the recorded body.")
    if trace.memory_entry is None and record.outcome == "delivered":
        notes.append(
            "this session file has no hidden message for the request: it may be on another "
            "branch or in another session file (/fork, /new), or the request was aborted."
        )
    if trace.matched_by == "time":
        notes.append("the user message was matched by time (there is no hidden message).")
    if trace.compacted_later:
        notes.append("the session was compacted later: Pi summarised this memory with the rest.")
    if trace.branches:
        notes.append(f"Pi's tree holds {trace.branches} other continuation(s); the first is shown.")
    if session.bad_lines:
        notes.append(f"{len(session.bad_lines)} unreadable line(s) in the session file.")
    diagnosis = Diagnosis(diagnosis.reading, diagnosis.summary, tuple(notes))
    return Explanation(detail, diagnosis, str(path), None, trace, matches)
