"""``pi-hindsight server start | stop | status``: the local Hindsight, or a team's (with an API
key, optionally on another address)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.errors import LauncherError
from pi_hindsight.launcher import (
    ServerInfo,
    ServerStatus,
    StopReport,
    server_status,
    start_server,
    stop_server,
)
from pi_hindsight.launcher.access import is_loopback
from pi_hindsight.launcher.database import ExternalDatabase
from pi_hindsight.launcher.database import from_env as database_from_env
from pi_hindsight.launcher.database import from_file as database_from_file
from pi_hindsight.launcher.reranker import REQUESTED, Requested, Reranker


def describe_reranker(reranker: Reranker | None) -> str:
    """The reranker a server runs and why (a server started before this was recorded: unknown)."""
    return "not recorded (started by an older release)" if reranker is None else reranker.label


# `status` exits with this when the server is not running or not healthy (as pg_ctl does).
EXIT_NOT_RUNNING = 3


def _state_dir(given: Path | None) -> Path:
    return resolve_state_dir(given).expanduser().absolute()


@click.group()
def server() -> None:
    """Run a local Hindsight (PostgreSQL + pgvector, local embeddings) on 127.0.0.1, or a
    team's with an API key."""


@server.command()
@click.option(
    "--port", type=click.IntRange(1, 65535), default=None, help="API port (default: free)."
)
@click.option(
    "--llm",
    type=click.Choice(["env", "offline"]),
    default="env",
    show_default=True,
    help="env: the provider in HINDSIGHT_API_LLM_*; offline: the deterministic stand-in.",
)
@click.option(
    "--timeout", type=float, default=240.0, show_default=True, help="Seconds to wait for health."
)
@click.option(
    "--api-key-env",
    metavar="VAR",
    default=None,
    help="A team's server: every request must carry the API key held in the environment "
    "variable VAR (its name, never the key itself, is recorded).",
)
@click.option(
    "--host",
    metavar="ADDRESS",
    default=None,
    help="Listen on ADDRESS instead of 127.0.0.1 (e.g. 0.0.0.0); needs --api-key-env.",
)
@click.option(
    "--database-url-env",
    metavar="VAR",
    default=None,
    help="Use your own PostgreSQL (with pgvector) instead of the embedded one: its URL "
    "(postgresql://USER:PASSWORD@HOST:PORT/DB) is in the environment variable VAR.",
)
@click.option(
    "--database-url-file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="As --database-url-env, with the URL in this file (keep it owner-only).",
)
@click.option("--database-url", "database_url_given", default=None, hidden=True)
@click.option(
    "--reranker",
    type=click.Choice(REQUESTED),
    default="auto",
    show_default=True,
    help="auto: Hindsight's cross-encoder when its model is cached or downloadable, else rrf.",
)
@state_dir_option
@json_option
def start(
    port: int | None,
    llm: Literal["env", "offline"],
    timeout: float,
    api_key_env: str | None,
    host: str | None,
    database_url_env: str | None,
    database_url_file: Path | None,
    database_url_given: str | None,
    reranker: Requested,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Start the server, or report the one already running."""
    directory = _state_dir(state_dir)
    database = _database(database_url_env, database_url_file, database_url_given)
    if not as_json:
        click.echo("starting the local Hindsight (usually 15-20 s)...", err=True)
    info = start_server(
        directory,
        port=port,
        llm=llm,
        timeout=timeout,
        host=host,
        api_key_env=api_key_env,
        database=database,
        reranker=reranker,
    )
    for warning in info.warnings:  # on stderr too, so --json users see them
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        echo_json(info.to_json())
    else:
        click.echo(_describe_info(info))


def _database(
    env_name: str | None, file: Path | None, given: str | None
) -> ExternalDatabase | None:
    """The team's own PostgreSQL, from a variable or a file — never from the command line,
    where every user of the machine could read its password (``ps``)."""
    if given is not None:
        raise LauncherError(
            "the database URL holds a password and is not taken on the command line",
            hint="put it in an environment variable and pass `--database-url-env VAR`, or in "
            "an owner-only file and pass `--database-url-file PATH`",
        )
    if env_name is not None and file is not None:
        raise LauncherError("give --database-url-env or --database-url-file, not both")
    if env_name is not None:
        return database_from_env(dict(os.environ), env_name)
    return None if file is None else database_from_file(file)


def _describe_database(info: ServerInfo | ServerStatus) -> str:
    if info.database is not None:
        return f"{info.database.shown} (your own PostgreSQL; URL from {info.database.source})"
    if isinstance(info, ServerStatus):
        return f"the embedded PostgreSQL, data in {info.data_dir}"
    owner = f" (as {info.postgres_user})" if info.postgres_user else ""
    return f"127.0.0.1:{info.postgres_port}{owner}, data in {info.data_dir}"


def _describe_info(info: ServerInfo) -> str:
    how = "already running" if info.reused else f"started in {info.startup_seconds:.1f} s"
    llm = info.llm if info.standin_url is None else f"{info.llm} (stand-in at {info.standin_url})"
    pids = ", ".join(f"{name} {pid}" for name, pid in info.pids.items())
    warnings = [f"  warning:   {warning}" for warning in info.warnings]
    return "\n".join(
        [
            f"Hindsight is running at {info.base_url} ({how})",
            *warnings,
            f"  listens:   {info.host}:{info.port}",
            f"  auth:      {_describe_auth(info.api_key_env)}",
            f"  llm:       {llm}",
            f"  reranker:  {describe_reranker(info.reranker)}",
            f"  postgres:  {_describe_database(info)}",
            f"  logs:      {info.log_dir}",
            f"  pids:      {pids}",
        ]
    )


@server.command()
@click.option(
    "--timeout",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds each process gets to exit before SIGKILL.",
)
@state_dir_option
@json_option
def stop(timeout: float, state_dir: Path | None, as_json: bool) -> None:
    """Stop the server this state directory started."""
    report = stop_server(_state_dir(state_dir), timeout=timeout)
    if as_json:
        echo_json(report.to_json())
    else:
        click.echo(_describe_stop(report))


def _describe_auth(api_key_env: str | None, key_check: str | None = None) -> str:
    if api_key_env is None:
        return "none (no API key: anyone who can reach the address can use it)"
    found = {
        "accepted": "accepted",
        "refused": "REFUSED — it is not the server's key",
        "unset": "not set here",
        "unknown": "not checked (no answer)",
    }
    here = f"; ${api_key_env} in this environment: {found[key_check]}" if key_check else ""
    return f"API key required (read from ${api_key_env} at start){here}"


def _describe_stop(report: StopReport) -> str:
    if not report.recorded:
        return "no local Hindsight is recorded; nothing to stop"
    if not report.was_running:
        return "the recorded server was no longer running; its record is removed"
    lines = ["stopped the local Hindsight"]
    lines += [f"  {p.name} (pid {p.pid}): {p.outcome}" for p in report.processes]
    return "\n".join(lines)


@server.command()
@state_dir_option
@json_option
def status(state_dir: Path | None, as_json: bool) -> None:
    """Show whether the server runs and is healthy (exit status 3 if not)."""
    result = server_status(_state_dir(state_dir))
    if as_json:
        echo_json(result.to_json())
    else:
        click.echo(_describe_status(result))
    if not result.healthy:
        raise click.exceptions.Exit(EXIT_NOT_RUNNING)


def _describe_status(result: ServerStatus) -> str:
    if not result.recorded:
        return "not running (no server recorded in this state directory)"
    state = "healthy" if result.healthy else "running, NOT healthy" if result.running else "down"
    lines = [f"{state}: {result.base_url} (llm {result.llm}, started {result.started_at})"]
    if result.problem:
        lines.append(f"  problem:   {result.problem}")
    if result.host is not None:
        reach = "this machine only" if is_loopback(result.host) else "other machines can reach it"
        lines.append(f"  listens:   {result.host} ({reach})")
    lines.append(f"  auth:      {_describe_auth(result.api_key_env, result.key_check)}")
    lines.append(f"  reranker:  {describe_reranker(result.reranker)}")
    for name, pid in result.pids.items():
        alive = "alive" if result.alive.get(name) else "gone"
        rss = result.rss_bytes.get(name)
        memory = f", {rss / 2**20:.0f} MiB" if rss else ""
        lines.append(f"  {name + ':':<10} pid {pid} ({alive}{memory})")
    lines.append(f"  database:  {_describe_database(result)}")
    lines.append(f"  logs:      {result.log_dir}")
    return "\n".join(lines)
