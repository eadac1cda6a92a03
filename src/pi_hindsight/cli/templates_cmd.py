"""``pi-hindsight templates list | preview NAME | apply NAME``: the two bundled starter bank
templates, applied to the bank selected for ``--cwd`` (docs/bank-maintenance.md)."""

from __future__ import annotations

from pathlib import Path

import click

from pi_hindsight.cli._common import echo_json, json_option, state_dir_option
from pi_hindsight.cli._selected import apply_option, cwd_option, run, select, user_option

_NAMES = click.Choice(["coding-project", "personal-preferences"])


@click.group()
def templates() -> None:
    """Bundled starter bank templates: list, preview (dry run), apply."""


@templates.command("list")
@json_option
def list_command(as_json: bool) -> None:
    """The bundled templates and what each sets."""
    from pi_hindsight.maintenance import render  # noqa: PLC0415 - slow import
    from pi_hindsight.maintenance.common import as_json as to_json  # noqa: PLC0415
    from pi_hindsight.maintenance.templates import list_templates  # noqa: PLC0415

    infos = list_templates()
    if as_json:
        echo_json(to_json(infos))
    else:
        click.echo(render.templates_list(infos))


@templates.command()
@click.argument("name", type=_NAMES)
@cwd_option
@user_option
@state_dir_option
@json_option
def preview(name: str, cwd: Path, user_bank: bool, state_dir: Path | None, as_json: bool) -> None:
    """What applying template NAME to the selected bank would change (changes nothing)."""
    from pi_hindsight.maintenance import render  # noqa: PLC0415 - slow import
    from pi_hindsight.maintenance.common import as_json as to_json  # noqa: PLC0415
    from pi_hindsight.maintenance.templates import preview_template  # noqa: PLC0415

    selected = select(state_dir, cwd, user_bank=user_bank)
    plan = run(
        selected,
        lambda backend: preview_template(
            backend, selected.bank, name, tags=selected.tags, timeout=selected.timeout
        ),
    )
    if as_json:
        echo_json(to_json(plan))
    else:
        click.echo(render.template_plan(plan))


@templates.command()
@click.argument("name", type=_NAMES)
@apply_option
@cwd_option
@user_option
@state_dir_option
@json_option
def apply(
    name: str, apply: bool, cwd: Path, user_bank: bool, state_dir: Path | None, as_json: bool
) -> None:
    """Apply template NAME to the selected bank: prints the preview; changes only with --apply."""
    from pi_hindsight.maintenance import render  # noqa: PLC0415 - slow import
    from pi_hindsight.maintenance.common import as_json as to_json  # noqa: PLC0415
    from pi_hindsight.maintenance.templates import apply_template, preview_template  # noqa: PLC0415

    selected = select(state_dir, cwd, user_bank=user_bank)
    if not apply:
        plan = run(
            selected,
            lambda backend: preview_template(
                backend, selected.bank, name, tags=selected.tags, timeout=selected.timeout
            ),
        )
        if as_json:
            echo_json({"applied": False, "plan": to_json(plan)})
        else:
            click.echo(render.template_plan(plan))
            click.echo("dry run: nothing changed; run again with --apply to apply it")
        return
    applied = run(
        selected,
        lambda backend: apply_template(
            backend, selected.bank, name, tags=selected.tags, timeout=selected.timeout
        ),
    )
    if as_json:
        echo_json({"applied": True, **to_json(applied)})
    else:
        click.echo(render.template_applied(applied))
