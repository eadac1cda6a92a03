"""Selected-bank maintenance on the real Hindsight (R-CONF-8): missions and mental models, dry
run first — a dry run changes nothing, applying changes exactly what it reported — and a scope
can only change its own mental models."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.cli.main import cli
from pi_hindsight.errors import BankNotFound, ConfigError, ScopeError
from pi_hindsight.maintenance.missions import read_missions, update_missions
from pi_hindsight.maintenance.model_changes import (
    create_model,
    delete_model,
    list_models,
    update_model,
)
from tests.support.maintenance import T, create_bank, fresh_bank, settle, snapshot

pytestmark = pytest.mark.server


async def _missions(backend: HindsightBackend, bank: str) -> None:
    current = await read_missions(backend, bank, timeout=T)
    assert current.mission == f"test bank {bank}" and "mission" in current.set_on_bank

    dry = await update_missions(
        backend,
        bank,
        mission="Engineering memory.",
        retain_mission="Keep decisions.",
        apply=False,
        timeout=T,
    )
    assert not dry.applied and [c.field for c in dry.changes] == ["mission", "retain_mission"]
    assert await read_missions(backend, bank, timeout=T) == current  # nothing changed

    done = await update_missions(
        backend,
        bank,
        mission="Engineering memory.",
        retain_mission="Keep decisions.",
        apply=True,
        timeout=T,
    )
    assert done.applied and done.changes == dry.changes
    assert done.missions.mission == "Engineering memory."
    assert done.missions.retain_mission == "Keep decisions."
    assert done.missions.observations_mission == current.observations_mission
    assert await read_missions(backend, bank, timeout=T) == done.missions

    same = await update_missions(
        backend, bank, mission="Engineering memory.", apply=True, timeout=T
    )
    assert not same.applied and same.changes == ()


async def _models(backend: HindsightBackend, bank: str) -> None:
    mine, theirs = ("project:mm-a",), ("project:mm-b",)
    before = await snapshot(backend, bank)
    dry = await create_model(
        backend,
        bank,
        mine,
        name="Release process",
        source_query="How are releases made?",
        apply=False,
        timeout=T,
    )
    assert not dry.applied and dry.operation_id is None
    assert await snapshot(backend, bank) == before

    created = await create_model(
        backend,
        bank,
        mine,
        name="Release process",
        source_query="How are releases made?",
        apply=True,
        timeout=T,
    )
    assert created.model_id == dry.model_id and created.changes == dry.changes
    assert created.operation_id
    listed = await list_models(backend, bank, tags=mine, timeout=T)
    assert [m.id for m in listed] == [created.model_id]
    assert listed[0].tags == mine and listed[0].trigger["tags_match"] == "exact"
    assert await list_models(backend, bank, tags=theirs, timeout=T) == ()

    with pytest.raises(ScopeError):  # another scope cannot touch it
        await update_model(backend, bank, theirs, created.model_id, name="x", apply=True, timeout=T)
    with pytest.raises(ScopeError):
        await delete_model(backend, bank, theirs, created.model_id, apply=True, timeout=T)

    await settle(backend, bank)
    unchanged = await snapshot(backend, bank)
    dry_update = await update_model(
        backend,
        bank,
        mine,
        created.model_id,
        source_query="How is a release cut?",
        apply=False,
        timeout=T,
    )
    assert [c.field for c in dry_update.changes] == ["source_query"] and not dry_update.applied
    assert await snapshot(backend, bank) == unchanged
    updated = await update_model(
        backend,
        bank,
        mine,
        created.model_id,
        source_query="How is a release cut?",
        apply=True,
        timeout=T,
    )
    assert updated.applied and updated.changes == dry_update.changes and updated.operation_id
    model = (await list_models(backend, bank, tags=mine, timeout=T))[0]
    assert model.source_query == "How is a release cut?" and model.name == "Release process"

    dry_delete = await delete_model(backend, bank, mine, created.model_id, apply=False, timeout=T)
    assert not dry_delete.applied
    assert len(await list_models(backend, bank, tags=mine, timeout=T)) == 1
    await delete_model(backend, bank, mine, created.model_id, apply=True, timeout=T)
    assert await list_models(backend, bank, tags=mine, timeout=T) == ()

    # The startup memo is listed but never changed from here.
    await backend.create_mental_model(
        bank,
        model_id="pi-memo-0123456789abcdef01234567",
        name="memo",
        source_query="q",
        tags=mine,
        max_tokens=512,
        trigger={"tags_match": "exact"},
        timeout=T,
    )
    with pytest.raises(ConfigError, match="startup memo"):
        await delete_model(
            backend, bank, mine, "pi-memo-0123456789abcdef01234567", apply=True, timeout=T
        )
    await settle(backend, bank)


async def _scenario(base_url: str) -> None:
    backend = HindsightBackend(base_url)
    bank = fresh_bank("maint")
    try:
        with pytest.raises(BankNotFound):
            await read_missions(backend, bank, timeout=T)
        with pytest.raises(BankNotFound):
            await create_model(
                backend, bank, ("p:x",), name="n", source_query="q", apply=True, timeout=T
            )
        assert not await backend.bank_exists(bank, timeout=T)
        await create_bank(backend, bank)
        await _missions(backend, bank)
        await _models(backend, bank)
    finally:
        await backend.close()


def test_missions_and_mental_models_dry_run_first(hindsight_server: Any) -> None:
    asyncio.run(_scenario(hindsight_server.base_url))


def _cli(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.output) if "--json" in args else result.output


def test_cli_acts_on_the_bank_selected_for_the_directory(
    hindsight_server: Any, isolated_dirs: Path, tmp_path: Path
) -> None:
    bank = fresh_bank("maint-cli")
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    (isolated_dirs / "config.json").write_text(
        json.dumps(
            {
                "hindsight": {"baseUrl": hindsight_server.base_url},
                "banks": {"project": {"bankId": bank}},
            }
        ),
        encoding="utf-8",
    )
    project = tmp_path / "project"
    project.mkdir()
    _cli("scope", "register", str(project))

    async def create() -> None:
        backend = HindsightBackend(hindsight_server.base_url)
        try:
            await create_bank(backend, bank)
        finally:
            await backend.close()

    asyncio.run(create())
    where = ("--cwd", str(project))
    dry = _cli("bank", "mission", "set", "CLI mission.", *where, "--json")["change"]
    assert dry["applied"] is False and dry["changes"][0]["after"] == "CLI mission."
    shown = _cli("bank", "mission", *where, "--json")["missions"]
    assert shown["mission"] == f"test bank {bank}"
    applied = _cli("bank", "mission", "set", "CLI mission.", *where, "--apply", "--json")
    assert applied["change"]["applied"]
    shown = _cli("bank", "mission", "show", *where, "--json")["missions"]
    assert shown["mission"] == "CLI mission."

    preview = _cli("templates", "apply", "coding-project", *where, "--json")
    assert preview["applied"] is False and preview["plan"]["changes_anything"] is True
    assert preview["changes"] is True
    listed = _cli("bank", "models", "list", *where, "--json")
    assert listed["models"] == []  # the dry run created nothing
    text = _cli("bank", "move", "--to-tag", "project:elsewhere", *where)
    assert "re-tag in place" in text and "dry run" in text
