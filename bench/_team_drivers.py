"""Sessions of one simulated person, through the real entry points (``bench/team_load.py``):

- **Pi**: a real sidecar (``python -m pi_hindsight serve``) spoken to over its stdio as the Pi
  shim does (:class:`RpcSidecar`: JSON-RPC lines, calls correlated by id, bounded waits);
- **Claude Code**: the real hook client (``python -m pi_hindsight.hosts.claude_code.hook``) for
  ``SessionStart``, ``UserPromptSubmit``, ``Stop`` and ``SessionEnd``, which starts and talks to
  the person's daemon; the transcript is written in Claude Code's row format.

Each request is one :class:`Sent` with what the person saw: the time to their memory (the
``prepareMemory`` round trip; the hook's wall time), the outcome, the delivered text, and the
status right after a failed request.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _team_world import Ledger, Owner, Person, token

HOOK = [sys.executable, "-m", "pi_hindsight.hosts.claude_code.hook"]
PROMPTS = (
    "Note for the team: component {token} is owned by {person} and deploys on day {n}.",
    "Remember that service {token} needs the {person} review before release {n}.",
    "Keep in mind: the {token} job runs nightly and alerts {person} after {n} failures.",
)


@dataclass
class Sent:
    """One request as its person saw it."""

    person: str
    host: str
    session: str
    request_id: str
    token: str
    scope: str  # the project id of the session's scope
    started: float  # time.monotonic()
    ended: float = 0.0
    wait_s: float = 0.0  # prepareMemory round trip, or the hook's wall time
    recall_ms: float | None = None
    outcome: str | None = None  # Pi: from the answer; Claude Code: from evidence afterwards
    reason: str | None = None
    delivered: str = ""
    notices: list[str] = field(default_factory=list)
    backend_after: dict[str, Any] | None = None  # Pi: status["backend"] right after a failure
    queued: bool = False


class SidecarGone(Exception):
    pass


class RpcSidecar:
    """A real ``pi-hindsight serve`` process; every wait is bounded."""

    def __init__(self, env: dict[str, str], *, ready_s: float = 300.0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pi_hindsight", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr: list[bytes] = []
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        try:
            ready = self._lines.get(timeout=ready_s)
        except queue.Empty:
            ready = None
        if ready is None or ready.get("method") != "ready":
            self.process.kill()  # ours: never left behind
            self.process.wait(timeout=10)
            raise SidecarGone(f"no ready line within {ready_s}s: {ready}")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(json.loads(line))
        self._lines.put(None)

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    def call(self, method: str, params: dict[str, Any], *, timeout: float = 60.0) -> Any:
        self._next += 1
        ident = self._next
        line = json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(line.encode() + b"\n")
            self.process.stdin.flush()
        except OSError as error:
            raise SidecarGone(str(error)) from error
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"{method} not answered in {timeout}s") from None
            if message is None:
                self._lines.put(None)
                raise SidecarGone(f"the sidecar exited during {method}")
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def close(self, bound_s: float = 30.0) -> None:
        try:
            self.call("shutdown", {"reason": "quit"}, timeout=bound_s)
            self.process.wait(timeout=bound_s)
        except (SidecarGone, TimeoutError, subprocess.TimeoutExpired, RuntimeError):
            self.process.kill()
            self.process.wait(timeout=10)
        finally:
            for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        continue


def _prompt(value: str, person: str, n: int) -> str:
    return PROMPTS[n % len(PROMPTS)].format(token=value, person=person, n=n)


def exchange(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": text, "timestamp": int(time.time() * 1000)},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
    ]


@dataclass
class Plan:
    """One session: where, how many requests, and what to call after each (progress)."""

    person: Person
    repo: Path
    session: str
    requests: int
    pause_s: float
    deadline: float
    on_sent: Callable[[Sent], None]
    personal: bool = False  # also retain a personal preference (hindsight_retain_global)
    on_tool: Callable[[float], None] = lambda seconds: None  # how long that tool call took


def pi_session(plan: Plan, ledger: Ledger) -> list[Sent]:
    person, session = plan.person, plan.session
    sidecar = RpcSidecar(person.env())
    sent: list[Sent] = []
    try:
        init = {"protocolVersion": 1, "cwd": str(plan.repo), "sessionId": session}
        if not sidecar.call("initialize", {**init, "hasUI": False})["enabled"]:
            raise RuntimeError(f"{person.name}: memory is off in {plan.repo}")
        scope = sidecar.call("status", {})["scope"]["projectId"]
        if plan.personal:
            value = token("pu")
            ledger.add(value, Owner(person=person.name))
            params = {"content": f"{person.name} personally prefers the {value} editor theme."}
            started = time.monotonic()
            # Bounded generously: the shim's own bound (the tool's timeoutMs) is what the report
            # compares this wait with; here the preference must be queued to be checked.
            result = sidecar.call(
                "toolCall",
                {"name": "hindsight_retain_global", "params": params, "sessionId": session},
                timeout=300,
            )
            plan.on_tool(time.monotonic() - started)
            if result.get("isError"):
                raise RuntimeError(f"{person.name}: retain_global failed: {result}")
        for n in range(plan.requests):
            if time.monotonic() > plan.deadline:
                break
            sent.append(_pi_request(sidecar, plan, scope, n, ledger))
            plan.on_sent(sent[-1])
            time.sleep(plan.pause_s)
    finally:
        sidecar.close()
    return sent


def _pi_request(sidecar: RpcSidecar, plan: Plan, scope: str, n: int, ledger: Ledger) -> Sent:
    value = token("rq")
    ledger.add(value, Owner(scope=scope))
    request_id = f"{plan.session}-r{n}"
    prompt = _prompt(value, plan.person.name, n)
    one = Sent(plan.person.name, "pi", plan.session, request_id, value, scope, time.monotonic())
    answer = sidecar.call(
        "prepareMemory", {"requestId": request_id, "prompt": prompt, "sessionId": plan.session}
    )
    one.wait_s = time.monotonic() - one.started
    one.outcome, one.reason, one.recall_ms = answer["outcome"], answer["reason"], answer["recallMs"]
    one.delivered = (answer.get("message") or {}).get("content") or ""
    one.notices = [notice["message"] for notice in answer.get("notices", [])]
    if one.outcome == "backend_unavailable":
        one.backend_after = sidecar.call("status", {})["backend"]
    turn = sidecar.call(
        "turnCompleted",
        {"requestId": request_id, "sessionId": plan.session, "messages": exchange(prompt)},
    )
    one.queued = turn["queued"] == 1
    one.ended = time.monotonic()
    return one


def _hook(plan: Plan, event: str, fields: dict[str, Any]) -> dict[str, Any]:
    payload = {"session_id": plan.session, "cwd": str(plan.repo), "hook_event_name": event}
    done = subprocess.run(
        [*HOOK, event],
        input=json.dumps({**payload, **fields}).encode(),
        cwd=plan.repo,
        env=plan.person.env(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {event} hook failed: {done.stderr!r}")
    text = done.stdout.decode().strip()
    output: dict[str, Any] = json.loads(text) if text else {}
    return output


def claude_session(plan: Plan, ledger: Ledger, scope: str) -> list[Sent]:
    """``scope``: the project id of ``plan.repo`` (Claude Code's hook output does not say it)."""
    transcript = plan.person.state_dir.parent / "transcripts" / f"{plan.session}.jsonl"
    transcript.parent.mkdir(exist_ok=True)
    transcript.touch()
    where = {"transcript_path": str(transcript)}
    sent: list[Sent] = []
    start = _hook(plan, "SessionStart", {**where, "source": "startup"})
    parent: str | None = None
    for n in range(plan.requests):
        if time.monotonic() > plan.deadline:
            break
        value = token("rq")
        ledger.add(value, Owner(scope=scope))
        prompt_id = str(uuid.uuid4())
        prompt = _prompt(value, plan.person.name, n)
        one = Sent(plan.person.name, "claude-code", plan.session, prompt_id, value, scope, 0.0)
        one.started = time.monotonic()
        output = _hook(
            plan, "UserPromptSubmit", {**where, "prompt_id": prompt_id, "prompt": prompt}
        )
        one.wait_s = time.monotonic() - one.started
        one.delivered = output.get("hookSpecificOutput", {}).get("additionalContext") or ""
        if "systemMessage" in output:
            one.notices.append(output["systemMessage"])
        if n == 0:  # what SessionStart delivered and said counts with the first request
            one.delivered += (start.get("hookSpecificOutput") or {}).get("additionalContext") or ""
            if "systemMessage" in start:
                one.notices.append(start["systemMessage"])
        parent = _append_request(transcript, plan.session, prompt_id, prompt, parent)
        stop = _hook(plan, "Stop", {**where, "stop_hook_active": False})
        if "systemMessage" in stop:
            one.notices.append(stop["systemMessage"])
        one.queued = True  # the transcript holds it: the daemon reads it from its cursor
        one.ended = time.monotonic()
        sent.append(one)
        plan.on_sent(one)
        time.sleep(plan.pause_s)
    _hook(plan, "SessionEnd", {**where, "reason": "exit"})
    return sent


def _append_request(
    path: Path, session: str, prompt_id: str, prompt: str, parent: str | None
) -> str:
    """A request's rows as Claude Code writes them; returns the last row's uuid."""
    rows = []
    for role, content in (("user", prompt), ("assistant", [{"type": "text", "text": "Noted."}])):
        uid = str(uuid.uuid4())
        row: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": False,
            "type": role,
            "uuid": uid,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
            "sessionId": session,
            "message": {"role": role, "content": content},
        }
        if role == "user":
            row["promptId"] = prompt_id
        rows.append(row)
        parent = uid
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(row) + "\n" for row in rows))
    assert parent is not None
    return parent


def stop_daemon(person: Person) -> None:
    """Stop the person's Claude Code daemon (it flushes what it can), and wait for it."""
    from pi_hindsight.hosts.claude_code import runtime

    try:
        pid = int(runtime.address(person.env()).pid_file.read_text())
    except (OSError, ValueError):
        pid = None
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "claude-code", "daemon", "--stop"],
        env=person.env(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    if pid is None:
        return
    for _ in range(600):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, 9)  # ours, and it did not stop within 30 s
