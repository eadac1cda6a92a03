"""``pi-hindsight bank mission | models | move``: maintenance of the bank selected for ``--cwd``
(docs/bank-maintenance.md). Mutating commands print their dry run and change something only
with ``--apply``."""

from __future__ import annotations

from pathlib import Path

import click

from pi_hindsight.cli._common import json_option, state_dir_option
from pi_hindsight.cli._selected import (
    Selected,
    apply_option,
    cwd_option,
    on_selected_bank,
    run_operation,
    scope_for,
    user_option,
)
from pi_hindsight.errors import ConfigError
from pi_hindsight.operations.bank_move import MOVE
from pi_hindsight.operations.bank_upkeep import MENTAL_MODELS, MISSION


@click.group()
def bank() -> None:
    """The selected bank: missions, mental models, moving a scope's memories."""


# -- missions ---------------------------------------------------------------------------------


@bank.group(invoke_without_command=True)
@cwd_option
@user_option
@state_dir_option
@json_option
@click.pass_context
def mission(
    ctx: click.Context, cwd: Path, user_bank: bool, state_dir: Path | None, as_json: bool
) -> None:
    """The bank's missions (bank-wide): `show` (default) or `set`."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(show, cwd=cwd, user_bank=user_bank, state_dir=state_dir, as_json=as_json)


@mission.command()
@on_selected_bank()
def show(selected: Selected, as_json: bool) -> None:
    """Show the missions of the selected bank."""
    run_operation(selected, MISSION, {}, as_json)


@mission.command("set")
@click.argument("text", required=False)
@click.option("--retain", "retain_text", default=None, help="What extraction keeps.")
@click.option("--observations", "observations_text", default=None, help="What is synthesised.")
@apply_option
@on_selected_bank()
def set_mission(
    selected: Selected,
    text: str | None,
    retain_text: str | None,
    observations_text: str | None,
    apply: bool,
    as_json: bool,
) -> None:
    """Set the mission (TEXT) and/or the retain and observations missions (bank-wide)."""
    given = {
        key: value
        for key, value in (
            ("mission", text),
            ("retainMission", retain_text),
            ("observationsMission", observations_text),
        )
        if value is not None
    }
    if not given:
        raise ConfigError("no mission given", hint="give the mission, retain or observations text")
    run_operation(selected, MISSION, {**given, "apply": apply}, as_json)


# -- mental models ----------------------------------------------------------------------------


@bank.group()
def models() -> None:
    """The selected scope's mental models: list, create, update, delete."""


@models.command("list")
@click.option("--content", is_flag=True, help="Include each model's current content.")
@on_selected_bank()
def list_models_command(selected: Selected, content: bool, as_json: bool) -> None:
    """Mental models carrying exactly the selected scope's tags."""
    run_operation(selected, MENTAL_MODELS, {"modelAction": "list", "showContent": content}, as_json)


@models.command()
@click.argument("name")
@click.option("--query", "source_query", required=True, help="The question the model answers.")
@click.option("--id", "model_id", default=None, help="Model id (default: from the name).")
@click.option("--max-tokens", type=int, default=1024, show_default=True)
@apply_option
@on_selected_bank()
def create(
    selected: Selected,
    name: str,
    source_query: str,
    model_id: str | None,
    max_tokens: int,
    apply: bool,
    as_json: bool,
) -> None:
    """Create a mental model NAME for the selected scope (its exact tags)."""
    params = {
        "modelAction": "create",
        "name": name,
        "sourceQuery": source_query,
        "modelId": model_id,
        "modelMaxTokens": max_tokens,
        "apply": apply,
    }
    run_operation(selected, MENTAL_MODELS, params, as_json)


@models.command()
@click.argument("model_id")
@click.option("--name", default=None)
@click.option("--query", "source_query", default=None)
@click.option("--max-tokens", type=int, default=None)
@apply_option
@on_selected_bank()
def update(
    selected: Selected,
    model_id: str,
    name: str | None,
    source_query: str | None,
    max_tokens: int | None,
    apply: bool,
    as_json: bool,
) -> None:
    """Change a mental model of the selected scope (a new query refreshes it)."""
    params = {
        "modelAction": "update",
        "modelId": model_id,
        "name": name,
        "sourceQuery": source_query,
        "modelMaxTokens": max_tokens,
        "apply": apply,
    }
    run_operation(selected, MENTAL_MODELS, params, as_json)


@models.command()
@click.argument("model_id")
@apply_option
@on_selected_bank()
def delete(selected: Selected, model_id: str, apply: bool, as_json: bool) -> None:
    """Delete a mental model of the selected scope (its memories stay)."""
    params = {"modelAction": "delete", "modelId": model_id, "apply": apply}
    run_operation(selected, MENTAL_MODELS, params, as_json)


# -- scope move -------------------------------------------------------------------------------


@bank.command()
@click.option(
    "--to-cwd",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="Target: the registered scope of this directory.",
)
@click.option("--to-bank", default=None, help="Target bank (default: the source bank).")
@click.option("--to-tag", "to_tags", multiple=True, help="Target tag (repeat; default: source's).")
@click.option("--doc", "document_ids", multiple=True, help="Move only this document (repeat).")
@click.option("--prefix", default=None, help="Move only documents whose id starts with this.")
@click.option(
    "--operation-timeout",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds to wait for each export/import operation.",
)
@apply_option
@on_selected_bank(user=False)
def move(
    selected: Selected,
    to_cwd: Path | None,
    to_bank: str | None,
    to_tags: tuple[str, ...],
    document_ids: tuple[str, ...],
    prefix: str | None,
    operation_timeout: float,
    apply: bool,
    as_json: bool,
) -> None:
    """Move the selected scope's memories (all, or --doc/--prefix) to another bank or tags.

    Prints the dry run; moves only with --apply. Running it again after a failure resumes.
    """
    if to_cwd is not None:
        if to_bank or to_tags:
            raise ConfigError("give either --to-cwd or --to-bank/--to-tag, not both")
        _, to_bank, to_tags = scope_for(selected.state_dir, to_cwd.resolve(), selected.settings)
    params = {
        "toBank": to_bank,
        "toTags": to_tags,
        "documentIds": document_ids,
        "prefix": prefix,
        "operationTimeout": operation_timeout,
        "apply": apply,
    }
    run_operation(selected, MOVE, params, as_json)
