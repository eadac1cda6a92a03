"""The stand-in's role registry: roles plugged in from outside the package, and its command line.

The stand-in (``pi_hindsight_standin``) knows only Hindsight's model; the agent models (Pi's
today, Claude Code's next) are registered from outside as a name and a handler. These tests
register roles of their own the way ``tests/agent_models`` does and check what the server makes
of their answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pi_hindsight_standin import (
    Answer,
    RoleRequest,
    ScriptError,
    SseEvent,
    StandIn,
    StandInError,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _http() -> httpx.Client:
    return httpx.Client(timeout=30, trust_env=False)


def _events(text: str) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of each server-sent event in ``text``."""
    found = []
    for block in text.split("\n\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        found.append((fields.get("event"), json.loads(fields["data"])))
    return found


class Recorder:
    """A role answering like a streaming Messages API: named events, or JSON when not streamed."""

    def __init__(self) -> None:
        self.seen: list[RoleRequest] = []

    def __call__(self, request: RoleRequest) -> Answer:
        self.seen.append(request)
        if request.route != "v1/messages":
            return Answer("unsupported", status=404, payload={"type": "error"})
        body = request.body or {}
        if not body.get("stream"):
            return Answer("message", payload={"type": "message", "content": "hi"})
        events = [
            SseEvent({"type": "message_start"}, event="message_start"),
            SseEvent({"type": "content_block_delta", "text": "hi"}, event="content_block_delta"),
            SseEvent({"type": "message_stop"}, event="message_stop"),
        ]
        return Answer("stream", events=iter(events), headers={"request-id": "req_1"})


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[StandIn]:
    with StandIn(log_path=tmp_path / "requests.jsonl") as server:
        yield server


def test_a_role_from_outside_streams_named_events_and_its_requests_are_logged(
    standin: StandIn,
) -> None:
    recorder = Recorder()
    standin.register_role("claude", recorder)  # while serving
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "stream": True}
    with _http() as client:
        streamed = client.post(
            f"{standin.url('claude')}/v1/messages?beta=true",
            json=body,
            headers={"Anthropic-Version": "2023-06-01"},
        )
        plain = client.post(f"{standin.url('claude')}/v1/messages", json={"stream": False})
        health = client.get(f"{standin.base_url}/_standin/health").json()
    assert streamed.headers["content-type"] == "text/event-stream"
    assert streamed.headers["request-id"] == "req_1"
    assert [name for name, _ in _events(streamed.text)] == [
        "message_start",
        "content_block_delta",
        "message_stop",
    ]
    assert plain.json() == {"type": "message", "content": "hi"}
    first = recorder.seen[0]
    assert (first.role, first.method, first.route) == ("claude", "POST", "v1/messages")
    assert first.path == "/claude/v1/messages"
    assert first.query == {"beta": ["true"]}
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert first.body == body
    logged = standin.requests("claude")
    assert [(e["kind"], e["path"]) for e in logged] == [
        ("stream", "/claude/v1/messages"),
        ("message", "/claude/v1/messages"),
    ]
    assert logged[0]["body"] == body
    assert health["roles"] == ["hindsight", "claude"]


def test_unregistered_roles_answer_404_and_log_nothing(standin: StandIn) -> None:
    """Regression: a 404 left the request body unread, and the keep-alive connection then took
    it for the next request line (the following request on it got 501)."""
    with _http() as client:
        reply = client.post(f"{standin.url('pi')}/v1/chat/completions", json={"messages": []})
        admin = client.get(f"{standin.base_url}/_standin/nothing")
    assert (reply.status_code, admin.status_code) == (404, 404)
    assert standin.requests() == []


def test_a_failing_handler_answers_500_and_the_server_keeps_serving(
    standin: StandIn, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: the 500 closed the connection without saying so (no ``Connection: close``),
    so a client's next request on it could fail with "Server disconnected" (a race)."""

    def broken(request: RoleRequest) -> Answer:
        raise RuntimeError("role bug")

    standin.register_role("broken", broken)
    with _http() as client:
        failed = client.post(f"{standin.url('broken')}/v1/x", json={})
        still = client.get(f"{standin.base_url}/_standin/health")
    assert failed.status_code == 500
    assert failed.headers["connection"] == "close"
    assert failed.json()["error"]["type"] == "server_error"
    assert still.json()["status"] == "ok"
    assert any("role bug" in (r.exc_text or "") for r in caplog.records)


@pytest.mark.parametrize("name", ["", "_standin", "Pi", "pi/v1", "a b"])
def test_a_role_name_must_be_one_lower_case_path_segment(name: str) -> None:
    with pytest.raises(StandInError, match="cannot name a role"):
        StandIn(roles={name: Recorder()})


class Accepting:
    """A scripted role that takes any script (and answers nothing)."""

    def __init__(self) -> None:
        self.script: Any = None

    def set_script(self, script: Any) -> None:
        self.script = script

    def __call__(self, request: RoleRequest) -> Answer:
        return Answer(None, payload=self.script)


class Picky(Accepting):
    """A scripted role that refuses scripts without a ``"picky"`` key."""

    def set_script(self, script: Any) -> None:
        if script is not None and "picky" not in script:
            raise ScriptError("script: 'picky' is missing")
        super().set_script(script)


def test_a_script_reaches_every_scripted_role_or_none_of_them() -> None:
    accepting, picky = Accepting(), Picky()
    standin = StandIn(roles={"a": accepting, "b": picky}, script={"picky": 1})
    assert (accepting.script, picky.script) == ({"picky": 1}, {"picky": 1})
    with pytest.raises(ScriptError, match="'picky' is missing"):
        standin.set_script({"other": 2})
    assert (accepting.script, picky.script) == ({"picky": 1}, {"picky": 1})
    late = Accepting()
    standin.register_role("c", late)
    assert late.script == {"picky": 1}  # a role registered later gets the current script


def test_a_script_with_no_scripted_role_is_refused(standin: StandIn) -> None:
    with _http() as client:
        reply = client.put(f"{standin.base_url}/_standin/script", json={"rules": []})
    assert reply.status_code == 400
    assert "no registered role takes a script" in reply.json()["error"]["message"]


# -- the command line ----------------------------------------------------------------------


def _standin_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pi_hindsight_standin", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--role", "pi"], "is not NAME=MODULE:FACTORY"),
        (["--role", "pi=tests.agent_models.no_such_module:PiRole"], "cannot import"),
        (["--role", "pi=tests.agent_models.pi_role:NoSuchRole"], "has no NoSuchRole"),
        (["--role", "Pi=tests.agent_models.pi_role:PiRole"], "cannot name a role"),
        (["--port", "70000"], "not in the range 0-65535"),
        (["--script", "/nonexistent/script.json"], "cannot read the script"),
    ],
)
def test_cli_refuses_bad_arguments_with_a_message_and_status_2(
    args: list[str], message: str
) -> None:
    result = _standin_cli(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_refuses_a_script_when_no_role_takes_one(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"rules": []}', encoding="utf-8")
    result = _standin_cli("--script", str(script))
    assert result.returncode == 2
    assert "no registered role takes a script" in result.stderr


def test_the_ready_file_names_every_role_and_a_busy_port_exits_1(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pi_hindsight_standin",
            "--role",
            "pi=tests.agent_models.pi_role:PiRole",
            "--ready-file",
            str(ready),
        ],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the stand-in did not become ready"
            time.sleep(0.02)
        info = json.loads(ready.read_text(encoding="utf-8"))
        base = info["base_url"]
        assert info["roles"] == {"hindsight": f"{base}/hindsight", "pi": f"{base}/pi"}
        busy = _standin_cli("--port", base.rsplit(":", 1)[1])
        assert busy.returncode == 1
        assert "cannot listen on" in busy.stderr
        assert "hint: choose another --port" in busy.stderr
    finally:
        process.terminate()
        process.communicate(timeout=20)
    assert process.returncode == 0
