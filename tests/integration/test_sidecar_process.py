"""The sidecar as a process: framing, malformed input, shutdown. No Hindsight needed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.sidecar import Sidecar


@pytest.fixture
def sidecar(isolated_dirs: Path) -> Any:
    process = Sidecar(isolated_dirs)
    yield process
    process.close()


def _initialize(cwd: Path) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1, "cwd": str(cwd), "sessionId": "s-1", "hasUI": False},
    }


def test_ready_handshake_comes_first(sidecar: Sidecar) -> None:
    assert sidecar.ready["method"] == "ready"
    assert sidecar.ready["params"]["protocolVersion"] == 1
    assert sidecar.ready["params"]["pid"] == sidecar.process.pid


def test_malformed_input_gets_json_rpc_errors_and_the_sidecar_keeps_serving(
    sidecar: Sidecar, tmp_path: Path
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
    sidecar: Sidecar, tmp_path: Path
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


def test_shutdown_answers_and_exits(sidecar: Sidecar, tmp_path: Path) -> None:
    sidecar.send(_initialize(tmp_path))
    sidecar.read()
    sidecar.send({"jsonrpc": "2.0", "id": 9, "method": "shutdown", "params": {"reason": "quit"}})
    answer = sidecar.read()
    assert answer["id"] == 9 and answer["result"]["pending"] == 0
    assert sidecar.process.wait(timeout=10) == 0


def test_stdin_eof_ends_the_sidecar(sidecar: Sidecar) -> None:
    assert sidecar.process.stdin is not None
    sidecar.process.stdin.close()
    started = time.monotonic()
    assert sidecar.process.wait(timeout=10) == 0
    assert time.monotonic() - started < 10
