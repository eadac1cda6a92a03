"""``pi-hindsight scope seed [DIR]``: give a newly registered scope the memory it would have had —
the earlier sessions of this location (and its worktrees) of every host that kept some (Pi's and
Claude Code's; ``--from`` picks one) and a digest of the git history.

The plan (a dry run) is always shown first; ``--dry-run`` stops there. Applying commits the plan
to the durable outbox, then waits while its worker delivers it (a progress bar in a terminal,
plain lines otherwise). Running it again sends nothing twice; after a kill it finishes the rest.
An adapter over ``operations/scope_seeding.py``: asking, progress and the wait are the command
line's; the plan, its text and its JSON are the operation's.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.engine.types import SessionInfo
from pi_hindsight.operations.scope_seeding import (
    SEED,
    DeliveryCount,
    MeasuredSpend,
    ScopeSeedResult,
    SeedArgs,
    SeedingContext,
)

if TYPE_CHECKING:
    from pi_hindsight.engine.engine import MemoryEngine
    from pi_hindsight.engine.seeding import SeedUnit, SessionSource
    from pi_hindsight.engine.spend import Spend

POLL_S = 0.5
HOSTS = ("pi", "claude-code")  # whose earlier sessions seeding reads (``--from``)


def _unit_line(done: int, total: int, unit: SeedUnit) -> str:
    what = f"session {unit.key}" if unit.kind == "session" else f"git {unit.label}"
    return f"queued {done}/{total}: {what} ({len(unit.requests)} items)"


async def _wait(
    engine: MemoryEngine, keys: list[tuple[str, str]], timeout: float, tty: bool, quiet: bool
) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    total = len(keys)
    bar = click.progressbar(length=total, label="delivering", file=sys.stderr) if tty else None
    shown = 0
    last_line = 0.0
    try:
        while True:
            states = await engine.seed_delivery(keys)
            finished = states["done"] + states["dead"]
            if bar is not None:
                bar.update(finished - shown)
                shown = finished
            elif not quiet and (time.monotonic() - last_line > 5 or finished == total):
                click.echo(f"delivered {states['done']}/{total} ({states['dead']} dead)")
                last_line = time.monotonic()
            if finished >= total or time.monotonic() > deadline:
                return dict(states)
            engine.wake_worker()
            await asyncio.sleep(POLL_S)
    finally:
        if bar is not None:
            bar.render_finish()


async def _seed(
    state_dir: Path,
    directory: Path,
    *,
    args: SeedArgs,
    hosts: tuple[str, ...],
    assume_yes: bool,
    wait: bool,
    timeout: float,
    as_json: bool,
) -> ScopeSeedResult:
    from pi_hindsight.app import CLI_HOST, build_engine  # noqa: PLC0415 - keep `--help` fast
    from pi_hindsight.hosts.claude_code.seed_transcripts import (  # noqa: PLC0415
        ClaudeCodeSessions,
        claude_config_dir,
    )
    from pi_hindsight.hosts.pi.seed_sessions import PiSessions  # noqa: PLC0415
    from pi_hindsight.paths import pi_agent_dir  # noqa: PLC0415

    engine = build_engine(CLI_HOST, state_dir, passive=not args.apply)
    info = SessionInfo(f"seed-{uuid.uuid4()}", directory, None, has_ui=False, reason="seed")
    await engine.open_session(info)
    tty = sys.stdout.isatty() and not as_json
    shown = False
    bar: Any = None

    def approve(plan: ScopeSeedResult) -> bool:
        """Show the plan before anything is queued; in a terminal, ask (unless --yes)."""
        nonlocal shown, bar
        shown = True
        if not as_json:
            click.echo("\n".join(plan.plan_lines()))
        if tty and not assume_yes and not click.confirm("send it to Hindsight?", default=True):
            return False
        to_send = sum(1 for unit in plan.units if unit.state == "send")
        bar = click.progressbar(length=to_send, label="queueing") if tty else None
        return True

    def progress(done: int, total: int, unit: SeedUnit) -> None:
        if bar is not None:
            bar.update(1)
        elif not as_json:
            click.echo(_unit_line(done, total, unit))

    try:
        sources: dict[str, SessionSource] = {
            "pi": PiSessions(pi_agent_dir()),
            "claude-code": ClaudeCodeSessions(claude_config_dir()),
        }
        context = SeedingContext(
            engine,
            tuple(sources[host] for host in hosts) if args.sessions else (),
            approve=approve,
            progress=progress,
        )
        spent_before = await _extraction_spend(engine) if args.apply and wait else None
        result = await SEED(context, args)
        if bar is not None:
            bar.render_finish()
        if not as_json:
            if not shown:
                click.echo("\n".join(result.plan_lines()))
            if not (result.applied and wait):
                click.echo(result.outcome_line())
        if not result.applied or not wait:
            return result
        states = await _wait(engine, result.queued_keys, timeout, tty, as_json)
        delivery = DeliveryCount.model_validate(states)
        if not as_json:
            click.echo(
                f"delivered {delivery.done} of {result.queued} items"
                + (
                    f", {delivery.dead} dead (see `pi-hindsight outbox list`)"
                    if delivery.dead
                    else ""
                )
            )
        measured = await _measured(engine, spent_before, result.estimated_tokens, as_json)
        return result.model_copy(update={"delivery": delivery, "measured": measured})
    finally:
        await engine.shutdown(3.0)


async def _extraction_spend(engine: MemoryEngine) -> Spend | None:
    """The bank's retain-extraction spend over the last day (None: the server did not say)."""
    from pi_hindsight.engine.spend import operation_spend  # noqa: PLC0415 - keep `--help` fast
    from pi_hindsight.errors import BackendError  # noqa: PLC0415

    scope = engine.scope()
    if scope is None:
        return None
    try:
        backend = await engine.backend()
        return await operation_spend(
            backend, scope.bank_id, ("retain",), "1d", timeout=engine.settings.timeout_ms / 1000
        )
    except BackendError:
        return None


async def _measured(
    engine: MemoryEngine, before: Spend | None, estimated: int, quiet: bool
) -> MeasuredSpend:
    """The extraction the run cost, as the server recorded it: the last day's before and after
    (consolidation runs on afterwards: `pi-hindsight usage` shows it), beside the estimate."""
    after = await _extraction_spend(engine)
    if before is None or after is None:
        found = MeasuredSpend(
            spend=None, describe="not known (the server's records could not be read)"
        )
    else:
        spent = after.minus(before)
        found = MeasuredSpend(
            spend=spent.to_json(),
            describe=f"retain extraction {spent.describe()}; consolidation follows "
            "(`pi-hindsight usage`)",
        )
    if not quiet:
        click.echo(f"spent: {found.describe} (estimated ~{estimated:,})")
    return found


@click.command()
@click.argument(
    "directory", type=click.Path(path_type=Path, exists=True, file_okay=False), default="."
)
@click.option(
    "--sessions", is_flag=True, help="Earlier sessions of this location and its worktrees."
)
@click.option(
    "--from",
    "from_",
    type=click.Choice(["all", *HOSTS]),
    default="all",
    show_default=True,
    help="Whose sessions: Pi's (~/.pi/agent/sessions), Claude Code's (~/.claude/projects) or both.",
)
@click.option(
    "--git", "git_", is_flag=True, help="A digest of the git history (newest 300 commits)."
)
@click.option("--dry-run", is_flag=True, help="Only show what would be sent.")
@click.option("--yes", "-y", "assume_yes", is_flag=True, help="Do not ask before sending.")
@click.option("--no-wait", is_flag=True, help="Queue it and return; the outbox delivers it later.")
@click.option(
    "--timeout", type=float, default=1800.0, show_default=True, help="Seconds to wait for delivery."
)
@state_dir_option
@json_option
def seed(
    directory: Path,
    sessions: bool,
    from_: str,
    git_: bool,
    dry_run: bool,
    assume_yes: bool,
    no_wait: bool,
    timeout: float,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Seed DIRECTORY's registered scope from earlier Pi and Claude Code sessions and the git
    history (both when neither --sessions nor --git is given). Shows the plan first; --dry-run
    sends nothing."""
    if not sessions and not git_:
        sessions = git_ = True
    result = asyncio.run(
        _seed(
            resolve_state_dir(state_dir),
            directory.resolve(),
            args=SeedArgs(sessions=sessions, git=git_, apply=not dry_run),
            hosts=HOSTS if from_ == "all" else (from_,),
            assume_yes=assume_yes,
            wait=not no_wait,
            timeout=timeout,
            as_json=as_json,
        )
    )
    if as_json:
        echo_json(result.to_json())
    if result.delivery is not None and result.delivery.done < result.queued:
        raise SystemExit(1)


__all__ = ["seed"]
