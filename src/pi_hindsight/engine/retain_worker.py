"""Drains the outbox into Hindsight: submit, follow the operation, confirm, retry or dead-letter.

One worker per sidecar, running on the sidecar's event loop while Pi runs. The conversation never
waits on it. Several sidecars may drain one outbox: the outbox's leases keep them apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pi_hindsight.backend.records import MemoryBackend, RetainItem
from pi_hindsight.errors import BackendError, BackendRejected, StateError
from pi_hindsight.stores.outbox import Backoff, Outbox, OutboxItem

logger = logging.getLogger(__name__)

BackendProvider = Callable[[], Awaitable[MemoryBackend]]


@dataclass
class WorkerStats:
    submitted: int = 0
    confirmed: int = 0
    retried: int = 0
    dead: int = 0
    last_error: str | None = None


def _retain_items(item: OutboxItem) -> list[RetainItem]:
    return [
        RetainItem(
            content=entry["content"],
            document_id=entry["document_id"],
            tags=tuple(entry["tags"]),
            timestamp=entry.get("timestamp"),
            context=entry.get("context"),
            metadata=dict(entry.get("metadata") or {}),
            update_mode=entry.get("update_mode", "append"),
        )
        for entry in item.payload["items"]
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
        idle_poll_s: float = 2.0,
        max_attempts: int = 25,
    ) -> None:
        self.outbox = outbox
        self._backend = backend
        self.timeout_s = timeout_s
        self.concurrency = concurrency
        self.backoff = backoff or Backoff()
        self.idle_poll_s = idle_poll_s
        self.max_attempts = max_attempts
        self.owner = f"{os.uname().nodename}:{os.getpid()}:{id(self):x}"
        self.stats = WorkerStats()
        self._wake = asyncio.Event()
        self._stopping = False

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        """Drain until stopped. Survives bad items and store errors: log and go on."""
        try:
            self.outbox.recover_stale_leases()
        except StateError as error:
            logger.warning("outbox lease recovery failed: %s", error)
        while not self._stopping:
            try:
                worked = await self.step()
            except StateError as error:
                logger.warning("outbox unavailable: %s", error)
                self.stats.last_error = str(error)
                worked = False
            if worked:
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.idle_poll_s)

    async def step(self) -> bool:
        """Claim and process one round of items; whether anything was claimed."""
        items = self.outbox.claim(self.owner, limit=self.concurrency)
        if not items:
            return False
        await asyncio.gather(*(self._process(item) for item in items))
        return True

    async def flush(self, deadline_s: float) -> None:
        """Submit what is ready before ``deadline_s`` (monotonic). Operations still running are
        left ``submitted``: the next sidecar confirms them."""
        while time.monotonic() < deadline_s:
            remaining = deadline_s - time.monotonic()
            items = self.outbox.claim(self.owner, limit=self.concurrency)
            items_to_send = [item for item in items if item.state == "leased"]
            for item in items:
                if item.state != "leased":
                    self.outbox.release(item.item_id, self.owner)
            if not items_to_send:
                return
            try:
                await asyncio.wait_for(
                    asyncio.gather(*(self._process(item) for item in items_to_send)),
                    timeout=max(0.05, remaining),
                )
            except TimeoutError:
                for item in items_to_send:
                    self.outbox.release(item.item_id, self.owner)
                return

    async def _process(self, item: OutboxItem) -> None:
        try:
            if item.state == "submitted" and item.server_operation_id:
                await self._follow(item)
            else:
                await self._submit(item)
        except BackendRejected as error:
            logger.warning("retain %s rejected, dead-lettered: %s", item.item_id, error)
            self.outbox.dead_letter(item.item_id, self.owner, error=str(error))
            self.stats.dead += 1
            self.stats.last_error = str(error)
        except BackendError as error:
            if item.attempts + 1 >= self.max_attempts:
                reason = f"gave up after {item.attempts + 1} attempts: {error}"
                logger.warning("retain %s dead-lettered: %s", item.item_id, reason)
                self.outbox.dead_letter(item.item_id, self.owner, error=reason)
                self.stats.dead += 1
                self.stats.last_error = reason
                return
            delay = self.backoff.delay(item.attempts + 1, error.retry_after)
            logger.info("retain %s will retry in %.1fs: %s", item.item_id, delay, error)
            self.outbox.retry_later(item.item_id, self.owner, error=str(error), delay_s=delay)
            self.stats.retried += 1
            self.stats.last_error = str(error)

    async def _submit(self, item: OutboxItem) -> None:
        backend = await self._backend()
        accepted = await backend.retain(
            item.bank_id,
            _retain_items(item),
            operation_id=item.idempotency_key,
            timeout=self.timeout_s,
            run_async=True,
        )
        self.stats.submitted += 1
        operation_id = accepted.operation_id
        if operation_id is None:  # processed synchronously: nothing left to follow
            self.outbox.mark_done(item.item_id, self.owner)
            self.stats.confirmed += 1
            return
        self.outbox.mark_submitted(item.item_id, self.owner, operation_id, poll_in_s=0.5)

    async def _follow(self, item: OutboxItem) -> None:
        backend = await self._backend()
        operation_id = item.server_operation_id or item.idempotency_key
        status = await backend.operation_status(item.bank_id, operation_id, timeout=self.timeout_s)
        if status.state == "completed":
            self.outbox.mark_done(item.item_id, self.owner)
            self.stats.confirmed += 1
        elif status.state in ("failed", "cancelled"):
            message = (
                f"operation {status.operation_id} {status.state}: {status.error_message or ''}"
            )
            delay = self.backoff.delay(item.attempts + 1)
            self.outbox.retry_later(
                item.item_id, self.owner, error=message.strip(), delay_s=delay, new_generation=True
            )
            self.stats.retried += 1
            self.stats.last_error = message
        else:
            self.outbox.poll_later(
                item.item_id, self.owner, delay_s=min(5.0, 0.5 * (1 + item.attempts))
            )
