"""Moving a scope's memories on the real Hindsight (R-SCOPE-10): the dry run changes nothing and
says exactly what apply then does; afterwards recall with the target's exact tags finds the moved
memories and the source scope no longer does; a move that failed halfway completes when run
again, without duplicates; the command line is an adapter over the operation."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.backend.resources import RetainItem
from pi_hindsight.cli.main import cli
from pi_hindsight.errors import BackendUnavailable
from pi_hindsight.maintenance.model_changes import create_model
from pi_hindsight.maintenance.move import MoveSelection, ScopeRef, move_scope, plan_move
from pi_hindsight.stores.outbox import Outbox
from pi_hindsight.stores.outbox_items import RetainRequest
from tests.plugins.pi import make_repo
from tests.plugins.scripted_backend import ScriptedBackend
from tests.support.maintenance import (
    T,
    create_bank,
    fresh_bank,
    recall_text,
    retain_documents,
    scope_contents,
    settle,
)

pytestmark = pytest.mark.server
QUERY = "Where does the project keep its build cache?"


def _documents(prefix: str, count: int, rng: random.Random) -> dict[str, str]:
    """Documents with one unique marker each, so recall can tell where each one went."""
    text = "The project keeps its build cache under marker zq{:08d}."
    return {f"{prefix}-{n}": text.format(rng.randrange(10**8)) for n in range(count)}


def _marker(text: str) -> str:
    return text.split("marker ")[1].rstrip(".")


async def _content(backend: HindsightBackend, bank: str, model_id: str) -> str:
    model = await backend.get_mental_model(bank, model_id, timeout=T)
    assert model is not None
    return model.content or ""


async def _split_in_one_bank(base_url: str) -> None:
    rng = random.Random(20261201)
    backend = HindsightBackend(base_url)
    bank = fresh_bank("move-split")
    source, target = ScopeRef(bank, ("project:mono",)), ScopeRef(bank, ("project:web",))
    moving, staying = _documents("web", 2, rng), _documents("core", 2, rng)
    try:
        await create_bank(backend, bank)
        await retain_documents(backend, bank, source.tags, {**moving, **staying})
        await settle(backend, bank)
        before = await scope_contents(backend, bank, source.tags)

        selection = MoveSelection(document_prefix="web-")
        dry = await move_scope(backend, source, target, selection, apply=False, timeout=T)
        plan = dry.plan
        assert not dry.applied and plan.method == "retag" and plan.can_apply
        assert sorted(d.document_id for d in plan.documents) == sorted(moving)
        moved_facts = {f.id for f in before["facts"] if f.document_id in moving}
        assert {fact for d in plan.documents for fact in d.fact_ids} == moved_facts
        assert plan.observations  # consolidation had built observations from them
        assert set(plan.observations) == {
            o.id for o in before["observations"] if moved_facts & set(o.source_memory_ids)
        }
        unchanged = await scope_contents(backend, bank, source.tags)
        assert unchanged["documents"].keys() == before["documents"].keys()  # dry run: no change
        assert {f.id for f in unchanged["facts"]} == {f.id for f in before["facts"]}

        done = await move_scope(backend, source, target, selection, apply=True, timeout=T)
        assert done.applied and done.plan == plan
        assert sorted(done.retagged) == sorted(moving) and done.deleted == ()
        assert done.facts_in_target == plan.fact_count
        assert done.observations_invalidated == plan.observations
        await settle(backend, bank)
        after_target = await scope_contents(backend, bank, target.tags)
        after_source = await scope_contents(backend, bank, source.tags)
        # Re-tagged in place: the same facts (same ids) now carry exactly the target tags.
        assert {f.id for f in after_target["facts"]} == moved_facts
        assert sorted(after_target["documents"]) == sorted(moving)
        assert sorted(after_source["documents"]) == sorted(staying)

        in_target = await recall_text(backend, bank, target.tags, QUERY)
        in_source = await recall_text(backend, bank, source.tags, QUERY)
        for text in moving.values():
            assert _marker(text) in in_target and _marker(text) not in in_source
        for text in staying.values():
            assert _marker(text) in in_source and _marker(text) not in in_target

        again = await plan_move(backend, source, target, selection, timeout=T)
        assert again.documents == ()  # nothing left to move
    finally:
        await backend.close()


def test_split_within_a_bank_moves_exactly_what_the_dry_run_said(hindsight_server: Any) -> None:
    asyncio.run(_split_in_one_bank(hindsight_server.base_url))


async def _merge_across_banks(base_url: str) -> None:
    rng = random.Random(20261202)
    backend = HindsightBackend(base_url)
    old_bank, new_bank = fresh_bank("move-from"), fresh_bank("move-to")
    source, target = ScopeRef(old_bank, ("project:old",)), ScopeRef(new_bank, ("project:new",))
    documents = _documents("pi-session", 3, rng)
    try:
        for bank in (old_bank, new_bank):
            await create_bank(backend, bank)
        await retain_documents(backend, old_bank, source.tags, documents)
        await settle(backend, old_bank)
        model = await create_model(
            backend,
            old_bank,
            source.tags,
            name="Build cache",
            source_query=QUERY,
            apply=True,
            timeout=T,
        )
        await settle(backend, old_bank)
        first = await _content(backend, old_bank, model.model_id)
        assert any(_marker(text) in first for text in documents.values())
        before = await scope_contents(backend, old_bank, source.tags)
        fact_texts = sorted(f.text for f in before["facts"])

        plan = await plan_move(backend, source, target, timeout=T)
        assert plan.method == "transfer" and plan.can_apply
        assert sorted(d.document_id for d in plan.documents) == sorted(documents)
        assert {d.state for d in plan.documents} == {"move"}
        assert plan.fact_count == len(before["facts"])
        assert (await scope_contents(backend, new_bank, target.tags))["documents"] == {}

        # Fail halfway: the copy is made, then deleting the second source document fails.
        flaky = ScriptedBackend(backend)
        flaky.fail("delete_document", BackendUnavailable("injected: connection lost"), after=1)
        with pytest.raises(BackendUnavailable):
            await move_scope(flaky, source, target, apply=True, timeout=T)
        assert flaky.calls["delete_document"] == 2

        resumed = await plan_move(backend, source, target, timeout=T)
        assert len(resumed.documents) == 2  # one source document was already deleted
        assert {d.state for d in resumed.documents} == {"finish"}  # copied, not yet removed
        done = await move_scope(backend, source, target, apply=True, timeout=T)
        assert done.copied == () and sorted(done.deleted) == sorted(
            d.document_id for d in resumed.documents
        )
        assert plan.mental_models == (model.model_id,) and len(done.refreshes) == 1
        await settle(backend, old_bank, new_bank)

        moved = await scope_contents(backend, new_bank, target.tags)
        left = await scope_contents(backend, old_bank, source.tags)
        # Exactly the planned documents and facts, once each: no duplicates after the resume.
        assert sorted(moved["documents"]) == sorted(documents)
        assert sorted(f.text for f in moved["facts"]) == fact_texts
        assert {d.content_hash for d in moved["documents"].values()} == {
            d.content_hash for d in plan.documents
        }
        assert left["documents"] == {} and left["facts"] == [] and left["observations"] == []
        assert moved["observations"]  # re-derived in the target by consolidation

        in_target = await recall_text(backend, new_bank, target.tags, QUERY)
        in_source = await recall_text(backend, old_bank, source.tags, QUERY)
        assert all(_marker(text) in in_target for text in documents.values())
        assert in_source == ""
        # The source scope's mental model was refreshed from what it still holds: nothing.
        content = await _content(backend, old_bank, model.model_id)
        assert not any(_marker(text) in content for text in documents.values())
    finally:
        await backend.close()


def test_merge_into_another_bank_resumes_after_a_failure(hindsight_server: Any) -> None:
    asyncio.run(_merge_across_banks(hindsight_server.base_url))


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_the_command_line_moves_through_the_operation_and_prints_its_typed_result(
    hindsight_server: Any, isolated_dirs: Path, tmp_path: Path
) -> None:
    """``bank move`` is an adapter over ``operations/bank_move.py``: its ``--json`` is the typed
    result (the move's JSON, keys as before), the dry run changes nothing, and apply is refused
    while a retain of the source scope waits in the outbox."""
    base_url = hindsight_server.base_url
    bank = fresh_bank("move-cli")
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    config = {"hindsight": {"baseUrl": base_url}, "banks": {"project": {"bankId": bank}}}
    (isolated_dirs / "config.json").write_text(json.dumps(config), encoding="utf-8")
    repo = make_repo(tmp_path / "repo", "https://example.com/team/moving.git")
    assert _cli("scope", "register", str(repo))[0] == 0
    source, target = ("project:example.com/team/moving",), ("project:moved",)
    documents = _documents("doc", 2, random.Random(20261204))

    async def prepare() -> None:
        backend = HindsightBackend(base_url)
        try:
            await create_bank(backend, bank)
            await retain_documents(backend, bank, source, documents)
        finally:
            await backend.close()

    async def contents(tags: tuple[str, ...]) -> list[str]:
        backend = HindsightBackend(base_url)
        try:
            return sorted((await scope_contents(backend, bank, tags))["documents"])
        finally:
            await backend.close()

    asyncio.run(prepare())
    where = ("--to-tag", target[0], "--cwd", str(repo))
    code, out = _cli("bank", "move", *where, "--json")
    assert code == 0, out
    dry = json.loads(out)
    assert set(dry) == {
        "plan", "applied", "copied", "retagged", "deleted", "facts_in_target",
        "observations_invalidated", "operation_ids", "refreshes",
    }  # fmt: skip
    assert dry["applied"] is False and dry["plan"]["method"] == "retag"
    assert dry["plan"]["can_apply"] is True and dry["plan"]["document_count"] == 2
    assert sorted(doc["document_id"] for doc in dry["plan"]["documents"]) == sorted(documents)
    code, text = _cli("bank", "move", *where)
    assert code == 0 and "re-tag in place" in text and "dry run: nothing changed" in text
    assert asyncio.run(contents(source)) == sorted(documents)  # the dry runs changed nothing

    outbox = Outbox(isolated_dirs)  # a live retain of the source scope, not yet confirmed
    try:
        outbox.enqueue(RetainRequest("s1", bank, RetainItem("[]", "pi-session-s1", source), "r1"))
        code, out = _cli("bank", "move", *where, "--apply")
        assert code == 1 and "still in the outbox" in out and "outbox drain" in out
        assert asyncio.run(contents(target)) == []  # refused before anything moved
        [batch] = outbox.claim("test")
        assert outbox.mark_done(batch.batch_id, "test")
    finally:
        outbox.close()

    code, out = _cli("bank", "move", *where, "--apply", "--json")
    assert code == 0, out
    done = json.loads(out)
    assert done["applied"] is True and sorted(done["retagged"]) == sorted(documents)
    assert done["plan"]["documents"] == dry["plan"]["documents"]
    assert asyncio.run(contents(target)) == sorted(documents)
    assert asyncio.run(contents(source)) == []
