"""Memory over its whole life, end to end: the real Pi binary, our extension and sidecar, the real
Hindsight server and the stand-in models. A fact said before the location was registered reaches
a later session after seeding (from the command line, and from Pi's ``/hindsight:seed``, which
shows the plan and asks first); a forgotten record is never delivered again and the memo no longer
states it; a corrected record is not delivered and its correction is; another scope's id is
refused like an unknown one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.engine.scope import Scope
from pi_hindsight.engine.startup_memo import memo_id
from tests.plugins.pi import PiWorld, make_repo
from tests.support.pi_confirm import agree_to_command
from tests.support.pi_requests import memory_after, messages_of, requests_for
from tests.support.retain import BankView

pytestmark = [pytest.mark.server, pytest.mark.pi]

FACT = "Our production deploy target is the Zephyr cluster in Frankfurt."
QUESTION = "Where do we deploy production?"
RIGHT = "Production now deploys to the Nimbus cluster in Dublin."


@pytest.fixture(autouse=True)
def _patient_recall(pi_world: PiWorld) -> None:
    """A loaded machine (the suite, other servers) can make recall slower than its default bound;
    these tests are about what is delivered, not how fast."""
    path = pi_world.state_dir / "config.json"
    config = json.loads(path.read_text())
    config["recall"] = {"timeoutMs": 20_000}
    path.write_text(json.dumps(config))


def _memory_for(world: PiWorld, prompt: str) -> str:
    requests = requests_for(world, prompt)
    assert requests, f"no provider request for {prompt!r}"
    return memory_after(messages_of(requests[-1]), prompt) or ""


def _record_lines(memory: str) -> list[str]:
    """The records of a memory block, as their bare text."""
    lines = []
    for line in memory.splitlines():
        if line.startswith("- "):
            text = line[2:]
            if text.startswith("(") and ") " in text:
                text = text.split(") ", 1)[1]
            lines.append(text)
    return lines


def _recall_ids(world: PiWorld, repo: Path, query: str, needle: str) -> list[str]:
    found = json.loads(world.cli("memory", "recall", query, "--cwd", str(repo), "--json").stdout)
    records = found["records"]
    assert any(needle in record["text"] for record in records), records
    return [record["id"] for record in records]


def _scope(world: PiWorld, repo: Path) -> Scope:
    shown = json.loads(world.cli("scope", "show", str(repo), "--json").stdout)["scope"]
    return Scope(shown["scope_id"], shown["project_id"], shown["bank_id"], tuple(shown["tags"]))


def _memo(world: PiWorld, repo: Path, *, states: bool, wait_for: str | None = None) -> str:
    """The startup memo once it does (``states``) or does not state the fact: first after
    ``wait_for`` (an operation our code requested), then refreshing it again while Hindsight
    defers (a refresh waits for pending consolidation). The stand-in's memo is mechanical."""
    scope = _scope(world, repo)

    async def read() -> str:
        backend = HindsightBackend(world.base_url)
        try:
            operation = wait_for
            content = ""
            for _ in range(30):
                if operation is None:
                    operation = await backend.refresh_mental_model(
                        scope.bank_id, memo_id(scope), full=not states, timeout=30
                    )
                await backend.wait_operation(scope.bank_id, operation, timeout=120, call_timeout=10)
                model = await backend.get_mental_model(scope.bank_id, memo_id(scope), timeout=10)
                content = "" if model is None else model.content or ""
                if ("Zephyr" in content) == states:
                    return content
                operation = None
                await asyncio.sleep(1)
            raise AssertionError(f"the memo {'never' if states else 'still'} states it: {content}")
        finally:
            await backend.close()

    return asyncio.run(read())


def test_a_fact_said_before_registration_reaches_a_later_session_after_seeding(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "alpha", "https://example.com/team/seed-e2e.git")
    pi_world.run(repo, FACT)  # not registered: memory is off, but Pi keeps the session
    (earlier,) = (pi_world.agent_dir / "sessions").glob("*/*.jsonl")
    pi_world.register(repo)

    plan = json.loads(
        pi_world.cli("scope", "seed", str(repo), "--sessions", "--dry-run", "--json").stdout
    )
    assert (plan["sessions"], plan["requests"]) == (1, 1)
    applied = json.loads(pi_world.cli("scope", "seed", str(repo), "--sessions", "--json").stdout)
    assert applied["queued"] == plan["items"] and applied["delivery"]["done"] == plan["items"]
    assert applied["queuedCharacters"] == plan["characters"]
    again = json.loads(pi_world.cli("scope", "seed", str(repo), "--sessions", "--json").stdout)
    assert again["items"] == 0 and again["skipped"] == {"seeded": 1}

    pi_world.run(repo, QUESTION)
    memory = _memory_for(pi_world, QUESTION)
    assert "Zephyr" in memory
    # The same document a live session would have made: the session's, with its turns.
    turns = BankView(pi_world.base_url, pi_world.bank_id).document_turns(
        f"pi-session-{earlier.stem.split('_', 1)[1]}"
    )
    assert [turn["role"] for turn in turns] == ["user", "assistant"]
    assert turns[0]["content"] == FACT


def test_pi_seeds_with_its_command_only_after_showing_the_plan_and_asking(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "gamma", "https://example.com/team/seed-command.git")
    pi_world.run(repo, FACT)  # not registered: memory is off, but Pi keeps the session
    pi_world.register(repo)

    def seeded() -> dict[str, Any]:
        plan = pi_world.cli("scope", "seed", str(repo), "--sessions", "--dry-run", "--json")
        data: dict[str, Any] = json.loads(plan.stdout)
        return data

    # Without a UI the command shows the plan and sends nothing.
    shown = pi_world.run(repo, "/hindsight:seed sessions")
    said = shown.stdout + shown.stderr
    assert "sessions: 1 to send (1 requests)" in said and "Not sent" in said
    assert seeded()["sessions"] == 1  # still to send

    ask = agree_to_command(
        pi_world,
        repo,
        "/hindsight:seed sessions",
        lambda said: "queued 1 item(s)" in said,
        "the queued report",
    )
    assert "1 earlier session(s)" in ask["title"]
    assert "sessions: 1 to send (1 requests)" in ask["message"]
    pi_world.drain()
    again = seeded()
    assert again["items"] == 0 and again["skipped"].get("seeded") == 1


def test_forget_deletes_the_source_and_the_memo_stops_stating_it(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "beta", "https://example.com/team/forget-e2e.git")
    config_path = pi_world.state_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["memo"] = {"minRefreshIntervalSeconds": 0}  # every refresh runs, none is skipped
    config_path.write_text(json.dumps(config))
    pi_world.register(repo)
    pi_world.run(repo, FACT)
    pi_world.drain()
    # The memo (created now if the first request did not) states the fact once refreshed.
    refreshed = json.loads(
        pi_world.cli("memory", "refresh-memo", "--cwd", str(repo), "--json").stdout
    )
    _memo(pi_world, repo, states=True, wait_for=refreshed["operationId"])
    record = _recall_ids(pi_world, repo, "Zephyr deploy target", "Zephyr")[0]

    dry = pi_world.cli("memory", "forget", record, "--cwd", str(repo)).stdout
    assert "DRY RUN: nothing was deleted" in dry and "document pi-session-" in dry
    applied = json.loads(
        pi_world.cli("memory", "forget", record, "--cwd", str(repo), "--apply", "--json").stdout
    )
    assert applied["applied"] is True
    assert sum(applied["deletedUnits"].values()) >= 1

    assert applied["memoOperationId"]
    _memo(pi_world, repo, states=False, wait_for=applied["memoOperationId"])
    pi_world.run(repo, QUESTION)
    assert "Zephyr" not in _memory_for(pi_world, QUESTION)
    status = json.loads(pi_world.cli("status", "--cwd", str(repo), "--no-server", "--json").stdout)
    assert status["lifecycle"] == {"corrections": 0, "forgottenDocuments": 1}


def test_a_corrected_record_is_not_delivered_and_the_correction_is(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "gamma", "https://example.com/team/correct-e2e.git")
    pi_world.register(repo)
    pi_world.run(repo, FACT)
    pi_world.drain()
    pi_world.run(repo, QUESTION)
    assert FACT in _record_lines(_memory_for(pi_world, QUESTION))
    records = _recall_ids(pi_world, repo, "Zephyr deploy target", "Zephyr")

    for record in records:  # the fact and its observation: both say it
        pi_world.cli("memory", "correct", record, RIGHT, "--cwd", str(repo))
    pi_world.drain()  # the correction note reaches Hindsight

    follow_up = "Where do we deploy production now?"
    pi_world.run(repo, follow_up)
    memory = _memory_for(pi_world, follow_up)
    assert FACT not in _record_lines(memory), memory
    assert "Nimbus" in memory
    listed = pi_world.cli("memory", "corrections", "--cwd", str(repo)).stdout
    assert f"{len(records)} correction(s) in force" in listed
    status = pi_world.cli("status", "--cwd", str(repo), "--no-server").stdout
    assert f"{len(records)} correction" in status and "in force" in status

    pi_world.cli("memory", "corrections", "--remove", records[0], "--cwd", str(repo))
    listed = pi_world.cli("memory", "corrections", "--cwd", str(repo)).stdout
    assert records[0] not in listed


def test_another_scopes_record_is_refused_like_an_unknown_one(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    alpha = make_repo(tmp_path / "alpha", "https://example.com/team/refuse-a.git")
    other = make_repo(tmp_path / "other", "https://example.com/team/refuse-b.git")
    pi_world.register(alpha)
    pi_world.register(other)
    pi_world.run(alpha, FACT)
    pi_world.drain()
    record = _recall_ids(pi_world, alpha, "Zephyr deploy target", "Zephyr")[0]

    answers: dict[str, Any] = {}
    for name, record_id in (
        ("foreign", record),
        ("unknown", "00000000-0000-4000-8000-000000000000"),
    ):
        for action in (("forget", record_id, "--apply"), ("correct", record_id, RIGHT)):
            done = pi_world.cli("memory", *action, "--cwd", str(other), check=False)
            assert done.returncode == 1 and "Traceback" not in done.stderr
            answers[f"{name}-{action[0]}"] = done.stdout.replace(record_id, "ID")
    assert answers["foreign-forget"] == answers["unknown-forget"]
    assert answers["foreign-correct"] == answers["unknown-correct"]
    assert "is not a memory of this scope" in answers["foreign-forget"]
    # Nothing was deleted: the record is still there in its own scope.
    assert record in _recall_ids(pi_world, alpha, "Zephyr deploy target", "Zephyr")
