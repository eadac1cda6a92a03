"""End to end with the real Pi, the real server and the stand-in model: what memory spends is
shown as the server recorded it, and a token budget pauses automatic retain without losing
anything (docs/operations.md, "Cost").

The stand-in reports usage in every answer (characters / 4) and logs it with the request; the
server records what the answer reported. The server is shared by the session's tests, so the
stand-in's log is narrowed to this test's requests by a marker only this test's requests carry.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.pi import PiWorld, make_repo

pytestmark = [pytest.mark.server, pytest.mark.pi]

EXTRACTION = "retain_extract_facts"


def _standin_log(server: object) -> list[dict[str, Any]]:
    url = getattr(server, "standin_url", None)
    if not url:
        pytest.skip("the server is not this run's (no stand-in log to compare with)")
    with urllib.request.urlopen(f"{url}/_standin/requests?role=hindsight", timeout=30) as answer:  # noqa: S310 - loopback
        entries: list[dict[str, Any]] = json.loads(answer.read())
    return entries


def _extractions(server: object, marker: str) -> list[dict[str, Any]]:
    return [
        entry
        for entry in _standin_log(server)
        if entry.get("kind") == EXTRACTION and marker in json.dumps(entry.get("body"))
    ]


def _json(world: PiWorld, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(world.cli(*args, "--json").stdout)
    return found


def _configure(world: PiWorld, **retain: object) -> None:
    path = world.state_dir / "config.json"
    config = json.loads(path.read_text())
    config["retain"] = {**config.get("retain", {}), **retain}
    path.write_text(json.dumps(config))


def _operation(usage: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(o for o in usage["operations"] if o["operation"] == name)
    return found


def test_usage_matches_the_models_own_log_and_status_carries_the_day(
    pi_world: PiWorld, hindsight_server: object, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "spend", "https://example.com/team/spend.git")
    pi_world.register(repo)
    marker = f"Quasar{uuid.uuid4().hex[:8]}"
    prompts = [
        f"The {marker} {name} service listens on port {port}."
        for name, port in (("billing", 8081), ("search", 8082), ("auth", 8083))
    ]
    for prompt in prompts:
        pi_world.run(repo, prompt)
    pi_world.drain()

    # The server writes its records in batches (every half second): wait until they are in and
    # the model's log and the server's count agree (Hindsight may extract several requests in
    # one call, so the number of calls is the model's, not the number of requests).
    deadline = time.monotonic() + 120
    while True:
        logged = _extractions(hindsight_server, marker)
        usage = _json(pi_world, "usage", "--period", "1d", "--cwd", str(repo))
        retain = _operation(usage, "retain extraction")
        if (logged and retain["calls"] == len(logged)) or time.monotonic() > deadline:
            break
        time.sleep(1)

    bodies = " ".join(json.dumps(entry["body"]) for entry in logged)
    assert any(prompt in bodies for prompt in prompts), "no retained request reached the model"
    assert retain["calls"] == len(logged), (retain, [e["usage"] for e in logged])
    assert retain["tokensReported"] is True
    assert retain["inputTokens"] == sum(e["usage"]["prompt_tokens"] for e in logged)
    assert retain["outputTokens"] == sum(e["usage"]["completion_tokens"] for e in logged)
    assert retain["totalTokens"] == sum(e["usage"]["total_tokens"] for e in logged)
    # The day's chart and the operations add up to the total.
    total = usage["total"]
    assert sum(day["calls"] for day in usage["days"]) == total["calls"]
    assert sum(o["calls"] for o in usage["operations"]) == total["calls"]

    status = _json(pi_world, "status", "--cwd", str(repo))
    spend = status["spend"]["spend"]
    assert spend["calls"] >= total["calls"]  # consolidation may have run on since
    assert spend["totalTokens"] >= total["totalTokens"]
    again = _json(pi_world, "usage", "--period", "1d", "--cwd", str(repo))["total"]
    assert spend["calls"] <= again["calls"]
    text = pi_world.cli("status", "--cwd", str(repo)).stdout
    assert "spend:   last 24 h: " in text and "model call" in text


def test_a_tiny_budget_pauses_retain_and_raising_it_drains_each_request_once(
    pi_world: PiWorld, hindsight_server: object, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "ceiling", "https://example.com/team/ceiling.git")
    pi_world.register(repo)
    _configure(pi_world, dailyTokenBudget=1)
    first = f"Nebula{uuid.uuid4().hex[:8]}"
    pi_world.run(repo, f"The {first} queue is drained by the nightly job.")
    pi_world.drain()  # the bank had spent nothing: the first request went through

    held = [f"Comet{uuid.uuid4().hex[:8]}" for _ in range(3)]
    for marker in held:
        pi_world.run(repo, f"The {marker} cache expires after ten minutes.")
    outbox = _json(pi_world, "outbox", "status")
    assert outbox["pending"] == len(held), outbox
    assert all(not _extractions(hindsight_server, marker) for marker in held)
    status = _json(pi_world, "status", "--cwd", str(repo))
    assert "paused by budget" in (status["retain"]["paused"] or "")
    text = pi_world.cli("status", "--cwd", str(repo)).stdout
    assert "PAUSED: paused by budget since" in text and "outbox resume" in text

    _configure(pi_world, dailyTokenBudget=1_000_000_000)
    pi_world.run(repo, "thanks!")  # a new session reads the raised budget; this one is skipped
    pi_world.drain()
    assert _json(pi_world, "outbox", "status")["pending"] == 0
    for marker in held:
        assert len(_extractions(hindsight_server, marker)) == 1, marker
    skipped = _json(pi_world, "outbox", "skipped")["skipped"]
    assert [entry["reason"] for entry in skipped][:1] == ["acknowledgement"]
