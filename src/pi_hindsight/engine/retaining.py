"""Retaining: completed requests and explicit notes become typed retain requests committed to the
durable outbox before any network call (R-RETAIN-1), and the worker that drains it.

What of a request is kept follows the retain policy, and every secret found is redacted first
(``engine/turn_text.py``); the same request id twice is stored once. Rendering and redaction run
in a thread (a turn can carry megabytes of tool output), one turn at a time, so a session's
requests are committed in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from pi_hindsight.backend import MemoryBackend
from pi_hindsight.backend.resources import RetainItem
from pi_hindsight.config import RetainSettings
from pi_hindsight.engine.local_stores import LocalState
from pi_hindsight.engine.retain_worker import FORCED_SUFFIX, Gate, RetainWorker
from pi_hindsight.engine.scope import Scope
from pi_hindsight.engine.trivial import Skip, classify
from pi_hindsight.engine.turn_text import ToolPolicy, render_turn
from pi_hindsight.engine.types import CompletedTurn, HostFacts
from pi_hindsight.errors import StateError
from pi_hindsight.redacting import redact
from pi_hindsight.stores.outbox_items import RetainRequest
from pi_hindsight.stores.outbox_skipped import SkippedRequest
from pi_hindsight.stores.runner import run_store

logger = logging.getLogger(__name__)

BackendProvider = Callable[[], Awaitable[MemoryBackend]]


class Retainer:
    def __init__(self, state: LocalState, host: HostFacts) -> None:
        self._state = state
        self.host = host
        self._lock = asyncio.Lock()
        self.worker: RetainWorker | None = None
        self._worker_task: asyncio.Task[None] | None = None

    def _item(
        self,
        *,
        content: str,
        document_id: str,
        scope_tags: tuple[str, ...],
        context: str,
        session_id: str,
        request_id: str,
        update_mode: str,
    ) -> RetainItem:
        return RetainItem(
            content=content,
            document_id=document_id,
            tags=scope_tags,
            timestamp=datetime.now(UTC).isoformat(),
            context=context,
            metadata={
                "source": self.host.name,
                "session_id": session_id,
                "request_id": request_id,
            },
            update_mode="replace" if update_mode == "replace" else "append",
        )

    async def turn(
        self, turn: CompletedTurn, scope: Scope, settings: RetainSettings
    ) -> Skip | None:
        """Commit one completed request of the session; returns why it was not queued, or None
        when it was."""
        policy = ToolPolicy(
            settings.tool_calls, settings.tool_results, settings.tool_result_max_chars
        )
        async with self._lock:
            skip = classify(turn.messages, aborted=turn.aborted) if settings.skip_trivial else None
            if skip is not None:
                await self._skipped(turn, scope, skip)
                return skip
            text = await asyncio.to_thread(render_turn, turn.messages, policy)
            if not text.content:  # skipTrivial off: nothing to send all the same
                return Skip("empty", 0)
            if text.redacted:
                logger.info("redacted %d secret(s) from request %s", text.redacted, turn.request_id)
            item = self._item(
                content=text.content,
                document_id=self.host.session_document(turn.session_id),
                scope_tags=scope.tags,
                context=self.host.session_context(scope.project_id),
                session_id=turn.session_id,
                request_id=turn.request_id,
                update_mode="append",
            )
            await self._enqueue(
                RetainRequest(turn.session_id, scope.bank_id, item, turn.request_id)
            )
        return None

    async def _skipped(self, turn: CompletedTurn, scope: Scope, skip: Skip) -> None:
        """Not sent (no knowledge in it): the outbox says which and why; fails open."""
        logger.info("request %s not retained: %s", turn.request_id, skip.reason)
        skipped = SkippedRequest(
            session_id=turn.session_id,
            request_id=turn.request_id,
            bank_id=scope.bank_id,
            reason=skip.reason,
            chars=skip.chars,
            created_at=time.time(),
        )
        try:
            outbox = await self._state.open_outbox()
            await run_store(outbox.record_skipped, skipped)
        except StateError as error:
            logger.warning("skipped request %s not recorded: %s", turn.request_id, error)

    async def note(
        self,
        *,
        session_id: str,
        bank_id: str,
        tags: tuple[str, ...],
        content: str,
        context: str | None,
        kind: str,
        force: bool = False,
    ) -> str:
        """An explicit note (a memory tool's retain): redacted, durable, its own document;
        ``force``: delivered even while the token budget holds automatic retain."""
        note_id = f"{kind}-{uuid.uuid4()}"
        text = await asyncio.to_thread(lambda: redact(content).text)
        item = self._item(
            content=text,
            document_id=self.host.note_document(note_id),
            scope_tags=tags,
            context=redact(context).text if context else self.host.note_context(kind),
            session_id=session_id,
            request_id=note_id,
            update_mode="replace",
        )
        queue = f"{session_id}{FORCED_SUFFIX}" if force else session_id
        await self._enqueue(RetainRequest(queue, bank_id, item, note_id))
        return note_id

    async def _enqueue(self, request: RetainRequest) -> None:
        outbox = await self._state.open_outbox()
        await run_store(outbox.enqueue, request)
        self.wake()

    def wake(self) -> None:
        if self.worker is not None:
            self.worker.wake()

    async def start_worker(
        self, backend: BackendProvider, *, timeout_s: float, gate: Gate | None = None
    ) -> None:
        """Start draining the outbox in the background (once per process)."""
        if self._worker_task is not None:
            return
        try:
            outbox = await self._state.open_outbox()
        except StateError as error:
            logger.warning("outbox unavailable: %s", error)
            return
        self.worker = RetainWorker(outbox, backend, timeout_s=timeout_s, gate=gate)
        self._worker_task = asyncio.get_running_loop().create_task(self.worker.run())

    async def shutdown(self, deadline: float) -> int:
        """Submit what is ready until ``deadline``; returns how many requests Hindsight accepted
        meanwhile. The rest stays in the outbox for the next process."""
        if self.worker is None:
            return 0
        flushed = 0
        try:
            flushed = await self.worker.shutdown(deadline)
        except StateError as error:
            logger.warning("flush on shutdown failed: %s", error)
        if self._worker_task is not None:
            try:
                await asyncio.wait_for(
                    self._worker_task, timeout=max(0.05, deadline - time.monotonic())
                )
            except TimeoutError:
                logger.warning("the retain worker did not stop in time; it was cancelled")
        return flushed
