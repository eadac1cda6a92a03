"""``pi-hindsight config …``: the effective configuration, its problems, legacy migration."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.config import (
    Settings,
    load_config,
    read_config_file,
    redacted,
    validate_raw,
    write_config_file,
)
from pi_hindsight.config.display import display_url, shown_key
from pi_hindsight.config.migration import migrate_legacy, unknown_keys
from pi_hindsight.config.raw import Change
from pi_hindsight.errors import ConfigError
from pi_hindsight.identity import resolve_identity
from pi_hindsight.paths import pi_agent_dir
from pi_hindsight.safe_files import printable

_project_option = click.option(
    "--cwd",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="Also apply the allowed keys of this directory's repository file (.pi/hindsight.json).",
)


@click.group()
def config() -> None:
    """The configuration: show, validate, migrate a legacy config."""


def _hide_secrets(config: dict[str, Any]) -> dict[str, Any]:
    """A copy to print: the API key as ``***``, the server URL without its password."""
    shown = copy.deepcopy(config)
    hindsight = shown.get("hindsight")
    if isinstance(hindsight, dict):
        if hindsight.get("apiKey"):
            hindsight["apiKey"] = "***"
        if isinstance(hindsight.get("baseUrl"), str):
            hindsight["baseUrl"] = display_url(hindsight["baseUrl"])
    return shown


def _load(state_dir: Path | None, cwd: Path | None) -> Any:
    root = None if cwd is None else resolve_identity(cwd).root
    return load_config(resolve_state_dir(state_dir), project_root=root)


@config.command()
@_project_option
@state_dir_option
@json_option
def show(cwd: Path | None, state_dir: Path | None, as_json: bool) -> None:
    """The effective settings and where each configured value came from (API key hidden)."""
    loaded = _load(state_dir, cwd)
    data = {
        "file": str(loaded.path),
        "readFrom": str(loaded.user_source) if loaded.user_source else None,
        "projectFile": str(loaded.project_file) if loaded.project_file else None,
        "settings": redacted(loaded.settings),
        "sources": dict(loaded.sources),
        "problems": [problem.describe() for problem in loaded.problems],
    }
    if as_json:
        echo_json(data)
        return
    click.echo(f"config file: {loaded.path}{'' if loaded.user_source else ' (absent: defaults)'}")
    if loaded.user_source and loaded.user_source != loaded.path:
        click.echo(f"read from:   {loaded.user_source} (legacy)")
    if loaded.project_file:
        click.echo(f"repository:  {loaded.project_file} (allowlisted keys only)")
    echo_json(data["settings"])
    for key, source in sorted(loaded.sources.items()):
        click.echo(f"  {key} ← {source}")
    for problem in loaded.problems:
        click.echo(f"{problem.level}: {problem.describe()}", err=True)


@config.command()
@_project_option
@state_dir_option
@json_option
def validate(cwd: Path | None, state_dir: Path | None, as_json: bool) -> None:
    """Check the configuration; exit 1 when anything is wrong (defaults are used meanwhile)."""
    loaded = _load(state_dir, cwd)
    warnings = loaded.warnings
    if as_json:
        echo_json(
            {
                "valid": not warnings,
                "problems": [
                    {
                        "level": p.level,
                        "source": p.source,
                        "key": p.key,
                        "message": p.message,
                        "fix": p.fix,
                    }
                    for p in loaded.problems
                ],
            }
        )
    else:
        for problem in loaded.problems:
            click.echo(f"{problem.level}: {problem.describe()}")
        click.echo("valid" if not warnings else f"{len(warnings)} problem(s)")
    if warnings:
        raise SystemExit(1)


@config.command()
@click.option(
    "--from",
    "source",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    default=None,
    help="Legacy file (default: <pi agent dir>/hindsight.json or .jsonc, else our config.json).",
)
@click.option("--write", is_flag=True, help="Write the migrated config to <state dir>/config.json.")
@state_dir_option
@json_option
def migrate(source: Path | None, write: bool, state_dir: Path | None, as_json: bool) -> None:
    """Migrate a legacy config (the TypeScript extension's, or old keys): report, then --write."""
    directory = resolve_state_dir(state_dir)
    target = directory / "config.json"
    if source is None:
        candidates = [pi_agent_dir() / "hindsight.json", pi_agent_dir() / "hindsight.jsonc", target]
        source = next((path for path in candidates if path.exists()), None)
        if source is None:
            raise ConfigError("no config to migrate", hint="pass --from FILE")
    raw = read_config_file(source)
    migrated, changes = migrate_legacy(raw)
    changes.extend(unknown_keys(migrated, Settings))
    settings, problems = validate_raw(migrated, str(source))
    changes.extend(Change(p.key, f"{p.message}; {p.fix}", p.level) for p in problems)
    supported = settings.model_dump(by_alias=True, exclude_defaults=True)
    shown = _hide_secrets(supported)
    shown_changes = [
        {"key": shown_key(c.key), "message": printable(c.message, 500), "level": c.level}
        for c in changes
    ]
    report: dict[str, Any] = {
        "from": str(source),
        "to": str(target),
        "written": False,
        "changes": shown_changes,
        "config": shown,
    }
    if write:
        if target.exists() and target != source:
            raise ConfigError(
                f"{target} exists already; not overwriting it",
                hint="move it away first, or edit it by hand",
            )
        write_config_file(target, supported)
        report["written"] = True
    if as_json:
        echo_json(report)
        return
    click.echo(f"migrating {source}")
    for change in shown_changes:
        click.echo(f"  {change['level']}: {change['key']}: {change['message']}")
    echo_json(shown)
    click.echo(f"written to {target}" if write else "dry run: add --write to save it")
