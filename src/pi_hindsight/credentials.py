"""The API key a running process sends, kept current without a restart.

A team rotates its key: the server is restarted with the new one, and each member's key
changes in their user config or their key file (``{"source": "file", "path": …}``). A
:class:`RotatingKey` is asked for the key before every call to Hindsight (``backend/_client.py``);
it checks (two ``stat`` calls) whether the config file or the key file changed, and only then
reads the user config again. So the next request of a running session uses the new key.

What a running process cannot see is a change to its own environment: a key exported in the
shell after Pi (or Claude Code) started is not in their environment, nor in ours. A key that
must rotate under running sessions belongs in a key file (docs/server.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pi_hindsight.config import LoadedConfig, load_config

Signature = tuple[tuple[int, int, int, int] | None, ...]


def _stamp(path: Path) -> tuple[int, int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


class RotatingKey:
    """``hindsight.apiKey`` as the user's files say now (call it for the key)."""

    def __init__(
        self, state_dir: Path, loaded: LoadedConfig, env: Mapping[str, str] | None = None
    ) -> None:
        self._state_dir = state_dir
        self._env = env
        self._take(loaded)

    def _take(self, loaded: LoadedConfig) -> None:
        self._key = loaded.settings.hindsight.api_key
        watched = [loaded.path]
        if loaded.user_source is not None and loaded.user_source != loaded.path:
            watched.append(loaded.user_source)  # a legacy config read in its place
        if loaded.key_file is not None:
            watched.append(loaded.key_file)
        self._watched = tuple(watched)
        self._signature = self._stamps()

    def _stamps(self) -> Signature:
        return tuple(_stamp(path) for path in self._watched)

    def __call__(self) -> str | None:
        if self._stamps() != self._signature:
            self._take(load_config(self._state_dir, os.environ if self._env is None else self._env))
        return self._key
