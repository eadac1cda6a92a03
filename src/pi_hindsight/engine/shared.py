"""What several sessions' engines in one process share (the Claude Code daemon builds them once,
``app.build_shared``), and how that process ends them."""

from __future__ import annotations

import time
from dataclasses import dataclass

from pi_hindsight.engine.connection import HindsightConnection
from pi_hindsight.engine.local_stores import LocalState
from pi_hindsight.engine.retaining import Retainer
from pi_hindsight.stores.runner import run_store


@dataclass(frozen=True)
class SharedParts:
    """What several sessions' engines in one process share: the stores (one store thread, one
    connection each), the Hindsight connection and the retainer with its one worker. A host
    serving many sessions from one long-lived process (the Claude Code daemon) builds these
    once (``app.build_shared``); each session's engine then owns only its session state, and
    ``close_shared`` ends them when the process stops."""

    state: LocalState
    connection: HindsightConnection
    retainer: Retainer


async def close_shared(parts: SharedParts, bound_s: float) -> dict[str, int]:
    """Submit what is ready within ``bound_s``, then close the connection and the stores; the
    rest stays in the outbox for the next process."""
    flushed = await parts.retainer.shutdown(time.monotonic() + bound_s)
    outbox = parts.state.outbox
    pending = await run_store(outbox.unfinished_count) if outbox is not None else 0
    await parts.connection.close()
    await parts.state.close()
    return {"flushed": flushed, "pending": pending}
