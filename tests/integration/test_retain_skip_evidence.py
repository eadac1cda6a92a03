"""Issue 21, "do not pay for nothing": the evidence says what retain did with each completed
request — queued, or skipped and why — next to what the outbox says. A real sidecar, a real
server, the real ledger and the real command line."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.stores.evidence import EVIDENCE_FILE_NAME
from tests.plugins.pi import make_repo
from tests.support.retain import exchange, marker, register, write_config
from tests.support.sidecar import Sidecar

pytestmark = [pytest.mark.server]


def _cli(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pi_hindsight", *args],
        env=dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state_dir)),
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _shown(state_dir: Path, request_id: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        _cli(state_dir, "evidence", "show", request_id, "--json").stdout
    )
    return found


def test_the_evidence_says_which_requests_retain_skipped_and_why(
    hindsight_server: Any, isolated_dirs: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    write_config(isolated_dirs, str(hindsight_server.base_url), f"test-{uuid.uuid4().hex[:12]}")
    register(isolated_dirs, repo)
    session = f"skip-{uuid.uuid4().hex[:6]}"
    fact = f"The staging database is called {marker()}; it is reset every Monday."
    turns = {
        "fact-1": exchange(fact, "Noted: staging is reset on Mondays."),
        "thanks-1": exchange("thanks!", "You're welcome!"),
        "empty-1": [],
    }
    sidecar = Sidecar(isolated_dirs)
    try:
        sidecar.initialize(repo, session)
        for request_id, messages in turns.items():
            prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
            sidecar.call(
                "prepareMemory", {"requestId": request_id, "prompt": prompt, "sessionId": session}
            )
            sidecar.turn(session, request_id, messages)
        # A request never prepared (its evidence was not kept) still completes, unrecorded.
        assert sidecar.turn(session, "unprepared", exchange("ok"))["queued"] == 0
    finally:
        sidecar.close()

    kept = _shown(isolated_dirs, "fact-1")
    assert kept["retain"] == {"decision": "queued", "reason": None}
    thanks = _shown(isolated_dirs, "thanks-1")
    assert thanks["retain"] == {"decision": "skipped", "reason": "acknowledgement"}
    assert _shown(isolated_dirs, "empty-1")["retain"] == {"decision": "skipped", "reason": "empty"}
    # The outbox says the same of the same requests.
    skipped = json.loads(_cli(isolated_dirs, "outbox", "skipped", "--json").stdout)["skipped"]
    assert sorted((s["requestId"], s["reason"]) for s in skipped) == [
        ("empty-1", "empty"),
        ("thanks-1", "acknowledgement"),
        ("unprepared", "acknowledgement"),
    ]
    text = _cli(isolated_dirs, "evidence", "show", "thanks-1", "--no-body").stdout
    assert "retain:       skipped: acknowledgement (not sent: no knowledge in it)" in text
    assert "retain:       queued" in _cli(isolated_dirs, "evidence", "show", "fact-1").stdout
    listed = _cli(isolated_dirs, "evidence", "list").stdout.splitlines()
    (thanks_line,) = [line for line in listed if "thanks-1" in line]
    assert thanks_line.endswith("retain skipped: acknowledgement")
    assert not any("retain skipped" in line for line in listed if "fact-1" in line)
    rows = sqlite3.connect(isolated_dirs / EVIDENCE_FILE_NAME).execute(
        "SELECT count(*) FROM requests WHERE request_id = 'unprepared'"
    )
    assert rows.fetchone()[0] == 0
