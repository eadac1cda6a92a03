"""``pi-hindsight scope …``: register locations for memory and inspect the catalogue."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.cli.seed_cmd import seed
from pi_hindsight.cli.state_cmd import echo_set_aside
from pi_hindsight.config import load_config
from pi_hindsight.engine.scope import register_location, resolve_scope
from pi_hindsight.errors import InputFileError, ScopeError, StateError
from pi_hindsight.safe_files import loads, read_bytes
from pi_hindsight.stores.catalog import Catalog, ScopeRecord
from pi_hindsight.stores.set_aside import SetAsideRecord, describe

# An export holds every scope, location and decline: generous, but bounded.
EXPORT_MAX_BYTES = 64_000_000
EXPORT_MAX_DEPTH = 16


def _record_json(record: ScopeRecord) -> dict[str, object]:
    data = asdict(record)
    data["tags"] = list(record.tags)
    data["locations"] = list(record.locations)
    data["registered_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.registered_at))
    return data


@click.group()
def scope() -> None:
    """Registered memory scopes (which directories may use memory)."""


@scope.command()
@click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False), default=".")
@click.option(
    "--project-id",
    default=None,
    help="Pin the project id for PATH instead of deriving it (git remote, common dir, directory).",
)
@state_dir_option
@json_option
def register(path: Path, project_id: str | None, state_dir: Path | None, as_json: bool) -> None:
    """Register PATH (default: the current directory) for memory. Running this is consent."""
    directory = resolve_state_dir(state_dir)
    config = load_config(directory)
    for problem in config.warnings:
        click.echo(f"warning: {problem.describe()}", err=True)
    catalog = Catalog(directory)
    try:
        registered = register_location(
            path, config.settings, catalog, consent="cli", pin=project_id
        )
    finally:
        catalog.close()
    if as_json:
        echo_json(asdict(registered))
        return
    click.echo(f"registered {path.resolve()}")
    click.echo(f"  scope: {registered.scope_id}")
    click.echo(f"  bank:  {registered.bank_id}")
    click.echo(f"  tags:  {', '.join(registered.tags)}")


@scope.command("list")
@state_dir_option
@json_option
def list_scopes(state_dir: Path | None, as_json: bool) -> None:
    """List registered scopes (and a set-aside catalogue whose registrations are missing)."""
    directory = resolve_state_dir(state_dir)
    catalog = Catalog(directory)
    try:
        records = catalog.scopes()
    finally:
        catalog.close()
    reports = SetAsideRecord(directory).open_events("catalog")
    if as_json:
        # The list as before; a set-aside catalogue goes to stderr so the list stays parseable.
        for event in reports:
            click.echo(f"warning: [{event.event_id}] {describe(event)}", err=True)
        echo_json([_record_json(record) for record in records])
        return
    echo_set_aside(reports)
    if not records:
        click.echo("no registered scopes; register one with `pi-hindsight scope register PATH`")
    for record in records:
        click.echo(f"{record.scope_id}  bank={record.bank_id}  tags={','.join(record.tags)}")
        for location in record.locations:
            click.echo(f"    {location}")


@scope.command()
@click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False), default=".")
@state_dir_option
@json_option
def show(path: Path, state_dir: Path | None, as_json: bool) -> None:
    """Show the scope a session started in PATH would use, and whether it is registered."""
    directory = resolve_state_dir(state_dir)
    config = load_config(directory)
    catalog = Catalog(directory)
    try:
        resolution = resolve_scope(path, config.settings, catalog)
    finally:
        catalog.close()
    data = {
        "path": str(path.resolve()),
        "projectId": resolution.identity.project_id,
        "identitySource": resolution.identity.source,
        "registered": resolution.registered is not None,
        "scope": asdict(resolution.registered or resolution.proposed),
        "bankRule": resolution.bank_rule,
        "warnings": list(resolution.warnings),
    }
    if as_json:
        echo_json(data)
        return
    chosen = resolution.registered or resolution.proposed
    state = "registered" if resolution.registered else "NOT registered (memory off)"
    click.echo(f"{data['path']}: {state}")
    click.echo(f"  project: {resolution.identity.project_id} (from {resolution.identity.source})")
    click.echo(f"  scope:   {chosen.scope_id}")
    click.echo(f"  bank:    {chosen.bank_id}")
    click.echo(f"  tags:    {', '.join(chosen.tags)} (match exact)")
    click.echo(f"  rule:    {resolution.bank_rule}")
    for warning in resolution.warnings:
        click.echo(f"  warning: {warning}")


@scope.command()
@click.argument("scope_id")
@state_dir_option
def unregister(scope_id: str, state_dir: Path | None) -> None:
    """Unregister SCOPE_ID (memory stays in Hindsight; sessions there stop using it)."""
    catalog = Catalog(resolve_state_dir(state_dir))
    try:
        removed = catalog.unregister(scope_id)
    finally:
        catalog.close()
    if not removed:
        raise ScopeError(f"no registered scope {scope_id!r}", hint="see `pi-hindsight scope list`")
    click.echo(f"unregistered {scope_id}")


@scope.command("export")
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False), default=None)
@state_dir_option
def export_scopes(output: Path | None, state_dir: Path | None) -> None:
    """Export scopes, locations, pins, exact tags and consent records as JSON (to keep them
    when replacing the extension or moving machines)."""
    catalog = Catalog(resolve_state_dir(state_dir))
    try:
        data = catalog.export()
    finally:
        catalog.close()
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    click.echo(f"exported {len(data['scopes'])} scopes to {output}")


@scope.command("import")
@click.argument("source", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@state_dir_option
@json_option
def import_scopes(source: Path, state_dir: Path | None, as_json: bool) -> None:
    """Merge an export into the catalogue. Existing scopes are never rewritten: a scope id with
    a different bank or tags is reported as a conflict."""
    try:
        data = loads(
            read_bytes(source, max_bytes=EXPORT_MAX_BYTES), source, max_depth=EXPORT_MAX_DEPTH
        )
    except InputFileError as error:
        raise StateError(f"cannot read the export: {error}", hint=error.hint) from error
    if not isinstance(data, dict):
        raise StateError(
            f"{source}: not a catalogue export (the top level is not a JSON object)",
            hint="export again with `pi-hindsight scope export`",
        )
    catalog = Catalog(resolve_state_dir(state_dir))
    try:
        report = catalog.import_(data)
    finally:
        catalog.close()
    if as_json:
        echo_json(asdict(report))
        return
    click.echo(
        f"imported {report.added_scopes} scopes and {report.added_locations} locations "
        f"({report.unchanged} already present)"
    )
    for conflict in report.conflicts:
        click.echo(f"conflict: {conflict}", err=True)


scope.add_command(seed)
