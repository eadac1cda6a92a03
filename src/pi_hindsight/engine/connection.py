"""The session's connection to Hindsight: created on first use (never for an unregistered
session), health tracked so a degraded state is shown once per change, banks created only for
registered scopes with their missions."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pi_hindsight.backend import BankMissions, MemoryBackend
from pi_hindsight.config import Settings
from pi_hindsight.engine.types import Notice
from pi_hindsight.errors import BackendAuthRejected, BackendError, PiHindsightError
from pi_hindsight.transport import ProxyRoute, proxy_route

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerAccess:
    """How to reach the server, from the session's settings: its URL, the API key, and the CA
    certificates an ``https://`` server must present a certificate of."""

    base_url: str
    api_key: str | None
    ca_file: str | None = None


BackendFactory = Callable[[ServerAccess], Awaitable[MemoryBackend]]


class HindsightConnection:
    def __init__(
        self,
        factory: BackendFactory,
        base_url_resolver: Callable[[Settings], str | None],
    ) -> None:
        self._factory = factory
        self._resolve = base_url_resolver
        self._backend: MemoryBackend | None = None
        self._opening: asyncio.Future[MemoryBackend] | None = None
        self._banks_ready: set[str] = set()
        self._bank_locks: dict[str, asyncio.Lock] = {}
        self.healthy: bool | None = None  # None: not contacted yet
        self.last_error: str | None = None
        self._refused = False  # the last failure was the server refusing our API key

    @property
    def created(self) -> bool:
        return self._backend is not None

    async def backend(self, settings: Settings) -> MemoryBackend:
        """The session's client, opened at first use. Opening it (importing the client, ~0.8 s,
        much more on a loaded machine) is shielded: a request whose bound ran out while it waited
        leaves it to finish for the next one, instead of starting it again."""
        if self._backend is not None:
            return self._backend
        opening = self._opening
        if opening is None or (opening.done() and opening.exception() is not None):
            opening = self._opening = asyncio.ensure_future(self._open(settings))
            # Its failure is read here even when every waiter gave up (never "not retrieved").
            opening.add_done_callback(lambda done: done.cancelled() or done.exception())
        return await asyncio.shield(opening)

    async def _open(self, settings: Settings) -> MemoryBackend:
        base_url = self._resolve(settings)
        if base_url is None:
            raise BackendError(
                "no Hindsight server is configured",
                hint="start one with `pi-hindsight server start`, or set hindsight.baseUrl "
                "in the config file or HINDSIGHT_BASE_URL",
            )
        hindsight = settings.hindsight
        access = ServerAccess(base_url, hindsight.api_key, hindsight.ca_file)
        self._backend = await self._factory(access)
        return self._backend

    async def route(self, settings: Settings) -> ProxyRoute | None:
        """The proxy the client uses for the session's server, as ``status`` shows it (None:
        no server known). The same rule as the client's (``transport.proxy_route``)."""
        try:
            base_url = await asyncio.to_thread(self._resolve, settings)
        except PiHindsightError:  # a damaged server record: status shows it elsewhere
            return None
        return None if base_url is None else proxy_route(base_url, os.environ)

    async def ensure_bank(
        self, backend: MemoryBackend, bank_id: str, mission: str, *, timeout: float
    ) -> None:
        """Create ``bank_id`` once, with ``mission``, if the bank listing does not have it."""
        if bank_id in self._banks_ready:
            return
        lock = self._bank_locks.setdefault(bank_id, asyncio.Lock())
        async with lock:  # concurrent callers (recall and memo) check and create it once
            if bank_id in self._banks_ready:
                return
            if not await backend.bank_exists(bank_id, timeout=timeout):
                await backend.create_bank(bank_id, BankMissions(mission=mission), timeout=timeout)
                logger.info("created bank %s", bank_id)
            self._banks_ready.add(bank_id)

    def note(self, error: BackendError | None) -> tuple[Notice, ...]:
        """Track health; a notice only when the state changes (not on every request) — a refused
        API key and an unreachable server count as different states."""
        was_healthy, was_refused = self.healthy, self._refused
        if error is None:
            self.healthy, self.last_error, self._refused = True, None, False
            if was_healthy is False:
                return (Notice.info("Hindsight is reachable again; memory is back."),)
            return ()
        refused = isinstance(error, BackendAuthRejected)
        self.healthy, self.last_error, self._refused = False, str(error), refused
        if was_healthy is False and refused == was_refused:
            return ()
        if refused:
            return (
                Notice.warning(
                    f"memory unavailable: {BackendAuthRejected.REFUSED} — "
                    f"{BackendAuthRejected.FIX}; retains wait in the outbox until it accepts it",
                ),
            )
        return (Notice.warning(f"memory unavailable for this request: {error.describe()}"),)

    async def close(self) -> None:
        if self._backend is None and self._opening is not None and not self._opening.done():
            # Still opening (an import in its thread): wait for it, to close what it opens.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._opening), timeout=5)
        if self._backend is not None:
            await self._backend.close()
