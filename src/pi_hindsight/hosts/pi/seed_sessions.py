"""Pi's earlier sessions as history to seed (``engine/seeding.py``): the session files under the
agent dir (``<agent dir>/sessions/--<cwd>--/<time>_<session id>.jsonl``), both Pi 0.73.1's and
Pi 1.x's entries (format version 3 for both), turned into requests the way live retain sees them.

A session belongs here when its header's ``cwd`` resolves to this location (the engine's
matcher). Its *main branch* is the path from the last entry to the root; on it, one request is
a user message and everything after it up to the next user message. Left out, as live retain
leaves them out: our hidden memory (``custom_message``) and other extensions' messages, Pi 1.x's
``system`` messages (prompt sections), attempts a ``context_edit`` with ``replacement: null``
omits (failed retries), and compaction and branch summaries — never user speech. A
``context_edit`` with a replacement changes the target's content, as Pi shows it to the model.
What remains goes through ``hosts/pi/messages.py`` ``turn_messages``, then the retain policy.

Files are read through ``session_file.read_session`` (``safe_files``: regular files only, size
and line caps, invalid UTF-8 and lone surrogates replaced); every problem is counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pi_hindsight.engine.seeding import HistoricSession, HistoricTurn, ScanReport
from pi_hindsight.engine.types import HostFacts
from pi_hindsight.errors import InputFileError, StateError
from pi_hindsight.hosts.pi.messages import turn_messages
from pi_hindsight.hosts.pi.naming import PI_HOST
from pi_hindsight.hosts.pi.session_file import SessionEntry, main_branch, read_session
from pi_hindsight.safe_files import SESSION_HEADER_MAX_BYTES, read_json_lines

MAX_SESSION_FILES = 20_000


def session_files(agent_dir: Path, report: ScanReport) -> list[Path]:
    root = agent_dir / "sessions"
    if not root.is_dir():
        return []
    files = sorted(path for path in root.glob("*/*.jsonl") if not path.is_symlink())
    if len(files) > MAX_SESSION_FILES:
        report.add(f"more than {MAX_SESSION_FILES} session files (the oldest were left out)")
        files = files[-MAX_SESSION_FILES:]
    return files


def _header(path: Path) -> tuple[str | None, str | None]:
    """(session id, cwd) from the first line only; raises InputFileError."""
    lines = read_json_lines(
        path, max_bytes=None, max_line_bytes=SESSION_HEADER_MAX_BYTES, max_lines=1
    )
    header = lines.values[0][1] if lines.values else None
    if not isinstance(header, dict) or header.get("type") != "session":
        return None, None
    session_id, cwd = header.get("id"), header.get("cwd")
    return (
        session_id if isinstance(session_id, str) and session_id else None,
        cwd if isinstance(cwd, str) and cwd else None,
    )


def _edits(branch: Sequence[SessionEntry]) -> dict[str, object]:
    """Target entry id → its latest replacement on the branch (None: omitted)."""
    edits: dict[str, object] = {}
    for entry in branch:
        if entry.kind == "context_edit":
            target = entry.raw.get("targetId")
            if isinstance(target, str):
                edits[target] = entry.raw.get("replacement")
    return edits


def _messages(branch: Sequence[SessionEntry]) -> list[tuple[SessionEntry, dict[str, Any]]]:
    edits = _edits(branch)
    kept: list[tuple[SessionEntry, dict[str, Any]]] = []
    for entry in branch:
        message = entry.raw.get("message")
        if entry.kind != "message" or not isinstance(message, Mapping):
            continue  # custom_message, compaction, branch_summary, usage, model changes, …
        if message.get("role") == "system":
            continue
        if entry.entry_id in edits:
            replacement = edits[entry.entry_id]
            if replacement is None:
                continue  # omitted from the model's context (a failed attempt)
            message = {**message, "content": replacement}
        kept.append((entry, dict(message)))
    return kept


def requests_of(entries: Sequence[SessionEntry]) -> list[HistoricTurn]:
    """The session's requests on its main branch, in order."""
    groups: list[list[tuple[SessionEntry, dict[str, Any]]]] = []
    for entry, message in _messages(main_branch(entries)):
        if message.get("role") == "user" or not groups:
            groups.append([])
        groups[-1].append((entry, message))
    turns: list[HistoricTurn] = []
    for group in groups:
        first = group[0][0]
        messages = tuple(turn_messages([message for _, message in group]))
        if messages:
            turns.append(HistoricTurn(first.entry_id, first.timestamp, messages))
    return turns


def _replaced(entries: Sequence[SessionEntry]) -> int:
    return sum(entry.text.count("\ufffd") + entry.readable.count("\ufffd") for entry in entries)


class PiSessions:
    """``engine.seeding.SessionSource`` over a Pi agent dir."""

    def __init__(self, agent_dir: Path, *, exclude: Sequence[str] = ()) -> None:
        self.agent_dir = agent_dir
        self.exclude = set(exclude)  # session ids left out (the session asking, say)

    @property
    def host(self) -> HostFacts:
        return PI_HOST

    def scan(self, belongs: Callable[[Path], bool], report: ScanReport) -> list[HistoricSession]:
        found: list[HistoricSession] = []
        for path in session_files(self.agent_dir, report):
            try:
                session_id, cwd = _header(path)
            except InputFileError as error:
                report.add("unreadable session file", f"{path}: {error}")
                continue
            if session_id is None or cwd is None:
                report.add("not a Pi session file (no session header)", str(path))
                continue
            if session_id in self.exclude:
                continue
            if not belongs(Path(cwd)):
                report.other_locations += 1
                continue
            try:
                session = read_session(path)
            except StateError as error:
                report.add("unreadable session file", f"{path}: {error}")
                continue
            if session.bad_lines:
                report.add(
                    "unreadable session line (skipped)", session.note, len(session.bad_lines)
                )
            replaced = _replaced(session.entries)
            if replaced:
                report.add("invalid text replaced by U+FFFD", str(path), replaced)
            found.append(
                HistoricSession(session_id, str(path), tuple(requests_of(session.entries)))
            )
        return found


def earlier_sessions(agent_dir: Path, belongs: Callable[[Path], bool], exclude: str) -> int:
    """How many session files of this location there are (headers only; for the offer)."""
    report = ScanReport()
    count = 0
    for path in session_files(agent_dir, report):
        try:
            session_id, cwd = _header(path)
        except InputFileError:
            continue
        if session_id and cwd and session_id != exclude and belongs(Path(cwd)):
            count += 1
    return count
