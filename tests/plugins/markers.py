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


def _xdist_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` keeps the tests marked ``xdist_group("<name>")`` on one worker by an
    ``@<name>`` suffix of their node id, which pytest-xdist 3.8 writes to ``item._nodeid``; pytest
    9.2 reads the node id from ``item._id``, so the grouping silently stopped
    (pytest-dev/pytest-xdist#1386). Written there too until xdist does (in the workers: the
    scheduler reads their node ids)."""
    if not getattr(config.option, "loadgroup", False) or not hasattr(config, "workerinput"):
        return
    try:
        from _pytest.nodeid import NodeId  # pytest >= 9.2 only
    except ImportError:  # an older pytest: xdist's own suffix works
        return
    for item in items:
        names = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        suffix = "@" + "_".join(sorted(names))
        if names and not item.nodeid.endswith(suffix):
            setattr(item, "_id", NodeId.parse(item.nodeid + suffix))  # noqa: B010


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _xdist_groups(config, items)
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
