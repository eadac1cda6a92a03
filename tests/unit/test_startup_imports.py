"""What a Pi session's sidecar loads before its first prompt (issue 19): only what ``ready`` and
``initialize`` need. ``ready`` is sent by the transport alone, before the engine is imported;
the Hindsight client, the redaction tables, seeding, status and the CLI load on first use (or
in the warm-up thread once ``initialize`` is answered), so a change that imports one of them at
start-up again fails here, whatever the machine's speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Not needed until a prompt, a tool call or a command: each costs start-up time (issue 19).
LATER = (
    "aiohttp",
    "hindsight_client",
    "pi_hindsight.backend.hindsight",
    "pi_hindsight.redaction",
    "pi_hindsight.engine.seeding",
    "pi_hindsight.engine.git_history",
    "pi_hindsight.engine.status",
    "pi_hindsight.hosts.pi.seed_sessions",
    "pi_hindsight.stores.evidence.diagnosis",  # explain's shapes
    "click",
)

# Not needed to say ``ready``: the transport sends it before the dispatcher is built.
NOT_AT_READY = (
    "pydantic",
    "sqlite3",
    "pi_hindsight.app",
    "pi_hindsight.config",
    "pi_hindsight.engine",
    "pi_hindsight.hosts",
    "pi_hindsight.stores",
)

# The sidecar's own wiring (``serve.serve_pi``: the transport, then ``app.pi_host`` once ready
# is sent) up to its first answer, in a fresh interpreter.
PROBE = """
import asyncio, json, sys
from pathlib import Path
import pi_hindsight.serve

at_ready = sorted(sys.modules)
from pi_hindsight.app import pi_host
state, cwd = Path(sys.argv[1]), sys.argv[2]
host = pi_host(state)
params = {"protocolVersion": 1, "cwd": cwd, "sessionId": "probe", "hasUI": False}
answer = asyncio.run(host.initialize(params))
loaded = {"ready": at_ready, "initialized": sorted(sys.modules), "enabled": answer["enabled"]}
print(json.dumps(loaded))
"""


def _register(env: dict[str, str], repo: Path) -> None:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "scope", "register", str(repo)],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize("registered", [False, True], ids=["unregistered", "registered"])
def test_the_sidecar_loads_nothing_its_start_does_not_need(
    tmp_path: Path, registered: bool
) -> None:
    state, repo = tmp_path / "state", tmp_path / "repo"
    repo.mkdir()
    env = dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state))
    # A server that is never reached: initialize connects nowhere.
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"hindsight": {"baseUrl": "http://127.0.0.1:9"}}))
    if registered:
        _register(env, repo)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(state), str(repo)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded = json.loads(done.stdout)
    assert loaded["enabled"] is registered
    early = [name for name in NOT_AT_READY if name in loaded["ready"]]
    assert early == [], f"loaded before ready: {early}"
    for moment in ("ready", "initialized"):
        early = [name for name in LATER if name in loaded[moment]]
        assert early == [], f"loaded by {moment}: {early}"


def test_the_sidecar_entry_does_not_load_the_cli(tmp_path: Path) -> None:
    """``python -m pi_hindsight serve`` (what the shim spawns) goes straight to the sidecar:
    with stdin closed it starts, warms up and stops, and never imports click."""
    env = dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pi_hindsight", "serve"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "pi_hindsight.rpc.sidecar" in imported  # the probe saw the sidecar start
    assert "click" not in imported
    assert '"ready"' in done.stdout
