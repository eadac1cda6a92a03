"""The one reader of Pi session files (JSONL, format version 3; Pi's docs/session-format.md).

A session file (``<agent dir>/sessions/--<cwd>--/<time>_<session id>.jsonl``) is a ``session``
header, then entries linked into a tree by ``id`` / ``parentId``. For one user request the layer
leaves::

    message (role user)                 the request
    └─ custom_message                   our hidden memory: customType "hindsight-memory",
       │                                details = the delivery's details (hosts/pi/wire.py)
       └─ message (role assistant) …    the reply, tool calls and results, up to the next request

What is read from it: the directory a resumed session started in (the header), what the *visible*
context holds (the path from the current leaf to the root, with everything before the latest
compaction's first kept entry summarised away: delivered memory records, the memo version and
text, whether a block stated the framing, the recent turns), and a request's entries for
``evidence explain``. Parsing is tolerant — a bad line
is skipped and counted, never fatal — and bounded: every read goes through ``safe_files``
(regular files only, 64 MB and 16 MB per line at most, nesting bounded).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_hindsight.engine.memory_block import memo_section
from pi_hindsight.engine.types import DeliveryDetails, VisibleContext
from pi_hindsight.errors import InputFileError, StateError
from pi_hindsight.hosts.pi.messages import readable_text, text_of
from pi_hindsight.hosts.pi.naming import CUSTOM_TYPE
from pi_hindsight.safe_files import SESSION_HEADER_MAX_BYTES, FileMissing, read_json_lines

if TYPE_CHECKING:
    from pi_hindsight.stores.evidence.diagnosis import TranscriptEntry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionEntry:
    """One entry of a session file, with what the layer reads from it."""

    entry_id: str
    parent_id: str | None
    kind: str  # the entry type: message, custom_message, compaction, branch_summary, …
    timestamp: str | None
    role: str | None  # for messages: user, assistant, toolResult, bashExecution, custom, …
    custom_type: str | None
    text: str  # text blocks only (what a query or a comparison needs)
    readable: str  # for a person: text, with tool calls and results as one-line mentions
    details: Mapping[str, Any] = field(default_factory=dict)
    first_kept_entry_id: str | None = None  # compactions only
    line: int = 0
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)  # the entry as read

    @property
    def is_user_message(self) -> bool:
        return self.kind == "message" and self.role == "user"

    @property
    def is_memory(self) -> bool:
        """One of our hidden memory messages."""
        return self.kind == "custom_message" and self.custom_type == CUSTOM_TYPE

    @property
    def delivery(self) -> DeliveryDetails | None:
        return DeliveryDetails.load_or_none(self.details) if self.is_memory else None

    def transcript(self) -> TranscriptEntry:
        # For explain only: the diagnosis shapes are not loaded when a session starts (issue 19).
        from pi_hindsight.stores.evidence.diagnosis import TranscriptEntry  # noqa: PLC0415

        return TranscriptEntry(
            entry_id=self.entry_id,
            kind=self.kind,
            role=self.role,
            message_kind=self.custom_type,
            timestamp=self.timestamp,
            line=self.line,
            text=self.readable,
        )


@dataclass(frozen=True)
class PiSession:
    path: Path
    session_id: str | None
    cwd: str | None
    entries: tuple[SessionEntry, ...]  # in file order, header excluded
    bad_lines: tuple[int, ...]
    note: str | None = None  # one line about skipped lines (for the log), if any

    def children(self, entry_id: str) -> tuple[SessionEntry, ...]:
        return tuple(entry for entry in self.entries if entry.parent_id == entry_id)

    def get(self, entry_id: str | None) -> SessionEntry | None:
        return next((entry for entry in self.entries if entry.entry_id == entry_id), None)

    def visible(self) -> list[SessionEntry]:
        return visible_entries(self.entries)

    def memory_entry(self, request_id: str) -> SessionEntry | None:
        """Our hidden message for ``request_id``, if this file has it."""
        for entry in self.entries:
            delivery = entry.delivery
            if delivery is not None and delivery.request_id and delivery.request_id == request_id:
                return entry
        return None


def main_branch(entries: Sequence[SessionEntry]) -> list[SessionEntry]:
    """The path from the last entry (Pi's leaf) to the root, oldest first, compactions and all."""
    if not entries:
        return []
    by_id = {entry.entry_id: entry for entry in entries}
    path: list[SessionEntry] = []
    seen: set[str] = set()
    node: SessionEntry | None = entries[-1]
    while node is not None and node.entry_id not in seen:
        seen.add(node.entry_id)
        path.append(node)
        node = by_id.get(node.parent_id) if node.parent_id is not None else None
    path.reverse()
    return path


def visible_entries(entries: Sequence[SessionEntry]) -> list[SessionEntry]:
    """The entries that make up the model's context now, oldest first (Pi's
    buildSessionContext): the path from the leaf (the last entry) to the root; with a compaction
    on the path, only the entries from its ``firstKeptEntryId`` on."""
    path = main_branch(entries)
    compactions = [index for index, entry in enumerate(path) if entry.kind == "compaction"]
    if not compactions:
        return path
    last = compactions[-1]
    first_kept = path[last].first_kept_entry_id
    start = next((index for index, entry in enumerate(path) if entry.entry_id == first_kept), last)
    return [entry for index, entry in enumerate(path) if index >= start and index != last]


def _entry(raw: Mapping[str, Any], line: int) -> SessionEntry | None:
    entry_id = raw.get("id")
    if not isinstance(entry_id, str):
        return None
    kind = str(raw.get("type"))
    role = custom_type = None
    details: Mapping[str, Any] = {}
    text = readable = ""
    if kind == "message" and isinstance(raw.get("message"), dict):
        message = raw["message"]
        role = str(message.get("role"))
        text = text_of(message.get("content"))
        if role == "toolResult":
            failed = ", failed" if message.get("isError") else ""
            readable = f"[tool result: {message.get('toolName')}, {len(text)} chars{failed}]"
            text = ""
        elif role == "bashExecution":
            readable = f"[bash: {message.get('command')}]"
        else:
            readable = readable_text(message.get("content"))
            custom_type = message.get("customType")
    elif kind == "custom_message":
        custom_type = raw.get("customType")
        text = readable = text_of(raw.get("content"))
        details = raw["details"] if isinstance(raw.get("details"), dict) else {}
    elif kind in ("compaction", "branch_summary"):
        text = readable = str(raw.get("summary") or "")
    parent = raw.get("parentId")
    timestamp = raw.get("timestamp")
    first_kept = raw.get("firstKeptEntryId")
    return SessionEntry(
        entry_id=entry_id,
        parent_id=parent if isinstance(parent, str) else None,
        kind=kind,
        timestamp=timestamp if isinstance(timestamp, str) else None,
        role=role,
        custom_type=custom_type if isinstance(custom_type, str) else None,
        text=text,
        readable=readable,
        details=details,
        first_kept_entry_id=first_kept if isinstance(first_kept, str) else None,
        line=line,
        raw=raw,
    )


def read_session(path: Path) -> PiSession:
    """Parse a Pi session file; unreadable lines are skipped and their numbers kept. A file that
    cannot be read safely (missing, a special file, over the caps) raises StateError."""
    try:
        lines = read_json_lines(path)
    except InputFileError as error:
        raise StateError(f"cannot read Pi session file: {error}", hint=error.hint) from error
    entries: list[SessionEntry] = []
    bad = [number for number, _ in lines.bad_lines]
    session_id = cwd = None
    header_seen = False
    for number, raw in lines.values:
        if not isinstance(raw, dict):
            bad.append(number)
        elif raw.get("type") == "session" and not header_seen:
            header_seen = True
            session_id, cwd = raw.get("id"), raw.get("cwd")
        elif (entry := _entry(raw, number)) is not None:
            entries.append(entry)
    return PiSession(
        path=path,
        session_id=session_id if isinstance(session_id, str) else None,
        cwd=cwd if isinstance(cwd, str) else None,
        entries=tuple(entries),
        bad_lines=tuple(sorted(bad)),
        note=lines.note(path),
    )


def read_session_file(path: Path) -> PiSession | None:
    """The session, or None when there is none to read: the file does not exist yet (Pi writes
    a new session's file only from its first turn on), cannot be read safely, or is not a Pi
    session. Problems are logged once per read."""
    try:
        session = read_session(path)
    except StateError as error:
        if not isinstance(error.__cause__, FileMissing):
            logger.warning("session file not read: %s", error)
        return None
    if session.note is not None:
        logger.warning("%s", session.note)
    return session if session.session_id is not None or session.cwd is not None else None


def session_start_dir(session_file: str | None, cwd: Path) -> Path:
    """The directory the session started in: a resumed session keeps the scope of the directory
    recorded in its session file's header, wherever Pi runs now (R-SCOPE-5). Only the header is
    read (a regular file, a bounded line); anything unusable means ``cwd``."""
    if not session_file:
        return cwd
    try:
        lines = read_json_lines(
            Path(session_file), max_bytes=None, max_line_bytes=SESSION_HEADER_MAX_BYTES, max_lines=1
        )
    except FileMissing:
        return cwd
    except InputFileError as error:
        logger.warning("session header not read: %s", error)
        return cwd
    header = lines.values[0][1] if lines.values else None
    if not isinstance(header, dict) or header.get("type") != "session":
        return cwd
    recorded = header.get("cwd")
    if isinstance(recorded, str) and Path(recorded).is_dir():
        return Path(recorded)
    return cwd


def delivered_record_ids(entries: Iterable[SessionEntry], field: str = "recordIds") -> set[str]:
    """Memory record ids (or, with ``field="recordKeys"``, text keys) delivered by our hidden
    messages among ``entries``."""
    found: set[str] = set()
    for entry in entries:
        delivery = entry.delivery
        if delivery is not None:
            found.update(delivery.record_keys if field == "recordKeys" else delivery.record_ids)
    return found


def memo_delivered(entries: Iterable[SessionEntry]) -> str | None:
    """The memo version (refresh time) last delivered among ``entries``, if any."""
    version: str | None = None
    for entry in entries:
        delivery = entry.delivery
        if delivery is not None and delivery.memo_version is not None:
            version = delivery.memo_version
    return version


def memo_texts(entries: Iterable[SessionEntry]) -> str | None:
    """The memo text every delivered memo among ``entries`` showed, joined (None: no memo)."""
    texts = [
        text
        for entry in entries
        if (delivery := entry.delivery) is not None
        and delivery.memo_version is not None
        and (text := memo_section(entry.text))
    ]
    return "\n".join(texts) or None


def framing_delivered(entries: Iterable[SessionEntry]) -> bool:
    """Whether one of our hidden messages among ``entries`` stated the full framing."""
    return any((delivery := entry.delivery) is not None and delivery.framed for entry in entries)


def recent_turns(entries: Sequence[SessionEntry], limit: int) -> list[tuple[str, str]]:
    """The last ``limit`` user/assistant texts among ``entries`` as (role, text)."""
    turns = [
        (str(entry.role), entry.text)
        for entry in entries
        if entry.kind == "message" and entry.role in ("user", "assistant") and entry.text.strip()
    ]
    return turns[-limit:] if limit > 0 else []


def read_visible_context(session_file: str | None, turns: int) -> VisibleContext | None:
    """What the session's visible context already holds, from its Pi session file: the memory
    records, memo and framing delivered there, and the last ``turns`` conversation turns."""
    if not session_file:
        return None
    session = read_session_file(Path(session_file))
    if session is None:
        return None
    visible = session.visible()
    return VisibleContext(
        record_ids=delivered_record_ids(visible),
        record_keys=delivered_record_ids(visible, "recordKeys"),
        memo_version=memo_delivered(visible),
        memo_text=memo_texts(visible),
        framed=framing_delivered(visible),
        recent=recent_turns(visible, turns),
    )


def find_session_file(agent_dir: Path, session_id: str) -> Path | None:
    """Pi names session files ``<timestamp>_<session id>.jsonl`` under ``sessions/<cwd>/``."""
    matches = sorted((agent_dir / "sessions").glob(f"*/*_{session_id}.jsonl"))
    return matches[-1] if matches else None
