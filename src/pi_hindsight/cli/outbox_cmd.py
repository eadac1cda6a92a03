"""``pi-hindsight outbox …``: the durable retain outbox."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict
from pathlib import Path

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.config import load_config
from pi_hindsight.errors import BackendError
from pi_hindsight.stores.outbox import Outbox


@click.group()
def outbox() -> None:
    """The retain outbox: what is waiting to reach Hindsight."""


@outbox.command()
@state_dir_option
@json_option
def status(state_dir: Path | None, as_json: bool) -> None:
    """Outbox health: pending, awaiting confirmation, dead letters, oldest age, last error."""
    store = Outbox(resolve_state_dir(state_dir))
    try:
        health = store.health()
    finally:
        store.close()
    if as_json:
        echo_json(asdict(health))
        return
    age = "-" if health.oldest_pending_age_s is None else f"{health.oldest_pending_age_s:.0f}s"
    click.echo(
        f"pending {health.pending}, awaiting confirmation {health.submitted}, dead {health.dead}, "
        f"done {health.done}, oldest {age}"
    )
    if health.last_error:
        click.echo(f"last error: {health.last_error}")


@outbox.command()
@click.option(
    "--timeout", type=float, default=120.0, show_default=True, help="Seconds to wait at most."
)
@state_dir_option
@json_option
def drain(timeout: float, state_dir: Path | None, as_json: bool) -> None:
    """Deliver everything pending now and wait until Hindsight confirms it (or TIMEOUT)."""
    directory = resolve_state_dir(state_dir)
    from pi_hindsight.backend.hindsight import HindsightBackend  # noqa: PLC0415 - slow import
    from pi_hindsight.engine.retain_worker import RetainWorker  # noqa: PLC0415
    from pi_hindsight.rpc.sidecar import resolve_base_url  # noqa: PLC0415

    settings = load_config(directory).settings
    base_url = resolve_base_url(directory)(settings)
    if base_url is None:
        raise BackendError(
            "no Hindsight server is configured", hint="run `pi-hindsight server start`"
        )

    async def run() -> dict[str, object]:
        store = Outbox(directory)
        backend = HindsightBackend(base_url, api_key=settings.hindsight.api_key)

        async def provider() -> HindsightBackend:
            return backend

        worker = RetainWorker(store, provider, timeout_s=settings.timeout_ms / 1000, concurrency=4)
        store.recover_stale_leases()
        deadline = time.monotonic() + timeout
        try:
            while store.unfinished_count() and time.monotonic() < deadline:
                if not await worker.step():
                    await asyncio.sleep(0.2)
            health = store.health()
        finally:
            await backend.close()
            store.close()
        return {"drained": health.pending == 0 and health.submitted == 0, **asdict(health)}

    result = asyncio.run(run())
    if as_json:
        echo_json(result)
    else:
        click.echo("drained" if result["drained"] else f"not drained: {result}")
    if not result["drained"]:
        raise SystemExit(1)
