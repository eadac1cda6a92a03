"""What a host adapter is to the engine (``HostAdapter``), and the session bookkeeping every
adapter keeps (``HostSession``). Pi's adapter (``pi/host.py``) serves one session per sidecar
process; Claude Code's (``claude_code/host.py``) many, from one daemon. Both:

- say who the host is (``facts``: document names, retain wording, how to register);
- open a session from the host's own event (``open``: its id, directory and record file);
- hand a delivery to the model in the host's own shape (``deliver``);
- show warnings and status to the user in the host's own shape (``show``).

Everything else an adapter asks of the engine goes through the engine's named methods.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

from pi_hindsight.engine.engine import MemoryEngine
from pi_hindsight.engine.types import (
    Delivery,
    HostFacts,
    Notice,
    NoticeLevel,
    SessionInfo,
    SessionView,
)


@dataclass
class HostSession:
    """One host session as its adapter holds it: the engine serving it, a lock that serialises
    its events, the last view of it (scope, consent, status line), the notices not yet shown
    and the once-per-session warnings already given."""

    engine: MemoryEngine
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    view: SessionView | None = None  # None until the session is open
    notices: list[Notice] = field(default_factory=list)
    told: set[str] = field(default_factory=set)

    @property
    def opened(self) -> bool:
        return self.view is not None

    async def open(self, info: SessionInfo) -> SessionView:
        """Open (or open again: Pi re-initializes, Claude Code re-checks registration) the
        engine's session for ``info``; the view is kept."""
        self.view = await self.engine.open_session(info)
        return self.view

    def tell_once(self, message: str, level: NoticeLevel = "warning") -> None:
        """Queue ``message`` unless this session was told it already."""
        if message not in self.told:
            self.told.add(message)
            self.notices.append(Notice(level=level, message=message))

    def take_notices(self) -> list[Notice]:
        taken, self.notices = self.notices, []
        return taken


SessionT_contra = TypeVar("SessionT_contra", bound=HostSession, contravariant=True)


@runtime_checkable
class HostAdapter(Protocol[SessionT_contra]):
    """What every host adapter provides (module docstring)."""

    @property
    def facts(self) -> HostFacts:
        """Who the host is."""
        ...

    async def open(self, info: SessionInfo) -> HostSession:
        """The session ``info`` describes, opened (once, or again when the host says so)."""
        ...

    def deliver(self, session: SessionT_contra, delivery: Delivery) -> object:
        """The delivery as the host passes it to the model (None: nothing to pass)."""
        ...

    def show(self, notices: Sequence[Notice]) -> object:
        """The notices as the host shows them to the user."""
        ...
