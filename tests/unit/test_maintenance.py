"""Bank maintenance without a server: the bundled templates, binding a template to a scope, the
move's scope checks and selection, rendering, and the CLI's refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hindsight_client_api.models.bank_template_manifest import BankTemplateManifest

from pi_hindsight.backend.mental_models import normalise_trigger
from pi_hindsight.backend.resources import TemplateImportResult
from pi_hindsight.cli.main import cli
from pi_hindsight.errors import ConfigError
from pi_hindsight.maintenance import plain_text
from pi_hindsight.maintenance.common import as_json
from pi_hindsight.maintenance.move import (
    DocumentMove,
    MovePlan,
    MoveResult,
    MoveSelection,
    ScopeRef,
    _check_scopes,
)
from pi_hindsight.maintenance.template_import import (
    TEMPLATE_NAMES,
    ConfigChange,
    ResourceChange,
    TemplatePlan,
    bind_manifest,
    list_templates,
    load_manifest,
    scope_suffix,
)
from pi_hindsight.operations.bank_move import MOVE, MoveOutcome
from pi_hindsight.operations.base import OperationInputError

MODEL_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_bundled_templates_are_v1_manifests_with_missions_models_and_a_directive(
    name: str,
) -> None:
    manifest = load_manifest(name)
    assert "description" not in manifest  # ours; never sent
    assert manifest["version"] == "1"
    assert set(manifest["bank"]) == {"reflect_mission", "retain_mission", "observations_mission"}
    models = manifest["mental_models"]
    assert 2 <= len(models) <= 4
    assert len({m["id"] for m in models}) == len(models)
    for model in models:
        assert MODEL_ID.match(model["id"])
        assert model["name"].strip() and model["source_query"].strip()
        assert 256 <= model["max_tokens"] <= 8192
        assert model.get("tags", []) == []  # bound to a scope when applied
    assert all(d["content"].strip() for d in manifest["directives"])
    # The official client's model of the manifest accepts it as it will be sent.
    assert BankTemplateManifest.from_dict(bind_manifest(manifest, bank="b", tags=["t:1"]))


def test_exactly_two_templates_are_listed_with_what_they_are_for() -> None:
    infos = list_templates()
    assert [info.name for info in infos] == ["coding-project", "personal-preferences"]
    assert all(len(info.description) > 80 for info in infos)


def test_unknown_template_is_a_clean_error() -> None:
    with pytest.raises(ConfigError, match="no bundled template"):
        load_manifest("../../etc/passwd")


def test_binding_gives_models_and_directives_the_scope_and_leaves_the_template_alone() -> None:
    manifest = load_manifest("coding-project")
    original = json.dumps(manifest, sort_keys=True)
    bound = bind_manifest(manifest, bank="pi-coding", tags=["project:a"])
    other = bind_manifest(manifest, bank="pi-coding", tags=["project:b"])
    assert json.dumps(manifest, sort_keys=True) == original
    suffix = scope_suffix("pi-coding", ["project:a"])
    for model in bound["mental_models"]:
        assert model["id"].endswith(f"-{suffix}") and MODEL_ID.match(model["id"])
        assert model["tags"] == ["project:a"]
        assert model["trigger"]["tags_match"] == "exact"
    assert all(d["tags"] == ["project:a"] for d in bound["directives"])
    assert all(d["name"].endswith("[project:a]") for d in bound["directives"])
    assert bound["bank"] == manifest["bank"]  # missions are bank-wide
    ids = {m["id"] for m in bound["mental_models"]}
    assert ids.isdisjoint({m["id"] for m in other["mental_models"]})


def test_binding_refuses_a_scope_without_tags() -> None:
    with pytest.raises(ConfigError):
        bind_manifest(load_manifest("coding-project"), bank="b", tags=[])


def test_trigger_normalisation_fills_defaults_and_drops_unset_fields() -> None:
    assert normalise_trigger({"refresh_after_consolidation": True}) == normalise_trigger(
        {"refresh_after_consolidation": True, "mode": "full", "budget": None}
    )
    assert normalise_trigger({"mode": "delta"}) != normalise_trigger({})


def test_move_scope_checks() -> None:
    a = ScopeRef("bank", ("project:a",))
    with pytest.raises(ConfigError, match="same scope"):
        _check_scopes(a, ScopeRef("bank", ("project:a",)))
    with pytest.raises(ConfigError, match="tags"):
        _check_scopes(a, ScopeRef("bank", ()))
    with pytest.raises(ConfigError, match="per-session"):
        _check_scopes(a, ScopeRef("pi::{session}", ("project:a",)))
    _check_scopes(a, ScopeRef("other", ("project:a",)))  # same tags, another bank: a move


def test_move_selection() -> None:
    assert MoveSelection().everything
    by_ids = MoveSelection(document_ids=("d1",))
    assert by_ids.matches("d1") and not by_ids.matches("d10")
    by_prefix = MoveSelection(document_prefix="pi-session-a")
    assert by_prefix.matches("pi-session-ab") and not by_prefix.matches("pi-session-b")


def _plan() -> MovePlan:
    return MovePlan(
        source=ScopeRef("b", ("project:a",)),
        target=ScopeRef("b2", ("project:c",)),
        selection=MoveSelection(document_prefix="d"),
        method="transfer",
        documents=(
            DocumentMove("d1", "move", ("f1", "f2"), 2, "h1"),
            DocumentMove("d2", "finish", ("f3",), 1, "h2"),
            DocumentMove("d3", "done", (), 1, "h3"),
        ),
        observations=("o1",),
        mental_models=("m1",),
        blockers=(),
        notes=("n",),
    )


def test_move_plan_counts_and_json() -> None:
    plan = _plan()
    assert plan.document_count == 2 and plan.fact_count == 3 and plan.can_apply
    data = as_json(MoveResult(plan=plan, applied=False))
    assert data["plan"]["fact_count"] == 3 and data["plan"]["can_apply"] is True
    assert data["plan"]["documents"][1]["state"] == "finish"
    json.dumps(data)  # plain JSON
    text = plain_text.move_result(MoveResult(plan=plan, applied=False))
    assert "b [project:a]" in text and "b2 [project:c]" in text and "dry run" in text
    assert "finish (already copied)" in text


def test_the_move_operation_has_one_text_and_one_json_form_and_checks_its_arguments() -> None:
    result = MoveResult(plan=_plan(), applied=False)
    outcome = MoveOutcome(move=result)
    assert outcome.to_json() == as_json(result)  # `bank move --json`: the keys it always had
    assert outcome.render() == plain_text.move_result(result)
    args = MOVE.parse({"toTags": ["project:x"], "documentIds": ["d1"], "apply": True})
    assert (args.to_tags, args.document_ids, args.to_bank, args.apply) == (
        ("project:x",), ("d1",), None, True,
    )  # fmt: skip
    for bad, named in (
        ({"toTags": [""]}, "toTags"),
        ({"operationTimeout": 0}, "operationTimeout"),
        ({"toBank": ""}, "toBank"),
        ({"to": "x"}, "to"),
    ):
        with pytest.raises(OperationInputError, match=named):
            MOVE.parse(bad)


def test_template_plan_rendering_says_what_is_bank_wide() -> None:
    plan = TemplatePlan(
        template="coding-project",
        bank="b",
        tags=("project:a",),
        config=(ConfigChange("retain_mission", None, "keep"),),
        mental_models=(ResourceChange("mental_model", "m-1", "M", "update", ("source_query",)),),
        directives=(ResourceChange("directive", "D [project:a]", "D [project:a]", "unchanged"),),
        server=TemplateImportResult(True, True, ("m-1",), (), ("D [project:a]",), (), ()),
        manifest={},
    )
    text = plain_text.template_plan(plan)
    assert "bank-wide" in text and "update    m-1: M (source_query)" in text
    assert as_json(plan)["changes_anything"] is True


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_cli_refuses_an_unregistered_directory_with_a_hint(tmp_path: Path) -> None:
    for args in (
        ("bank", "mission", "show"),
        ("bank", "models", "list"),
        ("templates", "preview", "coding-project"),
        ("bank", "move", "--to-tag", "project:x"),
    ):
        code, out = _invoke(*args, "--cwd", str(tmp_path))
        assert code == 1, (args, out)
        assert "is not registered" in out and "pi-hindsight scope register" in out


def test_cli_templates_list_json() -> None:
    from pi_hindsight.cli.templates_cmd import _NAMES

    code, out = _invoke("templates", "list", "--json")
    assert code == 0
    assert [item["name"] for item in json.loads(out)["templates"]] == list(TEMPLATE_NAMES)
    assert tuple(_NAMES.choices) == TEMPLATE_NAMES
