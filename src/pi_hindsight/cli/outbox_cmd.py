"""``pi-hindsight outbox …``: the durable retain outbox (docs/operations.md, "Outbox")."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.cli.state_cmd import echo_set_aside
from pi_hindsight.config import load_config
from pi_hindsight.errors import BackendError, ConfigError
from pi_hindsight.operations.outbox_upkeep import (
    OUTBOX_RETRY,
    OUTBOX_STATUS,
    OutboxRetryArgs,
    OutboxStatusArgs,
    age,
)
from pi_hindsight.stores.outbox import ITEM_STATES, UNFINISHED, ItemState, Outbox, OutboxItem
from pi_hindsight.stores.outbox_records import OutboxHealth
from pi_hindsight.stores.set_aside import SetAsideRecord

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    match = _DURATION.match(text.strip())
    if match is None:
        raise ConfigError(
            f"--older-than {text!r} is not a duration", hint="use e.g. 30m, 12h or 7d"
        )
    return float(match.group(1)) * _UNIT_S[match.group(2)]


class _StoreOutbox:
    """The outbox file as the outbox operations' context (``operations/outbox_upkeep.py``);
    ``retry_dead`` re-queues the items named on the command line, or every dead letter."""

    def __init__(self, store: Outbox, item_ids: Sequence[str] | None = None) -> None:
        self.store = store
        self.item_ids = item_ids

    async def outbox_health(self) -> OutboxHealth:
        return self.store.health()

    async def retry_dead(self) -> int:
        return self.store.retry_dead(list(self.item_ids) if self.item_ids else None)


@click.group()
def outbox() -> None:
    """The retain outbox: what is waiting to reach Hindsight."""


@outbox.command()
@state_dir_option
@json_option
def status(state_dir: Path | None, as_json: bool) -> None:
    """Outbox health: pending, awaiting confirmation, dead letters, oldest age, last error."""
    directory = resolve_state_dir(state_dir)
    store = Outbox(directory)
    try:
        result = asyncio.run(OUTBOX_STATUS(_StoreOutbox(store), OutboxStatusArgs()))
        aside = store.set_aside
    finally:
        store.close()
    reports = SetAsideRecord(directory).open_events("outbox")
    result = result.model_copy(
        update={
            "path": str(store.path),
            "set_aside": None
            if aside is None
            else {"movedTo": str(aside.moved_to), "reason": aside.reason},
            # Every outbox set aside (by any process) and not yet restored or acknowledged.
            "set_aside_reports": [event.to_json() for event in reports],
        }
    )
    if as_json:
        echo_json(result.to_json())
        return
    click.echo(result.render())
    echo_set_aside(reports)


def _item_json(item: OutboxItem, content: bool) -> dict[str, Any]:
    result: dict[str, Any] = {
        "item_id": item.item_id,
        "state": item.state,
        "session_id": item.session_id,
        "request_id": item.request_id,
        "bank_id": item.bank_id,
        "document_id": item.retain.document_id or None,
        "batch_id": item.batch_id,
        "bytes": item.payload_bytes,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
        "last_error": item.last_error,
    }
    if content:
        result["content"] = [item.retain.content]
    return result


@outbox.command("list")
@click.option(
    "--state",
    "states",
    type=click.Choice(ITEM_STATES),
    multiple=True,
    help="Only items in this state (repeatable). Default: everything not done.",
)
@click.option("--session", "session_id", default=None, help="Only this Pi session's items.")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--content", is_flag=True, help="Include the (redacted) text that will be retained.")
@state_dir_option
@json_option
def list_items(
    states: tuple[ItemState, ...],
    session_id: str | None,
    limit: int,
    content: bool,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Items in the outbox, oldest first, with their state and last error."""
    store = Outbox(resolve_state_dir(state_dir))
    try:
        chosen: tuple[ItemState, ...] = states or (*UNFINISHED, "dead")
        items = store.items(states=chosen, session_id=session_id, limit=limit)
    finally:
        store.close()
    if as_json:
        echo_json([_item_json(item, content) for item in items])
        return
    if not items:
        click.echo("no items")
        return
    now = time.time()
    for item in items:
        click.echo(
            f"{item.item_id}  {item.state:<9} session {item.session_id}  "
            f"{item.payload_bytes} B  {age(now - item.created_at)} old"
        )
        if item.last_error:
            click.echo(f"    last error: {item.last_error}")
        if content:
            click.echo(f"    {item.retain.content}")


@outbox.command()
@click.argument("item_ids", nargs=-1)
@click.option("--all", "retry_all", is_flag=True, help="Retry every dead letter.")
@state_dir_option
@json_option
def retry(
    item_ids: tuple[str, ...], retry_all: bool, state_dir: Path | None, as_json: bool
) -> None:
    """Send dead letters again (by item or batch id, or --all).

    A dead batch keeps its items and idempotency key: if Hindsight did store it after all,
    the retry stores nothing twice. A running Pi session (or `outbox drain`) delivers it.
    """
    if not item_ids and not retry_all:
        raise ConfigError("name the items to retry", hint="pass item ids, or --all")
    store = Outbox(resolve_state_dir(state_dir))
    try:
        selected = _StoreOutbox(store, None if retry_all else item_ids)
        result = asyncio.run(OUTBOX_RETRY(selected, OutboxRetryArgs()))
    finally:
        store.close()
    if as_json:
        echo_json(result.to_json())
    else:
        click.echo(result.render())


@outbox.command()
@click.option("--dead", "include_dead", is_flag=True, help="Also delete dead letters.")
@click.option(
    "--include-pending",
    is_flag=True,
    help="Also delete work not yet confirmed by Hindsight (it is then never retained).",
)
@click.option("--older-than", default=None, help="Only items last changed this long ago (30m, 7d).")
@click.option("--dry-run", is_flag=True, help="Only count what would be deleted.")
@state_dir_option
@json_option
def purge(
    include_dead: bool,
    include_pending: bool,
    older_than: str | None,
    dry_run: bool,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Delete delivered items (done) to keep the file small.

    Dead letters are deleted only with --dead; pending work only with --include-pending.
    """
    states: list[ItemState] = ["done"]
    if include_dead:
        states.append("dead")
    if include_pending:
        states.extend(UNFINISHED)
    store = Outbox(resolve_state_dir(state_dir))
    try:
        result = store.purge(states, older_than_s=_seconds(older_than), dry_run=dry_run)
    finally:
        store.close()
    if as_json:
        echo_json({"dry_run": dry_run, "states": states, **asdict(result)})
        return
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"{verb} {result.items} item(s) ({', '.join(states)})")


@outbox.command()
@click.option(
    "--timeout", type=float, default=120.0, show_default=True, help="Seconds to wait at most."
)
@state_dir_option
@json_option
def drain(timeout: float, state_dir: Path | None, as_json: bool) -> None:
    """Deliver everything pending now and wait until Hindsight confirms it (or TIMEOUT)."""
    directory = resolve_state_dir(state_dir)
    from pi_hindsight.app import base_url_resolver  # noqa: PLC0415 - keep `--help` fast
    from pi_hindsight.backend import MemoryBackend, open_backend  # noqa: PLC0415
    from pi_hindsight.engine.retain_worker import RetainWorker  # noqa: PLC0415

    settings = load_config(directory).settings
    base_url = base_url_resolver(directory)(settings)
    if base_url is None:
        raise BackendError(
            "no Hindsight server is configured", hint="run `pi-hindsight server start`"
        )

    async def run() -> dict[str, object]:
        store = Outbox(directory)
        backend = open_backend(
            base_url, api_key=settings.hindsight.api_key, ca_file=settings.hindsight.ca_file
        )

        async def provider() -> MemoryBackend:
            return backend

        worker = RetainWorker(store, provider, timeout_s=settings.timeout_ms / 1000, concurrency=4)
        try:
            try:
                await asyncio.wait_for(worker.run(until_empty=True), timeout=timeout)
            except TimeoutError:
                await worker.shutdown(time.monotonic())
            health = store.health()
        finally:
            await backend.close()
            store.close()
        drained = health.pending == 0 and health.submitted == 0
        return {"drained": drained, "offline": worker.offline_reason, **asdict(health)}

    result = asyncio.run(run())
    if as_json:
        echo_json(result)
    else:
        click.echo("drained" if result["drained"] else f"not drained: {result}")
    if not result["drained"]:
        raise SystemExit(1)


@outbox.command()
@state_dir_option
@json_option
def resume(state_dir: Path | None, as_json: bool) -> None:
    """Resume automatic retain paused by retain.dailyTokenBudget (the budget is set aside for
    the paused banks for 24 hours); running sessions deliver within seconds."""
    from pi_hindsight.engine.budget import RESUME_FOR_S  # noqa: PLC0415 - keep `--help` fast
    from pi_hindsight.engine.budget import resume as resume_banks  # noqa: PLC0415

    banks = resume_banks(resolve_state_dir(state_dir))
    if as_json:
        echo_json({"resumed": banks, "forSeconds": RESUME_FOR_S})
    elif banks:
        click.echo(f"resumed retain for {', '.join(banks)} (the budget is set aside for 24 h)")
    else:
        click.echo("no bank is paused by the budget")


@outbox.command()
@click.option("--limit", type=int, default=50, show_default=True, help="How many, newest first.")
@state_dir_option
@json_option
def skipped(limit: int, state_dir: Path | None, as_json: bool) -> None:
    """Requests not sent to retain because they carry no knowledge (retain.skipTrivial)."""
    store = Outbox(resolve_state_dir(state_dir))
    try:
        found = store.skipped(limit)
    finally:
        store.close()
    if as_json:
        echo_json({"skipped": [entry.to_json() for entry in found]})
        return
    if not found:
        click.echo("no request skipped")
    for entry in found:
        click.echo(
            f"{entry.request_id}  {entry.reason:<18} {entry.chars:>6} chars  {entry.bank_id}"
        )
