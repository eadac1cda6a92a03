"""Set-aside stores seen from real sidecar processes (as Pi runs them): every session warns until
the store is acknowledged or restored, ``status`` reports it, a set-aside catalogue explains why
memory is off, and a restored outbox's requests reach the real Hindsight.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.pi import make_repo
from tests.support.retain import BankView, exchange, marker, register, write_config
from tests.support.sidecar import Sidecar

UNREACHABLE = "http://127.0.0.1:9"  # nothing listens: delivery waits, the outbox keeps the work


@pytest.fixture
def sidecars() -> Iterator[list[Sidecar]]:
    started: list[Sidecar] = []
    yield started
    for sidecar in started:
        sidecar.close()


def _cli(state: Path, *args: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", *args, "--json"],
        env=dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state)),
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def _warnings(view: dict[str, Any]) -> list[str]:
    return [notice["message"] for notice in view["notices"] if notice["level"] == "warning"]


def _damage_an_index(path: Path, name: str) -> None:
    """Overwrite one index page: the file fails its integrity check, its rows stay readable."""
    connection = sqlite3.connect(path)
    (root,) = connection.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)
    ).fetchone()
    connection.close()
    with path.open("r+b") as handle:
        handle.seek((root - 1) * 4096)
        handle.write(b"\xa5" * 4096)


def test_every_session_warns_about_a_store_set_aside_elsewhere_until_acknowledged(
    isolated_dirs: Path, tmp_path: Path, sidecars: list[Sidecar]
) -> None:
    """Bug: a store set aside by one process was reported only by that process — the next Pi
    session and `status` said nothing."""
    state = isolated_dirs
    repo = make_repo(tmp_path / "repo")
    state.mkdir(parents=True, exist_ok=True)
    (state / "evidence.sqlite").write_bytes(b"damaged beyond repair" * 300)
    _cli(state, "evidence", "stats")  # another process meets the damage and sets it aside
    (event,) = _cli(state, "state", "list")

    for _ in range(2):  # each new session warns, once
        sidecar = Sidecar(state)
        sidecars.append(sidecar)
        view = sidecar.initialize(repo, f"s-{uuid.uuid4().hex[:6]}")
        (warning,) = [w for w in _warnings(view) if "set aside" in w]
        assert event["moved_to"] in warning and f"state acknowledge {event['id']}" in warning
        status = sidecar.call("status", {})
        assert [e["id"] for e in status["setAside"]] == [event["id"]]
        sidecar.shutdown()

    _cli(state, "state", "acknowledge", event["id"])
    sidecar = Sidecar(state)
    sidecars.append(sidecar)
    view = sidecar.initialize(repo, "after")
    assert not [w for w in _warnings(view) if "set aside" in w]
    assert sidecar.call("status", {})["setAside"] == []


def test_a_zero_byte_catalog_says_why_memory_is_off_and_restore_names_the_way_back(
    isolated_dirs: Path, tmp_path: Path, sidecars: list[Sidecar]
) -> None:
    """Bug: with catalog.sqlite truncated to 0 bytes, memory was "OFF — not registered" with no
    hint why. Now the off reason names the set-aside file, `state restore` and `scope import`."""
    state = isolated_dirs
    repo = make_repo(tmp_path / "repo")
    write_config(state, UNREACHABLE, f"test-{uuid.uuid4().hex[:8]}")
    register(state, repo)
    os.truncate(state / "catalog.sqlite", 0)

    sidecar = Sidecar(state)
    sidecars.append(sidecar)
    view = sidecar.initialize(repo, "s1")
    assert not view["enabled"]
    (event,) = sidecar.call("status", {})["setAside"]
    assert event["store"] == "catalog"
    assert event["moved_to"] in view["offReason"]
    assert f"state restore {event['id']}" in view["offReason"]
    assert "scope import" in view["offReason"]
    assert any("scope catalogue" in warning for warning in _warnings(view))


@pytest.mark.server
def test_a_restored_outbox_delivers_its_pending_requests(
    hindsight_server: Any, isolated_dirs: Path, tmp_path: Path, sidecars: list[Sidecar]
) -> None:
    """Requests waiting in an outbox that had to be set aside are not lost: `state restore`
    queues them again and they reach Hindsight (the real server)."""
    state = isolated_dirs
    repo = make_repo(tmp_path / "repo")
    bank_id = f"test-{uuid.uuid4().hex[:12]}"
    write_config(state, UNREACHABLE, bank_id)
    register(state, repo)
    session_id = f"restore-{uuid.uuid4().hex[:6]}"
    texts = [f"Pending request {n} {marker()}." for n in range(3)]
    sidecar = Sidecar(state)
    sidecars.append(sidecar)
    sidecar.initialize(repo, session_id)
    for text in texts:
        sidecar.turn(session_id, str(uuid.uuid4()), exchange(text))
    sidecar.shutdown()
    assert _cli(state, "outbox", "status")["pending"] == 3

    _damage_an_index(state / "outbox.sqlite", "items_by_state")
    status = _cli(state, "status", "--no-server")
    assert status["outbox"]["pending"] == 0  # a fresh outbox ...
    (event,) = status["setAside"]  # ... and the damaged one reported
    restored = _cli(state, "state", "restore", event["id"])
    assert (restored["added"], restored["unreadable"]) == (3, 0), restored

    write_config(state, str(hindsight_server.base_url), bank_id)
    drained = _cli(state, "outbox", "drain", "--timeout", "180")
    assert drained["drained"], drained
    turns = BankView(str(hindsight_server.base_url), bank_id).document_turns(
        f"pi-session-{session_id}"
    )
    assert [turn["content"] for turn in turns if turn["role"] == "user"] == texts
    assert _cli(state, "status", "--no-server")["setAside"] == []
