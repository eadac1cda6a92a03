"""A host session and its consent: which scope it belongs to (resolved once, R-SCOPE-5), whether
memory is on there and why not, the consent question, and what its visible context holds.

An unregistered location gets no Hindsight client at all (R-CONSENT-1): nothing here connects.
Scope resolution reads git and the catalogue, so it runs on the store thread, never on the loop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from pi_hindsight.config import Settings
from pi_hindsight.engine.scope import Scope, ScopeResolution, register_location, resolve_scope
from pi_hindsight.engine.types import (
    ConsentQuestion,
    HostFacts,
    Notice,
    Outcome,
    SessionInfo,
    SessionView,
    VisibleContext,
)
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.runner import run_store

logger = logging.getLogger(__name__)


def consent_question(cwd: Path, resolution: ScopeResolution) -> ConsentQuestion:
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


@dataclass
class Session:
    """One host session's memory state (the engine holds one per session)."""

    info: SessionInfo
    host: HostFacts
    resolution: ScopeResolution | None = None
    scope: Scope | None = None  # the registered scope, bank resolved for this session
    off_reason: str | None = None
    declined: bool = False
    memory: VisibleContext = field(default_factory=VisibleContext)
    last_outcome: Outcome | None = None
    last_reason: str | None = None

    def activate(self, settings: Settings, declined_here: bool) -> Scope | None:
        """Set the session's scope (or why memory is off) from the resolution and settings;
        returns the scope when memory is on."""
        self.scope = None
        resolution = self.resolution
        if resolution is None:
            return None
        if not settings.enabled:
            self.off_reason = "memory is disabled in the configuration (enabled: false)"
            return None
        registered = resolution.registered
        if registered is None:
            self.declined = self.declined or declined_here
            why = "registration was declined" if self.declined else "is not registered"
            self.off_reason = (
                f"{self.info.cwd} {why} for memory; {self.host.register_hint(self.info.cwd)}"
            )
            return None
        self.scope = Scope(
            scope_id=registered.scope_id,
            project_id=registered.project_id,
            bank_id=registered.bank_for(self.info.session_id),
            tags=registered.tags,
        )
        self.off_reason = None
        return self.scope

    def view(
        self, settings: Settings, status_line: str, notices: tuple[Notice, ...]
    ) -> SessionView:
        consent = None
        resolution = self.resolution
        if (
            self.scope is None
            and resolution is not None
            and settings.enabled
            and self.info.has_ui
            and not self.declined
        ):
            consent = consent_question(self.info.cwd, resolution)
        return SessionView(
            enabled=self.scope is not None,
            status_line=status_line,
            notices=notices,
            consent=consent,
            scope=self.scope,
            off_reason=self.off_reason,
        )

    def remember_turn(self, texts: list[tuple[str, str]]) -> None:
        """Keep the last turns' user and assistant text for the next recall query."""
        recent = self.memory.recent
        recent.extend(texts)
        del recent[: max(0, len(recent) - 20)]

    def forget_delivered(self) -> None:
        """After compaction only what the host kept is visible (memory summarised away may be
        delivered again when relevant; old snapshots are never re-injected)."""
        self.memory.record_ids.clear()
        self.memory.record_keys.clear()
        self.memory.memo_version = None
        self.memory.memo_text = None
        self.memory.framed = False  # the next block states the framing again

    def take_context(self, loaded: VisibleContext | None) -> None:
        """What the host's session record says is visible now (a resumed session)."""
        if loaded is None:
            return
        recent = self.memory.recent
        self.memory = loaded
        if not loaded.recent:
            loaded.recent = recent


async def resolve(cwd: Path, settings: Settings, catalog: Catalog) -> ScopeResolution:
    return await run_store(resolve_scope, cwd, settings, catalog)


async def declined_at(catalog: Catalog, resolution: ScopeResolution) -> bool:
    return await run_store(catalog.declined, resolution.identity.root) is not None


async def record_decline(catalog: Catalog, resolution: ScopeResolution) -> None:
    await run_store(
        catalog.record_decline, resolution.identity.root, resolution.identity.project_id
    )


async def register(cwd: Path, settings: Settings, catalog: Catalog) -> Scope:
    return await run_store(register_location, cwd, settings, catalog, consent="ui")
