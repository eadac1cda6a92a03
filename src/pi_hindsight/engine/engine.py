"""The memory engine: host-neutral. A request arrives with its text, session id and cwd; a
completed turn arrives with its messages. Pi specifics live in ``hosts/pi.py``.

Fail open, never silently: every degraded outcome returns a result the host can show (a notice
and a status line), and the conversation goes on without memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pi_hindsight.backend.records import BankMissions, MemoryBackend
from pi_hindsight.config import LoadedConfig, Settings
from pi_hindsight.engine.render import render_block
from pi_hindsight.engine.retain_worker import RetainWorker
from pi_hindsight.engine.scope import (
    SCOPE_TAGS_MATCH,
    Scope,
    ScopeResolution,
    register_location,
    resolve_scope,
)
from pi_hindsight.engine.transcript import TurnMessage, render_turn
from pi_hindsight.errors import BackendError, PiHindsightError, StateError
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.outbox import Outbox

logger = logging.getLogger(__name__)

Outcome = Literal[
    "delivered", "nothing_found", "skipped", "backend_unavailable", "not_registered", "error"
]
NoticeLevel = Literal["info", "warning", "error"]
BackendFactory = Callable[[str, str | None], Awaitable[MemoryBackend]]

_MAX_QUERY_CHARS = 800


@dataclass(frozen=True)
class Notice:
    level: NoticeLevel
    message: str

    def to_json(self) -> dict[str, str]:
        return {"level": self.level, "message": self.message}


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    cwd: Path
    session_file: str | None
    has_ui: bool
    reason: str


@dataclass(frozen=True)
class ConsentQuestion:
    title: str
    message: str


@dataclass(frozen=True)
class SessionView:
    """What the host shows after a session opened (or consent was answered)."""

    enabled: bool
    status_line: str
    notices: tuple[Notice, ...]
    consent: ConsentQuestion | None
    scope: Scope | None
    off_reason: str | None


@dataclass(frozen=True)
class UserRequest:
    request_id: str
    session_id: str
    prompt: str


@dataclass(frozen=True)
class Delivery:
    outcome: Outcome
    text: str | None
    details: dict[str, Any]
    notices: tuple[Notice, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class CompletedTurn:
    request_id: str
    session_id: str
    messages: Sequence[TurnMessage]


@dataclass
class _Session:
    info: SessionInfo
    resolution: ScopeResolution | None = None
    off_reason: str | None = None
    declined: bool = False


@dataclass
class _BackendState:
    backend: MemoryBackend | None = None
    healthy: bool | None = None
    last_error: str | None = None
    banks_ready: set[str] = field(default_factory=set)


def _register_hint(cwd: Path) -> str:
    return f"run `pi-hindsight scope register {cwd}` (or answer the consent prompt in Pi)"


class MemoryEngine:
    def __init__(
        self,
        *,
        state_dir: Path,
        config: LoadedConfig,
        backend_factory: BackendFactory,
        base_url_resolver: Callable[[Settings], str | None],
    ) -> None:
        self.state_dir = state_dir
        self.config = config
        self.settings = config.settings
        self._backend_factory = backend_factory
        self._base_url_resolver = base_url_resolver
        self._session: _Session | None = None
        self._backend_state = _BackendState()
        self._backend_lock = asyncio.Lock()
        self._catalog: Catalog | None = None
        self._outbox: Outbox | None = None
        self._worker: RetainWorker | None = None
        self._worker_task: asyncio.Task[None] | None = None
        self._last_outcome: Outcome | None = None
        self._warned: set[str] = set()

    # -- stores ----------------------------------------------------------------------------

    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog(self.state_dir)
        return self._catalog

    def outbox(self) -> Outbox:
        if self._outbox is None:
            self._outbox = Outbox(self.state_dir)
        return self._outbox

    # -- backend ---------------------------------------------------------------------------

    async def backend(self) -> MemoryBackend:
        """The Hindsight client, created on first use — never for an unregistered session."""
        async with self._backend_lock:
            if self._backend_state.backend is None:
                base_url = self._base_url_resolver(self.settings)
                if base_url is None:
                    raise BackendError(
                        "no Hindsight server is configured",
                        hint="start one with `pi-hindsight server start`, or set hindsight.baseUrl "
                        "in the config file or HINDSIGHT_BASE_URL",
                    )
                self._backend_state.backend = await self._backend_factory(
                    base_url, self.settings.hindsight.api_key
                )
            return self._backend_state.backend

    async def _ensure_bank(self, backend: MemoryBackend, scope: Scope) -> None:
        """Create the scope's bank once, with the default missions, if it does not exist."""
        if scope.bank_id in self._backend_state.banks_ready:
            return
        timeout = self.settings.timeout_ms / 1000
        if not await backend.bank_exists(scope.bank_id, timeout=timeout):
            await backend.create_bank(
                scope.bank_id,
                BankMissions(mission=self.settings.project_bank.mission),
                timeout=timeout,
            )
            logger.info("created bank %s for scope %s", scope.bank_id, scope.scope_id)
        self._backend_state.banks_ready.add(scope.bank_id)

    def _note_backend(self, error: BackendError | None) -> tuple[Notice, ...]:
        """Track backend health; warn once per change of state (not on every request)."""
        was_healthy = self._backend_state.healthy
        if error is None:
            self._backend_state.healthy = True
            self._backend_state.last_error = None
            if was_healthy is False:
                return (Notice("info", "Hindsight is reachable again; memory is back."),)
            return ()
        self._backend_state.healthy = False
        self._backend_state.last_error = str(error)
        if was_healthy is False:
            return ()
        return (Notice("warning", f"memory unavailable for this request: {error.describe()}"),)

    # -- session ---------------------------------------------------------------------------

    async def open_session(self, info: SessionInfo) -> SessionView:
        self._session = _Session(info=info)
        notices = [Notice("warning", problem.describe()) for problem in self.config.problems]
        try:
            resolution = resolve_scope(info.cwd, self.settings, self.catalog())
        except PiHindsightError as error:
            self._session.off_reason = f"scope could not be resolved: {error}"
            notices.append(Notice("warning", f"memory off: {error.describe()}"))
            return self._view(tuple(notices))
        self._session.resolution = resolution
        if self.catalog().set_aside is not None:
            aside = self.catalog().set_aside
            notices.append(
                Notice(
                    "warning",
                    f"the catalog was damaged and set aside as {aside.moved_to}"
                    if aside
                    else "the catalog was set aside",
                )
            )
        if resolution.registered is None:
            self._session.off_reason = (
                f"{info.cwd} is not registered for memory; {_register_hint(info.cwd)}"
            )
            return self._view(tuple(notices))
        self._start_worker()
        return self._view(tuple(notices))

    async def answer_consent(self, accepted: bool) -> SessionView:
        session = self._require_session()
        if not accepted:
            session.declined = True
            session.off_reason = "registration declined for this session"
            return self._view(())
        try:
            scope = register_location(session.info.cwd, self.settings, self.catalog(), consent="ui")
        except PiHindsightError as error:
            return self._view((Notice("error", f"registration failed: {error.describe()}"),))
        session.resolution = resolve_scope(session.info.cwd, self.settings, self.catalog())
        session.off_reason = None
        self._start_worker()
        return self._view(
            (Notice("info", f"memory on for {scope.scope_id} (bank {scope.bank_id})"),)
        )

    def _require_session(self) -> _Session:
        if self._session is None:
            raise PiHindsightError("no session: call initialize first")
        return self._session

    def _scope(self) -> Scope | None:
        session = self._session
        if session is None or session.resolution is None:
            return None
        return session.resolution.registered

    def _view(self, notices: tuple[Notice, ...]) -> SessionView:
        session = self._require_session()
        scope = self._scope()
        consent = None
        if (
            scope is None
            and session.resolution is not None
            and session.info.has_ui
            and not session.declined
        ):
            proposed = session.resolution.proposed
            consent = ConsentQuestion(
                title="Turn on Hindsight memory here?",
                message=(
                    f"{session.info.cwd} is not registered for memory. Register project "
                    f"{proposed.project_id} (bank {proposed.bank_id}, "
                    f"tags {', '.join(proposed.tags)})? Conversations here will be retained in "
                    "Hindsight and recalled in later sessions."
                ),
            )
        return SessionView(
            enabled=scope is not None,
            status_line=self.status_line(),
            notices=notices,
            consent=consent,
            scope=scope,
            off_reason=session.off_reason,
        )

    def status_line(self) -> str:
        scope = self._scope()
        if scope is None:
            return "memory: off (not registered)"
        state = "" if self._backend_state.healthy is not False else " · backend unavailable"
        return f"memory: {scope.scope_id}{state}"

    # -- requests --------------------------------------------------------------------------

    async def prepare(self, request: UserRequest) -> Delivery:
        scope = self._scope()
        details: dict[str, Any] = {"requestId": request.request_id}
        if scope is None:
            self._last_outcome = "not_registered"
            reason = self._session.off_reason if self._session else "no session"
            return Delivery("not_registered", None, details, reason=reason)
        details.update({"scopeId": scope.scope_id, "bankId": scope.bank_id})
        query = " ".join(request.prompt.split())[:_MAX_QUERY_CHARS]
        if not query:
            self._last_outcome = "skipped"
            return Delivery("skipped", None, details, reason="empty prompt")
        started = time.perf_counter()
        try:
            backend = await self.backend()
            await self._ensure_bank(backend, scope)
            records = await backend.recall(
                scope.bank_id,
                query,
                tags=scope.tags,
                tags_match=SCOPE_TAGS_MATCH,
                max_tokens=self.settings.recall.max_tokens,
                budget=self.settings.recall.budget,
                timeout=self.settings.recall.timeout_ms / 1000,
            )
        except BackendError as error:
            self._last_outcome = "backend_unavailable"
            return Delivery(
                "backend_unavailable", None, details, self._note_backend(error), reason=str(error)
            )
        notices = self._note_backend(None)
        details["recallMs"] = round((time.perf_counter() - started) * 1000, 1)
        block = render_block(
            records,
            scope_id=scope.scope_id,
            bank_id=scope.bank_id,
            recalled_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            max_tokens=self.settings.recall.max_tokens,
        )
        if block is None:
            self._last_outcome = "nothing_found"
            return Delivery("nothing_found", None, details, notices)
        details.update({"recordIds": list(block.record_ids), "omitted": block.omitted})
        self._last_outcome = "delivered"
        return Delivery("delivered", block.text, details, notices)

    def complete_turn(self, turn: CompletedTurn) -> int:
        """Commit the request's new messages to the outbox (before any network call)."""
        scope = self._scope()
        if scope is None or not self.settings.retain.enabled:
            return 0
        content = render_turn(turn.messages)
        if not content:
            return 0
        payload = {
            "items": [
                {
                    "content": content,
                    "document_id": f"pi-session-{turn.session_id}",
                    "tags": list(scope.tags),
                    "timestamp": datetime.now(UTC).isoformat(),
                    "context": f"Pi coding session in project {scope.project_id}",
                    "metadata": {
                        "source": "pi",
                        "session_id": turn.session_id,
                        "request_id": turn.request_id,
                    },
                    "update_mode": "append",
                }
            ]
        }
        self.outbox().enqueue(session_id=turn.session_id, bank_id=scope.bank_id, payload=payload)
        if self._worker is not None:
            self._worker.wake()
        return 1

    # -- background retain -----------------------------------------------------------------

    async def _worker_backend(self) -> MemoryBackend:
        backend = await self.backend()
        scope = self._scope()
        if scope is not None:
            await self._ensure_bank(backend, scope)
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

    async def shutdown(self, bound_s: float) -> dict[str, int]:
        """Submit what is ready within ``bound_s``; the rest stays in the outbox for later."""
        deadline = time.monotonic() + bound_s
        if self._worker is not None:
            self._worker.stop()
            if self._worker_task is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(self._worker_task), timeout=bound_s / 4)
                except TimeoutError:
                    self._worker_task.cancel()
            try:
                await self._worker.flush(deadline)
            except (StateError, BackendError) as error:
                logger.warning("flush on shutdown failed: %s", error)
        pending = self._outbox.unfinished_count() if self._outbox is not None else 0
        if self._backend_state.backend is not None:
            await self._backend_state.backend.close()
        for store in (self._catalog, self._outbox):
            if store is not None:
                store.close()
        flushed = self._worker.stats.submitted if self._worker else 0
        return {"flushed": flushed, "pending": pending}

    def status(self) -> dict[str, Any]:
        session = self._session
        scope = self._scope()
        outbox_health = None
        if self._outbox is not None:
            try:
                health = self._outbox.health()
                outbox_health = {
                    "pending": health.pending,
                    "submitted": health.submitted,
                    "dead": health.dead,
                    "oldestPendingAgeS": health.oldest_pending_age_s,
                    "lastError": health.last_error,
                }
            except StateError as error:
                outbox_health = {"error": str(error)}
        return {
            "enabled": scope is not None,
            "offReason": session.off_reason if session else "no session",
            "scope": None
            if scope is None
            else {
                "scopeId": scope.scope_id,
                "projectId": scope.project_id,
                "bankId": scope.bank_id,
                "tags": list(scope.tags),
                "tagsMatch": SCOPE_TAGS_MATCH,
            },
            "backend": {
                "healthy": self._backend_state.healthy,
                "lastError": self._backend_state.last_error,
            },
            "lastOutcome": self._last_outcome,
            "outbox": outbox_health,
        }
