"""Preparing one request's memory: query, parallel recall (project, User bank, startup memo),
budgets, safety, de-duplication against the visible session and the memo, and the outcome.

Every request ends in exactly one outcome — delivered, nothing_found, skipped (and why),
backend_unavailable or not_registered — returned to the host and recorded as evidence. Recall
respects its own timeout (well inside the host's) and cancellation; a missing, stale or failing
memo never blocks recall.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pi_hindsight import redacting, relevance
from pi_hindsight.backend import MemoryBackend, MemoryRecord
from pi_hindsight.config import Settings
from pi_hindsight.engine.connection import HindsightConnection
from pi_hindsight.engine.memory_block import (
    PROJECT_TITLE,
    USER_TITLE,
    MessageBuilder,
    SectionReport,
    record_key,
    record_text,
)
from pi_hindsight.engine.query import build_query, is_trivial
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH, USER_SCOPE_TAGS, Scope
from pi_hindsight.engine.startup_memo import MemoCache, MemoState, memo_id
from pi_hindsight.engine.types import (
    Delivery,
    DeliveryDetails,
    HeldRecord,
    HostFacts,
    MemoUse,
    Notice,
    Omitted,
    Outcome,
    Shown,
    UserRequest,
    VisibleContext,
)
from pi_hindsight.errors import BackendError, PiHindsightError
from pi_hindsight.redacting import redact, redact_recalled
from pi_hindsight.relevance import RelevanceBars
from pi_hindsight.stores.corrections import Corrected

logger = logging.getLogger(__name__)


@dataclass
class _Fetched:
    project: list[MemoryRecord] | None = None
    user: list[MemoryRecord] | None = None
    memo: MemoState | None = None
    errors: list[str] = field(default_factory=list)
    corrected: int = 0  # project records held back by a correction
    held: list[HeldRecord] = field(default_factory=list)  # below the relevance bars
    held_count: int = 0  # records held back (a text held back may be several records)


def hold_back(records: list[MemoryRecord], corrected: Corrected) -> tuple[list[MemoryRecord], int]:
    """``records`` without those a correction in this scope keeps out: the corrected record, the
    same text under another id, and an observation built on a corrected fact."""
    kept = [
        record
        for record in records
        if record.id not in corrected.record_ids
        and record_key(record.text) not in corrected.text_keys
        and not corrected.record_ids.intersection(record.source_memory_ids)
    ]
    return kept, len(records) - len(kept)


#: A memo line's list marker (``-``, ``*``, ``+``, ``•``, ``1.``, ``1)``) before its statement.
_LIST_MARKER = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")


def hold_back_memo(text: str, corrected: Corrected) -> tuple[str, int]:
    """The startup memo without the lines that state a corrected record. The memo is
    Hindsight's own text, regenerated from the bank's facts, and a correction deletes no fact:
    a refresh goes on listing the wrong statement beside its correction. A line (its list marker
    aside) with a corrected record's text key is left out; prose that only paraphrases it is
    not recognised (the correction note, delivered beside it, says what is right)."""
    if not corrected.text_keys:
        return text, 0
    kept: list[str] = []
    held = 0
    for line in text.split("\n"):
        statement = _LIST_MARKER.sub("", line, count=1)
        if statement.strip() and record_key(statement) in corrected.text_keys:
            held += 1
            continue
        kept.append(line)
    return ("\n".join(kept), held) if held else (text, 0)


def _hold_back_from_memo(fetched: _Fetched, corrected: Corrected) -> None:
    """``fetched.memo`` without the lines stating a corrected record (``hold_back_memo``)."""
    if fetched.memo is None or fetched.memo.model is None:
        return
    memo_text, held = hold_back_memo(fetched.memo.model.content or "", corrected)
    if held:
        model = dataclasses.replace(fetched.memo.model, content=memo_text)
        fetched.memo = dataclasses.replace(fetched.memo, model=model)
        fetched.corrected += held


def hold_back_irrelevant(
    records: list[MemoryRecord], section: str, bars: RelevanceBars
) -> tuple[list[MemoryRecord], list[HeldRecord], int]:
    """``records`` without those below the relevance bars (``relevance.py``), those held back
    (one per text, with the strongest scores of its records), and how many records that was."""
    kept, judged = relevance.split(records, bars)
    held: dict[str, HeldRecord] = {}
    for judgement in judged:
        record = judgement.record
        key = record_key(record.text)
        first = held.get(key)
        if first is not None:
            if relevance.strength(record.scores) > relevance.strength(first.scores):
                held[key] = dataclasses.replace(first, scores=record.scores)
            held[key] = dataclasses.replace(
                held[key], duplicate_ids=(*held[key].duplicate_ids, record.id)
            )
            continue
        held[key] = HeldRecord(
            id=record.id,
            key=key,
            section=section,
            text=record_text(record.text, redact_recalled),
            reason=relevance.BELOW_RELEVANCE,
            detail=judgement.detail,
            type=record.type,
            occurred=record.occurred_start or record.mentioned_at or None,
            scores=record.scores,
        )
    return kept, list(held.values()), len(judged)


def _hold_back_irrelevant(fetched: _Fetched, scope: Scope, settings: Settings) -> None:
    """Each bank's recall judged on its own: the best record is the best of that recall."""
    policy = settings.recall.relevance
    for section, bank_id in (("project", scope.bank_id), ("user", settings.banks.user.bank_id)):
        records = getattr(fetched, section)
        if not records:
            continue
        kept, held, count = hold_back_irrelevant(records, section, policy.for_bank(bank_id))
        setattr(fetched, section, kept)
        fetched.held.extend(held)
        fetched.held_count += count


def user_query(settings: Settings, query: str) -> str:
    preamble = settings.user_query_preamble
    return f"{preamble} {query}" if preamble else query


def _queries(settings: Settings, query: str) -> tuple[tuple[str, str], ...]:
    """The query each recall is sent (kept in the details and the evidence: why a record came)."""
    sent: list[tuple[str, str]] = []
    if settings.project_recall:
        sent.append(("project", query))
    if settings.user_bank_active:
        sent.append(("user", user_query(settings, query)))
    return tuple(sent)


def _no_recall(
    request: UserRequest, settings: Settings, details: DeliveryDetails
) -> Delivery | None:
    """Why this request gets no automatic recall at all, if it gets none."""
    if request.origin != "user":
        # R-RECALL-1: automatic recall is for the user's requests; the model can still search
        # with the memory tool. Recorded as its own kind, never as a failure.
        started_by = request.origin_detail or "something other than the user"
        return _outcome("not_user_request", details, reason=f"a run started by {started_by}")
    if settings.recall.skip_trivial and is_trivial(request.prompt):
        return _outcome("skipped", details, reason="trivial prompt")
    if not settings.project_recall and not settings.user_bank_active:
        return _outcome("skipped", details, reason=f"profile {settings.profile} recalls nothing")
    return None


class Deliverer:
    def __init__(self, connection: HindsightConnection, host: HostFacts) -> None:
        self.connection = connection
        self.host = host
        self.memos = MemoCache()

    async def prepare_memo(
        self,
        request: UserRequest,
        scope: Scope | None,
        settings: Settings,
        memory: VisibleContext,
        *,
        off_reason: str | None,
        corrected: Corrected | None = None,
    ) -> Delivery:
        """The startup memo alone, in the same fenced, framed block (a host that can add context
        when a session starts, before any prompt). Delivered at most once per memo version in
        the visible context, so the first request does not repeat it."""
        started = time.perf_counter()
        base = DeliveryDetails(request_id=request.request_id)
        if scope is None:
            return _outcome("not_registered", base, reason=off_reason or "memory is off")
        details = base.but(scope_id=scope.scope_id, bank_id=scope.bank_id)
        if not (settings.project_recall and settings.memo.enabled and settings.memo.max_tokens):
            return _outcome("skipped", details, reason="the startup memo is off in this profile")
        timeout = settings.recall.timeout_ms / 1000
        try:
            memo = await asyncio.wait_for(self._backend_memo(scope, settings, timeout), timeout)
        except (BackendError, TimeoutError) as error:
            failure = (
                error
                if isinstance(error, BackendError)
                else BackendError(f"the startup memo timed out after {timeout:.1f}s")
            )
            delivery = _outcome("backend_unavailable", details, reason=str(failure))
            return delivery.with_notices(self.connection.note(failure))
        except PiHindsightError as error:
            memo = MemoState("failed", error=str(error))
        notices = self.connection.note(None) if memo.status != "failed" else ()
        fetched = _Fetched(memo=memo)
        if corrected:
            _hold_back_from_memo(fetched, corrected)
        delivery = self._compose(
            scope,
            settings,
            memory,
            fetched,
            details,
            host_frames=request.host_states_framing,
            started=started,
        )
        if delivery.text is None:
            why = {
                "ready": "the startup memo is already in this session's context",
                "failed": f"the startup memo is unavailable: {memo.error}",
            }.get(memo.status, f"no startup memo yet ({memo.status})")
            delivery = dataclasses.replace(delivery, outcome="nothing_found", reason=why)
        return delivery.with_notices(notices)

    async def prepare(
        self,
        request: UserRequest,
        scope: Scope | None,
        settings: Settings,
        memory: VisibleContext,
        *,
        off_reason: str | None,
        corrected: Awaitable[Corrected | None] | None = None,
    ) -> Delivery:
        """``corrected``: the corrections in force, awaited once the records are back."""
        started = time.perf_counter()
        base = DeliveryDetails(request_id=request.request_id)
        if scope is None:
            return _outcome("not_registered", base, reason=off_reason or "memory is off")
        details = base.but(scope_id=scope.scope_id, bank_id=scope.bank_id)
        declined = _no_recall(request, settings, details)
        if declined is not None:
            return declined
        recall = settings.recall
        query = build_query(
            request.prompt,
            memory.recent,
            max_chars=recall.max_query_chars,
            context_turns=recall.context_turns,
        )
        if not query:
            return _outcome("skipped", details, reason="empty prompt")
        timeout = recall.timeout_ms / 1000
        # The first request may wait for the redaction tables (and below, the client) to load:
        # in recall's bound and off the loop (a loaded machine can take seconds).
        if not redacting.loaded():
            try:
                await asyncio.wait_for(redacting.load(), timeout=timeout)
            except TimeoutError:
                reason = f"memory was still loading after {timeout:.1f}s; the next request has it"
                return _outcome("skipped", details, reason=reason)
        query = redact(query).text  # a secret in the prompt is not sent to recall either
        details = details.but(queries=dict(_queries(settings, query)))
        try:
            fetched = await asyncio.wait_for(
                self._backend_fetch(scope, settings, query),
                timeout=max(0.0, timeout - (time.perf_counter() - started)),
            )
        except (BackendError, TimeoutError) as error:
            failure = (
                error
                if isinstance(error, BackendError)
                else BackendError(f"recall timed out after {timeout:.1f}s")
            )
            delivery = _outcome("backend_unavailable", details, reason=str(failure))
            return delivery.with_notices(self.connection.note(failure))
        waiting = time.perf_counter()
        corrections = None if corrected is None else await corrected
        waited = time.perf_counter() - waiting  # ours, not recall's: not in recall_ms
        if corrections and fetched.project:
            fetched.project, fetched.corrected = hold_back(fetched.project, corrections)
        if corrections:
            _hold_back_from_memo(fetched, corrections)
        _hold_back_irrelevant(fetched, scope, settings)
        recall_ms = round((time.perf_counter() - started - waited) * 1000, 1)
        notices = self.connection.note(None) if not fetched.errors else ()
        delivery = self._compose(
            scope,
            settings,
            memory,
            fetched,
            details,
            host_frames=request.host_states_framing,
            started=started,
            recall_ms=recall_ms,
        )
        return delivery.with_notices(notices)

    async def _backend_memo(self, scope: Scope, settings: Settings, timeout: float) -> MemoState:
        backend = await self.connection.backend(settings)
        return await self._memo(backend, scope, settings, timeout * 0.9)

    async def _backend_fetch(self, scope: Scope, settings: Settings, query: str) -> _Fetched:
        return await self._fetch(await self.connection.backend(settings), scope, settings, query)

    async def _fetch(
        self, backend: MemoryBackend, scope: Scope, settings: Settings, query: str
    ) -> _Fetched:
        """Project recall, User bank recall and the memo, in parallel; each may fail alone.

        Inner calls get shorter bounds than the caller's overall timeout, so a slow memo (or one
        slow bank) fails on its own instead of taking the whole request down with it.
        """
        fetched = _Fetched()
        overall = settings.recall.timeout_ms / 1000
        recall_timeout, memo_timeout = overall * 0.9, overall * 0.6
        jobs: dict[str, Awaitable[object]] = {}
        if settings.project_recall:
            jobs["project"] = self._recall(
                backend,
                scope.bank_id,
                settings.banks.project.mission,
                scope.tags,
                query,
                settings,
                settings.recall.max_tokens,
                recall_timeout,
            )
            if settings.memo.enabled and settings.memo.max_tokens > 0:
                jobs["memo"] = self._memo(backend, scope, settings, memo_timeout)
        if settings.user_bank_active:
            jobs["user"] = self._recall(
                backend,
                settings.banks.user.bank_id,
                settings.banks.user.mission,
                USER_SCOPE_TAGS,
                user_query(settings, query),
                settings,
                settings.user_max_tokens,
                recall_timeout,
            )
        results = await asyncio.gather(*jobs.values(), return_exceptions=True)
        first_error: BackendError | None = None
        for name, value in zip(jobs, results, strict=True):
            if not isinstance(value, BaseException):
                setattr(fetched, name, value)
                continue
            if not isinstance(value, PiHindsightError):
                raise value  # a bug or a cancellation: never swallowed
            if name == "memo":
                logger.info("startup memo unavailable: %s", value)
                fetched.memo = MemoState("failed", error=str(value))
                continue
            fetched.errors.append(f"{name}: {value}")
            if first_error is None and isinstance(value, BackendError):
                first_error = value
        if first_error is not None and fetched.project is None and fetched.user is None:
            raise first_error  # no recall answered: the backend is unavailable
        return fetched

    async def _recall(
        self,
        backend: MemoryBackend,
        bank_id: str,
        mission: str,
        tags: tuple[str, ...],
        query: str,
        settings: Settings,
        max_tokens: int,
        timeout: float,
    ) -> list[MemoryRecord]:
        await self.connection.ensure_bank(backend, bank_id, mission, timeout=timeout)
        return await backend.recall(
            bank_id,
            query,
            tags=tags,
            tags_match=SCOPE_TAGS_MATCH,
            max_tokens=max_tokens,
            budget=settings.recall.budget,
            timeout=timeout,
        )

    async def _memo(
        self, backend: MemoryBackend, scope: Scope, settings: Settings, timeout: float
    ) -> MemoState:
        await self.connection.ensure_bank(
            backend, scope.bank_id, settings.banks.project.mission, timeout=timeout
        )
        return await self.memos.get(
            backend,
            scope,
            timeout=timeout,
            min_refresh_interval_s=settings.memo.min_refresh_interval_s,
        )

    def _compose(
        self,
        scope: Scope,
        settings: Settings,
        memory: VisibleContext,
        fetched: _Fetched,
        details: DeliveryDetails,
        *,
        host_frames: bool,
        started: float,
        recall_ms: float | None = None,
    ) -> Delivery:
        """The delivery of what was fetched. ``started``: when preparing began (the details'
        ``total_ms``); ``recall_ms``: what recall took (None: all of it, for the memo alone)."""
        memo = fetched.memo
        builder = MessageBuilder(
            recalled_at=datetime.now(UTC).date().isoformat(),  # strftime: ~20 µs (issue 19)
            ceiling_tokens=self.host.block_ceiling_tokens(settings.recall.request_max_tokens),
            # Framing once per session (R-RECALL-5): by the host, or by the first block.
            framed=not host_frames and not memory.framed,
            redact=redact_recalled,
            default_context=lambda context: self.host.is_default_context(context, scope.project_id),
            # A memo the visible context already shows: records it states are left out too.
            visible_memo=memory.memo_text,
        )
        sections: list[SectionReport] = []
        memo_used: MemoUse | None = None
        memo_version: str | None = None
        if memo is not None:
            version = memo.version
            if memo.status == "ready" and memo.model and version != memory.memo_version:
                report = builder.add_memo(
                    memo.model.content or "",
                    refreshed=version,
                    budget_tokens=settings.memo.max_tokens,
                )
                sections.append(report)
                if report.tokens:
                    memo_used = MemoUse(memo_id(scope), memo.model.last_refreshed_at)
                    memo_version = version
        bank_ids = [scope.bank_id]
        if fetched.project:
            sections.append(
                builder.add_records(
                    PROJECT_TITLE,
                    fetched.project,
                    kind="project",
                    budget_tokens=settings.recall.max_tokens,
                    already_delivered=memory.record_ids,
                    already_delivered_keys=memory.record_keys,
                )
            )
        if fetched.user is not None:
            bank_ids.append(settings.banks.user.bank_id)
        if fetched.user:
            sections.append(
                builder.add_records(
                    USER_TITLE,
                    fetched.user,
                    kind="user",
                    budget_tokens=settings.user_max_tokens,
                    already_delivered=memory.record_ids,
                    already_delivered_keys=memory.record_keys,
                )
            )
        block = builder.build()
        omitted = Omitted(
            budget=sum(s.omitted_budget for s in sections),
            duplicate=sum(s.omitted_duplicate for s in sections),
            already_delivered=sum(s.omitted_already_delivered for s in sections),
            in_memo=sum(s.omitted_in_memo for s in sections),
            corrected=fetched.corrected,
            relevance=fetched.held_count,
        )
        # What every outcome's details say of the recall.
        total_ms = round((time.perf_counter() - started) * 1000, 1)
        details = details.recalled(
            recall_ms=total_ms if recall_ms is None else recall_ms,
            total_ms=total_ms,
            bank_ids=tuple(bank_ids),
            memo_status=None if memo is None else memo.status,
            omitted=omitted,
            held=tuple(fetched.held),
        )
        notices: tuple[Notice, ...] = tuple(
            Notice.warning(f"part of memory is unavailable: {error}") for error in fetched.errors
        )
        if block is None:
            found = len(fetched.project or ()) + len(fetched.user or ())
            if found and omitted.already_delivered + omitted.in_memo:
                delivery = _outcome(
                    "skipped",
                    details,
                    reason="everything recalled was already delivered in this session"
                    + (" (or is stated by its startup memo)" if omitted.in_memo else ""),
                )
            elif fetched.held_count:
                delivery = _outcome(
                    "nothing_found",
                    details,
                    reason=f"nothing recalled cleared the relevance bars "
                    f"({fetched.held_count} held back: {relevance.BELOW_RELEVANCE})",
                )
            else:
                delivery = _outcome(
                    "nothing_found", details, reason="recall found nothing in scope"
                )
            return delivery.with_notices(notices)
        details = details.delivered(
            records=block.records,
            framed=block.framed,
            tokens=block.tokens,
            memo=memo_used,
            memo_version=memo_version,
        )
        shown = Shown(
            record_ids=frozenset(details.record_ids),
            record_keys=frozenset(details.record_keys),
            framed=block.framed,
            memo_version=memo_version if memo_used is not None else None,
            memo_text=block.memo_text if memo_used is not None else None,
        )
        return Delivery("delivered", block.text, details, notices, shown=shown)


def _outcome(outcome: Outcome, details: DeliveryDetails, *, reason: str) -> Delivery:
    return Delivery(outcome, None, details, reason=reason)
