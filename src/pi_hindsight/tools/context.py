"""What the tools need from the session, and nothing more (``engine.MemoryEngine`` provides it):
the scope and settings, the backend (with a bank ready), the catalogue, the outbox for notes,
the memo cache and the status."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pi_hindsight.backend import MemoryBackend
from pi_hindsight.config import Settings
from pi_hindsight.engine.scope import Scope
from pi_hindsight.engine.types import HostFacts
from pi_hindsight.stores.handles import AsyncCatalog
from pi_hindsight.tools.specs import ToolInputError

if TYPE_CHECKING:
    from pi_hindsight.engine.status import EngineStatus


class ToolContext(Protocol):
    @property
    def settings(self) -> Settings: ...

    @property
    def host(self) -> HostFacts:
        """Who acts (the lifecycle log's actor): the host's name, or "cli"."""
        ...

    def scope(self) -> Scope | None: ...

    def off_reason(self) -> str: ...

    async def backend(self) -> MemoryBackend: ...

    async def backend_with_bank(self, bank: str, mission: str) -> MemoryBackend:
        """The backend, with ``bank`` created (with its mission) if it does not exist yet."""
        ...

    async def open_catalog(self) -> AsyncCatalog:
        """The catalogue's corrections, lifecycle log and operations, as awaitable methods."""
        ...

    async def enqueue_note(
        self,
        *,
        bank_id: str,
        tags: tuple[str, ...],
        content: str,
        context: str | None,
        kind: str,
        force: bool = False,
    ) -> str: ...

    def retain_paused(self) -> str | None:
        """Why automatic retain is paused (the token budget), or None."""
        ...

    def forget_memo(self) -> None: ...

    async def status(self) -> EngineStatus: ...


def require_scope(context: ToolContext) -> Scope:
    scope = context.scope()
    if scope is None:
        raise ToolInputError(f"memory is off here: {context.off_reason()}")
    return scope
