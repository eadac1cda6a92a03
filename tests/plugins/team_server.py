"""Pytest plugin: one real Hindsight with an API key (a team's server) for the whole run.

- ``team_server`` (session): started through the launcher's CLI with ``--api-key-env`` and the
  offline stand-in, in a state dir of its own (the session server of the other tests has no
  key), stopped at the end of the run — also after failures, Ctrl-C and SIGTERM. Tests that use
  it isolate themselves with their own banks, repositories and developer state dirs.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pi_hindsight.launcher import stop_server

KEY_VAR = "PI_HINDSIGHT_TEST_TEAM_KEY"  # what the server is started with


@dataclass
class TeamServer:
    state_dir: Path
    base_url: str
    key: str
    start_output: str
    pids: dict[str, int]  # Hindsight, PostgreSQL, the stand-in


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def team_server(
    tmp_path_factory: pytest.TempPathFactory, hindsight_system_dir: Path
) -> Iterator[TeamServer]:
    state = tmp_path_factory.mktemp("team-server")
    key = f"team-{secrets.token_urlsafe(24)}"
    env = dict(os.environ, **{KEY_VAR: key}, PI_HINDSIGHT_SYSTEM_DIR=str(hindsight_system_dir))
    # A CI timeout sends SIGTERM: as for the session server, the teardown below must still run
    # (with PI_HINDSIGHT_TEST_SERVER_URL set, nothing else has installed this).
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:  # stopped whatever happens, even when start fails half-way
        started = subprocess.run(
            [sys.executable, "-m", "pi_hindsight", "server", "start", "--llm", "offline",
             "--api-key-env", KEY_VAR, "--state-dir", str(state), "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )  # fmt: skip
        if started.returncode != 0:
            pytest.fail(f"server start --api-key-env failed: {started.stdout}{started.stderr}")
        info = json.loads(started.stdout)
        yield TeamServer(
            state, info["base_url"], key, started.stdout + started.stderr, info["pids"]
        )
    finally:
        report = stop_server(state)
        if previous is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        survived = [p.name for p in report.processes if p.outcome == "survived"]
        assert survived == [], f"the team server's {survived} outlived the tests"
