"""``pi-hindsight memory …``: the agent's memory tool actions, from a terminal (CLI parity).

Each command opens the same engine the Pi sidecar runs, for the session a Pi started in ``--cwd``
would have, and calls the same tool code, so the two never disagree.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.engine.types import SessionInfo
from pi_hindsight.tools import MEMORY_TOOL, RETAIN_GLOBAL_TOOL, MemoryTools, ToolResult

_cwd_option = click.option(
    "--cwd",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=".",
    help="The directory a Pi session would start in (default: here).",
)


async def _call(state_dir: Path, cwd: Path, tool: str, params: dict[str, Any]) -> ToolResult:
    from pi_hindsight.app import CLI_HOST, build_engine  # noqa: PLC0415 - keep `--help` fast

    engine = build_engine(CLI_HOST, state_dir)
    view = await engine.open_session(
        SessionInfo(
            session_id=f"cli-{uuid.uuid4()}",
            cwd=cwd,
            transcript_path=None,
            has_ui=False,
            reason="cli",
        )
    )
    try:
        if not view.enabled:
            return ToolResult(f"memory is off here: {view.off_reason}", is_error=True)
        return await MemoryTools(engine).call(tool, params)
    finally:
        # Anything a retain queued is submitted now when possible; the outbox keeps the rest.
        await engine.shutdown(3.0)


def _run(
    state_dir: Path | None, cwd: Path, tool: str, params: dict[str, Any], as_json: bool
) -> None:
    result = asyncio.run(_call(resolve_state_dir(state_dir), cwd.resolve(), tool, params))
    if as_json:
        echo_json({"text": result.text, "details": result.details, "isError": result.is_error})
    else:
        click.echo(result.text)
    if result.is_error:
        raise SystemExit(1)


@click.group()
def memory() -> None:
    """The memory tool's actions for the current project (same code as the agent's tool)."""


@memory.command()
@click.option("--operation-id", default=None, help="A refresh-memo operation id to follow.")
@_cwd_option
@state_dir_option
@json_option
def status(operation_id: str | None, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """Memory status; with --operation-id, the state of that startup-memo refresh."""
    params: dict[str, Any] = {"action": "status"}
    if operation_id:
        params["operationId"] = operation_id
    _run(state_dir, cwd, MEMORY_TOOL, params, as_json)


@memory.command()
@click.argument("query")
@click.option(
    "--type", "types", multiple=True, type=click.Choice(["world", "experience", "observation"])
)
@click.option("--as-of", "as_of", default=None, help="ISO date-time: the 'as of' anchor.")
@click.option("--since", default=None, help="ISO date: only memories created from then.")
@click.option("--until", default=None, help="ISO date: only memories created before then.")
@_cwd_option
@state_dir_option
@json_option
def recall(
    query: str,
    types: tuple[str, ...],
    as_of: str | None,
    since: str | None,
    until: str | None,
    cwd: Path,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Search this project's memory (its scope only)."""
    params: dict[str, Any] = {"action": "recall", "query": query}
    for key, value in (
        ("types", list(types)),
        ("queryTimestamp", as_of),
        ("startDate", since),
        ("endDate", until),
    ):
        if value:
            params[key] = value
    _run(state_dir, cwd, MEMORY_TOOL, params, as_json)


@memory.command()
@click.argument("query")
@_cwd_option
@state_dir_option
@json_option
def reflect(query: str, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """A synthesised answer from this project's memory, with the evidence ids it is based on."""
    _run(state_dir, cwd, MEMORY_TOOL, {"action": "reflect", "query": query}, as_json)


@memory.command("refresh-memo")
@_cwd_option
@state_dir_option
@json_option
def refresh_memo(cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """Ask Hindsight to refresh this project's startup memo; prints the operation id."""
    _run(state_dir, cwd, MEMORY_TOOL, {"action": "refresh_memo"}, as_json)


@memory.command()
@click.argument("content")
@_cwd_option
@state_dir_option
@json_option
def retain(content: str, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """Store a note in this project's memory (through the outbox)."""
    _run(state_dir, cwd, MEMORY_TOOL, {"action": "retain", "content": content}, as_json)


@memory.command("retain-global")
@click.argument("content")
@_cwd_option
@state_dir_option
@json_option
def retain_global(content: str, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """Store a durable personal preference in the User bank (profiles with a User bank)."""
    _run(state_dir, cwd, RETAIN_GLOBAL_TOOL, {"content": content}, as_json)


@memory.command()
@click.argument("record_id")
@click.option(
    "--apply",
    "apply_",
    is_flag=True,
    help="Really delete the source document (default: a dry run that names what would go).",
)
@_cwd_option
@state_dir_option
@json_option
def forget(record_id: str, apply_: bool, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """Forget a wrong memory: delete the document RECORD_ID was extracted from (dry run first)."""
    params: dict[str, Any] = {"action": "forget", "recordId": record_id, "confirm": apply_}
    _run(state_dir, cwd, MEMORY_TOOL, params, as_json)


@memory.command()
@click.argument("record_id")
@click.argument("text")
@_cwd_option
@state_dir_option
@json_option
def correct(record_id: str, text: str, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """Correct a wrong memory: RECORD_ID is no longer delivered here, TEXT is retained instead."""
    params = {"action": "correct", "recordId": record_id, "content": text}
    _run(state_dir, cwd, MEMORY_TOOL, params, as_json)


async def _remove_correction(state_dir: Path, cwd: Path, record_id: str) -> ToolResult:
    from pi_hindsight.app import CLI_HOST, build_engine  # noqa: PLC0415 - keep `--help` fast
    from pi_hindsight.tools.forget_correct import remove_correction  # noqa: PLC0415

    engine = build_engine(CLI_HOST, state_dir, passive=True)
    info = SessionInfo(f"cli-{uuid.uuid4()}", cwd, None, has_ui=False, reason="cli")
    view = await engine.open_session(info)
    try:
        if not view.enabled:
            return ToolResult(f"memory is off here: {view.off_reason}", is_error=True)
        if await remove_correction(engine, record_id):
            return ToolResult(f"correction of {record_id} lifted; it may be delivered again")
        return ToolResult(f"no correction of {record_id} in this scope", is_error=True)
    finally:
        await engine.shutdown(0.0)


@memory.command()
@click.option("--remove", "remove", default=None, metavar="ID", help="Lift the correction of ID.")
@_cwd_option
@state_dir_option
@json_option
def corrections(remove: str | None, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """The corrections in force in this project's scope (records kept out of deliveries)."""
    if remove is None:
        _run(state_dir, cwd, MEMORY_TOOL, {"action": "corrections"}, as_json)
        return
    result = asyncio.run(_remove_correction(resolve_state_dir(state_dir), cwd.resolve(), remove))
    if as_json:
        echo_json({"text": result.text, "removed": not result.is_error})
    else:
        click.echo(result.text)
    if result.is_error:
        raise SystemExit(1)
