"""``evidence explain`` for Pi: a request's ledger record next to its conversation in Pi's
session file (read now, never stored; the diagnosis itself is host-neutral,
``stores/evidence/diagnosis.py``)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pi_hindsight.errors import StateError
from pi_hindsight.hosts.pi.session_file import (
    PiSession,
    SessionEntry,
    find_session_file,
    read_session,
)
from pi_hindsight.stores.evidence.diagnosis import (
    ConversationTrace,
    Diagnosis,
    Explanation,
    diagnose,
)
from pi_hindsight.stores.evidence.tables import EvidenceDetail, EvidenceRecord

_MAX_REPLY_ENTRIES = 60
_TIME_MATCH_BEFORE_S = 5.0
_TIME_MATCH_AFTER_S = 120.0


def _epoch(timestamp: str | None) -> float | None:
    if timestamp is None:
        return None
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return None


def trace_request(session: PiSession, record: EvidenceRecord) -> ConversationTrace:
    """Find the request's entries: by the hidden message's ``details.requestId``, or, when there
    is no hidden message (nothing delivered), the user message entered right after preparing."""
    memory = session.memory_entry(record.request_id)
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
    return ConversationTrace(
        memory_entry=None if memory is None else memory.transcript(),
        user_entry=None if user is None else user.transcript(),
        replies=tuple(entry.transcript() for entry in replies),
        matched_by=matched,
        branches=branches,
        compacted_later=compacted,
    )


def explain(detail: EvidenceDetail, *, session_file: Path | None, agent_dir: Path) -> Explanation:
    """Pair a ledger record with its Pi conversation (read now, never stored)."""
    record = detail.record
    diagnosis = diagnose(record)
    path = session_file
    if path is None and record.transcript_path:
        path = Path(record.transcript_path)
    if (path is None or not path.exists()) and record.session_id:
        path = find_session_file(agent_dir, record.session_id) or path
    if path is None:
        return Explanation(
            detail=detail,
            diagnosis=diagnosis,
            transcript_path=None,
            session_problem="no session file is known",
            trace=None,
            body_matches_session=None,
        )
    if not path.exists():
        problem = "the session file does not exist (deleted, or the session was never saved)"
        return Explanation(
            detail=detail,
            diagnosis=diagnosis,
            transcript_path=str(path),
            session_problem=problem,
            trace=None,
            body_matches_session=None,
        )
    try:
        session = read_session(path)
    except StateError as error:
        return Explanation(
            detail=detail,
            diagnosis=diagnosis,
            transcript_path=str(path),
            session_problem=error.describe(),
            trace=None,
            body_matches_session=None,
        )
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
    return Explanation(
        detail=detail,
        diagnosis=diagnosis,
        transcript_path=str(path),
        session_problem=None,
        trace=trace,
        body_matches_session=matches,
    )
