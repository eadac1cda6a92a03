"""``pi-hindsight state …``: stores that were set aside because they were damaged
(docs/operations.md, "Damaged state files")."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.errors import ConfigError
from pi_hindsight.stores.set_aside import SetAsideEvent, SetAsideRecord, describe
from pi_hindsight.stores.set_aside_restore import restore as restore_event


@click.group()
def state() -> None:
    """Damaged state files that were set aside: list, acknowledge, restore."""


def echo_set_aside(events: list[SetAsideEvent]) -> None:
    """A warning per open set-aside report (for the other commands' plain output)."""
    for event in events:
        click.echo(f"warning: [{event.event_id}] {describe(event)}")


def _when(stamp: float | None) -> str:
    return "-" if stamp is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _show(event: SetAsideEvent) -> None:
    status = "open"
    if event.restored_at is not None:
        status = f"restored {_when(event.restored_at)}"
    elif event.acknowledged_at is not None:
        status = f"acknowledged {_when(event.acknowledged_at)}"
    click.echo(f"{event.event_id}  {event.store:<8} {_when(event.at)}  pid {event.pid}  {status}")
    click.echo(f"    {event.original} -> {event.moved_to}")
    click.echo(f"    reason: {event.reason}")
    if event.restore_note:
        click.echo(f"    restore: {event.restore_note}")
    if event.open:
        click.echo(f"    {describe(event).split('Next: ', 1)[1]}")


@state.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also acknowledged and restored ones.")
@state_dir_option
@json_option
def list_events(show_all: bool, state_dir: Path | None, as_json: bool) -> None:
    """Stores set aside and not yet acknowledged or restored (every process reports them)."""
    record = SetAsideRecord(resolve_state_dir(state_dir))
    events = record.events() if show_all else record.open_events()
    if as_json:
        echo_json([event.to_json() for event in events])
        return
    if not events:
        click.echo("nothing set aside" if show_all else "nothing set aside needs attention")
        return
    for event in events:
        _show(event)


@state.command()
@click.argument("event_ids", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Acknowledge every open one.")
@state_dir_option
@json_option
def acknowledge(
    event_ids: tuple[str, ...], every: bool, state_dir: Path | None, as_json: bool
) -> None:
    """Stop reporting a set-aside store (its file stays where it is; delete it when done)."""
    record = SetAsideRecord(resolve_state_dir(state_dir))
    if not event_ids and not every:
        raise ConfigError(
            "name what to acknowledge", hint="pass ids from `pi-hindsight state list`, or --all"
        )
    chosen = [event.event_id for event in record.open_events()] if every else list(event_ids)
    done = [record.acknowledge(event_id) for event_id in chosen]
    if as_json:
        echo_json([event.to_json() for event in done])
        return
    for event in done:
        click.echo(
            f"acknowledged {event.event_id} ({event.label}); the file stays at {event.moved_to}"
        )
    if not done:
        click.echo("nothing to acknowledge")


@state.command()
@click.argument("event_id")
@state_dir_option
@json_option
def restore(event_id: str, state_dir: Path | None, as_json: bool) -> None:
    """Bring back what a set-aside store still holds: an outbox's undelivered requests, a
    catalogue's registrations. Safe to repeat."""
    outcome = restore_event(resolve_state_dir(state_dir), event_id)
    if as_json:
        data = asdict(outcome)
        data["event"] = outcome.event.to_json()
        echo_json(data)
        return
    click.echo(f"{outcome.event.event_id} ({outcome.event.label}, {outcome.event.moved_to}):")
    click.echo(
        f"  read {outcome.recovered} row(s), {outcome.unreadable} could not be read; {outcome.note}"
    )
