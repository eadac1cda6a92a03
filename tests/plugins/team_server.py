"""Pytest plugin: one real Hindsight with an API key (a team's server) for the whole run.

- ``team_server`` (session): started through the launcher's CLI with ``--api-key-env`` and the
  offline stand-in, in a state dir of its own (the session server of the other tests has no
  key), shared by the run's xdist workers and stopped at its end by ``shared_run`` — also after
  failures, Ctrl-C and SIGTERM. It starts in a background process once the tests are collected.
  Tests that use it isolate themselves with their own banks, repositories and developer state
  dirs.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plugins import shared_run

KEY_VAR = "PI_HINDSIGHT_TEST_TEAM_KEY"  # what the server is started with


@dataclass
class TeamServer:
    state_dir: Path
    base_url: str
    key: str
    start_output: str
    pids: dict[str, int]  # Hindsight, PostgreSQL, the stand-in


def _start_argv(state: Path) -> list[str]:
    return [sys.executable, "-m", "pi_hindsight", "server", "start", "--llm", "offline",
            "--api-key-env", KEY_VAR, "--state-dir", str(state), "--json"]  # fmt: skip


def _env(config: pytest.Config) -> dict[str, str]:
    key = _run_key(shared_run.run_dir(config) / "team.key")
    system = shared_run.system_dir(config)
    return dict(os.environ, **{KEY_VAR: key}, PI_HINDSIGHT_SYSTEM_DIR=str(system))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start booting the team's server at once (``shared_run.start_early``)."""
    config = session.config
    if any("team_server" in getattr(item, "fixturenames", ()) for item in session.items):
        argv = _start_argv(shared_run.server_state_dir(config, "team"))
        shared_run.start_early(session, "team_server", argv, _env(config))


@pytest.fixture(scope="session")
def team_server(request: pytest.FixtureRequest) -> TeamServer:
    config = request.config
    shared_run.wait_early(config, "team_server")
    state = shared_run.server_state_dir(config, "team")
    env = _env(config)
    # The first worker starts it; the others find it running (the launcher's record and lock).
    started = subprocess.run(
        _start_argv(state), env=env, capture_output=True, text=True, timeout=300, check=False
    )
    if started.returncode != 0:
        pytest.fail(f"server start --api-key-env failed: {started.stdout}{started.stderr}")
    info = json.loads(started.stdout)
    return TeamServer(
        state, info["base_url"], env[KEY_VAR], started.stdout + started.stderr, info["pids"]
    )


def _run_key(path: Path) -> str:
    """One key for the whole run, whichever worker asks first (an exclusive create decides)."""
    try:
        with path.open("x", encoding="utf-8") as handle:
            handle.write(f"team-{secrets.token_urlsafe(24)}")
    except FileExistsError:
        pass
    for _ in range(100):  # the creator may not have written it yet
        key = path.read_text(encoding="utf-8")
        if key:
            return key
        time.sleep(0.05)
    raise AssertionError(f"{path} stayed empty")
