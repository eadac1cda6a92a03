"""Budgets and timeouts of delivery against the real server, through the real sidecar process."""

from __future__ import annotations

import asyncio
import json
import random
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.backend.resources import BankMissions, RetainItem
from pi_hindsight.engine.memory_block import estimate_tokens
from pi_hindsight.engine.scope import USER_SCOPE_TAGS
from tests.plugins.pi import LoopbackListener, make_repo
from tests.support.retain import register
from tests.support.sidecar import Sidecar

pytestmark = pytest.mark.server

PROJECT = "example.com/team/budgets"
WORDS = [
    "deploy",
    "cluster",
    "zephyr",
    "cache",
    "schema",
    "migration",
    "rollback",
    "feature",
    "flag",
    "billing",
    "queue",
    "worker",
]


def _corpus(rng: random.Random, count: int) -> list[str]:
    texts = []
    for index in range(count):
        length = rng.choice([6, 12, 40, 120, 400])
        words = " ".join(rng.choice(WORDS) for _ in range(length))
        texts.append(f"Note {index}: the team decided {words} ünïcödé ✓.")
    return texts


async def _seed(base_url: str, bank: str, user_bank: str) -> None:
    rng = random.Random(5)
    backend = HindsightBackend(base_url)
    try:
        for name in (bank, user_bank):
            await backend.create_bank(name, BankMissions(mission="budget test"), timeout=30)
        operations: list[tuple[str, str]] = []
        for target, tags, texts in (
            (bank, (f"project:{PROJECT}",), _corpus(rng, 40)),
            (user_bank, USER_SCOPE_TAGS, _corpus(rng, 20)),
        ):
            for text in texts:
                accepted = await backend.retain(
                    target,
                    [RetainItem(content=text, document_id=uuid.uuid4().hex, tags=tags)],
                    operation_id=str(uuid.uuid4()),
                    timeout=30,
                )
                assert accepted.operation_id
                operations.append((target, accepted.operation_id))
        for target, operation_id in operations:
            for _ in range(600):
                status = await backend.operation_status(target, operation_id, timeout=10)
                if status.state == "completed":
                    break
                await asyncio.sleep(0.2)
            else:
                raise AssertionError("seeding did not complete")
    finally:
        await backend.close()


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"\n## ", text)
    return {part.split("\n", 1)[0]: part for part in parts[1:]}


def test_budgets_are_never_exceeded_across_a_varied_corpus(
    hindsight_server: Any, tmp_path: Path
) -> None:
    bank, user_bank = f"budget-{uuid.uuid4().hex[:8]}", f"budget-user-{uuid.uuid4().hex[:8]}"
    asyncio.run(_seed(hindsight_server.base_url, bank, user_bank))
    repo = make_repo(tmp_path / "repo", f"https://{PROJECT}.git")
    configs = [
        {"maxTokens": 800, "requestMaxTokens": 1600},
        {"maxTokens": 300, "userMaxTokens": 100, "requestMaxTokens": 350},
        {"maxTokens": 2000, "userMaxTokens": 1500, "requestMaxTokens": 900},
        {"maxTokens": 120, "userMaxTokens": 0, "requestMaxTokens": 5000},
    ]
    queries = [
        "How do we deploy?",
        "What about billing and the queue?",
        "schema migration rollback",
        "cache",
    ]
    checked = 0
    for index, recall in enumerate(configs):
        state = tmp_path / f"state-{index}"
        state.mkdir()
        (state / "config.json").write_text(
            json.dumps(
                {
                    "hindsight": {"baseUrl": hindsight_server.base_url},
                    "profile": "project+user",
                    "banks": {"project": {"bankId": bank}, "user": {"bankId": user_bank}},
                    "recall": {**recall, "skipTrivial": False},
                    "memo": {"enabled": False},
                }
            )
        )
        register(state, repo)
        sidecar = Sidecar(state)
        try:
            assert sidecar.initialize(repo, f"s{index}")["enabled"] is True
            for number, query in enumerate(queries):
                sidecar.send(
                    {
                        "jsonrpc": "2.0",
                        "id": 10 + number,
                        "method": "prepareMemory",
                        "params": {
                            "requestId": f"r{index}-{number}",
                            "prompt": query,
                            "sessionId": f"s{index}",
                        },
                    }
                )
                result = sidecar.read()["result"]
                if result["message"] is None:
                    continue
                text = result["message"]["content"]
                assert estimate_tokens(text) <= recall["requestMaxTokens"]
                sections = _sections(text)
                project = next(
                    (body for title, body in sections.items() if title.startswith("Project")), ""
                )
                user = next(
                    (body for title, body in sections.items() if title.startswith("User")), ""
                )
                assert estimate_tokens(project) <= recall["maxTokens"] + 2
                assert (
                    estimate_tokens(user)
                    <= recall.get("userMaxTokens", recall["maxTokens"] // 2) + 2
                )
                checked += 1
        finally:
            sidecar.close()
    assert checked >= len(configs) * 2  # memory was delivered in most cases: the bounds were tested


def test_recall_respects_its_timeout_and_a_cancel_ends_it_at_once(
    black_hole: LoopbackListener, tmp_path: Path
) -> None:
    """Regression: a hung server must never hold the prompt beyond recall.timeoutMs, and the
    host's cancel must end the call immediately (not after the timeout)."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "config.json").write_text(
        json.dumps({"hindsight": {"baseUrl": black_hole.url}, "recall": {"timeoutMs": 1500}})
    )
    repo = make_repo(tmp_path / "repo", "https://example.com/team/hung.git")
    register(state, repo)
    sidecar = Sidecar(state)
    try:
        sidecar.initialize(repo)
        started = time.monotonic()
        sidecar.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "prepareMemory",
                "params": {"requestId": "r1", "prompt": "How do we deploy?", "sessionId": "s"},
            }
        )
        answer = sidecar.read()
        elapsed = time.monotonic() - started
        assert answer["result"]["outcome"] == "backend_unavailable"
        # Ended by recall's own timeout (the reason says so) — not by the hung server, which
        # never answers; and not before it started waiting.
        assert "timed out after 1.5s" in answer["result"]["reason"]
        assert elapsed >= 0.5
        sidecar.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "prepareMemory",
                "params": {"requestId": "r2", "prompt": "How do we deploy?", "sessionId": "s"},
            }
        )
        time.sleep(0.2)
        sidecar.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 3}})
        answer = sidecar.read()
        # -32800 (cancelled), not a backend_unavailable result: the cancel ended the call before
        # recall's own timeout did (a timing figure would only add noise on a loaded machine).
        assert answer["id"] == 3 and answer["error"]["code"] == -32800
    finally:
        sidecar.close()
    outcomes = subprocess.run(
        [
            sys.executable,
            "-m",
            "pi_hindsight",
            "evidence",
            "list",
            "--json",
            "--state-dir",
            str(state),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    records = {record["requestId"]: record for record in json.loads(outcomes.stdout)["records"]}
    assert records["r1"]["outcome"] == "backend_unavailable"
    assert records["r2"]["outcome"] == "skipped" and "cancel" in records["r2"]["reason"]
