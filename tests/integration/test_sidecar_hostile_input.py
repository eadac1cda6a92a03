"""The sidecar as a process under hostile input (issue 9): no frame kills or silences it, and
what the host sends is made safe once, at the protocol boundary. No Hindsight needed: a loopback
listener that accepts and closes stands in for an unreachable server where one is configured."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.stores.outbox import Outbox
from tests.plugins.pi import LoopbackListener, make_repo
from tests.support.sidecar import Sidecar


@pytest.fixture
def sidecar(isolated_dirs: Path) -> Any:
    process = Sidecar(isolated_dirs)
    yield process
    process.close()


def _alive_and_serving(sidecar: Sidecar, request_id: int = 999) -> None:
    answer = sidecar.request("status", request_id=request_id, params={})
    assert answer["id"] == request_id and "result" in answer, answer
    assert sidecar.process.poll() is None


def _initialize(sidecar: Sidecar, cwd: Path, session_id: str = "s-1") -> dict[str, Any]:
    answer = sidecar.request(
        "initialize",
        request_id=1,
        params={"protocolVersion": 1, "cwd": str(cwd), "sessionId": session_id},
    )
    result: dict[str, Any] = answer["result"]
    return result


@pytest.mark.parametrize("cancelled", [[1], {"a": 1}, 1.5, True, None])
def test_a_cancel_naming_an_unhashable_id_does_not_kill_the_sidecar(
    sidecar: Sidecar, cancelled: object
) -> None:
    """Issue 9: ``$/cancelRequest`` with ``{"id": [1]}`` (or an object id) raised TypeError
    (unhashable id) and the sidecar exited 1."""
    sidecar.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": cancelled}})
    _alive_and_serving(sidecar)


def test_a_deeply_nested_frame_is_answered_and_the_sidecar_lives(sidecar: Sidecar) -> None:
    """Issue 9: a 2 KB frame nested 1,000 levels deep let RecursionError escape
    ``protocol.decode`` and the sidecar exited 1."""
    frame = b'{"jsonrpc":"2.0","id":41,"method":"status","params":{"a":'
    sidecar.send_raw(frame + b"[" * 1000 + b"]" * 1000 + b"}}\n")
    answer = sidecar.read()
    assert answer["id"] == 41
    sidecar.send_raw(frame + b"[" * 100_000 + b"]" * 100_000 + b"}}\n")
    answer = sidecar.read()
    assert (answer["id"], answer["error"]["code"]) == (41, -32700)
    _alive_and_serving(sidecar)


def test_a_lone_surrogate_id_is_answered_with_a_replacement_character(
    sidecar: Sidecar,
) -> None:
    """Issue 9: ``"id":"\\ud800"`` was echoed as is, encoding failed inside ``send()``, and the
    sidecar went silent and exited 0. The same through command and tool arguments."""
    sidecar.send_raw(b'{"jsonrpc":"2.0","id":"\\ud800","method":"status"}\n')
    assert sidecar.read()["id"] == "\ufffd"
    sidecar.send_raw(
        b'{"jsonrpc":"2.0","id":"t","method":"toolCall","params":{"name":"hindsight_memory",'
        b'"params":{"action":"recall","query":"\\udc00"}}}\n'
    )
    assert sidecar.read()["id"] == "t"
    sidecar.send_raw(
        b'{"jsonrpc":"2.0","id":"c","method":"command","params":{"name":"hindsight",'
        b'"args":"\\ud801"}}\n'
    )
    assert sidecar.read()["id"] == "c"
    _alive_and_serving(sidecar)


def test_a_lone_surrogate_in_a_turn_is_retained_not_lost(
    isolated_dirs: Path, tmp_path: Path, canary: LoopbackListener
) -> None:
    """Issue 9: a lone surrogate inside a ``turnCompleted`` message (a truncated JavaScript
    string) lost that whole request's retain with -32603."""
    repo = make_repo(tmp_path / "repo", "https://example.com/t/surrogate.git")
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    (isolated_dirs / "config.json").write_text(json.dumps({"hindsight": {"baseUrl": canary.url}}))
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "scope", "register", str(repo)],
        check=True,
        capture_output=True,
        env=dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(isolated_dirs)),
    )
    sidecar = Sidecar(isolated_dirs)
    try:
        assert _initialize(sidecar, repo)["enabled"] is True
        messages = (
            b'[{"role":"user","content":"cut here \\ud83d"},'
            b'{"role":"assistant","content":[{"type":"text","text":"fine \\udfff end"}]}]'
        )
        sidecar.send_raw(
            b'{"jsonrpc":"2.0","id":2,"method":"turnCompleted","params":{"requestId":"r-1",'
            b'"sessionId":"s-1","messages":' + messages + b"}}\n"
        )
        answer = sidecar.read()
        assert answer["id"] == 2 and answer["result"]["queued"] == 1, answer
    finally:
        sidecar.close()
    outbox = Outbox(isolated_dirs)
    try:
        items = outbox.items()
    finally:
        outbox.close()
    assert len(items) == 1
    content = items[0].retain.content
    assert "cut here \ufffd" in content and "fine \ufffd end" in content


def test_a_session_call_before_initialize_is_an_invalid_request(sidecar: Sidecar) -> None:
    """Issue 9: ``consent`` before ``initialize`` answered -32603 (internal error) instead of an
    invalid-request error."""
    answer = sidecar.request("consent", request_id=3, params={"accepted": True})
    assert answer["error"]["code"] == -32600
    assert "initialize" in answer["error"]["message"]
    answer = sidecar.request(
        "command", request_id=4, params={"name": "hindsight:register", "accepted": True}
    )
    assert answer["error"]["code"] == -32600


def test_a_payload_size_beyond_sqlite_integers_is_refused_cleanly(
    isolated_dirs: Path, tmp_path: Path
) -> None:
    """Issue 9: ``confirmDelivery`` with ``payloadBytes`` >= 2**63 logged an OverflowError."""
    sidecar = Sidecar(isolated_dirs)
    try:
        _initialize(sidecar, tmp_path)
        sidecar.send(
            {
                "jsonrpc": "2.0",
                "method": "confirmDelivery",
                "params": {"requestId": "r", "confirmed": True, "payloadBytes": 2**64},
            }
        )
        _alive_and_serving(sidecar)
    finally:
        sidecar.close()
    log = (isolated_dirs / "logs" / "sidecar.log").read_text(encoding="utf-8")
    assert "OverflowError" not in log and "Traceback" not in log


def test_the_sidecar_log_is_owner_only(isolated_dirs: Path) -> None:
    """Issue 9: ``logs/sidecar.log`` was 0644 (everything else is 0600/0700)."""
    logs = isolated_dirs / "logs"
    logs.mkdir(parents=True)
    (logs / "sidecar.log").write_text("from an older version\n")
    (logs / "sidecar.log").chmod(0o644)
    sidecar = Sidecar(isolated_dirs)
    try:
        _alive_and_serving(sidecar)
    finally:
        sidecar.close()
    assert stat.S_IMODE((logs / "sidecar.log").stat().st_mode) == 0o600


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_flood_of_unread_requests_is_bounded(isolated_dirs: Path) -> None:
    """Issue 9, item 7: 500,000 requests the sidecar had not read yet grew it to 338 MB (every
    line was queued, and a task started for each). Reading now waits for room, so the flood
    waits in the pipe; every request is still answered, in bounded memory."""
    sidecar = Sidecar(isolated_dirs, reading=False)  # nobody reads its stdout: that is the test
    try:
        _flood(sidecar)
    finally:
        sidecar.close()


def _flood(sidecar: Sidecar) -> None:
    assert sidecar.process.stdout is not None
    assert json.loads(sidecar.process.stdout.readline())["method"] == "ready"
    count = 200_000
    padding = "x" * 200
    baseline_kb = _peak_rss_kb(sidecar.process.pid)
    assert sidecar.process.stdin is not None and sidecar.process.stdout is not None
    stdin = sidecar.process.stdin

    def flood() -> None:
        chunk: list[bytes] = []
        for index in range(count):
            chunk.append(
                b'{"jsonrpc":"2.0","id":%d,"method":"noSuchMethod","params":{"p":"%s"}}\n'
                % (index, padding.encode())
            )
            if len(chunk) == 1000:
                stdin.write(b"".join(chunk))
                chunk.clear()
        stdin.flush()

    writer = threading.Thread(target=flood, daemon=True)
    writer.start()
    time.sleep(2.0)  # nobody reads stdout: the sidecar blocks on writing, then stops reading
    stalled_kb = _peak_rss_kb(sidecar.process.pid)
    answered = 0
    while answered < count:
        answer = json.loads(sidecar.process.stdout.readline())
        assert answer["error"]["code"] in (-32601, -32001), answer
        answered += 1
    writer.join(timeout=60)
    peak_kb = _peak_rss_kb(sidecar.process.pid)
    # 200,000 lines of ~260 bytes are ~52 MB; queued in full they cost several times that.
    assert stalled_kb - baseline_kb < 40_000, (baseline_kb, stalled_kb)
    assert peak_kb - baseline_kb < 80_000, (baseline_kb, peak_kb)
    sidecar.start_reading()
    _alive_and_serving(sidecar)


def test_a_turn_followed_at_once_by_shutdown_is_committed_not_cancelled(
    isolated_dirs: Path, tmp_path: Path, canary: LoopbackListener
) -> None:
    """A turn is rendered and redacted off the event loop; a ``shutdown`` that arrives while
    that runs (Pi's print mode ends the session right after ``agent_end``) must let the turn
    reach the outbox instead of cancelling it with the rest of the work in flight."""
    repo = make_repo(tmp_path / "repo", "https://example.com/t/shutdown.git")
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    (isolated_dirs / "config.json").write_text(json.dumps({"hindsight": {"baseUrl": canary.url}}))
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "scope", "register", str(repo)],
        check=True,
        capture_output=True,
        env=dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(isolated_dirs)),
    )
    sidecar = Sidecar(isolated_dirs)
    try:
        assert _initialize(sidecar, repo)["enabled"] is True
        big = "word " * 400_000  # ~2 MB of tool output: redaction takes a moment
        turn = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "turnCompleted",
            "params": {
                "requestId": "r-1",
                "sessionId": "s-1",
                "messages": [
                    {"role": "user", "content": "remember the Zephyr cluster"},
                    {"role": "assistant", "content": [{"type": "text", "text": big}]},
                ],
            },
        }
        shutdown = {"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": {"reason": "quit"}}
        sidecar.send_raw(json.dumps(turn).encode() + b"\n" + json.dumps(shutdown).encode() + b"\n")
        answers = {sidecar.read()["id"]: None for _ in range(2)}
        assert set(answers) == {2, 3}
        assert sidecar.process.wait(timeout=30) == 0
    finally:
        sidecar.close()
    outbox = Outbox(isolated_dirs)
    try:
        assert [item.request_id for item in outbox.items()] == ["r-1"]
    finally:
        outbox.close()
