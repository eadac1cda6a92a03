"""``pi-hindsight setup --host claude-code``: hooks, MCP server and command into Claude Code's user
settings (``hosts/claude_code/install.py`` says what and how), and the same memory config Pi
uses — one state dir for both agents, so the same repository is the same memory in either."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

import click

from pi_hindsight.cli._common import echo_json
from pi_hindsight.config import CONFIG_FILE_NAME, load_config, read_config_file, write_config_file
from pi_hindsight.config.raw import set_dotted
from pi_hindsight.hosts.claude_code import install as installer
from pi_hindsight.paths import ensure_private_dir
from pi_hindsight.paths import state_dir as default_state_dir

AUTO_MEMORY_NOTE = (
    "Claude Code has its own auto-memory (~/.claude/projects/<dir>/memory/MEMORY.md), which may "
    'overlap with Hindsight memory. setup leaves it as it is; to switch it off, add "autoMemory'
    'Enabled": false to ~/.claude/settings.json (or set CLAUDE_CODE_DISABLE_AUTO_MEMORY=1).'
)


def _update_config(state: Path, updates: Mapping[str, object]) -> Path:
    config_path = state / CONFIG_FILE_NAME
    changed = {key: value for key, value in updates.items() if value is not None}
    if changed or not config_path.exists():
        merged = read_config_file(config_path) if config_path.exists() else {}
        merged.setdefault("profile", "project-only")
        for key, value in changed.items():
            set_dotted(merged, key, value)
        if merged.get("profile") in ("project+user", "user-only"):
            set_dotted(merged, "banks.user.enabled", True)
        write_config_file(config_path, merged)
    return config_path


def setup_claude_code(
    *,
    python: str | None,
    home: Path | None,
    updates: Mapping[str, object],
    uninstall: bool,
    as_json: bool,
) -> None:
    paths = installer.ClaudePaths(Path.home() if home is None else home)
    state = default_state_dir(dict(os.environ))
    if uninstall:
        changes = installer.uninstall(paths, state).lines
        if as_json:
            echo_json({"changed": changes})
            return
        for line in changes or ["nothing of pi-hindsight was installed there"]:
            click.echo(line)
        return
    interpreter = python or sys.executable
    if shutil.which(interpreter) is None and not Path(interpreter).is_file():
        raise click.BadParameter(f"{interpreter} is not an executable", param_hint="--python")
    ensure_private_dir(state)
    config_path = _update_config(state, updates)
    changes = installer.install(paths, interpreter, state).lines
    loaded = load_config(state)
    if as_json:
        echo_json(
            {
                "changed": changes,
                "python": interpreter,
                "stateDir": str(state),
                "config": str(config_path),
                "profile": loaded.settings.profile,
                "autoMemory": AUTO_MEMORY_NOTE,
                "problems": [problem.describe() for problem in loaded.warnings],
            }
        )
        return
    click.echo("installed pi-hindsight into Claude Code:")
    for line in changes:
        click.echo(f"  {line}")
    click.echo(f"  hook python:    {interpreter}")
    click.echo(f"  state dir:      {state} (shared with Pi)")
    click.echo(f"  profile:        {loaded.settings.profile}")
    for problem in loaded.warnings:
        click.echo(f"  warning: {problem.describe()}", err=True)
    click.echo(f"note: {AUTO_MEMORY_NOTE}")
    click.echo("next: register a project with `pi-hindsight scope register PATH` (or run")
    click.echo("/hindsight-register in Claude Code there). Running sessions need a restart.")
