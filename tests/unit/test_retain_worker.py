"""The retain worker's reactions to each way Hindsight can answer.

Hindsight's failure modes (failed operations, 429 with Retry-After, 5xx, an operation that
vanished) cannot be produced on demand with the real server, so these tests put a scripted
backend at the boundary (the ``MemoryBackend`` protocol, like httpx's MockTransport). The real
server runs in tests/integration/test_retain_*.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.backend.resources import (
    BankMissions,
    MemoryRecord,
    OperationState,
    OperationStatus,
    RetainAccepted,
    RetainItem,
    TagsMatch,
)
from pi_hindsight.engine.retain_worker import Backoff, RetainWorker
from pi_hindsight.errors import (
    BackendAuthRejected,
    BackendError,
    BackendRejected,
    BackendServerError,
    BackendUnavailable,
)
from pi_hindsight.stores.outbox import Outbox
from pi_hindsight.stores.runner import run_store
from tests.plugins.pi import LoopbackListener
from tests.support.outbox import retain_request


class ScriptedHindsight:
    """Answers retains and operation lookups from scripts; records every retain."""

    base_url = "http://scripted"

    def __init__(self) -> None:
        self.retain_errors: list[BackendError] = []
        self.states: list[OperationState] = []  # successive operation lookups; then completed
        self.failure_message = "LLM exploded"
        self.retains: list[tuple[str, list[RetainItem]]] = []
        self.health_errors: list[BackendError] = []
        self.health_checks = 0
        self.bank_errors: list[BackendError] = []  # successive bank lookups; then it exists
        self.bank_lookups = 0

    async def close(self) -> None:
        return None

    async def health(self, *, timeout: float) -> str:
        self.health_checks += 1
        if self.health_errors:
            raise self.health_errors.pop(0)
        return "healthy"

    async def bank_exists(self, bank: str, *, timeout: float) -> bool:
        self.bank_lookups += 1
        if self.bank_errors:
            raise self.bank_errors.pop(0)
        return True

    async def create_bank(self, bank: str, missions: BankMissions, *, timeout: float) -> None:
        return None

    async def recall(
        self,
        bank: str,
        query: str,
        *,
        tags: Sequence[str],
        tags_match: TagsMatch,
        max_tokens: int,
        timeout: float,
        budget: str = "mid",
        types: Sequence[str] | None = None,
        query_timestamp: str | None = None,
    ) -> list[MemoryRecord]:
        return []

    async def retain(
        self,
        bank: str,
        items: Sequence[RetainItem],
        *,
        operation_id: str,
        timeout: float,
        run_async: bool = True,
    ) -> RetainAccepted:
        if self.retain_errors:
            raise self.retain_errors.pop(0)
        uuid.UUID(operation_id)  # Hindsight rejects anything else with 422
        self.retains.append((operation_id, list(items)))
        return RetainAccepted(operation_id=operation_id, items=len(items))

    async def operation_status(
        self, bank: str, operation_id: str, *, timeout: float
    ) -> OperationStatus:
        state: OperationState = self.states.pop(0) if self.states else "completed"
        message = self.failure_message if state == "failed" else None
        return OperationStatus(operation_id, state, "batch_retain", message)


@pytest.fixture
def outbox(tmp_path: Path) -> Any:
    store = Outbox(tmp_path)
    yield store
    store.close()


def _enqueue(outbox: Outbox, n: int, session: str = "s") -> str:
    turns = json.dumps([{"role": "user", "content": f"request {n}"}])
    return outbox.enqueue(
        retain_request(
            session_id=session,
            bank_id="b",
            payload={
                "items": [
                    {
                        "content": turns,
                        "document_id": f"pi-session-{session}",
                        "tags": ["project:p"],
                        "metadata": {"request_id": f"r{n}"},
                        "update_mode": "append",
                    }
                ]
            },
            request_id=f"r{n}",
        )
    )


def _worker(outbox: Outbox, hindsight: ScriptedHindsight, **options: Any) -> RetainWorker:
    async def provider() -> ScriptedHindsight:
        return hindsight

    options.setdefault("backoff", Backoff(base_s=0.01, cap_s=0.05))
    options.setdefault("probe", Backoff(base_s=0.01, cap_s=0.02))
    options.setdefault("idle_poll_s", 0.05)
    return RetainWorker(outbox, provider, timeout_s=1.0, **options)  # type: ignore[arg-type]


def _drain(worker: RetainWorker, timeout: float = 10.0) -> None:
    asyncio.run(asyncio.wait_for(worker.run(until_empty=True), timeout))


def test_a_failed_operation_is_retried_under_the_next_generation_key(outbox: Outbox) -> None:
    hindsight = ScriptedHindsight()
    hindsight.states = ["pending", "failed"]
    _enqueue(outbox, 1)
    _drain(_worker(outbox, hindsight))
    (first, _), (second, _) = hindsight.retains
    assert first != second and uuid.UUID(second).version == 5
    assert outbox.health().done == 1


def test_failures_beyond_the_budget_dead_letter_with_the_servers_message(outbox: Outbox) -> None:
    hindsight = ScriptedHindsight()
    hindsight.states = ["failed"] * 3
    item = _enqueue(outbox, 1)
    _drain(_worker(outbox, hindsight, max_failures=3))
    (dead,) = outbox.items(states=["dead"])
    assert dead.item_id == item
    assert dead.last_error is not None and "LLM exploded" in dead.last_error
    assert "3 failures" in dead.last_error


def test_a_rejected_request_is_dead_lettered_at_once(outbox: Outbox) -> None:
    hindsight = ScriptedHindsight()
    hindsight.retain_errors = [BackendRejected("retain failed: HTTP 400 bad item", status=400)]
    _enqueue(outbox, 1)
    _enqueue(outbox, 2, session="other")
    _drain(_worker(outbox, hindsight))
    health = outbox.health()
    assert health.dead == 1 and health.done == 1
    assert health.last_error == "retain failed: HTTP 400 bad item"


def test_a_vanished_operation_is_dead_lettered_not_polled_forever(outbox: Outbox) -> None:
    hindsight = ScriptedHindsight()
    hindsight.states = ["not_found"]
    _enqueue(outbox, 1)
    _drain(_worker(outbox, hindsight))
    (dead,) = outbox.items(states=["dead"])
    assert dead.last_error is not None and "no longer knows" in dead.last_error


def test_429_honours_retry_after_and_pauses_the_worker(outbox: Outbox) -> None:
    hindsight = ScriptedHindsight()
    hindsight.retain_errors = [BackendServerError("HTTP 429", status=429, retry_after=0.4)]
    _enqueue(outbox, 1)
    started = time.monotonic()
    _drain(_worker(outbox, hindsight))
    assert time.monotonic() - started >= 0.4
    assert len(hindsight.retains) == 1
    (item,) = outbox.items(states=["done"])
    batch = outbox.batch(item.batch_id or "")
    assert batch is not None and batch.failures == 0  # slowing down is not a failure


def test_an_outage_keeps_the_key_counts_no_failure_and_resumes_after_the_probe(
    outbox: Outbox,
) -> None:
    hindsight = ScriptedHindsight()
    down = BackendUnavailable("cannot reach Hindsight")
    hindsight.retain_errors = [down]
    hindsight.health_errors = [down, down, down]
    _enqueue(outbox, 1)
    worker = _worker(outbox, hindsight)
    _drain(worker)
    assert hindsight.health_checks == 4  # probed until it answered, then delivered
    ((key, _),) = hindsight.retains
    (item,) = outbox.items(states=["done"])
    assert item.batch_id == key  # the same batch, the first generation's key
    batch = outbox.batch(key)
    assert batch is not None and batch.failures == 0
    assert worker.offline_reason is None


def test_server_errors_back_off_and_count(outbox: Outbox) -> None:
    hindsight = ScriptedHindsight()
    hindsight.retain_errors = [BackendServerError("HTTP 503", status=503)] * 2
    _enqueue(outbox, 1)
    _drain(_worker(outbox, hindsight))
    (item,) = outbox.items(states=["done"])
    batch = outbox.batch(item.batch_id or "")
    assert batch is not None and batch.failures == 2 and batch.attempts == 3


def test_shutdown_submits_what_is_ready_and_leaves_confirmation_to_the_next_sidecar(
    outbox: Outbox,
) -> None:
    hindsight = ScriptedHindsight()
    for n in range(3):
        _enqueue(outbox, n, session=f"s{n}")
    worker = _worker(outbox, hindsight, concurrency=2)

    async def shut_down() -> int:
        return await worker.shutdown(time.monotonic() + 2.0)

    assert asyncio.run(shut_down()) == 3
    health = outbox.health()
    assert health.submitted == 3 and health.pending == 0  # accepted, not yet confirmed
    # The next worker confirms them without sending anything again.
    _drain(_worker(outbox, hindsight))
    assert outbox.health().done == 3 and len(hindsight.retains) == 3


def _refused(status: int = 401) -> BackendAuthRejected:
    return BackendAuthRejected(
        f"retain failed: {BackendAuthRejected.REFUSED} (HTTP {status})", status=status
    )


def test_a_refused_api_key_keeps_every_item_and_probes_with_a_call_that_needs_the_key(
    outbox: Outbox,
) -> None:
    """Issue 10: a 401/403 was a ``BackendRejected`` — every retain dead-lettered at once for a
    wrong key. And ``/health`` answers without a key, so a health probe would resume at once."""
    hindsight = ScriptedHindsight()
    hindsight.retain_errors = [_refused(401), _refused(403)]
    hindsight.bank_errors = [_refused(401), _refused(401)]  # the key is refused twice more
    _enqueue(outbox, 1)
    _enqueue(outbox, 2, session="other")
    worker = _worker(outbox, hindsight, auth_probe=Backoff(base_s=0.01, cap_s=0.02))
    _drain(worker)
    assert outbox.health().done == 2 and outbox.health().dead == 0
    assert hindsight.health_checks == 0  # never trusted /health to say the key works
    assert hindsight.bank_lookups >= 3
    for item in outbox.items(states=["done"]):
        batch = outbox.batch(item.batch_id or "")
        assert batch is not None and batch.failures == 0  # the key's fault, not the item's
    assert worker.offline_reason is None


def test_a_refused_api_key_pauses_the_worker_and_shows_why(outbox: Outbox) -> None:
    hindsight = ScriptedHindsight()
    hindsight.retain_errors = [_refused()]
    hindsight.bank_errors = [_refused()] * 1000  # never fixed while the worker runs
    _enqueue(outbox, 1)
    worker = _worker(outbox, hindsight, auth_probe=Backoff(base_s=0.2, cap_s=0.4))

    async def run_a_while() -> None:
        task = asyncio.create_task(worker.run())
        await asyncio.sleep(1.0)
        worker.stop()
        await task

    asyncio.run(run_a_while())
    assert len(hindsight.retains) == 0 and hindsight.health_checks == 0
    assert hindsight.bank_lookups <= 6  # probed at the backoff's pace, not in a loop
    assert worker.offline_reason is not None
    assert BackendAuthRejected.REFUSED in worker.offline_reason
    health = outbox.health()
    assert health.pending == 1 and health.dead == 0
    assert health.last_error is not None and BackendAuthRejected.REFUSED in health.last_error


def test_a_key_accepted_for_reads_but_refused_for_writes_backs_off_instead_of_spinning(
    outbox: Outbox,
) -> None:
    """A server (or proxy) that answers the probe but refuses every retain with 403: each
    refusal must wait longer than the last, never resume into a tight retain loop."""
    hindsight = ScriptedHindsight()
    hindsight.retain_errors = [_refused(403)] * 1000
    _enqueue(outbox, 1)
    worker = _worker(outbox, hindsight, auth_probe=Backoff(base_s=0.05, cap_s=10.0))

    async def run_a_while() -> None:
        task = asyncio.create_task(worker.run())
        await asyncio.sleep(1.5)
        worker.stop()
        await task

    asyncio.run(run_a_while())
    attempts = 1000 - len(hindsight.retain_errors)
    # With a growing pause (~0.05, 0.1, 0.2, 0.4, 0.8 s, halved by jitter at worst) at most a
    # handful of retains fit in 1.5 s; a pause that restarted at 0.05 s each time would allow ~30.
    assert 2 <= attempts <= 8, attempts
    assert outbox.health().dead == 0 and outbox.health().pending == 1


def test_a_delivery_claimed_as_shutdown_begins_ends_with_it_quietly_and_stays_queued(
    outbox: Outbox, black_hole: LoopbackListener, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 19: the worker's loop claimed a batch while shutdown began. Its delivery must not
    outlive the shutdown (the connection closes next, under the request: aiohttp's traceback)
    and the batch stays in the outbox, no failure counted, for the next sidecar. The real
    backend, against a server that never answers; the store thread is held at the moment that
    matters by a job of our own, so the order is the same on every run."""
    backend = HindsightBackend(black_hole.url)

    async def provider() -> HindsightBackend:
        return backend

    worker = RetainWorker(outbox, provider, timeout_s=30.0, idle_poll_s=60.0)

    async def scenario() -> list[asyncio.Task[Any]]:
        run = asyncio.create_task(worker.run())
        for _ in range(3):  # the store thread runs jobs in order: the loop is idle after these
            await asyncio.sleep(0)
            await run_store(lambda: None)
        gate = threading.Event()
        held = asyncio.ensure_future(run_store(gate.wait))
        queued = asyncio.ensure_future(run_store(_enqueue, outbox, 1))
        worker.wake()
        for _ in range(20):  # the loop wakes and asks for a claim, queued behind the gate
            await asyncio.sleep(0)
        shutdown = asyncio.create_task(worker.shutdown(time.monotonic() + 1.0))
        await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(held, queued, shutdown)
        await asyncio.wait_for(run, 5.0)
        outliving = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in outliving:
            task.cancel()
        await asyncio.gather(*outliving, return_exceptions=True)
        await backend.close()
        return outliving

    with caplog.at_level(logging.INFO):
        outliving = asyncio.run(scenario())
    assert outliving == [], "a delivery outlived the worker's shutdown"
    health = outbox.health()
    assert (health.pending, health.submitted, health.dead, health.last_error) == (1, 0, 0, None)
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
