"""``pi-hindsight usage``: what the server's model spent for the selected bank (engine/spend.py)."""

from __future__ import annotations

import click

from pi_hindsight.cli._common import echo_json
from pi_hindsight.cli._selected import Selected, on_selected_bank, run
from pi_hindsight.engine.spend import PERIODS, Period, bank_usage, describe_usage


@click.command()
@click.option(
    "--period",
    type=click.Choice(PERIODS),
    default="7d",
    show_default=True,
    help="The window: the last day, 7 days or 30 days.",
)
@on_selected_bank()
def usage(selected: Selected, period: Period, as_json: bool) -> None:
    """Model calls and tokens the server spent for this directory's bank, by day and by
    operation (retain extraction, consolidation, reflect, memo refresh, other)."""
    found = run(
        selected,
        lambda backend: bank_usage(backend, selected.bank, period, timeout=selected.timeout),
    )
    if as_json:
        echo_json({"scopeId": selected.scope_id, **found.to_json()})
        return
    click.echo(f"scope {selected.scope_id}")
    click.echo(describe_usage([found]))
