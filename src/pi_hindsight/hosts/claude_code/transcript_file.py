"""Claude Code's transcript (``~/.claude/projects/<dir>/<session>.jsonl``): the new part since a
byte cursor, as host-neutral turns, plus what it says about the memory we injected.

The file is append-only within a session (resume and continue append; ``/clear`` and a fork start
a new file), so a byte offset is a cursor; only complete lines are read. Of each line:

- ``user`` / ``assistant`` rows are the conversation. Left out: side chains (subagents),
  Claude Code's own rows (``isMeta``), the compaction summary (``isCompactSummary``), slash
  command and local command rows, interruption notes, ``<system-reminder>`` sections, thinking,
  and our own MCP tools' calls (``mcp__hindsight__*``) with their results. A tool result's tool
  is known from its call, also when the call was in an earlier delta (``open_tools`` carries it).
- Every real prompt row starts a request; its ``uuid`` is the request id (unique in the file:
  ``promptId`` is not — a fork rewrites it). Rows before the first prompt in a delta continue a
  request retained earlier (a checkpoint before compaction): their request id is
  ``cont-<first row uuid>``. The same bytes always give the same requests, so a delta read
  twice (a crash before the cursor moved) is committed once (the outbox keys on it).
- ``attachment`` rows of type ``hook_additional_context`` hold hook context exactly as a hook
  returned it (injected memory is stored only this way, never as a user row): the *attached*
  observation. ``api-request`` rows (with their ``api-request-blob`` messages) are Claude Code's
  own record of each provider request it built: the *confirmed* observation. Both are read as
  found; a version that writes neither is simply not observed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pi_hindsight.engine.turn_text import TurnMessage
from pi_hindsight.hosts.claude_code.naming import OWN_TOOL_PREFIX
from pi_hindsight.safe_files import BadJson, loads_line, open_regular

MAX_READ_BYTES = 32 << 20  # one pass; a longer delta is read in several
MAX_LINE_BYTES = 16 << 20  # a longer line (a huge tool output) is skipped and counted
MAX_DEPTH = 64
MAX_OPEN_TOOLS = 500
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_COMMAND_ROW = re.compile(
    r"\s*<(command-name|command-message|command-args|local-command-stdout|local-command-stderr|"
    r"local-command-caveat|bash-input|bash-stdout|bash-stderr)>"
)
_INTERRUPTED = re.compile(r"\s*\[Request interrupted by user[^\]]*\]\s*\Z")
_MEMORY_FENCE = "<hindsight-memory"


@dataclass(frozen=True)
class Segment:
    """One request's new messages (all of it, or the part after a checkpoint)."""

    request_id: str
    messages: tuple[TurnMessage, ...]
    timestamp: str | None = None  # the first row's, as Claude Code wrote it


@dataclass(frozen=True)
class InjectedContext:
    entry_id: str  # the attachment row's uuid
    texts: tuple[str, ...]
    position: int  # the row's index in the delta


@dataclass(frozen=True)
class ApiRequest:
    position: int
    texts: tuple[str, ...] | None  # the request's new messages; None: not all are in this delta


@dataclass(frozen=True)
class Delta:
    end: int  # the byte offset after the last line read
    segments: tuple[Segment, ...] = ()
    contexts: tuple[InjectedContext, ...] = ()
    api_requests: tuple[ApiRequest, ...] = ()
    open_tools: Mapping[str, str] = field(default_factory=dict)
    bad_lines: int = 0
    more: bool = False  # complete lines remain past ``end``


def read_chunk(path: Path, offset: int, limit: int = MAX_READ_BYTES) -> tuple[bytes, int, bool]:
    """Complete lines from ``offset``: (bytes, their end offset, whether more remain). A line
    longer than ``limit`` is skipped whole (its bytes are not returned; the end moves past it)."""
    with open_regular(path) as handle:
        handle.seek(offset)
        raw = handle.read(limit + 1)
        more = len(raw) > limit
        data = raw[:limit]
        cut = data.rfind(b"\n")
        if cut >= 0:
            return data[: cut + 1], offset + cut + 1, more
        if not more:
            return b"", offset, False  # a line still being written
        skipped = offset + len(raw)  # where the handle is
        if raw.endswith(b"\n"):
            return b"\n", skipped, True  # exactly ``limit`` bytes and its newline
        while block := handle.read(1 << 20):
            newline = block.find(b"\n")
            if newline >= 0:
                return b"\n", skipped + newline + 1, True  # one (empty) line stands for it
            skipped += len(block)
        return b"", offset, False


def _blocks(content: object) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []


def _raw_texts(content: object) -> str:
    return "\n".join(
        block["text"]
        for block in _blocks(content)
        if block.get("type") == "text" and isinstance(block.get("text"), str)
    )


def _texts(content: object) -> str:
    return _REMINDER.sub("", _raw_texts(content)).strip()


def _lines(data: bytes) -> Iterator[tuple[Any, bool]]:
    """(parsed value, ok) per non-empty line; an unreadable line is (None, False)."""
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            yield None, False
            continue
        try:
            yield loads_line(raw, max_depth=MAX_DEPTH), True
        except BadJson:
            yield None, False


class _Builder:
    def __init__(self, open_tools: Mapping[str, str]) -> None:
        self.open_tools = dict(open_tools)
        self.segments: list[Segment] = []
        self._id: str | None = None
        self._messages: list[TurnMessage] = []
        self._timestamp: str | None = None
        self.row_timestamp: str | None = None  # the row being read

    def _close(self) -> None:
        if self._id is not None and self._messages:
            self.segments.append(Segment(self._id, tuple(self._messages), self._timestamp))
        self._id, self._messages = None, []

    def add(self, message: TurnMessage, row_id: str, *, starts: bool = False) -> None:
        if starts:
            self._close()
            self._id = row_id
            self._timestamp = self.row_timestamp
        elif self._id is None:
            self._id = f"cont-{row_id}"
            self._timestamp = self.row_timestamp
        self._messages.append(message)

    def user(self, row_id: str, content: object) -> None:
        blocks = _blocks(content)
        results = [block for block in blocks if block.get("type") == "tool_result"]
        if results:
            for block in results:
                tool_id = str(block.get("tool_use_id") or "")
                name = self.open_tools.pop(tool_id, "unknown")
                if name.startswith(OWN_TOOL_PREFIX):
                    continue
                message = TurnMessage(
                    "tool_result",
                    _texts(block.get("content")),
                    tool_name=name,
                    is_error=block.get("is_error") is True,
                )
                self.add(message, row_id)
            return
        text = _texts(content)
        if (
            not text
            or _COMMAND_ROW.match(text)
            or _INTERRUPTED.match(text)
            or text.startswith(_MEMORY_FENCE)
        ):
            return
        self.add(TurnMessage("user", text), row_id, starts=True)

    def assistant(self, row_id: str, content: object) -> None:
        text = _texts([b for b in _blocks(content) if b.get("type") == "text"])
        if text:
            self.add(TurnMessage("assistant", text), row_id)
        for block in _blocks(content):
            if block.get("type") != "tool_use":
                continue
            name = str(block.get("name") or "unknown")
            tool_id = str(block.get("id") or "")
            if tool_id and len(self.open_tools) < MAX_OPEN_TOOLS:
                self.open_tools[tool_id] = name
            if name.startswith(OWN_TOOL_PREFIX):
                continue
            arguments = block.get("input")
            text = json.dumps(arguments, ensure_ascii=False, default=str) if arguments else ""
            self.add(TurnMessage("tool_call", text, tool_name=name), row_id)

    def finish(self) -> tuple[Segment, ...]:
        self._close()
        return tuple(self.segments)


def copied_from(entry: Mapping[str, Any]) -> str | None:
    """The session a fork's row was copied from (Claude Code writes ``forkedFrom`` on each row
    it copies into a branched session, its ``uuid`` kept); None for the session's own rows."""
    forked = entry.get("forkedFrom")
    if not isinstance(forked, Mapping):
        return None
    origin = forked.get("sessionId")
    return origin if isinstance(origin, str) and origin != entry.get("sessionId") else None


def _is_conversation(
    entry: Mapping[str, Any], skip_before: str | None, skip_copies_of: Container[str]
) -> bool:
    if entry.get("isSidechain") is True or entry.get("isMeta") is True:
        return False
    if entry.get("isCompactSummary") is True:
        return False
    if skip_copies_of and copied_from(entry) in skip_copies_of:
        return False
    stamp = entry.get("timestamp")
    return not (skip_before and isinstance(stamp, str) and stamp < skip_before)


def parse_delta(
    data: bytes,
    end: int,
    *,
    open_tools: Mapping[str, str] | None = None,
    skip_before: str | None = None,
    skip_copies_of: Container[str] = frozenset(),
    more: bool = False,
) -> Delta:
    """The delta in ``data`` (complete lines ending at byte offset ``end``). ``open_tools``:
    calls of earlier deltas still waiting for their result (id → tool name); ``skip_before``:
    rows older than this ISO time are not new (a fork's copied history); ``skip_copies_of``:
    rows a fork copied from these sessions are theirs, not this one's (seeding)."""
    builder = _Builder(open_tools or {})
    contexts: list[InjectedContext] = []
    blobs: dict[str, str] = {}
    requests: list[ApiRequest] = []
    bad = 0
    for position, (entry, ok) in enumerate(_lines(data)):
        if not ok or not isinstance(entry, Mapping):
            bad += 1
            continue
        kind = entry.get("type")
        row_id = str(entry.get("uuid") or f"line-{end}-{position}")
        if kind in ("user", "assistant"):
            message = entry.get("message")
            if not _is_conversation(entry, skip_before, skip_copies_of) or not isinstance(
                message, Mapping
            ):
                continue
            stamp = entry.get("timestamp")
            builder.row_timestamp = stamp if isinstance(stamp, str) else None
            if kind == "user":
                builder.user(row_id, message.get("content"))
            else:
                builder.assistant(row_id, message.get("content"))
        elif kind == "attachment":
            attachment = entry.get("attachment")
            if isinstance(attachment, Mapping) and (
                attachment.get("type") == "hook_additional_context"
            ):
                content = attachment.get("content")
                texts = (
                    tuple(t for t in content if isinstance(t, str))
                    if isinstance(content, list)
                    else ((content,) if isinstance(content, str) else ())
                )
                contexts.append(InjectedContext(row_id, texts, position))
        elif kind == "api-request-blob":
            digest, message = entry.get("hash"), entry.get("message")
            if isinstance(digest, str) and isinstance(message, Mapping):
                blobs[digest] = _raw_texts(message.get("content"))  # as sent: reminders too
        elif kind == "api-request":
            tail = entry.get("tail")
            hashes = [h for h in tail if isinstance(h, str)] if isinstance(tail, list) else []
            found = [blobs.get(h) for h in hashes]
            texts = tuple(t for t in found if t is not None)
            complete = bool(hashes) and len(texts) == len(hashes)
            requests.append(ApiRequest(position, texts if complete else None))
    return Delta(
        end=end,
        segments=builder.finish(),
        contexts=tuple(contexts),
        api_requests=tuple(requests),
        open_tools=builder.open_tools,
        bad_lines=bad,
        more=more,
    )
