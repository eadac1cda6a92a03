"""Pytest plugin: one real local Hindsight for the whole test run.

Load it with ``-p tests.plugins.hindsight_server`` (or from a conftest's ``pytest_plugins``).

- ``hindsight_server`` (session): Hindsight started through the launcher with the offline LLM
  stand-in in the run's directory (``shared_run``): one server for every xdist worker, stopped
  when the run ends — also after failures and Ctrl-C (and SIGTERM, which is turned into Ctrl-C).
  It starts in a background process once the tests are collected.
- ``PI_HINDSIGHT_TEST_SERVER_URL=http://127.0.0.1:PORT`` uses that running server instead; the
  yielded ServerInfo then has only ``base_url``/``host``/``port`` (``pids`` is empty), and tests
  about the launcher itself skip.
- ``PI_HINDSIGHT_TEST_LLM`` (default ``offline``) picks the LLM mode of the started server;
  ``mock`` (Hindsight's built-in) is for working on the launcher without the stand-in.
- ``PI_HINDSIGHT_TEST_RERANKER`` (default ``rrf``) its reranker (``auto``, ``cross-encoder``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import pytest

from pi_hindsight.launcher import LlmMode, ServerInfo, start_server
from pi_hindsight.launcher.reranker import REQUESTED, Requested
from tests.plugins import shared_run

SERVER_URL_ENV = "PI_HINDSIGHT_TEST_SERVER_URL"
LLM_ENV = "PI_HINDSIGHT_TEST_LLM"
RERANKER_ENV = "PI_HINDSIGHT_TEST_RERANKER"


def llm_mode_for_tests() -> LlmMode:
    mode = os.environ.get(LLM_ENV, "offline")
    if mode not in ("offline", "mock", "env"):
        raise pytest.UsageError(f"{LLM_ENV} must be offline, mock or env, not {mode!r}")
    return cast(LlmMode, mode)


def reranker_for_tests() -> Requested:
    """``rrf`` unless ``PI_HINDSIGHT_TEST_RERANKER`` says otherwise: the same scores on every
    machine, whatever models its Hugging Face cache holds."""
    mode = os.environ.get(RERANKER_ENV, "rrf")
    if mode not in REQUESTED:
        raise pytest.UsageError(f"{RERANKER_ENV} must be one of {REQUESTED}, not {mode!r}")
    return cast(Requested, mode)


def external_info(url: str) -> ServerInfo:
    """A ServerInfo for a server this run did not start (only the address is known)."""
    parts = urlsplit(url.rstrip("/"))
    unknown = Path()
    return ServerInfo(
        base_url=url.rstrip("/"),
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 80,
        llm="env",
        started_at="",
        pids={},
        state_dir=unknown,
        log_dir=unknown,
        data_dir=unknown,
        postgres_port=0,
        postgres_install=unknown,
        postgres_user=None,
        standin_url=None,
        reused=True,
        startup_seconds=None,
    )


@pytest.fixture(scope="session")
def hindsight_system_dir(request: pytest.FixtureRequest) -> Path:
    """Where PostgreSQL goes when the tests run as root: a directory of the run any user can
    traverse (pytest's own temporary directories are mode 0700, closed to ``postgres``)."""
    return shared_run.system_dir(request.config)


def _start(state_dir: Path, system_dir: Path) -> ServerInfo:
    return start_server(
        state_dir, llm=llm_mode_for_tests(), system_dir=system_dir, reranker=reranker_for_tests()
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start booting the server at once (``shared_run.start_early``): this module's
    ``__main__`` makes the same start in a process of its own."""
    if not os.environ.get(SERVER_URL_ENV):
        config = session.config
        state, system = (
            shared_run.server_state_dir(config, "hindsight"),
            shared_run.system_dir(config),
        )
        argv = [sys.executable, "-m", "tests.plugins.hindsight_server", str(state), str(system)]
        shared_run.start_early(session, "hindsight_server", argv)


@pytest.fixture(scope="session")
def hindsight_server(request: pytest.FixtureRequest) -> ServerInfo:
    """The run's server: started by the first process (xdist worker) that needs it, reused by
    the others (the launcher's record), stopped by ``shared_run`` when the run ends."""
    url = os.environ.get(SERVER_URL_ENV)
    if url:
        return external_info(url)
    config = request.config
    shared_run.wait_early(config, "hindsight_server")
    return _start(shared_run.server_state_dir(config, "hindsight"), shared_run.system_dir(config))


if __name__ == "__main__":  # shared_run.start_early's background start: STATE_DIR SYSTEM_DIR
    _start(Path(sys.argv[1]), Path(sys.argv[2]))
