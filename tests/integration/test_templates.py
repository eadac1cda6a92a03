"""Bundled bank templates on the real Hindsight (R-CONF-7): a preview changes nothing, applying
changes exactly what the preview said, re-applying changes nothing, and a missing bank is refused
rather than created."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.errors import BankNotFound
from pi_hindsight.maintenance.template_import import apply_template, preview_template
from tests.support.maintenance import T, create_bank, fresh_bank, settle, snapshot

pytestmark = pytest.mark.server


async def _scenario(base_url: str) -> None:
    backend = HindsightBackend(base_url)
    bank, tags, other = fresh_bank("tpl"), ("project:tpl-a",), ("project:tpl-b",)
    try:
        await create_bank(backend, bank)
        before = await snapshot(backend, bank)

        plan = await preview_template(backend, bank, "coding-project", tags=tags, timeout=T)
        assert await snapshot(backend, bank) == before  # the preview changed nothing
        assert [c.key for c in plan.config if c.changed] == [
            "observations_mission",
            "reflect_mission",
            "retain_mission",
        ]
        assert {item.action for item in (*plan.mental_models, *plan.directives)} == {"create"}
        assert plan.server.dry_run and plan.changes_anything

        applied = await apply_template(backend, bank, "coding-project", tags=tags, timeout=T)
        assert applied.matches_plan
        assert applied.plan.mental_models == plan.mental_models
        after = await snapshot(backend, bank)
        for change in plan.config:
            assert after["overrides"][change.key] == change.after
        # Exactly the planned models and directives exist now, each with the scope's exact tags.
        assert [m[0] for m in after["models"]] == sorted(plan.keys("mental_model", "create"))
        assert all(m[2] == tags for m in after["models"])
        assert all(dict(m[5])["tags_match"] == "exact" for m in after["models"])
        assert [d[0] for d in after["directives"]] == sorted(plan.keys("directive", "create"))
        assert all(d[2] == tags for d in after["directives"])
        # Nothing else changed: the only override keys added are the template's.
        added = set(after["overrides"]) - set(before["overrides"])
        assert added <= {c.key for c in plan.config}

        await settle(backend, bank)  # the first refreshes ran
        again = await preview_template(backend, bank, "coding-project", tags=tags, timeout=T)
        assert not again.changes_anything
        reapplied = await apply_template(backend, bank, "coding-project", tags=tags, timeout=T)
        assert reapplied.matches_plan
        assert not reapplied.result.mental_models_created + reapplied.result.mental_models_updated

        # Another scope of the same bank gets its own models; this one's are untouched.
        elsewhere = await preview_template(backend, bank, "coding-project", tags=other, timeout=T)
        assert {item.action for item in elsewhere.mental_models} == {"create"}
        # The second bundled template is valid on the server too (its dry run passes).
        user = await preview_template(backend, bank, "personal-preferences", tags=tags, timeout=T)
        assert user.server.dry_run and len(user.mental_models) == 3
        await settle(backend, bank)
    finally:
        await backend.close()


def test_preview_changes_nothing_and_apply_changes_what_it_said(hindsight_server: Any) -> None:
    asyncio.run(_scenario(hindsight_server.base_url))


async def _missing(base_url: str) -> bool:
    backend = HindsightBackend(base_url)
    bank = fresh_bank("tpl-missing")
    try:
        with pytest.raises(BankNotFound):
            await preview_template(backend, bank, "coding-project", tags=("p:x",), timeout=T)
        with pytest.raises(BankNotFound):
            await apply_template(backend, bank, "coding-project", tags=("p:x",), timeout=T)
        return await backend.bank_exists(bank, timeout=T)
    finally:
        await backend.close()


def test_a_missing_bank_is_refused_not_created(hindsight_server: Any) -> None:
    """Hindsight's import dry run answers 200 for a missing bank and its import creates one."""
    assert asyncio.run(_missing(hindsight_server.base_url)) is False
