"""Pytest plugin: the real Claude Code CLI, offline, talking to the stand-in's ``claude`` role.

- ``claude_binary`` (fixture): the native executable from ``$CLAUDE_BIN``, else the project's
  ``claude/node_modules/.bin/claude`` (``make install``); the test is skipped, with the reason,
  when there is none (or only npm's placeholder, when install scripts were skipped).
- ``claude_env(home, standin)``: the environment to run it with: an isolated ``HOME``,
  ``ANTHROPIC_BASE_URL`` at the stand-in, no telemetry, updates or other traffic.
- ``hook_env`` (fixture): the environment hooks run with, for this test's state dir; the daemon
  its hooks start is stopped at teardown (killed if it does not stop).
- ``claude_world`` (fixture): a Claude Code home set up by ``pi-hindsight setup --host
  claude-code`` (hooks, the MCP server, the register command), our state dir configured for the
  session's Hindsight server and a fresh bank — the same state dir ``pi_world`` uses, so a test
  can run both agents, and a socket directory of its own (``XDG_RUNTIME_DIR``): every daemon
  with a pid file there is stopped at teardown, by pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.agent_models import AgentStandIn
from tests.plugins.pi import run_cli
from tests.support.claude_code import daemon_pid, stop_daemon, wait_gone

CLAUDE_BIN_ENV = "CLAUDE_BIN"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CLAUDE_BIN = PROJECT_ROOT / "claude" / "node_modules" / ".bin" / "claude"
# npm's placeholder for the native binary is a ~500-byte script; the binary is ~400 MB.
_PLACEHOLDER_MAX_BYTES = 1 << 20
CLAUDE_TIMEOUT_S = 120
API_KEY = "sk-standin"
# Where the hooks' own timeouts are measured against: generous on a loaded 2-core machine.
FLAGS = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def find_claude_binary() -> tuple[Path | None, str]:
    """The Claude Code executable to test with, or ``None`` and why there is none."""
    configured = os.environ.get(CLAUDE_BIN_ENV)
    candidate = Path(configured) if configured else DEFAULT_CLAUDE_BIN
    where = f"${CLAUDE_BIN_ENV}={configured}" if configured else str(DEFAULT_CLAUDE_BIN)
    if not (candidate.is_file() and os.access(candidate, os.X_OK)):
        hint = "" if configured else " (run `make install`)"
        return None, f"no Claude Code binary at {where}{hint}"
    if candidate.resolve().stat().st_size < _PLACEHOLDER_MAX_BYTES:
        return None, (
            f"{where} is npm's placeholder, not the native binary: run "
            "`node claude/node_modules/@anthropic-ai/claude-code/install.cjs` (no network needed)"
        )
    return candidate, ""


@pytest.fixture
def claude_binary() -> Path:
    """The real Claude Code binary; skips the test (with the reason) when it is not installed."""
    path, reason = find_claude_binary()
    if path is None:
        pytest.skip(reason)
    return path


def claude_env(
    home: Path, standin: AgentStandIn, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Claude Code's environment: isolated HOME, the stand-in as its API, nothing else reached."""
    env = {
        key: value
        for key, value in (os.environ if base is None else base).items()
        if not key.startswith(("ANTHROPIC_", "CLAUDE_CODE_", "CLAUDECODE", "CLAUDE_CONFIG_DIR"))
    }
    env.update(FLAGS)
    env["HOME"] = str(home)
    env["ANTHROPIC_BASE_URL"] = standin.claude_base_url
    env["ANTHROPIC_API_KEY"] = API_KEY
    return env


def transcripts(home: Path) -> list[Path]:
    return sorted((home / ".claude" / "projects").rglob("*.jsonl"))


@dataclass
class ClaudeWorld:
    claude: Path
    home: Path
    state_dir: Path
    bank_id: str
    base_url: str
    standin: AgentStandIn
    # The user's own extra environment for every run (e.g. another XDG_RUNTIME_DIR): the daemon
    # it starts is the one the finalizer stops.
    extra_env: dict[str, str] = field(default_factory=dict)

    def env(self, **extra: str) -> dict[str, str]:
        env = claude_env(self.home, self.standin)
        env["PI_HINDSIGHT_STATE_DIR"] = str(self.state_dir)
        env.update(self.extra_env)
        env.update(extra)
        return env

    def run(
        self,
        cwd: Path,
        prompt: str,
        *args: str,
        check: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        completed = subprocess.run(
            [str(self.claude), "-p", prompt, *args],
            cwd=cwd,
            env=dict(env) if env is not None else self.env(),
            capture_output=True,
            text=True,
            timeout=CLAUDE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if check and completed.returncode != 0:
            raise AssertionError(
                f"claude exited {completed.returncode}\nstdout:\n{completed.stdout}\n"
                f"stderr:\n{completed.stderr}"
            )
        return completed

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_cli(args, env=self.env(), timeout=CLAUDE_TIMEOUT_S, check=check)

    def register(self, path: Path) -> None:
        self.cli("scope", "register", str(path))

    def drain(self) -> None:
        """Wait until every retain is confirmed by Hindsight (the next session can recall it)."""
        self.cli("outbox", "drain", "--timeout", "120")

    def requests(self) -> list[dict[str, Any]]:
        return self.standin.requests("claude")

    def transcripts(self) -> list[Path]:
        return transcripts(self.home)

    def stop_daemon(self) -> None:
        """Stop the daemon the hooks started (killed if it does not stop in time)."""
        pid = daemon_pid(self.env())
        stop_daemon(self.env())
        if pid is not None and not wait_gone(pid, 15):
            os.kill(pid, 9)

    def stop_all_daemons(self) -> None:
        """Stop every daemon whose pid file is in this world's socket directory, by pid: also
        one started with another configuration (e.g. when a repository's setting was dropped
        and no launcher value could be read, the key differs)."""
        self.stop_daemon()
        sockets = Path(self.env()["XDG_RUNTIME_DIR"]) / "pi-hindsight"
        for pid_file in sorted(sockets.glob("*.pid")):
            try:
                pid = int(pid_file.read_text())
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except (OSError, ValueError):
                continue  # gone already
            if b"claude-code\0daemon" not in command:
                continue  # a reused pid: not ours
            os.kill(pid, signal.SIGTERM)
            if not wait_gone(pid, 15):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def claude_world(
    tmp_path: Path,
    claude_binary: Path,
    chat_standin: AgentStandIn,
    hindsight_server: object,
    isolated_dirs: Path,
) -> Iterator[ClaudeWorld]:
    home = tmp_path / "home"
    home.mkdir()
    base_url = str(getattr(hindsight_server, "base_url"))  # noqa: B009 - plugin type is opaque here
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    config = isolated_dirs / "config.json"
    if config.exists():  # pi_world wrote it first: share its bank
        bank_id = json.loads(config.read_text())["banks"]["project"]["bankId"]
    else:
        bank_id = f"test-{uuid.uuid4().hex[:12]}"
        config.write_text(
            json.dumps(
                {"hindsight": {"baseUrl": base_url}, "banks": {"project": {"bankId": bank_id}}}
            ),
            encoding="utf-8",
        )
    # A socket directory of the test's own: every daemon its sessions start is found there.
    sockets = tmp_path / "rt"
    sockets.mkdir(mode=0o700)
    world = ClaudeWorld(
        claude=claude_binary,
        home=home,
        state_dir=isolated_dirs,
        bank_id=bank_id,
        base_url=base_url,
        standin=chat_standin,
        extra_env={"XDG_RUNTIME_DIR": str(sockets)},
    )
    world.cli("setup", "--host", "claude-code", "--claude-home", str(home), "--yes")
    try:
        yield world
    finally:
        world.stop_all_daemons()


@pytest.fixture
def hook_env(isolated_dirs: Path) -> Iterator[dict[str, str]]:
    """The environment hooks run with (this test's state dir); its daemon is stopped after."""
    env = dict(os.environ)
    env["PI_HINDSIGHT_STATE_DIR"] = str(isolated_dirs)
    env["PI_HINDSIGHT_DAEMON_IDLE_S"] = "120"
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    yield env
    pid = daemon_pid(env)
    stop_daemon(env)
    if pid is not None and not wait_gone(pid, 15):
        os.kill(pid, 9)
