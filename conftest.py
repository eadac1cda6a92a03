"""The test run's plugins and isolation, for ``tests/`` and ``standin/tests/`` alike: every test
gets its own state dir and Pi agent dir; nothing touches ~/.pi.

Heavy services start once per run and are shared by its xdist workers
(``tests/plugins/shared_run.py``, ``tests/plugins/hindsight_server.py``); tests isolate
themselves with fresh banks, state dirs and Pi agent dirs. How to write a test: tests/README.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Nothing in the test run reaches the Hugging Face hub: the launcher's reranker choice reads
# the cache only (tests of the hub check give it an environment with a loopback endpoint).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

pytest_plugins = [
    "tests.plugins.shared_run",
    "tests.plugins.markers",
    "tests.plugins.hindsight_server",
    "tests.plugins.standin",
    "tests.plugins.pi",
    "tests.plugins.claude_code",
    "tests.plugins.team_server",
]


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    state = tmp_path / "state"
    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_HINDSIGHT_STATE_DIR", str(state))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("PI_OFFLINE", "1")
    # Claude Code's transcripts (`scope seed` reads them): never the machine's own ~/.claude.
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    for variable in ("HINDSIGHT_BASE_URL", "HINDSIGHT_API_KEY", "PI_HINDSIGHT_PROJECT_BANK_ID"):
        monkeypatch.delenv(variable, raising=False)
    yield state
