"""``pi-hindsight bank mission | models | move``: maintenance of the bank selected for ``--cwd``
(docs/bank-maintenance.md). Mutating commands print their dry run and change something only
with ``--apply``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.cli._selected import (
    Selected,
    apply_option,
    cwd_option,
    run,
    scope_for,
    select,
    user_option,
)
from pi_hindsight.errors import ConfigError, ScopeError


def _show(result: Any, text: str, as_json: bool) -> None:
    from pi_hindsight.maintenance.common import as_json as to_json  # noqa: PLC0415 - slow import

    if as_json:
        echo_json(to_json(result))
    else:
        click.echo(text)


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
@cwd_option
@user_option
@state_dir_option
@json_option
def show(cwd: Path, user_bank: bool, state_dir: Path | None, as_json: bool) -> None:
    """Show the missions of the selected bank."""
    from pi_hindsight.maintenance import render  # noqa: PLC0415 - slow import
    from pi_hindsight.maintenance.missions import read_missions  # noqa: PLC0415

    selected = select(state_dir, cwd, user_bank=user_bank)
    result = run(
        selected, lambda backend: read_missions(backend, selected.bank, timeout=selected.timeout)
    )
    _show(result, render.missions(result), as_json)


@mission.command("set")
@click.argument("text", required=False)
@click.option("--retain", "retain_text", default=None, help="What extraction keeps.")
@click.option("--observations", "observations_text", default=None, help="What is synthesised.")
@apply_option
@cwd_option
@user_option
@state_dir_option
@json_option
def set_mission(
    text: str | None,
    retain_text: str | None,
    observations_text: str | None,
    apply: bool,
    cwd: Path,
    user_bank: bool,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Set the mission (TEXT) and/or the retain and observations missions (bank-wide)."""
    from pi_hindsight.maintenance import render  # noqa: PLC0415 - slow import
    from pi_hindsight.maintenance.missions import update_missions  # noqa: PLC0415

    selected = select(state_dir, cwd, user_bank=user_bank)
    result = run(
        selected,
        lambda backend: update_missions(
            backend,
            selected.bank,
            mission=text,
            retain_mission=retain_text,
            observations_mission=observations_text,
            apply=apply,
            timeout=selected.timeout,
        ),
    )
    _show(result, render.mission_change(result), as_json)


# -- mental models ----------------------------------------------------------------------------


@bank.group()
def models() -> None:
    """The selected scope's mental models: list, create, update, delete."""


@models.command("list")
@click.option("--content", is_flag=True, help="Include each model's current content.")
@cwd_option
@user_option
@state_dir_option
@json_option
def list_models_command(
    content: bool, cwd: Path, user_bank: bool, state_dir: Path | None, as_json: bool
) -> None:
    """Mental models carrying exactly the selected scope's tags."""
    from pi_hindsight.maintenance import render  # noqa: PLC0415 - slow import
    from pi_hindsight.maintenance.mental_models import list_models  # noqa: PLC0415

    selected = select(state_dir, cwd, user_bank=user_bank)
    result = run(
        selected,
        lambda backend: list_models(
            backend, selected.bank, tags=selected.tags, timeout=selected.timeout
        ),
    )
    _show(result, render.models_list(result, content=content), as_json)


@models.command()
@click.argument("name")
@click.option("--query", "source_query", required=True, help="The question the model answers.")
@click.option("--id", "model_id", default=None, help="Model id (default: from the name).")
@click.option("--max-tokens", type=int, default=1024, show_default=True)
@apply_option
@cwd_option
@user_option
@state_dir_option
@json_option
def create(
    name: str,
    source_query: str,
    model_id: str | None,
    max_tokens: int,
    apply: bool,
    cwd: Path,
    user_bank: bool,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Create a mental model NAME for the selected scope (its exact tags)."""
    from pi_hindsight.maintenance import render  # noqa: PLC0415 - slow import
    from pi_hindsight.maintenance.mental_models import create_model  # noqa: PLC0415

    selected = select(state_dir, cwd, user_bank=user_bank)
    result = run(
        selected,
        lambda backend: create_model(
            backend,
            selected.bank,
            selected.tags,
            name=name,
            source_query=source_query,
            model_id=model_id,
            max_tokens=max_tokens,
            apply=apply,
            timeout=selected.timeout,
        ),
    )
    _show(result, render.model_change(result), as_json)


@models.command()
@click.argument("model_id")
@click.option("--name", default=None)
@click.option("--query", "source_query", default=None)
@click.option("--max-tokens", type=int, default=None)
@apply_option
@cwd_option
@user_option
@state_dir_option
@json_option
def update(
    model_id: str,
    name: str | None,
    source_query: str | None,
    max_tokens: int | None,
    apply: bool,
    cwd: Path,
    user_bank: bool,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Change a mental model of the selected scope (a new query refreshes it)."""
    from pi_hindsight.maintenance import render  # noqa: PLC0415 - slow import
    from pi_hindsight.maintenance.mental_models import update_model  # noqa: PLC0415

    selected = select(state_dir, cwd, user_bank=user_bank)
    result = run(
        selected,
        lambda backend: update_model(
            backend,
            selected.bank,
            selected.tags,
            model_id,
            name=name,
            source_query=source_query,
            max_tokens=max_tokens,
            apply=apply,
            timeout=selected.timeout,
        ),
    )
    _show(result, render.model_change(result), as_json)


@models.command()
@click.argument("model_id")
@apply_option
@cwd_option
@user_option
@state_dir_option
@json_option
def delete(
    model_id: str, apply: bool, cwd: Path, user_bank: bool, state_dir: Path | None, as_json: bool
) -> None:
    """Delete a mental model of the selected scope (its memories stay)."""
    from pi_hindsight.maintenance import render  # noqa: PLC0415 - slow import
    from pi_hindsight.maintenance.mental_models import delete_model  # noqa: PLC0415

    selected = select(state_dir, cwd, user_bank=user_bank)
    result = run(
        selected,
        lambda backend: delete_model(
            backend, selected.bank, selected.tags, model_id, apply=apply, timeout=selected.timeout
        ),
    )
    _show(result, render.model_change(result), as_json)


# -- scope move -------------------------------------------------------------------------------


def _unfinished_retains(selected: Selected) -> int:
    """Outbox items not yet confirmed for the source scope: they would land after the move."""
    from pi_hindsight.stores.outbox import UNFINISHED, Outbox  # noqa: PLC0415

    store = Outbox(selected.state_dir)
    try:
        items = store.items(states=UNFINISHED, limit=100_000)
    finally:
        store.close()
    count = 0
    for item in items:
        if item.bank_id == selected.bank and set(item.retain.tags) == set(selected.tags):
            count += 1
    return count


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
@cwd_option
@state_dir_option
@json_option
def move(
    to_cwd: Path | None,
    to_bank: str | None,
    to_tags: tuple[str, ...],
    document_ids: tuple[str, ...],
    prefix: str | None,
    operation_timeout: float,
    apply: bool,
    cwd: Path,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Move the selected scope's memories (all, or --doc/--prefix) to another bank or tags.

    Prints the dry run; moves only with --apply. Running it again after a failure resumes.
    """
    from pi_hindsight.maintenance import render  # noqa: PLC0415 - slow import
    from pi_hindsight.maintenance.move import MoveSelection, ScopeRef, move_scope  # noqa: PLC0415

    selected = select(state_dir, cwd, user_bank=False)
    if to_cwd is not None:
        if to_bank or to_tags:
            raise ConfigError("give either --to-cwd or --to-bank/--to-tag, not both")
        directory = resolve_state_dir(state_dir)
        _, bank_id, tags = scope_for(directory, to_cwd.resolve(), selected.settings)
        target = ScopeRef(bank_id, tags)
    else:
        target = ScopeRef(to_bank or selected.bank, tuple(to_tags) or selected.tags)
    source = ScopeRef(selected.bank, selected.tags)
    if apply and (pending := _unfinished_retains(selected)):
        raise ScopeError(
            f"{pending} retain(s) of the source scope are still in the outbox; they would "
            "arrive in the source after the move",
            hint="close Pi sessions there and run `pi-hindsight outbox drain` first",
        )
    result = run(
        selected,
        lambda backend: move_scope(
            backend,
            source,
            target,
            MoveSelection(tuple(document_ids), prefix),
            apply=apply,
            timeout=selected.timeout,
            operation_timeout=operation_timeout,
        ),
    )
    _show(result, render.move_result(result), as_json)
