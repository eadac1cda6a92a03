"""Drains the outbox into Hindsight: submit, follow the operation, confirm, retry or dead-letter.

One worker per sidecar, on the sidecar's event loop while the agent runs; the conversation never
waits on it. Several sidecars may drain one outbox: the outbox's leases keep them apart.

What each outcome does (docs/operations.md, "Outbox"):

- accepted → ``submitted``; the operation is followed until Hindsight reports it ``completed``
  (→ ``done``), ``failed``/``cancelled`` (→ retried under the next idempotency generation, or
  dead-lettered with the server's message once the failure budget is spent) or ``not_found``
  (the operation was deleted or pruned: dead-lettered, it cannot be confirmed).
- Hindsight unreachable (connection refused, timeout): the batch goes back unchanged (same key, no
  backoff, no failure counted) and the worker goes *offline*: it stops claiming and probes
  ``/health`` with capped exponential backoff, so an outage of any length loses nothing and floods
  nothing, and delivery resumes within seconds of the server's return.
- The API key refused (401/403, ``BackendAuthRejected``): the batch goes back unchanged (no
  failure counted, never dead-lettered: the key is at fault, not the item) and the worker pauses
  as when offline, but probes with an authenticated call (``/health`` answers without a key) on
  a slower backoff that keeps growing while the key stays refused, so a server that accepts reads
  but refuses writes cannot make it spin. It resumes when the server accepts the key (a fixed
  key reaches a new sidecar through its config).
- 429: the batch waits at least ``Retry-After`` and the whole worker pauses as long.
- 5xx: exponential backoff with jitter (``Retry-After`` as a floor), counted against the failure
  budget; other 4xx (the request can never succeed as sent): dead-lettered at once.

Replays are safe: Hindsight 1.1.0 answers a retain whose ``operation_id`` it already has with that
original operation, whatever its state, and creates no new work.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pi_hindsight.backend import MemoryBackend, RetainItem
from pi_hindsight.errors import (
    BackendAuthRejected,
    BackendError,
    BackendMalformed,
    BackendRejected,
    BackendServerError,
    StateError,
)
from pi_hindsight.stores.outbox import Batch, Outbox, owner_id
from pi_hindsight.stores.runner import run_store

logger = logging.getLogger(__name__)

BackendProvider = Callable[[], Awaitable[MemoryBackend]]
Gate = Callable[[], Awaitable[str | None]]
GATE_WAIT_S = 5.0
# Notes the user forced past the token budget are queued under "<session>#forced": while the gate
# holds, only those sessions' work is delivered.
FORCED_SUFFIX = "#forced"

_RECOVER_EVERY_S = 30.0


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter; a server's ``Retry-After`` is a floor."""

    base_s: float = 1.0
    cap_s: float = 300.0

    def delay(self, attempts: int, retry_after: float | None = None) -> float:
        ceiling = min(self.cap_s, self.base_s * (2 ** max(0, attempts - 1)))
        delay = random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not security
        return max(delay, retry_after or 0.0)


@dataclass
class WorkerStats:
    submitted: int = 0
    confirmed: int = 0
    retried: int = 0
    dead: int = 0
    last_error: str | None = None


def compose(batch: Batch) -> list[RetainItem]:
    """The retain items one batch sends: deterministic, so every replay sends the same thing.

    A one-item batch is sent as enqueued. Several items (consecutive requests of one session, to
    one document) become one item whose content is their turn arrays concatenated in order —
    exactly what successive appends would have stored (ADR 0004) — because an async retain
    rejects two items with the same document id.
    """
    items = [item.retain for item in batch.items]
    if len(items) <= 1:
        return items
    first = items[0]
    turns: list[Any] = []
    for item in items:
        parsed = json.loads(item.content)
        turns.extend(parsed if isinstance(parsed, list) else [parsed])
    metadata = {key: value for key, value in first.metadata.items() if key != "request_id"}
    request_ids = [item.metadata.get("request_id") for item in items]
    metadata["request_ids"] = ",".join(rid for rid in request_ids if rid)
    return [
        dataclasses.replace(first, content=json.dumps(turns, ensure_ascii=False), metadata=metadata)
    ]


class RetainWorker:
    def __init__(
        self,
        outbox: Outbox,
        backend: BackendProvider,
        *,
        timeout_s: float,
        concurrency: int = 2,
        backoff: Backoff | None = None,
        probe: Backoff | None = None,
        auth_probe: Backoff | None = None,
        idle_poll_s: float = 2.0,
        max_failures: int = 10,
        gate: Gate | None = None,
    ) -> None:
        self.outbox = outbox
        # Asked before delivering claimed work: a reason to hold it (the token budget), or None.
        self.gate = gate
        self.paused_by: str | None = None
        self._backend = backend
        self.timeout_s = timeout_s
        self.concurrency = max(1, concurrency)
        self.backoff = backoff or Backoff()
        self.probe = probe or Backoff(base_s=0.5, cap_s=15.0)
        self.auth_probe = auth_probe or Backoff(base_s=2.0, cap_s=120.0)
        self.idle_poll_s = idle_poll_s
        self.max_failures = max_failures
        self.owner = owner_id(f"{id(self):x}")
        self.stats = WorkerStats()
        self.offline_reason: str | None = None
        # While the key is refused: paused, a bank to probe with, refusals since the last delivery.
        self._refused = False
        self._refused_bank: str | None = None
        self._refusals = 0
        self._paused_until = 0.0
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- control ---------------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _stopped(self) -> bool:  # a call, so type checkers do not narrow it across awaits
        return self._stop.is_set()

    def _note(self, error: str) -> None:
        self.stats.last_error = error

    def _go_offline(self, error: BackendError) -> None:
        if self.offline_reason is None:
            logger.warning("Hindsight unreachable, retain paused until it answers: %s", error)
        self.offline_reason = str(error)
        self._note(str(error))

    def _key_refused(self, bank: str, error: BackendAuthRejected) -> None:
        if not self._refused:
            logger.warning("retain paused, nothing lost (the outbox keeps every item): %s", error)
        self._refused, self._refused_bank = True, bank
        self._refusals += 1
        self.offline_reason = str(error)
        self._note(str(error))

    async def _sleep(self, seconds: float, *, wakeable: bool = True) -> None:
        """Sleep, cut short by stop (and by new work, when ``wakeable``)."""
        if self._stop.is_set():
            return
        event = self._wake if wakeable else self._stop
        if wakeable:
            self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=max(0.0, seconds))

    # -- the loop --------------------------------------------------------------------------

    async def run(self, *, until_empty: bool = False) -> None:
        """Drain until stopped (or, with ``until_empty``, until nothing is left to deliver).

        Survives store and backend errors: log, note them, and go on.
        """
        await self._recover()
        recovered_at = time.monotonic()
        while not self.stopping:
            if time.monotonic() - recovered_at > _RECOVER_EVERY_S:
                await self._recover()  # another sidecar may have crashed meanwhile
                recovered_at = time.monotonic()
            if self.offline_reason is not None:
                await self._probe()
                continue
            pause = self._paused_until - time.monotonic()
            if pause > 0:
                await self._sleep(pause)
                continue
            claimed = await self._claim(self.concurrency - len(self._tasks))
            if claimed and not self._stopped() and await self._held(claimed):
                claimed = await self._claim(self.concurrency - len(self._tasks), forced=True)
                if not claimed:
                    await self._sleep(GATE_WAIT_S)
                    continue
            if self._stopped():  # stopped while claiming: shutdown() owns what is left
                for batch in claimed:
                    await self._release(batch)
                return
            for batch in claimed:
                task = asyncio.create_task(self._deliver(batch))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            if claimed:
                continue
            if until_empty and not self._tasks and await self._nothing_left():
                return
            await self._wait_for_work()

    async def _held(self, claimed: list[Batch]) -> bool:
        """Whether the gate holds delivery; held batches go back unchanged (nothing lost)."""
        if self.gate is None:
            return False
        self.paused_by = await self.gate()
        if self.paused_by is None:
            return False
        for batch in claimed:
            await self._release(batch)
        return True

    async def _recover(self) -> None:
        try:
            recovered = await run_store(self.outbox.recover_stale_leases)
        except StateError as error:
            logger.warning("outbox lease recovery failed: %s", error)
            self._note(str(error))
            return
        if recovered:
            logger.info("recovered %d outbox lease(s) of stopped workers", recovered)

    async def _claim(self, free: int, *, forced: bool = False) -> list[Batch]:
        if free <= 0:
            return []
        sessions = f"%{FORCED_SUFFIX}" if forced else "%"
        try:
            return await run_store(self.outbox.claim, self.owner, limit=free, sessions=sessions)
        except StateError as error:
            logger.warning("outbox unavailable: %s", error)
            self._note(str(error))
            return []

    async def _nothing_left(self) -> bool:
        try:
            return await run_store(self.outbox.unfinished_count) == 0
        except StateError as error:
            self._note(str(error))
            return False

    async def _wait_for_work(self) -> None:
        """Until a delivery finishes, new work is announced, or the idle poll is due."""
        self._wake.clear()
        waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._wake.wait())}
        waiters |= set(self._tasks)
        done, _ = await asyncio.wait(
            waiters, timeout=self.idle_poll_s, return_when=asyncio.FIRST_COMPLETED
        )
        for waiter in waiters:
            if waiter not in self._tasks and waiter not in done:
                waiter.cancel()

    async def _probe(self) -> None:
        attempt = 0
        while self.offline_reason is not None and not self.stopping:
            attempt += 1
            delay = (
                self.auth_probe.delay(max(1, self._refusals) + attempt - 1)
                if self._refused
                else self.probe.delay(attempt)
            )
            # New requests do not cut this short: an outage must not turn into a probe flood.
            await self._sleep(delay, wakeable=False)
            if self._stopped():
                return
            timeout = min(self.timeout_s, 5.0)
            try:
                backend = await self._backend()
                if self._refused and self._refused_bank is not None:
                    # /health answers without a key: ask something that needs one.
                    await backend.bank_exists(self._refused_bank, timeout=timeout)
                else:
                    await backend.health(timeout=timeout)
            except BackendError as error:
                self.offline_reason = str(error)
                self._note(str(error))
                self._refused = self._refused or isinstance(error, BackendAuthRejected)
                continue
            logger.info("Hindsight answers again; resuming retain")
            self.offline_reason = None
            self._refused, self._refused_bank = False, None

    # -- one batch -------------------------------------------------------------------------

    async def _deliver(self, batch: Batch) -> None:
        following = batch.state == "submitted"
        try:
            backend = await self._backend()
            operation_id = batch.server_operation_id or batch.idempotency_key
            if not following:
                operation_id = await self._submit(backend, batch)
                following = True
            await self._follow(backend, batch, operation_id)
        except asyncio.CancelledError:
            await self._release(batch)
            raise
        except BackendError as error:
            await self._failed(batch, error, following=following)
        except StateError as error:  # the lease expires and another worker takes over
            logger.warning("outbox update for batch %s failed: %s", batch.batch_id, error)
            self._note(str(error))
        except Exception as error:
            if self._stopped():
                # Shutdown closes the connection under a request still in flight (aiohttp then
                # fails in its own ways): not the item's fault. It stays in the outbox, unchanged,
                # for the next sidecar — no traceback, no failure counted.
                logger.info(
                    "retain batch %s interrupted by shutdown (%s); it stays in the outbox",
                    batch.batch_id,
                    type(error).__name__,
                )
                await self._release(batch)
                return
            # A bug: log it; retry within the failure budget, then dead-letter.
            logger.exception("retain batch %s failed unexpectedly", batch.batch_id)
            try:
                await self._retry_or_die(batch, f"internal error: {error!r}")
            except StateError as store_error:  # the lease expires and another worker takes over
                self._note(str(store_error))

    async def _submit(self, backend: MemoryBackend, batch: Batch) -> str:
        accepted = await backend.retain(
            batch.bank_id,
            compose(batch),
            operation_id=batch.idempotency_key,
            timeout=self.timeout_s,
            run_async=True,
        )
        operation_id = accepted.operation_id or batch.idempotency_key
        self._refusals = 0  # the key works: a later refusal starts the backoff anew
        await run_store(self.outbox.mark_submitted, batch.batch_id, self.owner, operation_id)
        self.stats.submitted += len(batch.items)
        return operation_id

    async def _follow(self, backend: MemoryBackend, batch: Batch, operation_id: str) -> None:
        delay = 0.1
        while True:
            status = await backend.operation_status(
                batch.bank_id, operation_id, timeout=self.timeout_s
            )
            if status.state == "completed":
                await run_store(self.outbox.mark_done, batch.batch_id, self.owner)
                self.stats.confirmed += len(batch.items)
                return
            if status.state in ("failed", "cancelled"):
                message = f"operation {operation_id} {status.state}"
                if status.error_message:
                    message += f": {status.error_message}"
                await self._retry_or_die(batch, message, new_generation=True)
                return
            if status.state == "not_found":
                await self._dead(
                    batch,
                    f"Hindsight no longer knows operation {operation_id} (deleted or pruned); "
                    "it cannot be confirmed — `pi-hindsight outbox retry` sends it again",
                )
                return
            if self.stopping:
                await self._release(batch)
                return
            await run_store(self.outbox.renew, batch.batch_id, self.owner)
            await self._sleep(delay, wakeable=False)
            delay = min(delay * 1.5, 1.0)

    async def _failed(self, batch: Batch, error: BackendError, *, following: bool) -> None:
        self._note(str(error))
        if isinstance(error, BackendAuthRejected):
            # The key, not the item: same key, no failure counted, pause until it is accepted.
            await self._later(batch, str(error), 0.0, following=following)
            self._key_refused(batch.bank_id, error)
            return
        if isinstance(error, BackendRejected):
            await self._dead(batch, str(error))
            return
        if isinstance(error, BackendMalformed):
            # Not Hindsight's answer (a proxy, another server): the server's fault, not the
            # item's. Back off and retry, counting no failure, so nothing is dead-lettered for it.
            delay = self.backoff.delay(batch.attempts + 1)
            self._paused_until = max(self._paused_until, time.monotonic() + delay)
            logger.warning(
                "unexpected answer from Hindsight; retain pauses %.1fs: %s", delay, error
            )
            await self._later(batch, str(error), delay, following=following)
            return
        if isinstance(error, BackendServerError) and error.status == 429:
            delay = self.backoff.delay(batch.attempts + 1, error.retry_after)
            self._paused_until = max(self._paused_until, time.monotonic() + delay)
            logger.info("Hindsight asked to slow down; retain pauses %.1fs", delay)
            await self._later(batch, str(error), delay, following=following)
            return
        if isinstance(error, BackendServerError):
            if following:  # the operation is known; only looking at it failed
                await self._later(batch, str(error), self.backoff.delay(1), following=True)
            else:
                await self._retry_or_die(batch, str(error), retry_after=error.retry_after)
            return
        # Unreachable (or not configured): same key, no backoff, no failure; go offline.
        await self._later(batch, str(error), 0.0, following=following)
        self._go_offline(error)

    async def _later(self, batch: Batch, error: str, delay: float, *, following: bool) -> None:
        if following:
            await run_store(
                self.outbox.poll_later, batch.batch_id, self.owner, error=error, delay_s=delay
            )
        else:
            await run_store(
                self.outbox.retry_later, batch.batch_id, self.owner, error=error, delay_s=delay
            )
        self.stats.retried += 1

    async def _retry_or_die(
        self,
        batch: Batch,
        error: str,
        *,
        new_generation: bool = False,
        retry_after: float | None = None,
    ) -> None:
        self._note(error)
        if batch.failures + 1 >= self.max_failures:
            await self._dead(batch, f"gave up after {batch.failures + 1} failures: {error}")
            return
        delay = self.backoff.delay(batch.failures + 1, retry_after)
        logger.info("retain batch %s will retry in %.1fs: %s", batch.batch_id, delay, error)
        await run_store(
            self.outbox.retry_later,
            batch.batch_id,
            self.owner,
            error=error,
            delay_s=delay,
            new_generation=new_generation,
            failure=True,
        )
        self.stats.retried += 1

    async def _dead(self, batch: Batch, reason: str) -> None:
        logger.warning(
            "retain batch %s (%d request(s) of session %s) dead-lettered: %s",
            batch.batch_id,
            len(batch.items),
            batch.session_id,
            reason,
        )
        await run_store(self.outbox.dead_letter, batch.batch_id, self.owner, error=reason)
        self.stats.dead += len(batch.items)
        self._note(reason)

    async def _release(self, batch: Batch) -> None:
        try:
            await run_store(self.outbox.release, batch.batch_id, self.owner)
        except StateError as error:  # the lease expires by itself
            logger.warning("could not release batch %s: %s", batch.batch_id, error)

    # -- shutdown --------------------------------------------------------------------------

    async def shutdown(self, deadline: float) -> int:
        """Stop, then submit what is ready until ``deadline`` (monotonic); returns how many
        requests Hindsight accepted meanwhile — by this call or by a delivery already under way
        when it was called. Operations still running stay ``submitted`` and anything not sent
        stays ``sending``/``ready``: the next sidecar confirms or sends them."""
        accepted_before = self.stats.submitted
        self.stop()
        await self._end_deliveries(deadline)
        if self.gate is not None:
            self.paused_by = await self.gate()
        while self.offline_reason is None and self.paused_by is None:
            if time.monotonic() >= deadline:
                break
            try:
                batches = await run_store(
                    self.outbox.claim, self.owner, limit=self.concurrency, include_submitted=False
                )
            except StateError as error:
                self._note(str(error))
                break
            if not batches:
                break
            await self._submit_before(batches, deadline)
        return self.stats.submitted - accepted_before

    async def _end_deliveries(self, deadline: float) -> None:
        """Let the deliveries under way finish until ``deadline``, then cancel the rest (their
        batches are released). Every one of them is over when this returns, so the connection
        can close under none."""
        while self._tasks:
            _, pending = await asyncio.wait(
                set(self._tasks), timeout=max(0.0, deadline - time.monotonic())
            )
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _submit_before(self, batches: list[Batch], deadline: float) -> None:
        async def submit_one(batch: Batch) -> None:
            try:
                backend = await self._backend()
                await self._submit(backend, batch)
                await run_store(self.outbox.release, batch.batch_id, self.owner)
            except asyncio.CancelledError:
                await self._release(batch)
                raise
            except BackendError as error:
                await self._failed(batch, error, following=False)
            except Exception as error:  # as in _deliver: shutdown is no reason to count a failure
                logger.info("retain batch %s not sent at shutdown: %r", batch.batch_id, error)
                await self._release(batch)

        tasks = [asyncio.create_task(submit_one(batch)) for batch in batches]
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.monotonic()))
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
