"""The stand-in's request log: every request a role answered, as JSON lines.

Tests prove what reached a provider by reading it (``StandIn.requests``, ``GET
/_standin/requests``). One line per request, flushed before the reply is written::

    {"ts": "…", "role": "pi", "path": "/pi/v1/chat/completions", "kind": "prompt", "body": {…},
     "usage": {"prompt_tokens": …, "completion_tokens": …, "total_tokens": …}}
"""

from __future__ import annotations

import json
import os
import threading
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from pi_hindsight_standin.errors import StandInError
from pi_hindsight_standin.roles import JsonObject

#: Requests kept in memory when there is no log file.
MEMORY_LOG_SIZE = 1000


class RequestLog:
    """Append-only JSON-lines record of every request body, flushed per line."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._memory: deque[JsonObject] = deque(maxlen=MEMORY_LOG_SIZE)
        self._file: IO[str] | None = None

    def open(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Owner-only: the bodies are whole conversations.
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._file = os.fdopen(descriptor, "a", encoding="utf-8")
        except OSError as error:
            raise StandInError(
                f"stand-in: cannot open the request log {self.path}: {error.strerror}",
                hint="pass a --log path in a writable directory",
            ) from error

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def append(
        self, role: str, path: str, kind: str, body: Any, *, usage: JsonObject | None = None
    ) -> None:
        entry: JsonObject = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "role": role,
            "path": path,
            "kind": kind,
            "body": body,
        }
        if usage is not None:  # what the answer reported: tests compare the server's count
            entry["usage"] = usage
        line = json.dumps(entry, ensure_ascii=False)
        with self._lock:
            self._memory.append(entry)
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    def entries(self, role: str | None = None) -> list[JsonObject]:
        """Logged requests, oldest first: the whole log file, else the recent in-memory ones."""
        with self._lock:
            if self.path is not None and self.path.exists():
                lines = self.path.read_text(encoding="utf-8").splitlines()
                found = [json.loads(line) for line in lines if line.strip()]
            else:
                found = list(self._memory)
        return [e for e in found if role is None or e.get("role") == role]
