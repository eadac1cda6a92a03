"""``pi-hindsight status``: memory at a glance for a directory, without starting anything."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.config import load_config
from pi_hindsight.config_display import basic_auth, display_url, scrub, url_secrets
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH, resolve_scope
from pi_hindsight.identity import resolve_identity
from pi_hindsight.rpc.sidecar import resolve_base_url
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.outbox import Outbox
from pi_hindsight.stores.set_aside import SetAsideRecord, catalog_hint


def _health(base_url: str | None, timeout_s: float) -> dict[str, Any]:
    """Probe ``/health``; the URL is reported without its password, and no error text that
    quotes the URL can leak it."""
    if base_url is None:
        return {"url": None, "healthy": False, "problem": "no server configured or recorded"}
    shown = display_url(base_url)
    plain, authorization = basic_auth(base_url)  # urllib does not take user:password@ itself
    request = urllib.request.Request(f"{plain.rstrip('/')}/health")  # noqa: S310 - our URL
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - our configured URL
            body = json.loads(response.read(65_536) or b"{}")
            return {"url": shown, "healthy": response.status == 200, "detail": body}
    except (urllib.error.URLError, OSError, ValueError) as error:
        problem = scrub(str(error), url_secrets(base_url))
        return {"url": shown, "healthy": False, "problem": problem}


def collect_status(directory: Path, cwd: Path, *, check_server: bool) -> dict[str, Any]:
    # The repository file's problems are listed too (a session shows them as one warning).
    loaded = load_config(directory, project_root=resolve_identity(cwd).root)
    settings = loaded.settings
    catalog = Catalog(directory)
    try:
        resolution = resolve_scope(cwd, loaded.settings, catalog)
    finally:
        catalog.close()
    outbox = Outbox(directory)
    try:
        health = asdict(outbox.health())
    finally:
        outbox.close()
    registered = resolution.registered
    scope = registered or resolution.proposed
    base_url = resolve_base_url(directory)(settings)
    set_aside = SetAsideRecord(directory).open_events()
    off_reason = None if registered else f"not registered; run `pi-hindsight scope register {cwd}`"
    lost_catalog = [event for event in set_aside if event.store == "catalog"]
    if off_reason and lost_catalog:
        off_reason = f"{off_reason}; {catalog_hint(lost_catalog[-1])}"
    return {
        "stateDir": str(directory),
        "configProblems": [problem.describe() for problem in loaded.problems],
        "cwd": str(cwd),
        "projectId": resolution.identity.project_id,
        "identitySource": resolution.identity.source,
        "registered": registered is not None,
        "profile": settings.profile,
        "bankRule": resolution.bank_rule,
        "warnings": list(resolution.warnings),
        "offReason": off_reason,
        "scope": {**asdict(scope), "tagsMatch": SCOPE_TAGS_MATCH},
        "server": _health(base_url, settings.timeout_ms / 1000)
        if check_server
        else {"url": None if base_url is None else display_url(base_url)},
        "outbox": health,
        # Stores set aside by any process and not yet restored or acknowledged (`state list`).
        "setAside": [event.to_json() for event in set_aside],
    }


@click.command()
@click.option(
    "--cwd",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=".",
    help="Directory a session would start in (default: here).",
)
@click.option("--no-server", is_flag=True, help="Do not contact the server.")
@state_dir_option
@json_option
def status(cwd: Path, no_server: bool, state_dir: Path | None, as_json: bool) -> None:
    """Scope, registration, server health and outbox health for a directory."""
    data = collect_status(resolve_state_dir(state_dir), cwd.resolve(), check_server=not no_server)
    if as_json:
        echo_json(data)
        return
    scope = data["scope"]
    click.echo(f"directory: {data['cwd']}")
    click.echo(f"  project: {data['projectId']} (from {data['identitySource']})")
    if data["registered"]:
        click.echo(
            f"  memory:  on — scope {scope['scope_id']}, bank {scope['bank_id']} "
            f"({data['bankRule']}), profile {data['profile']}"
        )
    else:
        click.echo(f"  memory:  OFF — {data['offReason']}")
    click.echo(f"  tags:    {', '.join(scope['tags'])} (match {scope['tagsMatch']})")
    server = data["server"]
    state = "healthy" if server.get("healthy") else f"unavailable ({server.get('problem', '?')})"
    if no_server:
        state = "not checked"
    click.echo(f"server:    {server.get('url') or '-'} — {state}")
    outbox = data["outbox"]
    click.echo(
        f"outbox:    {outbox['pending']} pending, {outbox['submitted']} awaiting confirmation, "
        f"{outbox['dead']} dead"
    )
    if outbox["last_error"]:
        click.echo(f"           last error: {outbox['last_error']}")
    for warning in data["warnings"]:
        click.echo(f"warning:   {warning}")
    for problem in data["configProblems"]:
        click.echo(f"config:    {problem}")
    for event in data["setAside"]:
        click.echo(f"set aside: [{event['id']}] {event['description']}")
