"""The invariants of ``bench/team_load.py`` catch what they are there for: fed a duplicated, a
lost and a stray retain, a foreign token in a delivery, and a failure nobody was shown, each
check says so (the load test in tests/integration proves they hold on real data)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH))  # the bench's modules import each other by name
    try:
        import _team_checks  # type: ignore[import-not-found]

        yield _team_checks
    finally:
        sys.path.remove(str(BENCH))


A, B, MINE = "rq0000000000a1", "rq0000000000b2", "pu0000000000c3"


def _world(bench: ModuleType) -> tuple[Any, Any, Any]:
    world = sys.modules["_team_world"]
    drivers = sys.modules["_team_drivers"]
    ledger = world.Ledger()
    ledger.add(A, world.Owner(scope="app"))
    ledger.add(B, world.Owner(scope="tool"))
    ledger.add(MINE, world.Owner(person="p01"))
    alice = drivers.Sent("p00", "pi", "s1", "r1", A, "app", 1.0, ended=2.0, outcome="delivered")
    bob = drivers.Sent("p01", "pi", "s2", "r2", B, "tool", 1.0, ended=2.0, outcome="delivered")
    return ledger, alice, bob


def test_a_duplicated_lost_or_stray_retain_fails_exactly_once(bench: ModuleType) -> None:
    ledger, alice, bob = _world(bench)
    documents = {"pi-session-s1": f"[{A}] [{A}]", "pi-session-stray": ""}
    personal = {"p01": ("pi-user-x", {"d": ""})}
    check = bench.exactly_once([alice, bob], documents, personal, {"p00": {"dead": 1}}, ledger)
    assert not check.ok
    assert check.problems == [
        "r1 (p00): its token is in pi-session-s1 2 times",
        "r2 (p01): its token is in pi-session-s2 0 times",
        "an unexpected document on the server: pi-session-stray",
        f"the personal preference {MINE} of p01 is in p01's User bank pi-user-x 0 times "
        "(expected 1)",
        "p00's outbox is not empty: {'dead': 1}",
    ]
    whole = {"pi-session-s1": A, "pi-session-s2": B}
    fine = bench.exactly_once([alice, bob], whole, {"p01": ("b", {"d": MINE})}, {}, ledger)
    assert fine.ok and fine.passed == 2


def test_another_scopes_or_persons_token_in_a_delivery_fails(bench: ModuleType) -> None:
    ledger, alice, bob = _world(bench)
    alice.delivered = f"memory: {B} and {MINE} and {A}"
    bob.delivered = f"memory: {MINE}"  # his own preference: fine
    check, with_tokens = bench.nothing_crosses([alice, bob], {}, {}, ledger)
    assert with_tokens == 2
    assert check.problems == [f"p00 in app, r1 (live): {MINE} (User bank of p01), {B} (scope tool)"]


def test_a_failure_without_evidence_or_status_and_an_unmet_outage_fail(
    bench: ModuleType,
) -> None:
    _, alice, bob = _world(bench)
    bob.outcome, bob.backend_after = "backend_unavailable", {"healthy": True}
    windows = [bench.Window("server restart", 0.5, 3.0), bench.Window("refused key", 5, 6, "p00")]
    check, met = bench.outages_show([alice, bob], {}, windows)
    assert met == {"server restart": 1, "refused key": 0}
    assert check.problems == [
        "r2 (p01): no evidence record",
        "the refused key was met by no request: nothing was shown of it",
    ]
