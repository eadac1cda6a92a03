"""The memory engine, host-neutral: a request arrives with its text and session id, a completed
turn with its messages; what a host is comes in as typed facts (``HostFacts``). Hosts live in
``hosts/``.

The engine is a thin facade over named collaborators, one session per engine:

- ``sessions.Session`` — the session's scope (resolved once), consent, its visible context;
- ``delivery.Deliverer`` — one request's memory: query, parallel recall and memo, the block;
- ``recording.EvidenceRecorder`` — the evidence ledger, with R-EVID-5's failure policy;
- ``retaining.Retainer`` — turns and notes into the durable outbox, and the retain worker;
- ``local_state.LocalState`` — the stores, used on the store thread, and their set-aside reports.

Fail open, never silently: every degraded outcome returns something the host shows (a notice,
the status line), is in ``status()``, and is recorded as evidence; every prepare ends in exactly
one recorded outcome, ``error`` included. No SQLite or git call runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from pi_hindsight.backend import MemoryBackend
from pi_hindsight.config import LoadedConfig, Settings
from pi_hindsight.engine import sessions
from pi_hindsight.engine.budget import BudgetGate, read_pause
from pi_hindsight.engine.connection import BackendFactory, HindsightConnection
from pi_hindsight.engine.delivery import Deliverer
from pi_hindsight.engine.local_stores import LocalState, with_catalog_hint
from pi_hindsight.engine.memory_block import FRAMING
from pi_hindsight.engine.recording import EvidenceRecorder, LedgerFilters
from pi_hindsight.engine.retaining import Retainer
from pi_hindsight.engine.scope import Scope
from pi_hindsight.engine.sessions import Session
from pi_hindsight.engine.shared import SharedParts, close_shared
from pi_hindsight.engine.spend import SPEND_CACHE_S, STATUS_TIMEOUT_S, LastDay, last_day
from pi_hindsight.engine.types import (
    CompletedTurn,
    Delivery,
    DeliveryDetails,
    HostFacts,
    Notice,
    Outcome,
    SessionInfo,
    SessionView,
    UserRequest,
    VisibleContext,
)
from pi_hindsight.errors import NoSession, PiHindsightError, ScopeError
from pi_hindsight.identity import resolve_identity
from pi_hindsight.stores.corrections import Corrected
from pi_hindsight.stores.evidence.shapes import EvidencePage
from pi_hindsight.stores.handles import AsyncCatalog
from pi_hindsight.stores.outbox import OutboxHealth
from pi_hindsight.stores.runner import run_store

if TYPE_CHECKING:  # loaded when first used: seeding and status are no session's start (issue 19)
    from pi_hindsight.engine.seeding import Seeder
    from pi_hindsight.engine.status import EngineStatus

logger = logging.getLogger(__name__)

ConfigLoader = Callable[[Path | None], LoadedConfig]  # project root -> effective config
# Reads what the host's session record says is visible now (delivered ids, memo, recent turns).
ContextReader = Callable[[str | None, int], VisibleContext | None]


def _config_notices(config: LoadedConfig) -> list[Notice]:
    """Config warnings for the host; info-level notes (legacy keys migrated) stay in status."""
    return [Notice.warning(text) for text in config.notices()]


class MemoryEngine:
    def __init__(
        self,
        *,
        host: HostFacts,
        state_dir: Path,
        config_loader: ConfigLoader,
        backend_factory: BackendFactory,
        base_url_resolver: Callable[[Settings], str | None],
        context_reader: ContextReader | None = None,
        passive: bool = False,
        shared: SharedParts | None = None,
    ) -> None:
        self.host = host
        self.state_dir = state_dir
        self._config_loader = config_loader
        self.config = config_loader(None)
        self.settings = self.config.settings
        # Shared parts belong to whoever built them (close_shared); this engine never closes them.
        self._owns_parts = shared is None
        if shared is None:
            state = LocalState(state_dir)
            connection = HindsightConnection(backend_factory, base_url_resolver)
            shared = SharedParts(state, connection, Retainer(state, host))
        self.connection = shared.connection
        self._deliverer = Deliverer(self.connection, host)
        self._read_context = context_reader
        # A command that only looks (``status``): no retain worker, no evidence recording.
        self._passive = passive
        self.state = shared.state
        self.recorder = EvidenceRecorder(self.state)
        self.retainer = shared.retainer
        self._session: Session | None = None
        self._spend: tuple[float, LastDay] | None = None  # (when asked, the answer)

    # -- session ---------------------------------------------------------------------------

    def _require_session(self) -> Session:
        if self._session is None:
            raise NoSession("no session: call initialize first")
        return self._session

    def scope(self) -> Scope | None:
        """The session's scope with its bank resolved, or None when memory is off."""
        return None if self._session is None else self._session.scope

    def off_reason(self) -> str:
        session = self._session
        return "no session" if session is None else session.off_reason or "memory is on"

    async def backend(self) -> MemoryBackend:
        return await self.connection.backend(self.settings)

    async def backend_with_bank(self, bank: str, mission: str) -> MemoryBackend:
        """The backend, with ``bank`` created (with its mission) if it does not exist yet."""
        backend = await self.connection.backend(self.settings)
        await self.connection.ensure_bank(
            backend, bank, mission, timeout=self.settings.timeout_ms / 1000
        )
        return backend

    async def open_catalog(self) -> AsyncCatalog:
        """The catalogue for the tools: awaitable methods, each run on the store thread."""
        return AsyncCatalog(await self.state.open_catalog())

    # -- what hosts, commands and the CLI may ask (they never reach past these) --------------

    def session_info(self) -> SessionInfo | None:
        """What the host said of this session when it opened it; None before that."""
        return None if self._session is None else self._session.info

    def is_registered(self) -> bool:
        """The session's location is registered (memory may still be off: disabled)."""
        resolution = None if self._session is None else self._session.resolution
        return resolution is not None and resolution.registered is not None

    def awaits_registration(self) -> bool:
        """Memory is enabled and the location resolved, but nobody registered it yet: the
        one state in which a host tells the user how to turn memory on."""
        resolution = None if self._session is None else self._session.resolution
        return self.settings.enabled and resolution is not None and resolution.registered is None

    def resolution_warnings(self) -> tuple[str, ...]:
        """What resolving the session's scope warned about (a pin not honoured, …)."""
        resolution = None if self._session is None else self._session.resolution
        return () if resolution is None else resolution.warnings

    async def outbox_health(self) -> OutboxHealth:
        return await self.state.outbox_health()

    async def retry_dead(self) -> int:
        """Re-queue every dead letter (original idempotency keys); the worker is woken."""
        retried = await self.state.retry_dead()
        self.wake_worker()
        return retried

    async def open_stores_for_status(self) -> None:
        """Open the outbox (its health is part of the status) and an evidence ledger that
        exists already (never created here; a damaged one shows as such in the status)."""
        await self.state.open_for_status(self.settings.evidence)

    def evidence_unavailable(self) -> str | None:
        """Why this session has no evidence ledger, or None when it has one."""
        return self.recorder.unavailable()

    async def ledger_page(
        self, limit: int, **filters: Unpack[LedgerFilters]
    ) -> tuple[EvidencePage, str]:
        """The newest ``limit`` evidence records (no bodies) and the retention in force."""
        return await self.recorder.page(limit, **filters)

    async def seed_delivery(self, keys: Sequence[tuple[str, str]]) -> Counter[str]:
        """How many seeded items (``(session id, request id)``) are in each outbox state."""
        return await self.state.seed_delivery(keys)

    async def open_session(self, info: SessionInfo) -> SessionView:
        """Resolve the session's scope; start memory only for a registered location.

        An unregistered location gets no Hindsight client at all (R-CONSENT-1): no bank is
        created and no connection is made until the user registers it.
        """
        self._session = session = Session(info=info, host=self.host)
        notices: list[Notice] = []
        try:
            catalog = await self.state.open_catalog()
            # The repository's own file may only set allowlisted keys (config/raw.py).
            root = (await asyncio.to_thread(resolve_identity, info.cwd)).root
            self.config = await asyncio.to_thread(self._config_loader, root)
            self.settings = self.config.settings
            notices.extend(_config_notices(self.config))
            session.resolution = await sessions.resolve(info.cwd, self.settings, catalog)
        except PiHindsightError as error:
            session.off_reason = f"scope could not be resolved: {error}"
            notices.append(Notice.warning(f"memory off: {error.describe()}"))
            notices.extend(await self._set_aside_notices())
            return self._view(tuple(notices))
        notices.extend(Notice.warning(warning) for warning in session.resolution.warnings)
        if not self._passive:
            notices.extend(await self.recorder.open(self.settings.evidence))
        await self._load_context()
        await self._activate()
        notices.extend(await self._set_aside_notices())
        return self._view(tuple(notices))

    async def _load_context(self) -> None:
        """Seed what the visible context already holds (a resumed session) from the host."""
        session = self._require_session()
        if self._read_context is None:
            return
        turns = max(4, self.settings.recall.context_turns * 2)
        loaded = await asyncio.to_thread(self._read_context, session.info.transcript_path, turns)
        session.take_context(loaded)

    async def compacted(self) -> None:
        """After compaction only what the host kept is visible: re-read it."""
        session = self._session
        if session is None:
            return
        session.forget_delivered()
        await self._load_context()

    async def _activate(self) -> None:
        session = self._require_session()
        resolution = session.resolution
        declined = False
        if resolution is not None and resolution.registered is None and self.settings.enabled:
            declined = await sessions.declined_at(await self.state.open_catalog(), resolution)
        if session.activate(self.settings, declined) is not None:
            await self._start_worker()

    async def answer_consent(self, accepted: bool) -> SessionView:
        session = self._require_session()
        resolution = session.resolution
        if resolution is None:
            return self._view((Notice.warning("no scope to register"),))
        catalog = await self.state.open_catalog()
        if not accepted:
            session.declined = True
            try:
                await sessions.record_decline(catalog, resolution)
            except PiHindsightError as error:
                logger.warning("could not record the declined consent: %s", error)
            await self._activate()
            hint = self.host.register_hint(session.info.cwd)
            return self._view((Notice.info(f"memory stays off here; {hint}"),))
        try:
            scope = await sessions.register(session.info.cwd, self.settings, catalog)
            session.resolution = await sessions.resolve(session.info.cwd, self.settings, catalog)
        except PiHindsightError as error:
            return self._view((Notice.error(f"registration failed: {error.describe()}"),))
        session.declined = False
        await self._activate()  # may open the outbox (and set a damaged one aside): report it
        return self._view(
            (
                Notice.info(f"memory on for {scope.scope_id} (bank {scope.bank_id})"),
                *await self._set_aside_notices(),
            )
        )

    async def _set_aside_notices(self) -> tuple[Notice, ...]:
        notices, lost_catalog = await self.state.set_aside_notices()
        session = self._session
        if session is not None and session.scope is None and session.off_reason:
            session.off_reason = with_catalog_hint(session.off_reason, lost_catalog)
        return notices

    def _view(self, notices: tuple[Notice, ...]) -> SessionView:
        return self._require_session().view(self.settings, self.status_line(), notices)

    def status_line(self) -> str:
        scope = self.scope()
        if scope is None:
            if self._session is not None and not self.settings.enabled:
                return "memory: off (disabled)"
            return "memory: off (not registered)"
        state = "" if self.connection.healthy is not False else " · backend unavailable"
        worker = self.retainer.worker
        if worker is not None and worker.paused_by is not None:
            state += " · retain paused by budget (/hindsight)"
        return f"memory: {scope.scope_id}{state}"

    # -- requests --------------------------------------------------------------------------

    def framing(self) -> str | None:
        """The framing of memory (R-RECALL-5) for a host that states it in its stable prefix on
        every request while memory is on (the same text every time); None when memory is off."""
        return FRAMING if self.scope() is not None else None

    async def prepare(self, request: UserRequest) -> Delivery:
        """One request's memory. Every request ends in exactly one recorded outcome: delivered,
        nothing found, skipped (cancelled by the host, too), backend unavailable, not
        registered — or ``error``, when preparing failed in a way nobody foresaw."""
        session = self._session
        memory = session.memory if session else VisibleContext()
        # Read while recall runs: the corrections are needed only once records are back.
        corrections = asyncio.ensure_future(self._corrected())
        try:
            delivery = await self._deliverer.prepare(
                request,
                self.scope(),
                self.settings,
                memory,
                off_reason=session.off_reason if session else "no session",
                corrected=corrections,
            )
            memory.take_in(delivery.shown)
        except asyncio.CancelledError:
            # The user aborted (or the host gave up): the request goes on without memory.
            reason = "cancelled by the host before recall finished"
            delivery = self._failed(request, "skipped", reason)
            await asyncio.shield(self._record(request, delivery, now=True))
            raise
        except Exception as error:
            # Fail open: the request goes on without memory, and the ledger says why.
            logger.exception("preparing memory for %s failed", request.request_id)
            delivery = self._failed(request, "error", f"preparing memory failed: {error!r}")
            notice = Notice.warning(f"memory unavailable for this request: {error}")
            return delivery.with_notices((notice, *await self._record(request, delivery)))
        finally:
            corrections.cancel()  # not awaited when no recall was made; harmless when done
        return delivery.with_notices(await self._record(request, delivery))

    async def startup_memo(self, request: UserRequest) -> Delivery:
        """The startup memo alone, for a host that adds context when a session starts; recorded
        like any request (``prompt`` is empty). Fails open like ``prepare``."""
        session = self._session
        memory = session.memory if session else VisibleContext()
        try:
            delivery = await self._deliverer.prepare_memo(
                request,
                self.scope(),
                self.settings,
                memory,
                off_reason=session.off_reason if session else "no session",
                corrected=await self._corrected(),
            )
            memory.take_in(delivery.shown)
        except Exception as error:
            logger.exception("preparing the startup memo for %s failed", request.request_id)
            delivery = self._failed(request, "error", f"preparing the memo failed: {error!r}")
        return delivery.with_notices(await self._record(request, delivery))

    async def _corrected(self) -> Corrected | None:
        """The corrections in force in this scope, read anew per request (a correction made
        from the command line applies to a running session's next request)."""
        scope = self.scope()
        if scope is None:
            return None
        try:
            catalog = await self.state.open_catalog()
            return await run_store(catalog.corrected, scope.scope_id)
        except PiHindsightError as error:
            logger.warning("corrections not read; delivering without them: %s", error)
            return None

    def _failed(self, request: UserRequest, outcome: Outcome, reason: str) -> Delivery:
        scope = self.scope()
        details = DeliveryDetails(
            request_id=request.request_id,
            scope_id=None if scope is None else scope.scope_id,
            bank_id=None if scope is None else scope.bank_id,
        )
        return Delivery(outcome, None, details, reason=reason)

    async def _record(
        self, request: UserRequest, delivery: Delivery, *, now: bool = False
    ) -> tuple[Notice, ...]:
        session = self._session
        if session is not None:
            session.last_outcome, session.last_reason = delivery.outcome, delivery.reason
        transcript_path = session.info.transcript_path if session else None
        self.recorder.prepared(request, delivery, transcript_path)  # written after the answer
        if now:  # ...but before it after a cancel: the host may end the process at once
            await self.recorder.flush()
        return self.recorder.take_notices()

    async def memory_attached(
        self, request_id: str, *, entry_id: str | None = None, transcript_path: str | None = None
    ) -> None:
        """The host saw the delivered block in its context (the entry holding it, if known)."""
        await self.recorder.attached(request_id, entry_id=entry_id, transcript_path=transcript_path)

    async def delivery_confirmed(
        self, request_id: str, confirmed: bool, payload_bytes: int | None
    ) -> None:
        await self.recorder.confirmed(request_id, confirmed, payload_bytes)

    async def complete_turn(self, turn: CompletedTurn) -> int:
        """Commit the request's new messages to the outbox (before any network call)."""
        session = self._session
        if turn.memory_entry_id is not None:
            await self.recorder.attached(
                turn.request_id, entry_id=turn.memory_entry_id, transcript_path=turn.transcript_path
            )
        if session is not None:
            session.remember_turn(
                [
                    (m.role, m.text)
                    for m in turn.messages
                    if m.role in ("user", "assistant") and m.text.strip()
                ]
            )
        scope = self.scope()
        if scope is None or not self.settings.project_retain:
            return 0
        skip = await self.retainer.turn(turn, scope, self.settings.retain)
        await self.recorder.retain_decided(turn.request_id, skip)
        return 1 if skip is None else 0

    async def enqueue_note(
        self,
        *,
        bank_id: str,
        tags: tuple[str, ...],
        content: str,
        context: str | None,
        kind: str,
        force: bool = False,
    ) -> str:
        """An explicit note (a memory tool's retain): redacted, durable, its own document."""
        session = self._require_session()
        return await self.retainer.note(
            session_id=session.info.session_id,
            bank_id=bank_id,
            tags=tags,
            content=content,
            context=context,
            kind=kind,
            force=force,
        )

    def wake_worker(self) -> None:
        self.retainer.wake()

    def forget_memo(self) -> None:
        """The memo is being refreshed: fetch it anew next time instead of from the cache."""
        scope = self.scope()
        if scope is not None:
            self._deliverer.memos.forget(scope)

    async def seeder(self) -> Seeder:
        """Seeding for this session's location (``engine/seeding.py``): a registered scope with
        a project bank only; never the User bank."""
        session = self._require_session()
        scope = self.scope()
        resolution = session.resolution
        if scope is None or resolution is None or resolution.registered is None:
            raise ScopeError(
                f"only a registered location can be seeded ({self.off_reason()})",
                hint="register it first: `pi-hindsight scope register PATH` or /hindsight:register",
            )
        if not self.settings.project_recall:
            raise ScopeError(f"profile {self.settings.profile} has no project bank to seed")
        from pi_hindsight.engine.seeding import Seeder  # noqa: PLC0415 - on demand (issue 19)

        return Seeder(
            scope=scope,
            identity=resolution.identity,
            settings=self.settings,
            state_dir=self.state_dir,
            outbox=await self.state.open_outbox(),
            backend=self._worker_backend,
        )

    # -- background retain -----------------------------------------------------------------

    async def _worker_backend(self) -> MemoryBackend:
        scope = self.scope()
        if scope is None:
            return await self.backend()
        return await self.backend_with_bank(scope.bank_id, self.settings.banks.project.mission)

    async def _start_worker(self) -> None:
        if not self._passive:
            await self.retainer.start_worker(
                self._worker_backend,
                timeout_s=self.settings.timeout_ms / 1000,
                gate=self._budget_gate(),
            )

    def _budget_gate(self) -> BudgetGate | None:
        scope, budget = self.scope(), self.settings.retain.daily_token_budget
        if scope is None or budget is None:
            return None
        return BudgetGate(
            self.state_dir,
            bank=scope.bank_id,
            budget=budget,
            backend=self._worker_backend,
            timeout_s=self.settings.timeout_ms / 1000,
        )

    def retain_paused(self) -> str | None:
        """Why automatic retain is paused in this scope (the token budget), or None."""
        scope = self.scope()
        if scope is None or self.settings.retain.daily_token_budget is None:
            return None
        pause = read_pause(self.state_dir, scope.bank_id)
        return None if pause is None else pause.describe()

    async def shutdown(self, bound_s: float) -> dict[str, int]:
        """Submit what is ready within ``bound_s``; the rest stays in the outbox for later."""
        self.recorder.submit_pending()  # queued before the stores close
        if not self._owns_parts:  # the process that shares them closes them (close_shared)
            outbox = self.state.outbox
            pending = await run_store(outbox.unfinished_count) if outbox is not None else 0
            return {"flushed": 0, "pending": pending}
        return await close_shared(SharedParts(self.state, self.connection, self.retainer), bound_s)

    # -- status ----------------------------------------------------------------------------

    async def status(self, *, spend: bool = True) -> EngineStatus:
        """``spend``: ask the server for the bank's last 24 hours of model spend (bounded)."""
        from pi_hindsight.engine.status import (  # noqa: PLC0415 - on demand (issue 19)
            BackendStatus,
            ConfigStatus,
            EngineStatus,
            RecallStatus,
            RetainStatus,
            ScopeStatus,
            evidence_status,
            identity_fields,
            lifecycle_counts,
            outbox_status,
        )

        session = self._session
        scope = self.scope()
        settings = self.settings
        project_id, source, bank_rule, proposed = identity_fields(
            session.resolution if session else None, scope
        )
        outbox = await run_store(outbox_status, self.state.outbox)
        evidence = await run_store(
            evidence_status,
            settings.evidence.enabled,
            self.state.evidence,
            self.recorder.last_error,
        )
        return EngineStatus(
            enabled=scope is not None,
            off_reason=session.off_reason if session else "no session",
            profile=settings.profile,
            project_id=project_id,
            identity_source=source,
            bank_rule=bank_rule,
            proposed_scope=proposed,
            scope=None if scope is None else ScopeStatus.of(scope),
            recall=RecallStatus.of(settings),
            retain=RetainStatus(automatic=settings.project_retain, paused=self.retain_paused()),
            backend=BackendStatus(
                contacted=self.connection.created,
                healthy=self.connection.healthy,
                last_error=self.connection.last_error,
                proxy=await self.connection.route(settings),
            ),
            config=ConfigStatus.of(self.config),
            last_outcome=session.last_outcome if session else None,
            last_reason=session.last_reason if session else None,
            outbox=outbox,
            evidence=evidence,
            set_aside=await self.state.open_set_asides(),
            lifecycle=await run_store(lifecycle_counts, self.state.catalog, scope),
            spend=await self._last_day(scope) if spend else None,
        )

    async def _last_day(self, scope: Scope | None) -> LastDay | None:
        """The bank's last 24 hours of model spend; asked again at most every SPEND_CACHE_S
        (a host may poll status often)."""
        if scope is None:
            return None
        cached = self._spend
        fresh = cached is not None and time.monotonic() - cached[0] < SPEND_CACHE_S
        if cached is not None and fresh and cached[1].bank_id == scope.bank_id:
            return cached[1]
        try:
            backend = await self.backend()
        except PiHindsightError as error:
            return LastDay(bank_id=scope.bank_id, spend=None, error=str(error))
        timeout = min(STATUS_TIMEOUT_S, self.settings.timeout_ms / 1000)
        found = await last_day(backend, scope.bank_id, timeout=timeout)
        self._spend = (time.monotonic(), found)
        return found
