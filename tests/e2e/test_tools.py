"""The agent's tools end to end: the stand-in model calls them through the real Pi; the real
server answers; the sidecar is restarted between sessions (a new Pi process each time)."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.engine.scope import USER_SCOPE_TAGS
from tests.plugins.pi import PiWorld, make_repo
from tests.support.pi_requests import FACT, last_tool_result, script_tool_call

pytestmark = [pytest.mark.server, pytest.mark.pi]

REMOTE = "https://example.com/team/tools.git"
TAGS = ("project:example.com/team/tools",)


def _configure(world: PiWorld, **extra: Any) -> None:
    path = world.state_dir / "config.json"
    config = json.loads(path.read_text())
    config.update(extra)
    path.write_text(json.dumps(config))


@pytest.fixture
def tools_repo(pi_world: PiWorld, tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "tools", REMOTE)
    pi_world.register(repo)
    pi_world.run(repo, FACT)
    pi_world.drain()
    return repo


@pytest.mark.pi_both("tool-params")
def test_recall_searches_further_inside_the_scope_only(pi_world: PiWorld, tools_repo: Path) -> None:
    script_tool_call(
        pi_world,
        "search memory",
        "hindsight_memory",
        {"action": "recall", "query": "deploy target"},
    )
    pi_world.run(tools_repo, "Please search memory for the deploy target.")
    result = last_tool_result(pi_world)
    assert "Zephyr" in result and "reference material" in result
    # A call that tries to widen the scope is refused (tags are not a parameter).
    script_tool_call(
        pi_world,
        "widen",
        "hindsight_memory",
        {"action": "recall", "query": "deploy", "tags": ["project:other"]},
    )
    pi_world.run(tools_repo, "Please widen the search.")
    refused = last_tool_result(pi_world)
    assert "Zephyr" not in refused and ("tags" in refused or "additional" in refused.lower())


def test_reflect_answers_with_only_the_evidence_ids_the_backend_returned(
    pi_world: PiWorld, tools_repo: Path
) -> None:
    script_tool_call(
        pi_world,
        "think about",
        "hindsight_memory",
        {"action": "reflect", "query": "Where do we deploy?"},
    )
    pi_world.run(tools_repo, "Please think about our deployment.")
    result = last_tool_result(pi_world)
    assert "Synthesised by Hindsight" in result
    cited = re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", result)
    assert cited, result

    async def existing_ids() -> set[str]:
        backend = HindsightBackend(pi_world.base_url)
        try:
            listed = await backend.list_memories(
                pi_world.bank_id, tags=TAGS, tags_match="exact", timeout=30, limit=500
            )
            observations = await backend.list_memories(
                pi_world.bank_id,
                tags=TAGS,
                tags_match="exact",
                timeout=30,
                limit=500,
                fact_type="observation",
            )
        finally:
            await backend.close()
        return {record.id for record in [*listed, *observations]}

    assert set(cited) <= asyncio.run(existing_ids())  # never invented


def test_a_memo_refresh_id_can_be_followed_after_a_restart_and_foreign_ids_are_refused(
    pi_world: PiWorld, tools_repo: Path, tmp_path: Path
) -> None:
    script_tool_call(pi_world, "refresh the memo", "hindsight_memory", {"action": "refresh_memo"})
    pi_world.run(tools_repo, "Please refresh the memo.")
    accepted = last_tool_result(pi_world)
    match = re.search(r'"operationId": "([0-9a-f-]{36})"', accepted)
    assert match, accepted
    operation_id = match.group(1)

    # A new Pi process (a new sidecar) looks it up.
    script_tool_call(
        pi_world,
        "check the refresh",
        "hindsight_memory",
        {"action": "status", "operationId": operation_id},
    )
    pi_world.run(tools_repo, "Please check the refresh.")
    looked_up = last_tool_result(pi_world)
    assert f"startup memo operation {operation_id}:" in looked_up
    assert re.search(r": (pending|processing|completed)", looked_up)

    # A retain operation of the same bank is not a memo operation of this scope: refused, and
    # nothing about it is shown.
    connection = sqlite3.connect(pi_world.state_dir / "outbox.sqlite")
    try:
        retain_operation = connection.execute(
            "SELECT coalesce(server_operation_id, batch_id) FROM batches LIMIT 1"
        ).fetchone()[0]
    finally:
        connection.close()
    script_tool_call(
        pi_world,
        "check that one",
        "hindsight_memory",
        {"action": "status", "operationId": retain_operation},
    )
    pi_world.run(tools_repo, "Please check that one.")
    refused = last_tool_result(pi_world)
    assert "not a startup-memo operation of this scope" in refused
    assert "retain" not in refused.lower() or "refresh_memo" in refused

    # Another registered scope cannot look up this scope's refresh either.
    other = make_repo(tmp_path / "other", "https://example.com/team/other.git")
    pi_world.register(other)
    script_tool_call(
        pi_world,
        "check the refresh",
        "hindsight_memory",
        {"action": "status", "operationId": operation_id},
    )
    pi_world.run(other, "Please check the refresh.")
    assert "not a startup-memo operation of this scope" in last_tool_result(pi_world)


def test_retain_global_writes_only_the_user_bank_and_automatic_retain_never_does(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    user_bank = f"{pi_world.bank_id}-user"
    _configure(
        pi_world,
        profile="project+user",
        banks={"project": {"bankId": pi_world.bank_id}, "user": {"bankId": user_bank}},
    )
    repo = make_repo(tmp_path / "global", REMOTE)
    pi_world.register(repo)
    pi_world.run(repo, FACT)
    script_tool_call(
        pi_world,
        "remember everywhere",
        "hindsight_retain_global",
        {"content": "The user prefers tabs over spaces in every project."},
    )
    pi_world.run(repo, "Please remember everywhere that I prefer tabs.")
    assert "Queued for the User bank" in last_tool_result(pi_world)
    pi_world.drain()

    async def texts(bank: str, tags: tuple[str, ...]) -> list[str]:
        backend = HindsightBackend(pi_world.base_url)
        try:
            return [
                record.text
                for record in await backend.list_memories(
                    bank, tags=tags, tags_match="exact", timeout=30, limit=500
                )
            ]
        finally:
            await backend.close()

    user_texts = asyncio.run(texts(user_bank, USER_SCOPE_TAGS))
    project_texts = asyncio.run(texts(pi_world.bank_id, TAGS))
    assert any("tabs" in text for text in user_texts)
    assert not any("Zephyr" in text for text in user_texts)  # automatic retain: project only
    assert not any("tabs over spaces" in text for text in project_texts)
    assert any("Zephyr" in text for text in project_texts)


def test_retain_global_refuses_clearly_without_a_user_bank(
    pi_world: PiWorld, tools_repo: Path
) -> None:
    completed = pi_world.cli("memory", "retain-global", "x", "--cwd", str(tools_repo), check=False)
    assert completed.returncode == 1
    assert "User bank is not part of profile project-only" in completed.stdout


@pytest.mark.pi_both("tool-params")
def test_invalid_arguments_are_a_tool_error_that_says_what_was_wrong(
    pi_world: PiWorld, tools_repo: Path
) -> None:
    script_tool_call(pi_world, "bad call", "hindsight_memory", {"action": "recall"})
    pi_world.run(tools_repo, "Please make a bad call.")
    assert "needs a non-empty 'query'" in last_tool_result(pi_world)


def test_cli_parity_for_recall_and_status(pi_world: PiWorld, tools_repo: Path) -> None:
    recalled = pi_world.cli("memory", "recall", "deploy target", "--cwd", str(tools_repo), "--json")
    records = json.loads(recalled.stdout)["records"]
    zephyr = next(record for record in records if "Zephyr" in record["text"])
    # Each record carries what a script needs: its id (to forget or correct it), its type,
    # dates, source and why recall returned it.
    assert {"id", "text", "type", "occurredStart", "mentionedAt", "source", "scores"} <= set(zephyr)
    assert zephyr["scores"]["final"] is not None
    status = json.loads(pi_world.cli("memory", "status", "--cwd", str(tools_repo), "--json").stdout)
    assert status["status"]["scope"]["tags"] == list(TAGS)


def test_an_explicit_project_note_reaches_project_memory(
    pi_world: PiWorld, tools_repo: Path
) -> None:
    script_tool_call(
        pi_world,
        "note that",
        "hindsight_memory",
        {"action": "retain", "content": "The nightly build runs on the Wombat runner."},
    )
    pi_world.run(tools_repo, "Please note that the nightly build runs on Wombat.")
    assert "Queued for project memory" in last_tool_result(pi_world)
    pi_world.drain()
    recalled = json.loads(
        pi_world.cli(
            "memory", "recall", "nightly build runner", "--cwd", str(tools_repo), "--json"
        ).stdout
    )
    assert any("Wombat" in record["text"] for record in recalled["records"])
