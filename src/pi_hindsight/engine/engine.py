"""The memory engine: host-neutral. A request arrives with its text and session id; a completed
turn arrives with its messages. Pi specifics live in ``hosts/``.

The engine owns one session (one per sidecar): its scope (resolved once), consent, the delivery
state of its visible context, the retain worker, and the evidence of every request. Fail open,
never silently: every degraded outcome returns something the host shows (a notice, the status
line), is in ``status()``, and is recorded as evidence.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pi_hindsight.backend import MemoryBackend
from pi_hindsight.config import LoadedConfig, Settings
from pi_hindsight.engine.connection import BackendFactory, HindsightConnection
from pi_hindsight.engine.delivery import Deliverer, Prepared
from pi_hindsight.engine.retain_worker import RetainWorker
from pi_hindsight.engine.scope import (
    Scope,
    ScopeResolution,
    register_location,
    resolve_scope,
)
from pi_hindsight.engine.status import engine_status
from pi_hindsight.engine.transcript import RetainText, ToolPolicy, render_turn
from pi_hindsight.engine.types import (
    CompletedTurn,
    ConsentQuestion,
    Delivery,
    DeliveryMemory,
    Notice,
    Outcome,
    SessionInfo,
    SessionView,
    UserRequest,
)
from pi_hindsight.errors import NoSession, PiHindsightError, StateError
from pi_hindsight.identity import resolve_identity
from pi_hindsight.redaction import redact
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.evidence import EvidenceLedger
from pi_hindsight.stores.evidence_schema import MemoInfo
from pi_hindsight.stores.outbox import Outbox

logger = logging.getLogger(__name__)

ConfigLoader = Callable[[Path | None], LoadedConfig]  # project root -> effective config
# Reads what the host's session record says is visible now (delivered ids, memo, recent turns).
ContextReader = Callable[[str | None, int], DeliveryMemory | None]


@dataclass
class _Session:
    info: SessionInfo
    resolution: ScopeResolution | None = None
    scope: Scope | None = None  # the registered scope, bank resolved for this session
    off_reason: str | None = None
    declined: bool = False
    memory: DeliveryMemory = field(default_factory=DeliveryMemory)


def _config_notices(config: LoadedConfig) -> list[Notice]:
    """Config warnings for the host; info-level notes (legacy keys migrated) stay in status."""
    return [Notice("warning", text) for text in config.notices()]


def _consent_question(cwd: Path, resolution: ScopeResolution) -> ConsentQuestion:
    proposed = resolution.proposed
    where = f"bank {proposed.bank_id}, tags {', '.join(proposed.tags)}"
    known = resolution.known_elsewhere
    if known is not None:
        elsewhere = ", ".join(known.locations) or "another location"
        message = (
            f"{cwd} is a new location of project {proposed.project_id}, which has memory at "
            f"{elsewhere} ({where}). Use the same memory here? Conversations here will be "
            "retained in that scope and recalled in later sessions. Nothing is sent until you "
            "agree."
        )
    else:
        message = (
            f"{cwd} is not registered for memory. Register project {proposed.project_id} "
            f"({where})? Conversations here will be retained in Hindsight and recalled in later "
            "sessions. Nothing is sent until you agree."
        )
    return ConsentQuestion(title="Turn on Hindsight memory here?", message=message)


def _register_hint(cwd: Path) -> str:
    return f"run `pi-hindsight scope register {cwd}` (or answer the consent prompt in Pi)"


class MemoryEngine:
    def __init__(
        self,
        *,
        state_dir: Path,
        config_loader: ConfigLoader,
        backend_factory: BackendFactory,
        base_url_resolver: Callable[[Settings], str | None],
        context_reader: ContextReader | None = None,
    ) -> None:
        self.state_dir = state_dir
        self._config_loader = config_loader
        self.config = config_loader(None)
        self.settings = self.config.settings
        self.connection = HindsightConnection(backend_factory, base_url_resolver)
        self._deliverer = Deliverer(self.connection)
        self._read_context = context_reader
        self._session: _Session | None = None
        self._catalog: Catalog | None = None
        self._outbox: Outbox | None = None
        self._evidence: EvidenceLedger | None = None
        self._evidence_error: str | None = None
        self._worker: RetainWorker | None = None
        self._worker_task: asyncio.Task[None] | None = None
        self._last_outcome: Outcome | None = None
        self._last_reason: str | None = None
        self._retain_lock = asyncio.Lock()

    # -- stores ----------------------------------------------------------------------------

    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog(self.state_dir)
        return self._catalog

    def outbox(self) -> Outbox:
        if self._outbox is None:
            self._outbox = Outbox(self.state_dir)
        return self._outbox

    def _open_evidence(self) -> tuple[Notice, ...]:
        """Open the ledger when evidence is on; a failure warns and the conversation goes on."""
        settings = self.settings.evidence
        if not settings.enabled or self._evidence is not None:
            return ()
        try:
            self._evidence = EvidenceLedger(
                self.state_dir, retention_days=settings.retention_days, cap_bytes=settings.cap_bytes
            )
        except StateError as error:
            return self._evidence_failed(error)
        aside = self._evidence.set_aside
        if aside is None:
            return ()
        return (
            Notice(
                "warning",
                f"the evidence ledger could not be used ({aside.reason}); it was set aside as "
                f"{aside.moved_to} and a fresh one was created",
            ),
        )

    def _evidence_failed(self, error: PiHindsightError) -> tuple[Notice, ...]:
        """R-EVID-5: a failure to record never stops the conversation; warn once, show in status."""
        first = self._evidence_error is None
        self._evidence_error = str(error)
        logger.warning("evidence not recorded: %s", error)
        if not first:
            return ()
        return (Notice("warning", f"evidence is not being recorded: {error.describe()}"),)

    def _record(self, request: UserRequest, prepared: Prepared) -> tuple[Notice, ...]:
        if self._evidence is None:
            return ()
        session = self._session
        delivery = prepared.delivery
        try:
            self._evidence.record_prepared(
                request.request_id,
                outcome=delivery.outcome,
                session_id=request.session_id,
                scope_id=delivery.details.get("scopeId"),
                bank_ids=prepared.bank_ids,
                session_file=session.info.session_file if session else None,
                reason=delivery.reason,
                body=delivery.text,
                record_ids=prepared.record_ids,
                omitted=prepared.omitted,
                tokens=prepared.tokens,
                recall_ms=prepared.recall_ms,
                total_ms=prepared.total_ms,
                memo=None if prepared.memo is None else MemoInfo(*prepared.memo),
            )
        except StateError as error:
            return self._evidence_failed(error)
        return ()

    def _evidence_call(self, action: Callable[[EvidenceLedger], object]) -> None:
        if self._evidence is None:
            return
        try:
            action(self._evidence)
        except StateError as error:
            self._evidence_failed(error)

    # -- session ---------------------------------------------------------------------------

    async def open_session(self, info: SessionInfo) -> SessionView:
        """Resolve the session's scope; start memory only for a registered location.

        An unregistered location gets no Hindsight client at all (R-CONSENT-1): no bank is
        created and no connection is made until the user registers it.
        """
        self._session = session = _Session(info=info)
        notices: list[Notice] = []
        try:
            catalog = self.catalog()
            if catalog.set_aside is not None:
                notices.append(
                    Notice(
                        "warning",
                        "the scope catalogue was unreadable and was set aside as "
                        f"{catalog.set_aside.moved_to}; register this project again",
                    )
                )
            # The repository's own file may only set allowlisted keys (config_migrate.py).
            self.config = self._config_loader(resolve_identity(info.cwd).root)
            self.settings = self.config.settings
            notices.extend(_config_notices(self.config))
            session.resolution = resolve_scope(info.cwd, self.settings, catalog)
        except PiHindsightError as error:
            session.off_reason = f"scope could not be resolved: {error}"
            notices.append(Notice("warning", f"memory off: {error.describe()}"))
            return self._view(tuple(notices))
        notices.extend(Notice("warning", warning) for warning in session.resolution.warnings)
        notices.extend(self._open_evidence())
        self._load_context()
        self._activate()
        notices.extend(self._outbox_notices())
        return self._view(tuple(notices))

    def _load_context(self) -> None:
        """Seed what the visible context already holds (a resumed session) from the host."""
        session = self._require_session()
        if self._read_context is None:
            return
        turns = max(4, self.settings.recall.context_turns * 2)
        loaded = self._read_context(session.info.session_file, turns)
        if loaded is not None:
            recent = session.memory.recent
            session.memory = loaded
            if not loaded.recent:
                loaded.recent = recent

    def compacted(self) -> None:
        """After compaction only what Pi kept is visible: re-read it (memory summarised away
        may be delivered again when relevant; old snapshots are never re-injected)."""
        session = self._session
        if session is None:
            return
        session.memory.record_ids.clear()
        session.memory.record_keys.clear()
        session.memory.memo_version = None
        self._load_context()

    def _activate(self) -> None:
        """Set the session's scope (or why memory is off) from the resolution and settings."""
        session = self._require_session()
        resolution = session.resolution
        session.scope = None
        if resolution is None:
            return
        if not self.settings.enabled:
            session.off_reason = "memory is disabled in the configuration (enabled: false)"
            return
        registered = resolution.registered
        if registered is None:
            declined = self.catalog().declined(resolution.identity.root)
            session.declined = session.declined or declined is not None
            why = "registration was declined" if session.declined else "is not registered"
            session.off_reason = (
                f"{session.info.cwd} {why} for memory; {_register_hint(session.info.cwd)}"
            )
            return
        session.scope = Scope(
            scope_id=registered.scope_id,
            project_id=registered.project_id,
            bank_id=registered.bank_for(session.info.session_id),
            tags=registered.tags,
        )
        session.off_reason = None
        self._start_worker()

    async def answer_consent(self, accepted: bool) -> SessionView:
        session = self._require_session()
        resolution = session.resolution
        if resolution is None:
            return self._view((Notice("warning", "no scope to register"),))
        if not accepted:
            session.declined = True
            try:
                self.catalog().record_decline(
                    resolution.identity.root, resolution.identity.project_id
                )
            except PiHindsightError as error:
                logger.warning("could not record the declined consent: %s", error)
            self._activate()
            return self._view(
                (Notice("info", f"memory stays off here; {_register_hint(session.info.cwd)}"),)
            )
        try:
            scope = register_location(session.info.cwd, self.settings, self.catalog(), consent="ui")
            session.resolution = resolve_scope(session.info.cwd, self.settings, self.catalog())
        except PiHindsightError as error:
            return self._view((Notice("error", f"registration failed: {error.describe()}"),))
        session.declined = False
        self._activate()
        return self._view(
            (Notice("info", f"memory on for {scope.scope_id} (bank {scope.bank_id})"),)
        )

    def _require_session(self) -> _Session:
        if self._session is None:
            raise NoSession("no session: call initialize first")
        return self._session

    def scope(self) -> Scope | None:
        """The session's scope with its bank resolved, or None when memory is off."""
        return None if self._session is None else self._session.scope

    def _view(self, notices: tuple[Notice, ...]) -> SessionView:
        session = self._require_session()
        scope = self.scope()
        consent = None
        resolution = session.resolution
        if (
            scope is None
            and resolution is not None
            and self.settings.enabled
            and session.info.has_ui
            and not session.declined
        ):
            consent = _consent_question(session.info.cwd, resolution)
        return SessionView(
            enabled=scope is not None,
            status_line=self.status_line(),
            notices=notices,
            consent=consent,
            scope=scope,
            off_reason=session.off_reason,
        )

    def status_line(self) -> str:
        scope = self.scope()
        if scope is None:
            if self._session is not None and not self.settings.enabled:
                return "memory: off (disabled)"
            return "memory: off (not registered)"
        state = "" if self.connection.healthy is not False else " · backend unavailable"
        return f"memory: {scope.scope_id}{state}"

    # -- requests --------------------------------------------------------------------------

    async def prepare(self, request: UserRequest) -> Delivery:
        session = self._session
        memory = session.memory if session else DeliveryMemory()
        try:
            prepared = await self._deliverer.prepare(
                request,
                self.scope(),
                self.settings,
                memory,
                off_reason=session.off_reason if session else "no session",
            )
        except asyncio.CancelledError:
            # The user aborted (or the host gave up): the request goes on without memory.
            self._last_outcome, self._last_reason = "skipped", "cancelled by the host"
            scope = self.scope()
            details = {} if scope is None else {"scopeId": scope.scope_id}
            reason = "cancelled by the host before recall finished"
            self._record(request, Prepared(Delivery("skipped", None, details, reason=reason)))

            raise
        delivery = prepared.delivery
        self._last_outcome, self._last_reason = delivery.outcome, delivery.reason
        recorded = self._record(request, prepared)
        if recorded:
            delivery = Delivery(
                delivery.outcome,
                delivery.text,
                delivery.details,
                (*delivery.notices, *recorded),
                delivery.reason,
            )
        return delivery

    def memory_attached(self, request_id: str) -> None:
        self._evidence_call(lambda ledger: ledger.mark_attached(request_id))

    def delivery_confirmed(
        self, request_id: str, confirmed: bool, payload_bytes: int | None
    ) -> None:
        if not confirmed:
            logger.warning("memory for request %s was not in the provider payload", request_id)
        self._evidence_call(
            lambda ledger: ledger.mark_confirmed(request_id, confirmed, payload_bytes)
        )

    async def complete_turn(self, turn: CompletedTurn) -> int:
        """Commit the request's new messages to the outbox (before any network call).

        What is kept follows the retain policy and every secret found is redacted first
        (``engine/transcript.py``); the same request id twice is stored once. Rendering and
        redaction run in a thread (a turn can carry megabytes of tool output), one turn at a
        time so a session's requests are committed in order.
        """
        session = self._session
        if turn.memory_entry_id is not None:
            self._evidence_call(
                lambda ledger: ledger.mark_attached(
                    turn.request_id, entry_id=turn.memory_entry_id, session_file=turn.session_file
                )
            )
        if session is not None:
            recent = session.memory.recent
            recent.extend(
                (m.role, m.text)
                for m in turn.messages
                if m.role in ("user", "assistant") and m.text.strip()
            )
            del recent[: max(0, len(recent) - 20)]
        scope = self.scope()
        if scope is None or not self.settings.project_retain:
            return 0
        retain = self.settings.retain
        policy = ToolPolicy(retain.tool_calls, retain.tool_results, retain.tool_result_max_chars)
        async with self._retain_lock:
            text = await asyncio.to_thread(render_turn, turn.messages, policy)
            return self._enqueue_turn(turn, scope, text)

    def _enqueue_turn(self, turn: CompletedTurn, scope: Scope, text: RetainText) -> int:
        if not text.content:
            return 0
        if text.redacted:
            logger.info("redacted %d secret(s) from request %s", text.redacted, turn.request_id)
        self._enqueue(
            session_id=turn.session_id,
            request_id=turn.request_id,
            bank_id=scope.bank_id,
            item={
                "content": text.content,
                "document_id": f"pi-session-{turn.session_id}",
                "tags": list(scope.tags),
                "context": f"Pi coding session in project {scope.project_id}",
                "update_mode": "append",
            },
        )
        return 1

    def enqueue_note(
        self,
        *,
        bank_id: str,
        tags: tuple[str, ...],
        content: str,
        context: str | None,
        kind: str,
    ) -> str:
        """An explicit note (a memory tool's retain): redacted, durable, its own document."""
        session = self._require_session()
        request_id = f"{kind}-{uuid.uuid4()}"
        text = redact(content).text
        self._enqueue(
            session_id=session.info.session_id,
            request_id=request_id,
            bank_id=bank_id,
            item={
                "content": text,
                "document_id": f"pi-{request_id}",
                "tags": list(tags),
                "context": redact(context).text if context else f"{kind} from a Pi session",
                "update_mode": "replace",
            },
        )
        return request_id

    def _enqueue(
        self, *, session_id: str, request_id: str, bank_id: str, item: dict[str, Any]
    ) -> None:
        item = {
            **item,
            "timestamp": datetime.now(UTC).isoformat(),
            "metadata": {"source": "pi", "session_id": session_id, "request_id": request_id},
        }
        self.outbox().enqueue(
            session_id=session_id, bank_id=bank_id, payload={"items": [item]}, request_id=request_id
        )
        if self._worker is not None:
            self._worker.wake()

    def wake_worker(self) -> None:
        if self._worker is not None:
            self._worker.wake()

    def forget_memo(self) -> None:
        """The memo is being refreshed: fetch it anew next time instead of from the cache."""
        scope = self.scope()
        if scope is not None:
            self._deliverer.memos.forget(scope)

    # -- background retain -----------------------------------------------------------------

    async def _worker_backend(self) -> MemoryBackend:
        backend = await self.connection.backend(self.settings)
        scope = self.scope()
        if scope is not None:
            await self.connection.ensure_bank(
                backend,
                scope.bank_id,
                self.settings.banks.project.mission,
                timeout=self.settings.timeout_ms / 1000,
            )
        return backend

    def _start_worker(self) -> None:
        if self._worker_task is not None:
            return
        try:
            outbox = self.outbox()
        except StateError as error:
            logger.warning("outbox unavailable: %s", error)
            return
        self._worker = RetainWorker(
            outbox, self._worker_backend, timeout_s=self.settings.timeout_ms / 1000
        )
        self._worker_task = asyncio.get_running_loop().create_task(self._worker.run())

    def _outbox_notices(self) -> tuple[Notice, ...]:
        """A warning when the outbox file was damaged or foreign and had to be set aside."""
        aside = None if self._outbox is None else self._outbox.set_aside
        if aside is None:
            return ()
        return (
            Notice(
                "warning",
                f"the retain outbox {aside.original} could not be used ({aside.reason}); it was "
                f"set aside as {aside.moved_to} and a fresh one was created. Requests queued in "
                "it were not delivered; nothing already in Hindsight is affected.",
            ),
        )

    async def shutdown(self, bound_s: float) -> dict[str, int]:
        """Submit what is ready within ``bound_s``; the rest stays in the outbox for later."""
        deadline = time.monotonic() + bound_s
        flushed = 0
        if self._worker is not None:
            try:
                flushed = await self._worker.shutdown(deadline)
            except StateError as error:
                logger.warning("flush on shutdown failed: %s", error)
            if self._worker_task is not None:
                try:
                    await asyncio.wait_for(
                        self._worker_task, timeout=max(0.05, deadline - time.monotonic())
                    )
                except TimeoutError:
                    logger.warning("the retain worker did not stop in time; it was cancelled")
        pending = self._outbox.unfinished_count() if self._outbox is not None else 0
        await self.connection.close()
        for store in (self._catalog, self._outbox, self._evidence):
            if store is not None:
                store.close()
        return {"flushed": flushed, "pending": pending}

    # -- status ----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return engine_status(self)

    @property
    def session(self) -> _Session | None:
        return self._session

    @property
    def last_outcome(self) -> tuple[Outcome | None, str | None]:
        return self._last_outcome, self._last_reason

    @property
    def stores(self) -> tuple[Outbox | None, EvidenceLedger | None, str | None]:
        return self._outbox, self._evidence, self._evidence_error
