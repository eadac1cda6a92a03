"""Reading Pi session files (JSONL, format v3; see Pi's docs/session-format.md).

The sidecar reads a session file for three things: the directory a resumed session started in
(its header), the recent conversation (to enrich the recall query of a resumed session), and which
memory records are already delivered in the *visible* context — the path from the current leaf to
the root, with everything before the latest compaction's first kept entry summarised away.
Parsing is tolerant: a bad line is skipped, never fatal; the file is read through ``safe_files``
(regular files only, 64 MB and 16 MB per line at most, nesting bounded).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pi_hindsight.engine.render import CUSTOM_TYPE
from pi_hindsight.errors import InputFileError
from pi_hindsight.safe_files import FileMissing, read_json_lines

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionFile:
    header: dict[str, Any]
    entries: tuple[dict[str, Any], ...]  # in file order, header excluded

    @property
    def cwd(self) -> str | None:
        value = self.header.get("cwd")
        return value if isinstance(value, str) else None


def read_session_file(path: Path) -> SessionFile | None:
    """Parse a session file; None when it does not exist, cannot be read safely (a special
    file, over the size cap: ``safe_files``) or is not a Pi session. Bad lines are skipped, and
    logged once per read."""
    try:
        lines = read_json_lines(path)
    except FileMissing:
        return None  # Pi writes a new session's file only after its first reply
    except InputFileError as error:
        logger.warning("session file not read: %s", error)
        return None
    note = lines.note(path)
    if note is not None:
        logger.warning("%s", note)
    parsed = [value for _, value in lines.values if isinstance(value, dict)]
    if not parsed or parsed[0].get("type") != "session":
        return None
    return SessionFile(header=parsed[0], entries=tuple(parsed[1:]))


def visible_entries(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries that make up the model's context now, oldest first (Pi's buildSessionContext):
    the path from the leaf (the last entry) to the root; with a compaction on the path, only the
    entries from its ``firstKeptEntryId`` on."""
    by_id = {entry.get("id"): entry for entry in entries if isinstance(entry.get("id"), str)}
    if not entries:
        return []
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    node: dict[str, Any] | None = entries[-1]
    while node is not None:
        node_id = node.get("id")
        if not isinstance(node_id, str) or node_id in seen:
            break
        seen.add(node_id)
        path.append(node)
        parent = node.get("parentId")
        node = by_id.get(parent) if isinstance(parent, str) else None
    path.reverse()
    compactions = [index for index, entry in enumerate(path) if entry.get("type") == "compaction"]
    if not compactions:
        return path
    last = compactions[-1]
    first_kept = path[last].get("firstKeptEntryId")
    start = next((index for index, entry in enumerate(path) if entry.get("id") == first_kept), last)
    return [entry for index, entry in enumerate(path) if index >= start and index != last]


def delivered_record_ids(entries: Iterable[dict[str, Any]], field: str = "recordIds") -> set[str]:
    """Memory record ids (or, with ``field="recordKeys"``, text keys) delivered by our hidden
    messages among ``entries``."""
    ids: set[str] = set()
    for entry in entries:
        if entry.get("type") != "custom_message" or entry.get("customType") != CUSTOM_TYPE:
            continue
        details = entry.get("details")
        if isinstance(details, dict):
            ids.update(str(item) for item in details.get(field) or [] if item)
    return ids


def memo_delivered(entries: Iterable[dict[str, Any]]) -> str | None:
    """The memo version (refresh time) last delivered among ``entries``, if any."""
    version: str | None = None
    for entry in entries:
        if entry.get("type") == "custom_message" and entry.get("customType") == CUSTOM_TYPE:
            details = entry.get("details")
            if isinstance(details, dict) and isinstance(details.get("memoVersion"), str):
                version = details["memoVersion"]
    return version


def recent_turns(entries: Iterable[dict[str, Any]], limit: int) -> list[tuple[str, str]]:
    """The last ``limit`` user/assistant texts among ``entries`` as (role, text)."""
    turns: list[tuple[str, str]] = []
    for entry in entries:
        if entry.get("type") != "message":
            continue
        message = entry.get("message")
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            continue
        text = text_of(message.get("content"))
        if text.strip():
            turns.append((str(message["role"]), text))
    return turns[-limit:] if limit > 0 else []


def text_of(content: object) -> str:
    """The text of a Pi message's content (a string, or text blocks; images ignored)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        )
    return ""
