"""Pytest plugin: a real Pi with our extension installed, talking to the stand-in model and the
real Hindsight from the launcher.

- ``pi_world`` (function): an empty Pi agent dir (``$PI_CODING_AGENT_DIR`` of the test; the same
  path for each test of a worker, emptied first, so Pi's TypeScript cache holds) with
  the extension installed by ``install_extension`` (the copy form; ``tests/e2e/test_install.py``
  covers the package form), Pi pointed at ``chat_standin``, our state dir configured for the
  session's Hindsight server and a bank of its own (fresh per test). It runs on Pi 1.x, and on
  0.73.1 too when the test is marked ``pi_both`` (``pi_binary``); ``world.pi`` says which.
- ``make_repo(path, remote=None)``: a git repository (optionally with an origin URL; nothing is
  ever fetched).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.cli.setup_cmd import install_extension
from tests.agent_models import AgentStandIn
from tests.plugins import shared_run
from tests.plugins.pi_versions import PiInstall
from tests.plugins.standin import pi_env, write_pi_agent_dir

PI_TIMEOUT_S = 120


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def make_repo(path: Path, remote: str | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    _git(
        path,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "init",
    )
    if remote:
        _git(path, "remote", "add", "origin", remote)
    return path


def run_cli(
    args: Sequence[str], *, env: Mapping[str, str], timeout: float, check: bool
) -> subprocess.CompletedProcess[str]:
    """``pi-hindsight ARGS`` as the user runs it (this interpreter); with ``check``, a non-zero
    exit fails the test with both outputs."""
    completed = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and completed.returncode != 0:
        raise AssertionError(
            f"pi-hindsight {' '.join(args)} exited {completed.returncode}\n"
            f"stdout:\n{completed.stdout}\nstderr:\n{completed.stderr}"
        )
    return completed


@dataclass
class PiWorld:
    pi: PiInstall
    agent_dir: Path
    state_dir: Path
    bank_id: str
    base_url: str
    standin: AgentStandIn

    def env(self) -> dict[str, str]:
        env = pi_env(self.agent_dir, pi=self.pi)
        env["PI_HINDSIGHT_STATE_DIR"] = str(self.state_dir)
        return env

    def run(
        self, cwd: Path, *prompts: str, args: tuple[str, ...] = (), check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        completed = subprocess.run(
            self.pi.argv(*args, "-p", *prompts),
            cwd=cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=PI_TIMEOUT_S,
            check=False,
        )
        if check and completed.returncode != 0:
            raise AssertionError(
                f"pi exited {completed.returncode}\nstdout:\n{completed.stdout}\n"
                f"stderr:\n{completed.stderr}"
            )
        return completed

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_cli(args, env=self.env(), timeout=PI_TIMEOUT_S, check=check)

    def register(self, path: Path) -> None:
        self.cli("scope", "register", str(path))

    def drain(self) -> None:
        """Wait until every retain is confirmed by Hindsight (the next session can recall it)."""
        self.cli("outbox", "drain", "--timeout", "120")

    def pi_requests(self) -> list[dict[str, object]]:
        return self.standin.requests("pi")


def _agent_dir(config: pytest.Config, pi: PiInstall) -> Path:
    """An empty Pi agent dir at the same path for every test this process runs on ``pi``.

    Pi compiles an extension's TypeScript with jiti, whose cache is keyed by the file's path: at
    a new path each test paid about a second of CPU before its first request (a user's extension
    stays where it is and pays it once). The tests of one xdist worker run one at a time, and the
    dir is emptied before each, so no test sees another's agent dir."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    path = shared_run.run_dir(config) / "pi-agents" / f"{worker}-{pi.test_id}" / "agent"
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


@pytest.fixture
def pi_world(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    pi_binary: PiInstall,
    chat_standin: AgentStandIn,
    hindsight_server: object,
    isolated_dirs: Path,
) -> PiWorld:
    agent_dir = _agent_dir(request.config, pi_binary)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent_dir))
    write_pi_agent_dir(agent_dir, chat_standin)
    install_extension(agent_dir, sys.executable, isolated_dirs)
    base_url = str(getattr(hindsight_server, "base_url"))  # noqa: B009 - plugin type is opaque here
    bank_id = f"test-{uuid.uuid4().hex[:12]}"
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    config = {
        "hindsight": {"baseUrl": base_url},
        "banks": {"project": {"bankId": bank_id}},
        # The suite runs Pi sessions on two workers on a loaded 2-core machine,
        # where a recall can take longer than the 4 s default bound and a request would go out
        # without its memory. No test using this world is about that bound (it has tests of its
        # own, which write their own config).
        "recall": {"timeoutMs": 30_000},
    }
    (isolated_dirs / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return PiWorld(
        pi=pi_binary,
        agent_dir=agent_dir,
        state_dir=isolated_dirs,
        bank_id=bank_id,
        base_url=base_url,
        standin=chat_standin,
    )


class PiRpc:
    """A real ``pi --mode rpc`` process: send JSON commands, wait for JSON events."""

    def __init__(self, world: PiWorld, cwd: Path) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            world.pi.argv("--mode", "rpc"),
            cwd=cwd,
            env=world.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip():
                with self._lock:
                    self.events.append(json.loads(line))

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def wait_for(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        what: str,
        *,
        after: int = 0,
        timeout: float = 60,
    ) -> tuple[int, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for index in range(after, len(self.events)):
                    if predicate(self.events[index]):
                        return index, self.events[index]
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(
            f"timed out waiting for {what}; events: {json.dumps(self.events)[-3000:]}"
        )

    def prompt(self, message: str) -> int:
        """Send a prompt and wait until its agent run ended; returns the index of agent_end."""
        start = len(self.events)
        self.send({"type": "prompt", "message": message})
        index, _ = self.wait_for(lambda e: e.get("type") == "agent_end", "agent_end", after=start)
        return index

    def close(self) -> int:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            for stream in (self.process.stdout, self.process.stderr):
                if stream is not None:
                    stream.close()


class LoopbackListener:
    """A loopback TCP listener that counts every connection made to it. ``hold=False`` closes
    each at once (a canary: was anything contacted?); ``hold=True`` keeps them open and never
    answers (a hung server)."""

    def __init__(self, *, hold: bool = False) -> None:
        self.hold = hold
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.socket.settimeout(0.2)
        self.connections = 0
        self.held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            self.connections += 1
            if self.hold:
                self.held.append(connection)
            else:
                connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        for connection in self.held:
            connection.close()
        self.socket.close()


@pytest.fixture
def canary() -> Iterator[LoopbackListener]:
    listener = LoopbackListener()
    yield listener
    listener.close()


@pytest.fixture
def black_hole() -> Iterator[LoopbackListener]:
    listener = LoopbackListener(hold=True)
    yield listener
    listener.close()
