"""``pi-hindsight memory …``: the memory operations, from a terminal (CLI parity).

Each command opens the same engine the Pi sidecar runs, for the session a Pi started in ``--cwd``
would have, and runs the same operation the agent's tool runs (``pi_hindsight.operations``), so
the two never disagree. ``--json`` prints the operation's typed result.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.engine.types import SessionInfo
from pi_hindsight.errors import PiHindsightError
from pi_hindsight.operations.base import describe_failure

if TYPE_CHECKING:
    from pi_hindsight.operations.base import OperationResult

_cwd_option = click.option(
    "--cwd",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=".",
    help="The directory a Pi session would start in (default: here).",
)


async def _call(
    state_dir: Path, cwd: Path, action: str, params: dict[str, Any], *, passive: bool
) -> OperationResult:
    from pi_hindsight.app import CLI_HOST, build_engine  # noqa: PLC0415 - keep `--help` fast
    from pi_hindsight.operations import memory_actions  # noqa: PLC0415
    from pi_hindsight.operations.base import OperationInputError  # noqa: PLC0415

    operations: dict[str, memory_actions.AnyOperation] = {
        **memory_actions.MEMORY_ACTIONS,
        "retain_global": memory_actions.RETAIN_GLOBAL,
        "lift_correction": memory_actions.LIFT_CORRECTION,
    }
    operation = operations[action]
    args = operation.parse(params)
    engine = build_engine(CLI_HOST, state_dir, passive=passive)
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
            raise OperationInputError(f"memory is off here: {view.off_reason}")
        result: OperationResult = await operation(engine, args)
        return result
    finally:
        # Anything a retain queued is submitted now when possible; the outbox keeps the rest.
        await engine.shutdown(0.0 if passive else 3.0)


def _run(
    state_dir: Path | None,
    cwd: Path,
    action: str,
    params: dict[str, Any],
    as_json: bool,
    *,
    passive: bool = False,
) -> None:
    """Run the operation; print its text or its JSON. A failure prints its message (on stdout,
    as the tool would show it) and exits 1."""
    try:
        result = asyncio.run(
            _call(resolve_state_dir(state_dir), cwd.resolve(), action, params, passive=passive)
        )
    except PiHindsightError as error:
        message = describe_failure(error)
        if as_json:
            echo_json({"error": message})
        else:
            click.echo(f"memory {action}: {message}")
        raise SystemExit(1) from None
    if as_json:
        echo_json(result.to_json())
    else:
        click.echo(result.as_text())


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
    params: dict[str, Any] = {}
    if operation_id:
        params["operationId"] = operation_id
    _run(state_dir, cwd, "status", params, as_json)


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
    params: dict[str, Any] = {"query": query}
    for key, value in (
        ("types", list(types)),
        ("queryTimestamp", as_of),
        ("startDate", since),
        ("endDate", until),
    ):
        if value:
            params[key] = value
    _run(state_dir, cwd, "recall", params, as_json)


@memory.command()
@click.argument("query")
@_cwd_option
@state_dir_option
@json_option
def reflect(query: str, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """A synthesised answer from this project's memory, with the evidence ids it is based on."""
    _run(state_dir, cwd, "reflect", {"query": query}, as_json)


@memory.command("refresh-memo")
@_cwd_option
@state_dir_option
@json_option
def refresh_memo(cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """Ask Hindsight to refresh this project's startup memo; prints the operation id."""
    _run(state_dir, cwd, "refresh_memo", {}, as_json)


@memory.command()
@click.argument("content")
@_cwd_option
@state_dir_option
@json_option
def retain(content: str, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """Store a note in this project's memory (through the outbox)."""
    _run(state_dir, cwd, "retain", {"content": content}, as_json)


@memory.command("retain-global")
@click.argument("content")
@_cwd_option
@state_dir_option
@json_option
def retain_global(content: str, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """Store a durable personal preference in the User bank (profiles with a User bank)."""
    _run(state_dir, cwd, "retain_global", {"content": content}, as_json)


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
    _run(state_dir, cwd, "forget", {"recordId": record_id, "confirm": apply_}, as_json)


@memory.command()
@click.argument("record_id")
@click.argument("text")
@_cwd_option
@state_dir_option
@json_option
def correct(record_id: str, text: str, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """Correct a wrong memory: RECORD_ID is no longer delivered here, TEXT is retained instead."""
    _run(state_dir, cwd, "correct", {"recordId": record_id, "content": text}, as_json)


@memory.command()
@click.option("--remove", "remove", default=None, metavar="ID", help="Lift the correction of ID.")
@_cwd_option
@state_dir_option
@json_option
def corrections(remove: str | None, cwd: Path, state_dir: Path | None, as_json: bool) -> None:
    """The corrections in force in this project's scope (records kept out of deliveries)."""
    if remove is None:
        _run(state_dir, cwd, "corrections", {}, as_json)
    else:
        _run(state_dir, cwd, "lift_correction", {"recordId": remove}, as_json, passive=True)
