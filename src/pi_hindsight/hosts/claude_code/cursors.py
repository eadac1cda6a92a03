"""Where retain got to in each Claude Code transcript: a byte-offset cursor per transcript file,
kept durably in the user's state dir (``claude-code/cursors/``, 0700, each file 0600).

Moving a cursor is write-ahead, so a crash (a ``kill -9`` of the hook or the daemon) anywhere
loses and duplicates nothing: before a delta is committed to the outbox its end is saved as
``planned``; after, the cursor moves there. A cursor found with ``planned`` set is redone over
exactly the same bytes, which give the same request ids, which the outbox stores once. A cursor
file that cannot be read counts as none (the transcript is read again from its start: the same
requests, stored once) and says so in the log.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import Field, StrictInt

from pi_hindsight.errors import InputFileError
from pi_hindsight.safe_files import BadJson, FileMissing, loads_line, read_bytes
from pi_hindsight.serialisation import Record

logger = logging.getLogger(__name__)

_MAX_CURSOR_BYTES = 256 << 10
STALE_AFTER_S = 90 * 86_400


# A byte offset or a file id part (never a boolean or a numeric string).
Count = Annotated[StrictInt, Field(ge=0)]


class Cursor(Record):
    """Where retain got to in one transcript; its JSON form is the cursor file (camelCase)."""

    offset: Count = 0
    planned: Count | None = None  # a delta being committed ends here: redo exactly this
    open_tools: dict[str, str] = Field(default_factory=dict)  # calls awaiting a result
    skip_before: str | None = None  # a fork: rows older than this are copied history
    # (st_dev, st_ino): another file resets the cursor
    file_id: tuple[Count, Count] | None = None

    def restarted(self) -> Cursor:
        """The same transcript path now names another file: from its start."""
        return self.but(offset=0, planned=None, open_tools={}, file_id=None)


class CursorStore:
    def __init__(self, state_dir: Path) -> None:
        self.directory = state_dir / "claude-code" / "cursors"

    def _path(self, transcript: Path) -> Path:
        digest = hashlib.sha256(str(transcript).encode("utf-8", "surrogateescape")).hexdigest()
        return self.directory / f"{digest[:32]}.json"

    def load(self, transcript: Path) -> Cursor:
        path = self._path(transcript)
        try:
            raw = read_bytes(path, max_bytes=_MAX_CURSOR_BYTES)
        except FileMissing:
            return Cursor()
        except (OSError, InputFileError) as error:
            logger.warning("cursor %s unreadable (%s); reading %s again", path, error, transcript)
            return Cursor()
        try:
            data = loads_line(raw, max_depth=8)
        except BadJson as error:
            logger.warning("cursor %s damaged (%s); reading %s again", path, error, transcript)
            return Cursor()
        if isinstance(data, Mapping) and data.get("transcript") not in (None, str(transcript)):
            return Cursor()  # (a checksum collision: never another file's cursor)
        return Cursor.load_or_none(data) or Cursor()

    def save(self, transcript: Path, cursor: Cursor) -> None:
        """Durably: written to a temporary file, synced, renamed over the old one."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        path = self._path(transcript)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        data = {"transcript": str(transcript), "updatedAt": time.time(), **cursor.to_json()}
        encoded = json.dumps(data, ensure_ascii=True).encode("ascii")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, encoded)
            os.fsync(fd)
        finally:
            os.close(fd)
        temporary.replace(path)

    def prune(self, max_age_s: float = STALE_AFTER_S) -> int:
        """Remove cursors of transcripts untouched for ``max_age_s``; returns how many."""
        removed = 0
        cutoff = time.time() - max_age_s
        try:
            entries = list(self.directory.iterdir())
        except OSError:
            return 0
        for entry in entries:
            try:
                if entry.suffix in (".json", ".tmp") and entry.stat().st_mtime < cutoff:
                    entry.unlink()
                    removed += 1
            except OSError:
                continue
        return removed
