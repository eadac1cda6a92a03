"""Evidence recording, behind the one policy of R-EVID-5: a failure to record never stops the
conversation. It is logged, it warns once (a notice for the host), and ``status`` shows it.

A request's record is written after its answer (issues 17 and 19): the host answers without
waiting for the write (an fsync), and the record is queued on the store thread only once the
step that answers is over — queued earlier, building and writing it on the store thread would
compete with the answer for the interpreter. Queued there, it is written before anything queued
after it (the request's ``attached`` and ``confirmed`` marks, closing the stores at shutdown):
those come with later messages, handled after the queued callback. A write that fails warns
with the next request's notices.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypedDict, Unpack

from pi_hindsight.config import EvidenceSettings
from pi_hindsight.engine.local_stores import LocalState
from pi_hindsight.engine.trivial import Skip
from pi_hindsight.engine.types import Delivery, Notice, UserRequest, scores_json
from pi_hindsight.errors import PiHindsightError, StateError
from pi_hindsight.stores.evidence import (
    DeliveredItem,
    EvidenceLedger,
    HeldItem,
    MemoInfo,
    PreparedRecord,
)
from pi_hindsight.stores.evidence.shapes import EvidencePage, Outcome, RetainDecision
from pi_hindsight.stores.runner import run_store, submit_store


class LedgerFilters(TypedDict, total=False):
    """Which records a page lists (the ledger's ``list``); none: every record."""

    scope: str | None
    session: str | None
    since: float | None  # a timestamp
    outcome: Outcome | None
    before: str | None  # the previous page's ``next_cursor``


logger = logging.getLogger(__name__)


def prepared_record(
    request: UserRequest, delivery: Delivery, transcript_path: str | None
) -> PreparedRecord:
    """What the ledger keeps of one request's delivery (the body only when delivered)."""
    details = delivery.details
    memo = details.memo
    omitted = details.omitted
    delivered = delivery.outcome == "delivered"
    omitted_by = {
        key: count
        for key, count in (omitted.to_json() if omitted is not None else {}).items()
        if count
    }
    return PreparedRecord(
        request_id=request.request_id,
        outcome=delivery.outcome,
        session_id=request.session_id,
        scope_id=details.scope_id,
        bank_ids=details.bank_ids,
        transcript_path=transcript_path,
        reason=delivery.reason,
        body=delivery.text,
        record_ids=details.record_ids,
        omitted=omitted.budget if omitted is not None and delivered else 0,
        tokens=details.tokens,
        recall_ms=details.recall_ms,
        total_ms=details.total_ms,
        memo=None
        if memo is None
        else MemoInfo(memo_id=memo.memo_id, refreshed_at=memo.refreshed_at),
        items=tuple(
            DeliveredItem(
                record_id=record.id,
                section=record.section,
                key=record.key or None,
                type=record.type,
                document_id=record.document_id,
                chunk_id=record.chunk_id,
                occurred=record.occurred,
                context=record.context,
                shown=record.shown,
                duplicate_ids=record.duplicate_ids,
                scores=scores_json(record.scores) or {},
            )
            for record in details.records
        )
        if delivered
        else (),
        omitted_by=omitted_by,
        queries=dict(details.queries),
        held=tuple(
            HeldItem(
                record_id=record.id,
                section=record.section,
                text=record.text,
                reason=record.reason,
                detail=record.detail,
                key=record.key or None,
                type=record.type,
                occurred=record.occurred,
                scores=scores_json(record.scores) or {},
                duplicate_ids=record.duplicate_ids,
            )
            for record in details.held
        ),
    )


class EvidenceRecorder:
    def __init__(self, state: LocalState) -> None:
        self._state = state
        self.last_error: str | None = None
        self._writing: set[asyncio.Future[StateError | None]] = set()
        # Records not yet handed to the store thread (``prepared``), in order.
        self._pending: list[Callable[[], StateError | None]] = []
        self._notices: list[Notice] = []  # from writes that failed after their answer

    @property
    def ledger(self) -> EvidenceLedger | None:
        return self._state.evidence

    def unavailable(self) -> str | None:
        """Why there is no ledger to read, or None when there is one."""
        if self._state.evidence is not None:
            return None
        return self.last_error or "evidence is disabled (evidence.enabled: false)"

    async def page(self, limit: int, **filters: Unpack[LedgerFilters]) -> tuple[EvidencePage, str]:
        """The newest ``limit`` records (no bodies) matching the filters, and the retention."""
        ledger = self._state.evidence
        if ledger is None:
            raise StateError(f"no evidence ledger: {self.unavailable()}")
        self.submit_pending()
        page = await run_store(ledger.list, limit=limit, **filters)
        stats = await run_store(ledger.stats, counts=False)
        return page, stats.retention_note

    async def open(self, settings: EvidenceSettings) -> tuple[Notice, ...]:
        """Open the ledger when evidence is on (a ledger set aside while opening is reported
        with the other set-aside stores)."""
        if not settings.enabled or self._state.evidence is not None:
            return ()
        try:
            await self._state.open_evidence(settings)
        except StateError as error:
            return self._failed(error)
        return ()

    def prepared(
        self, request: UserRequest, delivery: Delivery, transcript_path: str | None
    ) -> None:
        """Queue the request's record for the store thread, after the answer (module doc), and
        return at once."""
        ledger = self._state.evidence
        if ledger is None:
            return

        def write() -> StateError | None:
            try:
                ledger.record_prepared(prepared_record(request, delivery, transcript_path))
            except StateError as error:
                return error
            return None

        # Submitted once this task step is over (the host's answer is sent in the same step),
        # or before the next ledger call, whichever comes first: the order of writes holds.
        self._pending.append(write)
        asyncio.get_running_loop().call_soon(self.submit_pending)

    def submit_pending(self) -> None:
        """Hand the records not yet queued to the store thread, in order (before any other
        ledger call, and before the stores close)."""
        while self._pending:
            future = submit_store(self._pending.pop(0))
            self._writing.add(future)
            future.add_done_callback(self._written)

    def _written(self, future: asyncio.Future[StateError | None]) -> None:
        self._writing.discard(future)
        if future.cancelled():
            return
        failure = future.exception()
        if failure is not None:  # not a store error: a bug, logged with its traceback
            logger.error("evidence not recorded", exc_info=failure)
            error: StateError | None = StateError(f"recording failed: {failure!r}")
        else:
            error = future.result()
        if error is not None:
            self._notices.extend(self._failed(error))

    def take_notices(self) -> tuple[Notice, ...]:
        """Warnings of records that failed since the last call (for the next answer)."""
        taken, self._notices = tuple(self._notices), []
        return taken

    async def flush(self) -> None:
        """Wait until every queued record is written (or has failed)."""
        self.submit_pending()
        if self._writing:
            await asyncio.wait(set(self._writing))

    async def attached(
        self, request_id: str, *, entry_id: str | None = None, transcript_path: str | None = None
    ) -> tuple[Notice, ...]:
        return await self._call(
            lambda ledger: ledger.mark_attached(
                request_id, entry_id=entry_id, transcript_path=transcript_path
            )
        )

    async def confirmed(
        self, request_id: str, confirmed: bool, payload_bytes: int | None
    ) -> tuple[Notice, ...]:
        if not confirmed:
            logger.warning("memory for request %s was not in the provider payload", request_id)
        return await self._call(
            lambda ledger: ledger.mark_confirmed(request_id, confirmed, payload_bytes)
        )

    async def retain_decided(self, request_id: str, skip: Skip | None) -> None:
        """What retain did with the completed request: queued (``skip`` None), or skipped and
        why. A failure warns with the next request's notices."""
        decision: RetainDecision = "queued" if skip is None else "skipped"
        reason = None if skip is None else skip.reason
        self._notices.extend(
            await self._call(lambda ledger: ledger.mark_retain(request_id, decision, reason))
        )

    async def _call(self, action: Callable[[EvidenceLedger], object]) -> tuple[Notice, ...]:
        ledger = self._state.evidence
        if ledger is None:
            return ()
        self.submit_pending()  # a request's record before its marks
        try:
            await run_store(action, ledger)
        except StateError as error:
            return self._failed(error)
        return ()

    def _failed(self, error: PiHindsightError) -> tuple[Notice, ...]:
        first = self.last_error is None
        self.last_error = str(error)
        logger.warning("evidence not recorded: %s", error)
        if not first:
            return ()
        return (Notice.warning(f"evidence is not being recorded: {error.describe()}"),)
