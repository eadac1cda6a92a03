"""``pi-hindsight setup``: install the Pi extension and record which Python runs the sidecar."""

from __future__ import annotations

import json
import os
import shutil
import sys
from importlib import resources
from pathlib import Path

import click

from pi_hindsight.cli._common import echo_json, json_option
from pi_hindsight.paths import ensure_private_dir, pi_agent_dir
from pi_hindsight.paths import state_dir as default_state_dir

EXTENSION_DIR_NAME = "pi-hindsight"
_SHIPPED_SUFFIXES = {".ts", ".json"}


def install_extension(agent_dir: Path, python: str) -> Path:
    """Copy the shim into ``<agent dir>/extensions/pi-hindsight`` and write ``sidecar.json``."""
    target = agent_dir / "extensions" / EXTENSION_DIR_NAME
    target.mkdir(parents=True, exist_ok=True)
    source = resources.files("pi_hindsight") / "shim"
    for entry in source.iterdir():
        if (
            entry.is_file()
            and Path(entry.name).suffix in _SHIPPED_SUFFIXES
            and entry.name != "sidecar.json"
        ):
            (target / entry.name).write_bytes(entry.read_bytes())
    sidecar = {"python": python, "args": ["-m", "pi_hindsight", "serve"]}
    temporary = target / "sidecar.json.tmp"
    temporary.write_text(json.dumps(sidecar, indent=2) + "\n", encoding="utf-8")
    temporary.replace(target / "sidecar.json")
    return target


@click.command()
@click.option(
    "--agent-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Pi agent dir (default: $PI_CODING_AGENT_DIR or ~/.pi/agent).",
)
@click.option(
    "--python", "python", default=None, help="Interpreter for the sidecar (default: this one)."
)
@json_option
def setup(agent_dir: Path | None, python: str | None, as_json: bool) -> None:
    """Install the Pi extension into the Pi agent dir. Never waits for input without a terminal."""
    agent = pi_agent_dir() if agent_dir is None else agent_dir
    interpreter = python or sys.executable
    if shutil.which(interpreter) is None and not Path(interpreter).is_file():
        raise click.BadParameter(f"{interpreter} is not an executable", param_hint="--python")
    installed = install_extension(agent, interpreter)
    env = dict(os.environ)
    env["PI_CODING_AGENT_DIR"] = str(agent)
    state = ensure_private_dir(default_state_dir(env) if agent_dir is None else agent / "hindsight")
    result = {"extension": str(installed), "python": interpreter, "stateDir": str(state)}
    if as_json:
        echo_json(result)
        return
    click.echo(f"installed the Pi extension in {installed}")
    click.echo(f"  sidecar python: {interpreter}")
    click.echo(f"  state dir:      {state}")
    click.echo("next: register a project with `pi-hindsight scope register PATH`, or accept the")
    click.echo("prompt Pi shows in an unregistered project. Running Pi sessions need /reload.")
