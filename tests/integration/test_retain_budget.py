"""``retain.dailyTokenBudget`` with a real sidecar and server (docs/operations.md, "Cost"): past
the budget, automatic retain waits in the outbox; an explicit retain is refused until forced and
then delivered while the rest waits; ``outbox resume`` delivers the rest, each request once.
Trivial requests are recorded as skipped, not queued."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.engine.budget import CHECK_EVERY_S
from tests.plugins.pi import make_repo
from tests.support.retain import (
    BankView,
    exchange,
    marker,
    outbox_status,
    register,
    wait_until_delivered,
    write_config,
)
from tests.support.sidecar import Sidecar

pytestmark = [pytest.mark.server]


def _cli(state_dir: Path, *args: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", *args, "--json"],
        env=dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state_dir)),
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    found: dict[str, Any] = json.loads(completed.stdout)
    return found


def _texts(bank: BankView, session_id: str) -> list[str]:
    turns = bank.document_turns(f"pi-session-{session_id}")
    return [turn["content"] for turn in turns if turn["role"] == "user"]


def _retain(sidecar: Sidecar, content: str, **extra: Any) -> dict[str, Any]:
    params = {"action": "retain", "content": content, **extra}
    answer: dict[str, Any] = sidecar.call(
        "toolCall", {"name": "hindsight_memory", "params": params}
    )
    return answer


def test_the_budget_holds_automatic_retain_force_passes_one_note_and_resume_drains_once(
    hindsight_server: Any, isolated_dirs: Path, tmp_path: Path
) -> None:
    base_url = str(hindsight_server.base_url)
    bank_id = f"test-{uuid.uuid4().hex[:12]}"
    repo = make_repo(tmp_path / "repo")
    write_config(isolated_dirs, base_url, bank_id, retain={"dailyTokenBudget": 1})
    register(isolated_dirs, repo)
    bank = BankView(base_url, bank_id)
    session = f"budget-{uuid.uuid4().hex[:6]}"
    sidecar = Sidecar(isolated_dirs)
    try:
        sidecar.initialize(repo, session)
        first = f"The first request names {marker()} and goes through."
        assert sidecar.turn(session, "r0", exchange(first))["queued"] == 1
        wait_until_delivered(sidecar)  # nothing spent yet: under the budget
        # The server records the extraction's tokens (now past the budget of 1), and the gate's
        # last answer (asked at most every CHECK_EVERY_S) expires.
        deadline = time.monotonic() + 60
        while not _cli(isolated_dirs, "usage", "--period", "1d", "--cwd", str(repo))["total"][
            "totalTokens"
        ]:
            assert time.monotonic() < deadline, "the server recorded no tokens"
            time.sleep(0.5)
        time.sleep(CHECK_EVERY_S + 0.5)
        held = [f"Held request {n} names {marker()}." for n in range(3)]
        for n, text in enumerate(held, start=1):
            assert sidecar.turn(session, f"r{n}", exchange(text))["queued"] == 1
        # A trivial request is not queued: the outbox records it as skipped.
        assert sidecar.turn(session, "r9", exchange("thanks!", "You're welcome!"))["queued"] == 0

        deadline = time.monotonic() + 60
        while "paused by budget" not in (sidecar.call("status", {})["retain"]["paused"] or ""):
            assert time.monotonic() < deadline, "retain never paused"
            time.sleep(0.5)
        time.sleep(6)  # longer than the gate's wait: nothing is delivered meanwhile
        assert outbox_status(isolated_dirs)["pending"] == len(held)
        # The Pi footer says so with the next request.
        prepared = sidecar.call(
            "prepareMemory", {"requestId": "p1", "prompt": "next", "sessionId": session}
        )
        assert "retain paused by budget" in prepared["statusLine"]

        refused = _retain(sidecar, f"Note {marker()} kept on request.")
        assert refused["isError"] is True
        assert "budget is reached" in refused["content"][0]["text"]
        assert "force" in refused["content"][0]["text"]
        note = f"Forced note {marker()}."
        forced = _retain(sidecar, note, force=True)
        assert forced["isError"] is False and forced["details"]["forced"] is True
        deadline = time.monotonic() + 120
        while outbox_status(isolated_dirs)["pending"] != len(held):
            assert time.monotonic() < deadline, "the forced note was not delivered"
            time.sleep(0.5)
        assert all(text not in " ".join(_texts(bank, session)) for text in held)

        resumed = _cli(isolated_dirs, "outbox", "resume")
        assert resumed["resumed"] == [bank_id]
        wait_until_delivered(sidecar)
    finally:
        sidecar.close()
    texts = _texts(bank, session)
    assert [t for t in texts if t in held] == held  # each once, in order
    assert [t for t in texts if t == first] == [first]
    skipped = _cli(isolated_dirs, "outbox", "skipped")["skipped"]
    assert [(s["requestId"], s["reason"]) for s in skipped] == [("r9", "acknowledgement")]
