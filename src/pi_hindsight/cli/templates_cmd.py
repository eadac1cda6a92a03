"""``pi-hindsight templates list | preview NAME | apply NAME``: the two bundled starter bank
templates, applied to the bank selected for ``--cwd`` (docs/bank-maintenance.md)."""

from __future__ import annotations

import click

from pi_hindsight.cli._common import echo_json, json_option
from pi_hindsight.cli._selected import Selected, apply_option, on_selected_bank, run
from pi_hindsight.maintenance import plain_text
from pi_hindsight.maintenance.common import as_json as to_json
from pi_hindsight.maintenance.templates import (
    TEMPLATE_NAMES,
    TemplatePlan,
    apply_template,
    list_templates,
    preview_template,
)

_NAMES = click.Choice(TEMPLATE_NAMES)


@click.group()
def templates() -> None:
    """Bundled starter bank templates: list, preview (dry run), apply."""


@templates.command("list")
@json_option
def list_command(as_json: bool) -> None:
    """The bundled templates and what each sets."""
    infos = list_templates()
    if as_json:
        echo_json(to_json(infos))
    else:
        click.echo(plain_text.templates_list(infos))


def _preview(selected: Selected, name: str) -> TemplatePlan:
    return run(
        selected,
        lambda backend: preview_template(
            backend, selected.bank, name, tags=selected.tags, timeout=selected.timeout
        ),
    )


@templates.command()
@click.argument("name", type=_NAMES)
@on_selected_bank()
def preview(selected: Selected, name: str, as_json: bool) -> None:
    """What applying template NAME to the selected bank would change (changes nothing)."""
    plan = _preview(selected, name)
    if as_json:
        echo_json(to_json(plan))
    else:
        click.echo(plain_text.template_plan(plan))


@templates.command()
@click.argument("name", type=_NAMES)
@apply_option
@on_selected_bank()
def apply(selected: Selected, name: str, apply: bool, as_json: bool) -> None:
    """Apply template NAME to the selected bank: prints the preview; changes only with --apply."""
    if not apply:
        plan = _preview(selected, name)
        if as_json:
            echo_json({"applied": False, "plan": to_json(plan)})
        else:
            click.echo(plain_text.template_plan(plan))
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
        click.echo(plain_text.template_applied(applied))
