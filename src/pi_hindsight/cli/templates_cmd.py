"""``pi-hindsight templates list | preview NAME | apply NAME``: the two bundled starter bank
templates, applied to the bank selected for ``--cwd`` (docs/bank-maintenance.md). The same
operations as Pi's ``/hindsight:template…`` commands (``operations/bank_templates.py``)."""

from __future__ import annotations

import asyncio

import click

from pi_hindsight.cli._common import echo_json, json_option
from pi_hindsight.cli._selected import Selected, apply_option, on_selected_bank, run_operation
from pi_hindsight.maintenance.template_import import TEMPLATE_NAMES
from pi_hindsight.operations.bank_templates import (
    TEMPLATE_APPLY,
    TEMPLATE_PREVIEW,
    TEMPLATES,
    TemplatesArgs,
)

_NAMES = click.Choice(TEMPLATE_NAMES)


@click.group()
def templates() -> None:
    """Bundled starter bank templates: list, preview (dry run), apply."""


@templates.command("list")
@json_option
def list_command(as_json: bool) -> None:
    """The bundled templates and what each sets."""
    listed = asyncio.run(TEMPLATES(None, TemplatesArgs()))
    if as_json:
        echo_json(listed.to_json())
    else:
        click.echo(listed.render())


@templates.command()
@click.argument("name", type=_NAMES)
@on_selected_bank()
def preview(selected: Selected, name: str, as_json: bool) -> None:
    """What applying template NAME to the selected bank would change (changes nothing)."""
    run_operation(selected, TEMPLATE_PREVIEW, {"name": name}, as_json)


@templates.command()
@click.argument("name", type=_NAMES)
@apply_option
@on_selected_bank()
def apply(selected: Selected, name: str, apply: bool, as_json: bool) -> None:
    """Apply template NAME to the selected bank: prints the preview; changes only with --apply."""
    if apply:
        run_operation(selected, TEMPLATE_APPLY, {"name": name}, as_json)
        return
    run_operation(selected, TEMPLATE_PREVIEW, {"name": name}, as_json)
    if not as_json:
        click.echo("dry run: nothing changed; run again with --apply to apply it")
