"""A Hindsight outage while Pi keeps working: nothing is lost, the conversation is not slowed,
and everything is delivered in order once the server is back.

The test starts its own server (a second launcher instance in its own state dir, on a fixed
port) so it can stop and restart it without disturbing the session-wide server other tests use.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.launcher import ServerInfo, start_server, stop_server
from tests.plugins.hindsight_server import SERVER_URL_ENV, llm_mode_for_tests
from tests.plugins.pi import make_repo
from tests.support.retain import (
    BankView,
    exchange,
    marker,
    register,
    wait_until_delivered,
    write_config,
)
from tests.support.sidecar import Sidecar
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.server]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def private_server(
    tmp_path_factory: pytest.TempPathFactory, hindsight_system_dir: Path
) -> Iterator[tuple[Path, ServerInfo]]:
    if os.environ.get(SERVER_URL_ENV):
        pytest.skip("needs a server the test can stop and start itself")
    state = tmp_path_factory.mktemp("outage-server")
    info = start_server(
        state, llm=llm_mode_for_tests(), port=_free_port(), system_dir=hindsight_system_dir
    )
    try:
        yield state, info
    finally:
        stop_server(state)


def _timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def test_an_outage_loses_nothing_slows_nothing_and_delivers_in_order_afterwards(
    private_server: tuple[Path, ServerInfo],
    hindsight_system_dir: Path,
    isolated_dirs: Path,
    tmp_path: Path,
) -> None:
    server_state, info = private_server
    bank = BankView(info.base_url, f"test-{uuid.uuid4().hex[:12]}")
    repo = make_repo(tmp_path / "repo")
    write_config(isolated_dirs, info.base_url, bank.bank_id)
    register(isolated_dirs, repo)
    a, b = f"outage-a-{uuid.uuid4().hex[:6]}", f"outage-b-{uuid.uuid4().hex[:6]}"
    texts = {a: [f"Before the outage {i} {marker()}." for i in range(3)], b: []}
    first = Sidecar(isolated_dirs)
    second: Sidecar | None = None
    try:
        bounds = first.initialize(repo, a)["timeouts"]
        for text in texts[a]:
            first.turn(a, str(uuid.uuid4()), exchange(text))
        wait_until_delivered(first)

        stop_server(server_state)
        second = Sidecar(isolated_dirs)
        second.initialize(repo, b)
        slowest_turn = slowest_prepare = 0.0
        outcomes = set()
        for i in range(12):
            for session, sidecar in ((a, first), (b, second)):
                text = f"During the outage {i} in {session} {marker()}."
                texts[session].append(text)
                prepared, took = _timed(
                    lambda s=session, sc=sidecar, t=text: sc.call(
                        "prepareMemory",
                        {"requestId": str(uuid.uuid4()), "prompt": t, "sessionId": s},
                    )
                )
                loading = "memory was still loading" in (prepared.get("reason") or "")
                # A session's first request on a loaded machine may find memory still loading
                # (bounded like recall): it goes on without memory, like an unreachable server.
                outcomes.add("backend_unavailable" if loading else prepared["outcome"])
                slowest_prepare = max(slowest_prepare, took)
                answer, took = _timed(
                    lambda s=session, sc=sidecar, t=text: sc.turn(s, str(uuid.uuid4()), exchange(t))
                )
                assert answer["queued"] == 1
                slowest_turn = max(slowest_turn, took)
        assert outcomes == {"backend_unavailable"}
        # Bounds the protocol itself sets (not speed figures): recall gives up within its own
        # timeout, well inside the shim's prepareMs, and committing a turn never waits for the
        # network, so it stays inside the shim's turnMs even on a loaded machine.
        assert slowest_prepare < bounds["prepareMs"] / 1000, f"prepare took {slowest_prepare:.2f}s"
        assert slowest_turn < bounds["turnMs"] / 1000, f"turnCompleted took {slowest_turn:.2f}s"
        # Every turn of the outage waits in the outbox, and a worker met the outage (it is
        # offline, probing, until the server is back: the restart below takes a while).
        wait_until(
            lambda: (
                (box := first.call("status", {})["outbox"])["lastError"]
                and box["pending"] + box["submitted"] >= 24
            ),
            "the outage's turns waiting in the outbox, after a failed delivery",
            details=lambda: str(first.call("status", {})["outbox"]),
        )
        # Pi exits promptly even though nothing can be delivered; the next sidecar delivers.
        _, took = _timed(second.shutdown)
        assert took < bounds["shutdownMs"] / 1000 + 2, f"shutdown took {took:.2f}s in the outage"

        restart = start_server(
            server_state, llm=llm_mode_for_tests(), port=info.port, system_dir=hindsight_system_dir
        )
        assert restart.base_url == info.base_url
        back = time.monotonic()
        wait_until_delivered(first, timeout=120)
        delivered_after = time.monotonic() - back
        first.shutdown()
    finally:
        first.close()
        if second is not None:
            second.close()

    for session in (a, b):
        turns = bank.document_turns(f"pi-session-{session}")
        assert [t["content"] for t in turns if t["role"] == "user"] == texts[session]
    assert delivered_after < 60, f"delivery resumed only {delivered_after:.0f}s after the restart"
