"""Seeding as one operation (issue 19, item 2): typed arguments, a typed result with one text
form and one JSON form, the host's sessions through the context, nothing queued before the
adapter approved the plan or when Hindsight cannot say what it already holds. A real seeder
over a real outbox, git repository and Pi session files; Hindsight is a closed port here (the
integration tests run the same operation against the real server)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from pi_hindsight.backend import MemoryBackend, open_backend
from pi_hindsight.config import Settings
from pi_hindsight.engine.scope import register_location
from pi_hindsight.engine.seeding import Seeder
from pi_hindsight.errors import PiHindsightError
from pi_hindsight.hosts.pi.seed_sessions import PiSessions
from pi_hindsight.identity import resolve_identity
from pi_hindsight.operations.base import OperationInputError
from pi_hindsight.operations.scope_seeding import (
    SEED,
    ScopeSeedResult,
    SeedArgs,
    SeedingContext,
)
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.outbox import Outbox
from tests.plugins.pi import make_repo
from tests.support.pi_sessions import Exchange, write_session


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Engine:
    """The two things seeding asks of a session's engine, over a real seeder."""

    def __init__(self, seeder: Seeder) -> None:
        self._seeder = seeder
        self.woken = 0

    async def seeder(self) -> Seeder:
        return self._seeder

    def wake_worker(self) -> None:
        self.woken += 1


def _run(
    tmp_path: Path, args: SeedArgs, *, approve: bool | None = None
) -> tuple[ScopeSeedResult, list[ScopeSeedResult], int, _Engine]:
    """Seed a registered repository with two earlier Pi sessions and one commit."""
    state = tmp_path / "state"
    agent = tmp_path / "agent"
    repo = make_repo(tmp_path / "repo", "https://example.com/team/seeding-op.git")
    write_session(agent, repo, [Exchange("We deploy to Zephyr.", "Noted.")])
    write_session(
        agent,
        repo,
        [Exchange("Lint with ruff.", "Ok."), Exchange("Tests use pytest.", "Fine.")],
        version="1.x",
    )
    write_session(agent, tmp_path, [Exchange("Another place.", "Ok.")])
    settings = Settings()
    catalog = Catalog(state)
    try:
        scope = register_location(repo, settings, catalog, consent="cli")
    finally:
        catalog.close()
    outbox = Outbox(state)
    backend = open_backend(f"http://127.0.0.1:{_closed_port()}")

    async def provide() -> MemoryBackend:
        return backend

    seeder = Seeder(
        scope=scope,
        identity=resolve_identity(repo),
        settings=settings,
        state_dir=state,
        outbox=outbox,
        backend=provide,
    )
    engine = _Engine(seeder)
    shown: list[ScopeSeedResult] = []

    def approved(plan: ScopeSeedResult) -> bool:
        shown.append(plan)
        return bool(approve)

    context = SeedingContext(
        engine, (PiSessions(agent),), approve=None if approve is None else approved
    )

    async def run() -> ScopeSeedResult:
        try:
            return await SEED(context, args)
        finally:
            await backend.close()

    try:
        result = asyncio.run(run())
        queued = outbox.health().pending
    finally:
        outbox.close()
    return result, shown, queued, engine


def test_the_plan_is_one_typed_result_with_one_text_and_one_json_form(tmp_path: Path) -> None:
    result, _, queued, engine = _run(tmp_path, SeedArgs())
    # Three requests of two sessions, and the history (one commit) as one document.
    assert (result.sessions, result.requests, result.commits, result.items) == (2, 3, 1, 4)
    assert result.other_locations == 1 and result.server_error is not None
    assert not result.applied and queued == 0 and engine.woken == 0

    data = json.loads(json.dumps(result.to_json()))
    assert data["bankId"] == result.bank_id and data["tags"] == [
        "project:example.com/team/seeding-op"
    ]
    assert (data["sessions"], data["requests"], data["items"]) == (2, 3, 4)
    assert data["estimatedTokens"] == result.estimated_tokens > data["characters"] // 4
    assert data["otherLocations"] == 1 and data["serverError"] == result.server_error
    assert (data["applied"], data["declined"], data["queued"]) == (False, False, 0)
    assert "queuedKeys" not in data and "queued_keys" not in data  # for waiting, not output
    sessions = [unit for unit in data["units"] if unit["kind"] == "session"]
    assert sorted(unit["items"] for unit in sessions) == [1, 2]
    assert {unit["state"] for unit in sessions} == {"send"}
    assert sum(unit["characters"] for unit in data["units"]) == data["characters"]
    # The JSON form reads back into the same result.
    assert ScopeSeedResult.model_validate(data) == result

    text = result.render()
    lines = text.splitlines()
    assert lines[0].startswith(f"seeding {result.scope} (bank {result.bank_id}")
    assert "  sessions: 2 to send (3 requests); found: pi 2" in lines
    assert "  git: 1 commits in 1 documents" in lines
    assert f"~{result.estimated_tokens:,} LLM tokens" in text
    assert "Hindsight not asked what it already holds" in text
    assert lines[-1] == "dry run: nothing was sent"


def test_only_the_sources_asked_for_are_planned(tmp_path: Path) -> None:
    result, _, _, _ = _run(tmp_path, SeedArgs(sessions=False))
    assert result.sessions == 0 and result.other_locations == 0
    assert {unit.kind for unit in result.units} <= {"git"}
    with pytest.raises(OperationInputError, match="sessions, the git history or both"):
        SEED.parse({"sessions": False, "git": False})
    with pytest.raises(OperationInputError, match="apply"):
        SEED.parse({"apply": "perhaps"})


def test_a_declined_plan_queues_nothing_and_says_so(tmp_path: Path) -> None:
    result, shown, queued, engine = _run(tmp_path, SeedArgs(apply=True), approve=False)
    assert shown and shown[0].items == result.items == 4  # the adapter saw the plan first
    assert result.declined and not result.applied
    assert queued == 0 and engine.woken == 0
    assert result.render().splitlines()[-1] == "nothing was sent"


def test_nothing_is_queued_when_hindsight_cannot_say_what_it_holds(tmp_path: Path) -> None:
    with pytest.raises(PiHindsightError, match="nothing was queued"):
        _run(tmp_path, SeedArgs(apply=True), approve=True)
    outbox = Outbox(tmp_path / "state")
    try:
        assert outbox.health().pending == 0
    finally:
        outbox.close()
