"""Hostile and damaged files, made at a path: what a user's mistake, a broken disk or a hostile
repository clone can leave where we read a config, a repository file or a session file."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def _bytes(data: bytes) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.write_bytes(data)

    return make


def _devzero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _huge(path: Path) -> None:
    with path.open("wb") as handle:  # sparse: 50 MB on paper, nothing on disk
        handle.truncate(50_000_000)


def _nested(depth: int) -> bytes:
    return b'{"recall": ' + b"[" * depth + b"]" * depth + b"}"


# name -> (make it at a path, a fragment the problem's message must contain)
HOSTILE: dict[str, tuple[Callable[[Path], None], str]] = {
    "not-utf8": (_bytes(b'{"recall": {"budget": "\xff\xfe"}}'), "not UTF-8"),
    "nested-5000": (_bytes(_nested(5_000)), "nested more than"),
    "devzero-symlink": (_devzero, "character device"),
    "fifo": (_fifo, "FIFO"),
    "directory": (_directory, "a directory"),
    "50mb": (_huge, "larger than"),
    "comments": (_bytes(b'{\n  // low\n  "recall": {"budget": "low"}\n}'), "comment at line 2"),
    "trailing-comma": (_bytes(b'{"recall": {"budget": "low"},}'), "trailing comma"),
    "top-level-array": (_bytes(b'[{"recall": {"budget": "low"}}]'), "top level is a list"),
    "null": (_bytes(b"null"), "top level is null"),
    "lone-surrogate": (_bytes(b'{"recall": {"budget": "\\ud800"}}'), "lone surrogate"),
    "truncated": (_bytes(b'{"recall": {"budget": '), "not valid JSON"),
}

# Files that are fine, though unusual: read as meant, no problem reported.
BENIGN: dict[str, bytes] = {
    "bom": b'\xef\xbb\xbf{"recall": {"budget": "low"}}',
    "surrogate-pair": b'{"recall": {"budget": "low"}, "userQueryPreamble": "\\ud83d\\ude00"}',
}
