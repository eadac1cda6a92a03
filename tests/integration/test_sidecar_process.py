"""The sidecar as a process: framing, malformed input, shutdown. No Hindsight needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest


class SidecarProcess:
    def __init__(self, state_dir: Path) -> None:
        env = dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state_dir))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pi_hindsight", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.ready = self.read()

    def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.endswith(b"\n"), f"sidecar closed stdout; stderr: {self.stderr()}"
        value: dict[str, Any] = json.loads(line)
        return value

    def call(self, request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read the next message (the answer, in these sequential tests)."""
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return self.read()

    def initialize(self, cwd: Path, session_id: str = "s") -> dict[str, Any]:
        answer = self.call(
            1,
            "initialize",
            {"protocolVersion": 1, "cwd": str(cwd), "sessionId": session_id, "hasUI": False},
        )
        result: dict[str, Any] = answer["result"]
        return result

    def stderr(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read().decode(errors="replace")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def sidecar(isolated_dirs: Path) -> Any:
    process = SidecarProcess(isolated_dirs)
    yield process
    process.close()


def _initialize(cwd: Path) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1, "cwd": str(cwd), "sessionId": "s-1", "hasUI": False},
    }


def test_ready_handshake_comes_first(sidecar: SidecarProcess) -> None:
    assert sidecar.ready["method"] == "ready"
    assert sidecar.ready["params"]["protocolVersion"] == 1
    assert sidecar.ready["params"]["pid"] == sidecar.process.pid


def test_malformed_input_gets_json_rpc_errors_and_the_sidecar_keeps_serving(
    sidecar: SidecarProcess, tmp_path: Path
) -> None:
    sidecar.send_raw(b"{this is not json\n")
    assert sidecar.read()["error"]["code"] == -32700
    sidecar.send_raw(b'"a string"\n')
    assert sidecar.read()["error"]["code"] == -32600
    sidecar.send({"jsonrpc": "2.0", "id": 5, "method": "noSuchMethod"})
    answer = sidecar.read()
    assert (answer["id"], answer["error"]["code"]) == (5, -32601)
    sidecar.send({"jsonrpc": "2.0", "id": 6, "method": "prepareMemory", "params": {"prompt": 3}})
    answer = sidecar.read()
    assert (answer["id"], answer["error"]["code"]) == (6, -32602)
    assert "requestId" in answer["error"]["message"]
    # Still serving: a well-formed request after all of that is answered normally.
    sidecar.send(_initialize(tmp_path))
    answer = sidecar.read()
    assert answer["id"] == 1 and answer["result"]["enabled"] is False


def test_unicode_line_separators_inside_strings_do_not_split_messages(
    sidecar: SidecarProcess, tmp_path: Path
) -> None:
    sidecar.send(_initialize(tmp_path))
    sidecar.read()
    prompt = "first\u2028second\u2029third"
    raw = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "prepareMemory",
            "params": {"requestId": "r", "prompt": prompt, "sessionId": "s-1"},
        },
        ensure_ascii=False,
    ).encode()
    assert "\u2028".encode() in raw
    sidecar.send_raw(raw + b"\n")
    answer = sidecar.read()
    assert answer["id"] == 2 and answer["result"]["outcome"] == "not_registered"


def test_shutdown_answers_and_exits(sidecar: SidecarProcess, tmp_path: Path) -> None:
    sidecar.send(_initialize(tmp_path))
    sidecar.read()
    sidecar.send({"jsonrpc": "2.0", "id": 9, "method": "shutdown", "params": {"reason": "quit"}})
    answer = sidecar.read()
    assert answer["id"] == 9 and answer["result"]["pending"] == 0
    assert sidecar.process.wait(timeout=10) == 0


def test_stdin_eof_ends_the_sidecar(sidecar: SidecarProcess) -> None:
    assert sidecar.process.stdin is not None
    sidecar.process.stdin.close()
    started = time.monotonic()
    assert sidecar.process.wait(timeout=10) == 0
    assert time.monotonic() - started < 10
