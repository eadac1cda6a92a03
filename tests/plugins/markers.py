"""Pytest plugin: the tiers of the suite, marked from where a test lives and what it needs, so no
test has to remember to mark itself.

- ``e2e``: under ``tests/e2e/`` (a real Pi or Claude Code end to end).
- ``slow``: needs a server or an agent binary (``SLOW_FIXTURES``), or lives where every test
  starts processes or servers of its own (``SLOW_PATHS``).

``make test-fast`` runs ``-m "not e2e and not slow"`` (the units, engine and stand-in tests);
``make test`` runs everything, the fast tests first: the shared servers boot meanwhile.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLOW_FIXTURES = frozenset(
    {"hindsight_server", "team_server", "pi_binary", "pi_world", "claude_binary", "claude_world"}
)
SLOW_PATHS = (
    "tests/e2e/",
    "tests/integration/",
    "tests/fuzz/",
    "tests/test_launcher.py",
    "tests/test_packaging.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.resolve().relative_to(ROOT).as_posix()
        if where.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.e2e)
        needs = set(getattr(item, "fixturenames", ()))
        if where.startswith(SLOW_PATHS) or needs & SLOW_FIXTURES:
            item.add_marker(pytest.mark.slow)
    # The fast tier first, the rest in their order (the longest, e2e, early): the shared servers
    # boot in the background meanwhile (shared_run.start_early). A stable sort: every xdist
    # worker gets the same order.
    items.sort(key=lambda item: item.get_closest_marker("slow") is not None)
