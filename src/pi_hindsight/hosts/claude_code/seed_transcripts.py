"""Claude Code's earlier sessions as history to seed (``engine/seeding.py``): the transcripts
``<config dir>/projects/<encoded start directory>/<session id>.jsonl``, where the config dir is
``$CLAUDE_CONFIG_DIR`` when set, else ``~/.claude`` (Claude Code's own rule).

A transcript belongs here when the start directory its rows carry (``cwd``, on the first row
that has one) resolves to this location (the engine's matcher); the directory's encoded name
is not trusted (it is lossy). The whole file is read the way live retain reads it
(``transcript_file.parse_delta``), so one request is a prompt and everything after it up to
the next prompt, and the same things are left out: side chains (subagents), Claude Code's own
rows, compaction summaries, slash-command rows, ``<system-reminder>`` sections, thinking, our
injected memory (hook context rows; a prompt that is our block) and our own MCP tools with
their results. A fork's copies of another session's rows (``forkedFrom``) stay that session's
when its transcript is here too, so nothing is seeded twice.

Hostile files: regular files only (no symlinks), at most :data:`MAX_TRANSCRIPT_BYTES` each (a
larger one is reported by name, not read); a line that is not JSON, too deep or too long is
skipped and counted, the rest of the file still read; invalid UTF-8 and lone surrogates become
U+FFFD, counted. A last line without its newline (Claude Code stopped mid-write) is read too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pi_hindsight.engine.seeding import HistoricSession, HistoricTurn, ScanReport
from pi_hindsight.engine.types import HostFacts
from pi_hindsight.errors import InputFileError
from pi_hindsight.hosts.claude_code.naming import CLAUDE_CODE_HOST
from pi_hindsight.hosts.claude_code.transcript_file import (
    MAX_LINE_BYTES,
    MAX_READ_BYTES,
    Segment,
    parse_delta,
    read_chunk,
)
from pi_hindsight.safe_files import format_size, open_regular, read_json_lines

CONFIG_DIR_ENV = "CLAUDE_CONFIG_DIR"
MAX_TRANSCRIPTS = 20_000
MAX_TRANSCRIPT_BYTES = 256 << 20
HEAD_LINES = 50  # the first row with a ``cwd`` comes after a few bookkeeping rows
HEAD_LINE_BYTES = 1 << 20
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def claude_config_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    configured = env.get(CONFIG_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".claude"


def transcript_files(projects: Path, report: ScanReport) -> list[Path]:
    """Every session transcript, oldest first (subagents' own files are not sessions)."""
    if not projects.is_dir():
        return []
    files: list[tuple[float, Path]] = []
    for path in projects.glob("*/*.jsonl"):
        if path.is_symlink() or path.name.startswith("agent-"):
            continue
        try:
            files.append((path.stat().st_mtime, path))
        except OSError:
            continue  # gone since it was listed
    files.sort()
    if len(files) > MAX_TRANSCRIPTS:
        report.add(f"more than {MAX_TRANSCRIPTS} transcripts (the oldest were left out)")
        files = files[-MAX_TRANSCRIPTS:]
    return [path for _, path in files]


def start_directory(path: Path) -> str | None:
    """The ``cwd`` of the session's first row that has one; raises InputFileError."""
    head = read_json_lines(
        path, max_bytes=None, max_line_bytes=HEAD_LINE_BYTES, max_lines=HEAD_LINES
    )
    for _, row in head.values:
        if isinstance(row, dict) and row.get("isSidechain") is not True:
            cwd = row.get("cwd")
            if isinstance(cwd, str) and cwd and "\x00" not in cwd:
                return cwd
    return None


@dataclass(frozen=True)
class TranscriptRead:
    turns: tuple[HistoricTurn, ...]
    bad_lines: int  # not JSON, too deep or too long: skipped
    replaced: int  # characters that were invalid text, now U+FFFD


def _turns(segments: Sequence[Segment]) -> tuple[HistoricTurn, ...]:
    """One turn per prompt: a segment that continues a request (a new chunk of the file began
    inside it) joins the one before."""
    turns: list[HistoricTurn] = []
    for segment in segments:
        if segment.request_id.startswith("cont-") and turns:
            last = turns[-1]
            turns[-1] = HistoricTurn(last.key, last.timestamp, (*last.messages, *segment.messages))
        else:
            turns.append(HistoricTurn(segment.request_id, segment.timestamp, segment.messages))
    return tuple(turns)


def _tail(path: Path, offset: int) -> bytes:
    """The last line when Claude Code did not finish it with a newline (bounded)."""
    with open_regular(path) as handle:
        handle.seek(offset)
        data = handle.read(MAX_LINE_BYTES + 1)
    return data + b"\n" if data.strip() else b""


def read_transcript(
    path: Path,
    skip_copies_of: Container[str] = frozenset(),
    *,
    chunk_bytes: int = MAX_READ_BYTES,
) -> TranscriptRead:
    """The session's requests, in order, read ``chunk_bytes`` at a time; raises InputFileError
    (and OSError) when the file cannot be read at all or is larger than
    :data:`MAX_TRANSCRIPT_BYTES`."""
    size = path.stat().st_size
    if size > MAX_TRANSCRIPT_BYTES:
        raise InputFileError(
            f"{format_size(size)}, larger than the {format_size(MAX_TRANSCRIPT_BYTES)} "
            "a transcript may have: not read"
        )
    segments: list[Segment] = []
    open_tools: Mapping[str, str] = {}
    offset = bad = 0
    while offset < size:
        data, end, _ = read_chunk(path, offset, chunk_bytes)
        if end == offset:  # what is left is one line without its newline
            data, end = _tail(path, offset), size
            if not data:
                break
        elif data == b"\n" and end - offset > 1:
            bad += 1  # a line longer than a read: read_chunk skipped it
        delta = parse_delta(data, end, open_tools=open_tools, skip_copies_of=skip_copies_of)
        segments.extend(delta.segments)
        open_tools, bad, offset = delta.open_tools, bad + delta.bad_lines, end
    turns = _turns(segments)
    replaced = sum(m.text.count("\ufffd") for turn in turns for m in turn.messages)
    return TranscriptRead(turns, bad, replaced)


class ClaudeCodeSessions:
    """``engine.seeding.SessionSource`` over Claude Code's transcripts."""

    def __init__(self, config_dir: Path, *, exclude: Sequence[str] = ()) -> None:
        self.projects = config_dir / "projects"
        self.exclude = set(exclude)  # session ids left out (the session asking, say)

    @property
    def host(self) -> HostFacts:
        return CLAUDE_CODE_HOST

    def scan(self, belongs: Callable[[Path], bool], report: ScanReport) -> list[HistoricSession]:
        files = transcript_files(self.projects, report)
        present = {path.stem for path in files}
        found: list[HistoricSession] = []
        for path in files:
            session_id = path.stem
            if not _SESSION_ID.fullmatch(session_id):
                report.add("not a Claude Code transcript name (skipped)", str(path))
                continue
            if session_id in self.exclude:
                continue
            try:
                cwd = start_directory(path)
            except InputFileError as error:
                report.add("unreadable transcript", f"{path}: {error}")
                continue
            if cwd is None:
                report.add("transcript names no start directory (skipped)", str(path))
                continue
            if not belongs(Path(cwd)):
                report.other_locations += 1
                continue
            try:
                read = read_transcript(path, present - {session_id})
            except (InputFileError, OSError) as error:
                report.add("unreadable transcript", f"{path}: {error}")
                continue
            if read.bad_lines:
                report.add("unreadable transcript line (skipped)", str(path), read.bad_lines)
            if read.replaced:
                report.add("invalid text replaced by U+FFFD", str(path), read.replaced)
            found.append(HistoricSession(session_id, str(path), read.turns))
        return found
