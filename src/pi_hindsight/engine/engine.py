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
from pi_hindsight.engine.transcript import ToolPolicy, TurnMessage, render_turn
from pi_hindsight.errors import BackendError, PiHindsightError, StateError
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.outbox import Outbox

logger = logging.getLogger(__name__)

Outcome = Literal[
    "delivered", "nothing_found", "skipped", "backend_unavailable", "not_registered", "error"
]
NoticeLevel = Literal["info", "warning", "error"]
BackendFactory = Callable[[str, str | None], Awaitable[MemoryBackend]]
ConfigLoader = Callable[[Path | None], LoadedConfig]  # project root -> effective config

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
    scope: Scope | None = None  # the registered scope, bank resolved for this session
    off_reason: str | None = None
    declined: bool = False


@dataclass
class _BackendState:
    backend: MemoryBackend | None = None
    healthy: bool | None = None
    last_error: str | None = None
    banks_ready: set[str] = field(default_factory=set)


def _config_notices(config: LoadedConfig) -> list[Notice]:
    """Config warnings for Pi; info-level notes (e.g. legacy keys migrated) stay in status."""
    return [Notice("warning", problem.describe()) for problem in config.warnings]


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
    ) -> None:
        self.state_dir = state_dir
        self._config_loader = config_loader
        self.config = config_loader(None)
        self.settings = self.config.settings
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
                BankMissions(mission=self.settings.banks.project.mission),
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
                        f"the scope catalogue was unreadable and was set aside as "
                        f"{catalog.set_aside.moved_to}; register this project again",
                    )
                )
            # The repository's own file may only set allowlisted keys (see config_migrate.py).
            from pi_hindsight.identity import resolve_identity  # noqa: PLC0415

            root = resolve_identity(info.cwd).root
            self.config = self._config_loader(root)
            self.settings = self.config.settings
            notices.extend(_config_notices(self.config))
            session.resolution = resolve_scope(info.cwd, self.settings, catalog)
        except PiHindsightError as error:
            session.off_reason = f"scope could not be resolved: {error}"
            notices.append(Notice("warning", f"memory off: {error.describe()}"))
            return self._view(tuple(notices))
        notices.extend(Notice("warning", warning) for warning in session.resolution.warnings)
        self._activate()
        notices.extend(self._outbox_notices())
        return self._view(tuple(notices))

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
            declined = self.catalog().declined(resolution.identity.project_id)
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
                self.catalog().record_decline(resolution.identity.project_id, session.info.cwd)
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
            raise PiHindsightError("no session: call initialize first")
        return self._session

    def _scope(self) -> Scope | None:
        """The session's scope with its bank resolved, or None when memory is off."""
        return None if self._session is None else self._session.scope

    def _view(self, notices: tuple[Notice, ...]) -> SessionView:
        session = self._require_session()
        scope = self._scope()
        consent = None
        resolution = session.resolution
        if (
            scope is None
            and resolution is not None
            and self.settings.enabled
            and session.info.has_ui
            and not session.declined
        ):
            proposed = resolution.proposed
            consent = ConsentQuestion(
                title="Turn on Hindsight memory here?",
                message=(
                    f"{session.info.cwd} is not registered for memory. Register project "
                    f"{proposed.project_id} (bank {proposed.bank_id}, "
                    f"tags {', '.join(proposed.tags)})? Conversations here will be retained in "
                    "Hindsight and recalled in later sessions. Nothing is sent until you agree."
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
            session = self._session
            if session is not None and not self.settings.enabled:
                return "memory: off (disabled)"
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
        if not self.settings.project_recall:
            self._last_outcome = "skipped"
            return Delivery("skipped", None, details, reason=f"profile {self.settings.profile}")
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
        """Commit the request's new messages to the outbox (before any network call).

        What is kept follows the retain policy and every secret found is redacted first
        (``engine/transcript.py``); the same request id twice is stored once.
        """
        scope = self._scope()
        if scope is None or not self.settings.project_retain:
            return 0
        retain = self.settings.retain
        text = render_turn(
            turn.messages,
            ToolPolicy(retain.tool_calls, retain.tool_results, retain.tool_result_max_chars),
        )
        if not text.content:
            return 0
        if text.redacted:
            logger.info("redacted %d secret(s) from request %s", text.redacted, turn.request_id)
        payload = {
            "items": [
                {
                    "content": text.content,
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
        self.outbox().enqueue(
            session_id=turn.session_id,
            bank_id=scope.bank_id,
            payload=payload,
            request_id=turn.request_id,
        )
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
        if self._backend_state.backend is not None:
            await self._backend_state.backend.close()
        for store in (self._catalog, self._outbox):
            if store is not None:
                store.close()
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
                    "setAside": None
                    if self._outbox.set_aside is None
                    else {
                        "movedTo": str(self._outbox.set_aside.moved_to),
                        "reason": self._outbox.set_aside.reason,
                    },
                }
            except StateError as error:
                outbox_health = {"error": str(error)}
        resolution = session.resolution if session else None
        return {
            "enabled": scope is not None,
            "offReason": session.off_reason if session else "no session",
            "profile": self.settings.profile,
            "projectId": resolution.identity.project_id if resolution else None,
            "identitySource": resolution.identity.source if resolution else None,
            "bankRule": resolution.bank_rule if resolution else None,
            "proposedScope": None
            if resolution is None or scope is not None
            else {
                "scopeId": resolution.proposed.scope_id,
                "bankId": resolution.proposed.bank_id,
                "tags": list(resolution.proposed.tags),
            },
            "scope": None
            if scope is None
            else {
                "scopeId": scope.scope_id,
                "projectId": scope.project_id,
                "bankId": scope.bank_id,
                "tags": list(scope.tags),
                "tagsMatch": SCOPE_TAGS_MATCH,
            },
            "recall": {
                "project": self.settings.project_recall,
                "userBank": self.settings.user_bank_active,
                "maxTokens": self.settings.recall.max_tokens,
                "userMaxTokens": self.settings.user_max_tokens,
            },
            "retain": {"automatic": self.settings.project_retain},
            "backend": {
                "healthy": self._backend_state.healthy,
                "lastError": self._backend_state.last_error,
            },
            "config": {
                "path": str(self.config.path),
                "source": str(self.config.user_source) if self.config.user_source else None,
                "projectFile": str(self.config.project_file) if self.config.project_file else None,
                "problems": [problem.describe() for problem in self.config.problems],
            },
            "lastOutcome": self._last_outcome,
            "outbox": outbox_health,
        }
