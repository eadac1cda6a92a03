"""Durable retain against the real Hindsight: crashes, concurrent sidecars, damaged outbox files,
and what must never be retained. Sidecars are real processes driven over stdio like the shim.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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
from tests.support.sidecar import Sidecar, SidecarGone

pytestmark = [pytest.mark.server]


@dataclass
class World:
    state_dir: Path
    repo: Path
    bank: BankView

    def sidecar(self, session_id: str) -> Sidecar:
        sidecar = Sidecar(self.state_dir)
        sidecar.initialize(self.repo, session_id)
        return sidecar


@pytest.fixture
def world(hindsight_server: Any, isolated_dirs: Path, tmp_path: Path) -> World:
    base_url = str(hindsight_server.base_url)
    bank_id = f"test-{uuid.uuid4().hex[:12]}"
    repo = make_repo(tmp_path / "repo")
    write_config(isolated_dirs, base_url, bank_id)
    register(isolated_dirs, repo)
    return World(isolated_dirs, repo, BankView(base_url, bank_id))


@pytest.fixture
def sidecars() -> Iterator[list[Sidecar]]:
    """Every sidecar a test starts; all are killed at the end, whatever happened."""
    started: list[Sidecar] = []
    yield started
    for sidecar in started:
        sidecar.close()


def _user_texts(world: World, session_id: str) -> list[str]:
    turns = world.bank.document_turns(f"pi-session-{session_id}")
    return [turn["content"] for turn in turns if turn["role"] == "user"]


def _drive_with_crashes(
    world: World,
    session_id: str,
    requests: list[tuple[str, str]],
    rng: random.Random,
    sidecars: list[Sidecar],
) -> int:
    """Send every request, killing the sidecar (-9) at random moments; a request not
    acknowledged before a kill is sent again to the next sidecar (the same request id).

    The clock starts once the session is initialized: each sidecar commits turns and delivers
    before its kill. (Started at ``ready``, a loaded machine's slow ``initialize`` ran it out:
    hundreds of sidecars were killed before their first turn, minutes of starts.)"""
    pending = deque(requests)
    kills = 0
    while pending:
        sidecar = Sidecar(world.state_dir)
        sidecars.append(sidecar)
        timer = threading.Timer(rng.uniform(0.2, 1.5), sidecar.kill)
        try:
            sidecar.initialize(world.repo, session_id)
            timer.start()
            while pending:
                request_id, text = pending[0]
                answer = sidecar.turn(session_id, request_id, exchange(text))
                assert answer == {"queued": 1, "notices": []}, answer
                pending.popleft()
                time.sleep(rng.uniform(0.0, 0.03))
        except (SidecarGone, AssertionError):
            # Only our kill ends a sidecar here: anything else is a real failure.
            if sidecar.process.wait(timeout=10) != -9:
                raise
            kills += 1
        finally:
            timer.cancel()
    return kills


def test_kill_9_at_random_points_loses_and_duplicates_nothing(
    world: World, sidecars: list[Sidecar]
) -> None:
    rng = random.Random(20261129)
    sessions = {
        f"crash-{name}-{uuid.uuid4().hex[:6]}": [
            (str(uuid.uuid4()), f"Request {n} of session {name} carries marker {marker()}.")
            for n in range(100)
        ]
        for name in ("a", "b")
    }
    kills: list[int] = []

    def drive(session_id: str, requests: list[tuple[str, str]], seed: float) -> None:
        kills.append(
            _drive_with_crashes(world, session_id, requests, random.Random(seed), sidecars)
        )

    threads = [
        threading.Thread(target=drive, args=(session, requests, rng.random()))
        for session, requests in sessions.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert len(kills) == 2, "a driver thread failed; see the output above"
    # Crash the workers a few more times while they deliver (mid-submit, mid-confirmation).
    for _ in range(4):
        sidecar = world.sidecar("drainer")
        sidecars.append(sidecar)
        time.sleep(rng.uniform(0.3, 1.2))
        sidecar.kill()
    assert sum(kills) + 4 >= 6
    final = world.sidecar("drainer")
    sidecars.append(final)
    outbox = wait_until_delivered(final)
    final.shutdown()

    assert outbox["dead"] == 0, outbox
    assert outbox_status(world.state_dir)["done"] == 200  # each request enqueued once
    for session_id, requests in sessions.items():
        # Exactly once and in order: the session document holds each request's turn once.
        assert _user_texts(world, session_id) == [text for _, text in requests]
    memories = [m for m in world.bank.memories() if m["fact_type"] in ("world", "experience")]
    for requests in sessions.values():
        for _, text in requests:
            tag = text.rsplit(" ", 1)[-1].rstrip(".")
            carrying = [m for m in memories if tag in m["text"]]
            assert len(carrying) == 1, (tag, carrying)


def test_four_sidecars_share_one_outbox_without_double_delivery_or_lock_errors(
    world: World, sidecars: list[Sidecar]
) -> None:
    sessions = {f"conc-{n}-{uuid.uuid4().hex[:6]}": n for n in range(4)}
    for session_id in sessions:
        sidecars.append(world.sidecar(session_id))
    texts = {
        session_id: [f"Concurrent request {i} in {session_id} {marker()}." for i in range(25)]
        for session_id in sessions
    }
    answers: dict[str, list[Any]] = {session_id: [] for session_id in sessions}

    def drive(sidecar: Sidecar, session_id: str) -> None:
        for text in texts[session_id]:
            started = time.monotonic()
            answer = sidecar.turn(session_id, str(uuid.uuid4()), exchange(text))
            answers[session_id].append((answer, time.monotonic() - started))

    threads = [
        threading.Thread(target=drive, args=(sidecar, session_id))
        for sidecar, session_id in zip(sidecars, sessions, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    for session_id in sessions:
        assert [answer for answer, _ in answers[session_id]] == [{"queued": 1, "notices": []}] * 25
    wait_until_delivered(sidecars[0])
    for sidecar in sidecars:
        sidecar.shutdown()
    for session_id in sessions:
        assert _user_texts(world, session_id) == texts[session_id]
    for sidecar in sidecars:
        assert "locked" not in sidecar.stderr and "Traceback" not in sidecar.stderr
    assert outbox_status(world.state_dir)["done"] == 100


def _garbage(path: Path) -> None:
    path.write_bytes(b"definitely not a database " * 200)


def _foreign(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE notes (x)")
    connection.execute("INSERT INTO notes VALUES ('keep me')")
    connection.commit()
    connection.close()


@pytest.mark.parametrize("damage", [_garbage, _foreign], ids=["corrupted", "foreign"])
def test_a_damaged_outbox_is_set_aside_with_a_warning_and_a_fresh_one_works(
    world: World, sidecars: list[Sidecar], damage: Any
) -> None:
    session_id = f"aside-{uuid.uuid4().hex[:6]}"
    before, after = f"Before the damage {marker()}.", f"After the damage {marker()}."
    first = world.sidecar(session_id)
    sidecars.append(first)
    first.turn(session_id, str(uuid.uuid4()), exchange(before))
    wait_until_delivered(first)
    first.shutdown()
    outbox_file = world.state_dir / "outbox.sqlite"
    for leftover in world.state_dir.glob("outbox.sqlite-*"):
        leftover.unlink()
    outbox_file.unlink()
    damage(outbox_file)

    second = Sidecar(world.state_dir)
    sidecars.append(second)
    view = second.initialize(world.repo, session_id)
    warnings = [n["message"] for n in view["notices"] if n["level"] == "warning"]
    assert any("set aside" in message and "outbox" in message for message in warnings), warnings
    status = second.call("status", {})
    assert status["outbox"]["setAside"]["movedTo"].startswith(str(outbox_file))
    assert second.turn(session_id, str(uuid.uuid4()), exchange(after))["queued"] == 1
    wait_until_delivered(second)
    second.shutdown()

    assert _user_texts(world, session_id) == [before, after]  # Hindsight's copy is untouched
    kept = list(world.state_dir.glob("outbox.sqlite.corrupt-*"))
    assert len([path for path in kept if not path.name.endswith(("-wal", "-shm"))]) == 1


SECRETS = {
    "npm": "npm_" + "Qw3rTy" * 6,
    "hindsight": "hsk_3f9a1c7e5b2d8046a9e1f3c5b7d90e42",  # token_hex(16)-shaped, not a placeholder
    "env": "s3cr3t-Pa55word-42",
    "bearer": "Zx9Qm4Tr7Kp2Wv8Ln5Hs3Jd6",  # random-looking: a short repeat reads as a placeholder
    "url": "dbPa55w0rd",
}
PRIVATE_KEY_BODY = "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu"


def test_injected_memory_memory_tools_summaries_and_secrets_never_reach_hindsight(
    world: World, sidecars: list[Sidecar]
) -> None:
    session_id = f"content-{uuid.uuid4().hex[:6]}"
    spoken = f"Keep the release notes short {marker()}."
    injected, tool_output, summary = marker(), marker(), marker()
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": f"{spoken} My npm token is {SECRETS['npm']} and the Hindsight key is "
            f"{SECRETS['hindsight']}.\nDB_PASSWORD={SECRETS['env']}\n"
            f"-----BEGIN RSA PRIVATE KEY-----\n{PRIVATE_KEY_BODY}\n"
            "-----END RSA PRIVATE KEY-----",
        },
        {
            "role": "custom",
            "customType": "hindsight-memory",
            "content": f"<hindsight-memory scope='x'>{injected} remembered</hindsight-memory>",
            "display": False,
        },
        {"role": "user", "content": f"<hindsight-memory scope='x'>{injected}</hindsight-memory>"},
        {"role": "compactionSummary", "summary": f"summary {summary}", "tokensBefore": 5},
        {
            "role": "user",
            "content": "The conversation history before this point was compacted into the "
            f"following summary:\n\n<summary>\nThe user said {summary}\n</summary>",
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking it up."},
                {
                    "type": "toolCall",
                    "id": "t1",
                    "name": "hindsight_memory",
                    "arguments": {"query": tool_output},
                },
                {
                    "type": "toolCall",
                    "id": "t2",
                    "name": "bash",
                    "arguments": {
                        "command": f"curl -H 'Authorization: Bearer {SECRETS['bearer']}'"
                    },
                },
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "t1",
            "toolName": "hindsight_memory",
            "content": [{"type": "text", "text": f"memory says {tool_output}"}],
            "isError": False,
        },
        {
            "role": "toolResult",
            "toolCallId": "t2",
            "toolName": "bash",
            "content": [{"type": "text", "text": f"postgres://app:{SECRETS['url']}@db/x"}],
            "isError": False,
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done, notes kept short."}]},
    ]
    # Keep every tool result and call argument, so only the memory-tool rule and redaction stop
    # them (the defaults would drop them anyway).
    write_config(
        world.state_dir,
        world.bank.base_url,
        world.bank.bank_id,
        retain={"toolCalls": "arguments", "toolResults": "all"},
    )
    sidecar = world.sidecar(session_id)
    sidecars.append(sidecar)
    assert sidecar.turn(session_id, str(uuid.uuid4()), messages)["queued"] == 1
    wait_until_delivered(sidecar)
    sidecar.shutdown()

    held = world.bank.everything([f"pi-session-{session_id}"])
    assert spoken in held and "Done, notes kept short." in held
    for forbidden in (injected, tool_output, summary, PRIVATE_KEY_BODY, *SECRETS.values()):
        assert forbidden not in held, forbidden
    assert "[REDACTED:npm_token]" in held and "(used tool bash" in held
