"""``pi-hindsight setup``: install the Pi extension and record which Python runs the sidecar.

The install itself (a Pi package through ``pi install``, or a copy without a ``pi``) lives in
``hosts/pi/install.py``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from pi_hindsight.cli._common import echo_json, json_option
from pi_hindsight.config import (
    CONFIG_FILE_NAME,
    LoadedConfig,
    load_config,
    read_config_file,
    write_config_file,
)
from pi_hindsight.config.raw import set_dotted
from pi_hindsight.hosts.pi import install as pi_install
from pi_hindsight.paths import ensure_private_dir, pi_agent_dir
from pi_hindsight.paths import state_dir as default_state_dir

EXTENSION_DIR_NAME = pi_install.COPY_DIR_NAME


def install_extension(agent_dir: Path, python: str, state_dir: Path | None = None) -> Path:
    """The copy form (no ``pi`` needed), for the demo and tests: the shim in
    ``<agent dir>/extensions/pi-hindsight``, ``sidecar.json`` in ``state_dir`` (default
    ``<agent dir>/hindsight``)."""
    target = pi_install.copy_shim(agent_dir)
    pi_install.write_sidecar_spec(
        agent_dir / "hindsight" if state_dir is None else state_dir, python
    )
    return target


PROFILES = ("project-only", "project+user", "user-only", "recall-only")
PROFILE_HELP = {
    "project-only": "recall and automatic retain in the project's scope (default)",
    "project+user": "also recall your personal User bank (written only on purpose)",
    "user-only": "only your User bank: recall, and writes only on purpose",
    "recall-only": "recall, but never retain automatically",
}


def _choose(
    interactive: bool,
    profile: str | None,
    user_bank: str | None,
    current: dict[str, Any],
) -> tuple[str | None, str | None]:
    """Ask for what the flags did not say — only with a terminal; never wait otherwise."""
    if not interactive:
        return profile, user_bank
    if profile is None:
        click.echo("Memory profiles:")
        for name in PROFILES:
            click.echo(f"  {name:13} {PROFILE_HELP[name]}")
        profile = click.prompt(
            "Profile",
            type=click.Choice(PROFILES),
            default=current.get("profile", "project-only"),
        )
    if profile in ("project+user", "user-only") and user_bank is None:
        # "auto" writes nothing: pi-user on your own server, a personal id on a shared one.
        answer = click.prompt(
            "User bank id ('auto': pi-user on your own server, personal on a team's)",
            default=current.get("banks", {}).get("user", {}).get("bankId", "auto"),
        )
        user_bank = None if answer == "auto" else answer
    return profile, user_bank


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
@click.option("--profile", type=click.Choice(PROFILES), default=None, help="Memory profile.")
@click.option("--bank", default=None, help="Project (coding domain) bank id.")
@click.option("--user-bank", default=None, help="User bank id (profiles with a User bank).")
@click.option(
    "--topology",
    type=click.Choice(("domain-tagged", "isolated-bank")),
    default=None,
    help="One shared coding bank with exact project tags (default), or a bank per project.",
)
@click.option("--server-url", default=None, help="Hindsight URL (default: the local server).")
@click.option(
    "--pi",
    "pi_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The Pi to install with (default: $PI_BIN, else `pi` on PATH).",
)
@click.option(
    "--uninstall",
    is_flag=True,
    help="Remove what setup installed (Pi: the extension in either form and sidecar.json; "
    "claude-code: exactly what setup added); config and memory stay.",
)
@click.option("--yes", "-y", is_flag=True, help="Never ask; use flags and defaults.")
@click.option(
    "--host",
    type=click.Choice(("pi", "claude-code")),
    default="pi",
    help="Which agent to install into (default: pi).",
)
@click.option(
    "--claude-home",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="claude-code: the home whose .claude/ and .claude.json to change (default: ~).",
)
@json_option
def setup(
    agent_dir: Path | None,
    python: str | None,
    profile: str | None,
    bank: str | None,
    user_bank: str | None,
    topology: str | None,
    server_url: str | None,
    pi_path: Path | None,
    uninstall: bool,
    yes: bool,
    host: str,
    claude_home: Path | None,
    as_json: bool,
) -> None:
    """Install the Pi extension (or, with --host claude-code, the Claude Code hooks, MCP server
    and command) and choose a memory profile.

    The extension is installed as a Pi package (`pi install`), so `pi list` shows it and a
    `/reload` after upgrading pi-hindsight runs the new version; without a `pi` command it is
    copied into the agent dir's extensions/ folder. With a terminal it asks for what the flags did
    not say; without one (or with --yes) it uses the flags and defaults and never waits for input.
    """
    if host == "claude-code":
        from pi_hindsight.cli.setup_claude_code import setup_claude_code  # noqa: PLC0415

        updates = {
            "profile": profile,
            "banks.project.bankId": bank,
            "banks.user.bankId": user_bank,
            "topology": topology,
            "hindsight.baseUrl": server_url,
        }
        setup_claude_code(
            python=python, home=claude_home, updates=updates, uninstall=uninstall, as_json=as_json
        )
        return
    if claude_home is not None:
        raise click.UsageError("--claude-home goes with --host claude-code")
    agent = pi_agent_dir() if agent_dir is None else agent_dir
    env = dict(os.environ)
    env["PI_CODING_AGENT_DIR"] = str(agent)
    state = default_state_dir(env) if agent_dir is None else agent / "hindsight"
    try:
        pi = pi_install.find_pi(pi_path)
    except pi_install.InstallError as error:
        raise click.BadParameter(str(error), param_hint="--pi") from error
    if uninstall:
        _uninstall(agent, state, pi, as_json)
        return
    interpreter = python or sys.executable
    if shutil.which(interpreter) is None and not Path(interpreter).is_file():
        raise click.BadParameter(f"{interpreter} is not an executable", param_hint="--python")
    state = ensure_private_dir(state)
    config_path = state / CONFIG_FILE_NAME
    current = read_config_file(config_path) if config_path.exists() else {}
    interactive = not yes and not as_json and sys.stdin.isatty() and sys.stdout.isatty()
    profile, user_bank = _choose(interactive, profile, user_bank, current)
    updates = {
        "profile": profile,
        "banks.project.bankId": bank,
        "banks.user.bankId": user_bank,
        "topology": topology,
        "hindsight.baseUrl": server_url,
    }
    changed = {key: value for key, value in updates.items() if value is not None}
    if changed or not config_path.exists():
        merged = dict(current)
        merged.setdefault("profile", "project-only")
        for key, value in changed.items():
            set_dotted(merged, key, value)
        if merged.get("profile") in ("project+user", "user-only"):
            set_dotted(merged, "banks.user.enabled", True)
        write_config_file(config_path, merged)
    try:
        installed = pi_install.install(agent, state, interpreter, pi)
    except pi_install.InstallError as error:
        raise click.ClickException(str(error)) from error
    loaded = load_config(state, env)
    result = {
        "extension": str(installed.location),
        "form": installed.form,
        "pi": None if installed.pi is None else str(installed.pi.path),
        "removed": list(installed.removed),
        "note": installed.note,
        "sidecar": str(installed.sidecar),
        "python": interpreter,
        "stateDir": str(state),
        "config": str(config_path),
        "profile": loaded.settings.profile,
        "problems": [problem.describe() for problem in loaded.warnings],
    }
    if as_json:
        echo_json(result)
        return
    _report(installed, interpreter, state, loaded)


def _report(
    installed: pi_install.InstallResult, interpreter: str, state: Path, loaded: LoadedConfig
) -> None:
    if installed.form == "package":
        click.echo(f"installed the Pi extension as a Pi package: {installed.location}")
    else:
        click.echo(f"installed the Pi extension as a copy in {installed.location}")
    if installed.note:
        click.echo(f"  note: {installed.note}")
    for what in installed.removed:
        click.echo(f"  removed the older install: {what}")
    click.echo(f"  sidecar python: {interpreter} ({installed.sidecar})")
    click.echo(f"  state dir:      {state}")
    click.echo(
        f"  profile:        {loaded.settings.profile} — {PROFILE_HELP[loaded.settings.profile]}"
    )
    for problem in loaded.warnings:
        click.echo(f"  warning: {problem.describe()}", err=True)
    click.echo("next: register a project with `pi-hindsight scope register PATH`, or accept the")
    click.echo("prompt Pi shows in an unregistered project. Running Pi sessions need /reload.")


def _uninstall(agent: Path, state: Path, pi: pi_install.PiCommand | None, as_json: bool) -> None:
    try:
        removed = pi_install.uninstall(agent, state, pi)
    except pi_install.InstallError as error:
        raise click.ClickException(str(error)) from error
    if as_json:
        echo_json({"removed": list(removed), "stateDir": str(state)})
        return
    if not removed:
        click.echo(f"nothing to remove: pi-hindsight is not installed in {agent}")
        return
    for what in removed:
        click.echo(f"removed {what}")
    click.echo(f"kept the state dir {state} (config, registrations, outbox, evidence).")
    click.echo("Running Pi sessions keep the extension until /reload or a restart.")
