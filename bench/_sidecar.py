"""A real sidecar process driven over its stdio, as the Pi shim does (shared by the benchmarks)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


class Sidecar:
    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pi_hindsight", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.next_id = 0
        self.read()  # ready

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        message: dict[str, Any] = json.loads(self.process.stdout.readline())
        return message

    def call(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request and return its result (notifications in between are skipped)."""
        assert self.process.stdin is not None
        self.next_id += 1
        line = json.dumps(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        )
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        while True:
            message = self.read()
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]

    def close(self) -> None:
        try:
            self.call("shutdown", {"reason": "quit"})
            self.process.wait(timeout=30)
        finally:
            for pipe in (self.process.stdin, self.process.stdout):
                if pipe is not None:
                    pipe.close()
