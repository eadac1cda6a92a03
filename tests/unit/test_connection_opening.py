"""Opening the session's client is shielded: a request whose bound runs out while the client
loads (its import takes seconds on a loaded machine) leaves it to finish for the next request,
and a failed opening is tried again."""

from __future__ import annotations

import asyncio

import pytest

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.config import Settings
from pi_hindsight.engine.connection import HindsightConnection, ServerAccess
from pi_hindsight.errors import BackendError, BackendUnavailable

UNUSED_URL = "http://127.0.0.1:9"  # never contacted: opening a client makes no connection


def test_a_request_that_gives_up_leaves_the_opening_to_the_next_one() -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        opened: list[str] = []

        async def slow(access: ServerAccess) -> HindsightBackend:
            opened.append(access.base_url)
            await release.wait()
            return HindsightBackend(access.base_url)

        connection = HindsightConnection(slow, lambda settings: UNUSED_URL)
        settings = Settings()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(connection.backend(settings), timeout=0.05)
        assert not connection.created
        release.set()
        backend = await connection.backend(settings)
        assert opened == [UNUSED_URL]  # opened once, not again by the second request
        assert await connection.backend(settings) is backend
        await connection.close()

    asyncio.run(scenario())


def test_a_failed_opening_is_tried_again_and_its_error_reaches_the_caller() -> None:
    async def scenario() -> None:
        attempts = 0

        async def flaky(access: ServerAccess) -> HindsightBackend:
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                raise BackendUnavailable("injected: the client could not be opened")
            return HindsightBackend(access.base_url)

        connection = HindsightConnection(flaky, lambda settings: UNUSED_URL)
        with pytest.raises(BackendError, match="could not be opened"):
            await connection.backend(Settings())
        backend = await connection.backend(Settings())
        assert attempts == 2 and connection.created
        await backend.close()

    asyncio.run(scenario())


def test_no_server_configured_is_a_clear_error() -> None:
    async def never(access: ServerAccess) -> HindsightBackend:
        raise AssertionError("not opened without a server")

    async def scenario() -> None:
        connection = HindsightConnection(never, lambda settings: None)
        with pytest.raises(BackendError, match="no Hindsight server is configured"):
            await connection.backend(Settings())

    asyncio.run(scenario())
