"""The commit mark: a count of committed write transactions kept *outside* a store file.

Every write transaction of a store adds one to a counter inside the database (``store_commits``,
see ``stores/sqlite.py``) and, once committed, writes the new count here, ``<store>.commits``.
When the store opens, a counter lower than the mark means committed transactions are missing:
SQLite silently drops write-ahead-log frames after a damaged one (and a cut or zeroed log loses
them all), so without the mark a damaged log would pass for a store with fewer rows. ADR 0006.

The mark is read *before* the counter when checking: a concurrent writer only raises the counter
before it raises the mark, so the check never sees a mark ahead of a healthy file. The mark is
not synced to disk (it survives a crashed process, like the log itself; after a power loss it
may be ahead of a log that lost its last moments, and that loss is then reported too).

Format: one line ``<file id> <count>``, fixed width, rewritten in place under ``flock``. The file
id (a UUID stored in the database) ties the mark to one store file: a mark left by another file
(set aside, replaced) is not compared, only overwritten.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

_WIDTH = 36 + 1 + 20 + 1  # uuid, space, zero-padded count, newline


@dataclass(frozen=True)
class MarkReading:
    file_id: str
    count: int


def mark_path(store_path: Path) -> Path:
    return store_path.with_name(store_path.name + ".commits")


def read_mark(store_path: Path) -> MarkReading | None:
    """The mark of ``store_path`` as written, or None when there is none or it is unreadable."""
    try:
        with mark_path(store_path).open("rb") as handle:
            return _parse(handle.read(_WIDTH))
    except OSError:
        return None


class CommitMark:
    """The mark of one open store file. Writes are best effort: a mark that cannot be written
    only weakens detection (it is never ahead of the file), so failures are logged, not raised."""

    def __init__(self, store_path: Path, file_id: str) -> None:
        self.path = mark_path(store_path)
        self.store_path = store_path
        self.file_id = file_id
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._inode: tuple[int, int] | None = None
        with contextlib.suppress(OSError):
            stat = store_path.stat()
            self._inode = (stat.st_dev, stat.st_ino)
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as error:
            logger.warning("commit mark %s unavailable: %s", self.path, error)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def replaced(self) -> bool:
        """Whether the store's path no longer names the file this mark was opened for (another
        process set it aside): writes to this file are then no longer the live store's."""
        try:
            stat = self.store_path.stat()
        except OSError:
            return True
        return self._inode is not None and (stat.st_dev, stat.st_ino) != self._inode

    def advance(self, count: int) -> None:
        """Record ``count`` committed transactions (never lowers the mark of this file)."""
        with self._lock:
            if self._fd is None:
                return
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
                try:
                    if self.replaced():
                        return  # this file was set aside: its commits are not the live store's
                    current = _parse(os.pread(self._fd, _WIDTH, 0))
                    mine = current is not None and current.file_id == self.file_id
                    if mine and current is not None and current.count >= count:
                        return
                    line = f"{self.file_id} {count:020d}\n".encode()
                    os.pwrite(self._fd, line, 0)
                finally:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
            except OSError as error:
                logger.warning("commit mark %s not written: %s", self.path, error)


def _parse(raw: bytes) -> MarkReading | None:
    try:
        file_id, count = raw.decode("ascii").split()
        return MarkReading(file_id, int(count))
    except (UnicodeDecodeError, ValueError):
        return None
