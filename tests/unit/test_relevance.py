"""The relevance policy (issue 17): the pure decision, its settings, and what delivery does with
it — held-back records kept with their scores and reason, counted, and listed in the evidence."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_hindsight.backend.resources import MemoryRecord, RecallScores
from pi_hindsight.cli.main import cli
from pi_hindsight.config import load_config
from pi_hindsight.engine.delivery import hold_back_irrelevant
from pi_hindsight.engine.recording import prepared_record
from pi_hindsight.engine.types import Delivery, DeliveryDetails, Omitted, UserRequest
from pi_hindsight.relevance import (
    BELOW_RELEVANCE,
    DEFAULT_BARS,
    OFF,
    RelevanceBars,
    RelevanceSettings,
    judge,
    strength,
)
from pi_hindsight.stores.evidence import EVIDENCE_FILE_NAME, EvidenceLedger, PreparedRecord
from pi_hindsight.stores.evidence.diagnosis import diagnose
from pi_hindsight.stores.evidence.tables import SCHEMA


def _record(
    record_id: str,
    text: str,
    *,
    semantic: float | None = None,
    keyword: float | None = None,
    reranker: float | None = None,
    kind: str = "world",
) -> MemoryRecord:
    return MemoryRecord(
        id=record_id,
        text=text,
        type=kind,
        occurred_start="2026-12-01T10:00:00+00:00",
        scores=RecallScores(final=1.0, reranker=reranker, semantic=semantic, keyword=keyword),
    )


# Shaped like the measured recall of "Which tool applies database migrations?" (docs/delivery.md)
MIGRATIONS = [
    _record("obs-1", "Database migrations are applied with Alembic.", semantic=0.68, keyword=0.4),
    _record("fact-1", "Database migrations are applied with Alembic.", semantic=0.61, keyword=0.5),
    _record("naming", "Database tables are named in the singular.", semantic=0.32, keyword=0.1),
    _record("backups", "Backups of the production database run nightly.", keyword=0.1),
    _record("linked", "API errors follow RFC 7807 problem details."),  # a graph link only
]


def test_strength_is_semantic_plus_keyword_with_missing_arms_as_zero() -> None:
    assert strength(RecallScores(final=1.0, semantic=0.5, keyword=0.2)) == 0.7
    assert strength(RecallScores(final=1.0, keyword=0.1)) == 0.1
    assert strength(RecallScores(final=0.9)) == 0.0
    assert strength(None) == 0.0


def test_the_defaults_keep_the_match_and_hold_back_the_merely_similar() -> None:
    judged = judge(MIGRATIONS, DEFAULT_BARS)
    assert [j.record.id for j in judged] == [r.id for r in MIGRATIONS]  # recall's order
    assert {j.record.id for j in judged if j.kept} == {"obs-1", "fact-1"}
    details = {j.record.id: j.detail for j in judged if not j.kept}
    assert details["naming"] == "strength 0.42 < 0.60 x best 1.11 of this recall"
    assert details["backups"] == "strength 0.10 < floor 0.40"
    assert details["linked"] == "strength 0.00 < floor 0.40"


def test_the_floor_holds_back_a_weak_best_match() -> None:
    weak = [_record("only", "Logs are kept for 14 days.", semantic=0.33)]
    assert [j.kept for j in judge(weak, DEFAULT_BARS)] == [False]
    assert [j.kept for j in judge(weak, DEFAULT_BARS.model_copy(update={"floor": 0.3}))] == [True]


def test_records_of_one_text_are_judged_together_by_the_strongest() -> None:
    pair = [
        _record("weak", "Releases ship on Thursdays.", semantic=0.31),
        _record("strong", "Releases ship on Thursdays.", semantic=0.5, keyword=0.2),
        _record("other", "Hotfixes ship any day.", semantic=0.45),
    ]
    kept = {j.record.id for j in judge(pair, DEFAULT_BARS) if j.kept}
    assert kept == {"weak", "strong", "other"}  # 0.45 >= 0.6 x 0.7


def test_a_cross_encoder_can_only_hold_back_more() -> None:
    scored = [
        _record("a", "Deploys go through Argo CD.", semantic=0.6, keyword=0.3, reranker=0.9),
        _record("b", "Deploy keys live in Vault.", semantic=0.58, keyword=0.3, reranker=0.02),
    ]
    judged = judge(scored, DEFAULT_BARS)
    assert [j.kept for j in judged] == [True, False]
    assert judged[1].detail == "reranker 0.02 < 0.10"
    # Without reranker scores (rrf) the same pair is judged on strength alone: both kept.
    plain = [_record(r.id, r.text, semantic=0.6, keyword=0.3) for r in scored]
    assert all(j.kept for j in judge(plain, DEFAULT_BARS))


def test_off_keeps_everything_and_nothing_is_lost() -> None:
    assert all(j.kept for j in judge(MIGRATIONS, OFF))
    assert judge([], DEFAULT_BARS) == []


SCORES = st.builds(
    RecallScores,
    final=st.floats(0, 2),
    reranker=st.none() | st.floats(0, 1),
    semantic=st.none() | st.floats(0, 1),
    keyword=st.none() | st.floats(0, 2),
)
RECORDS = st.lists(
    st.builds(
        MemoryRecord,
        id=st.uuids().map(str),
        text=st.sampled_from(["a fact", "another fact", "A  Fact", "third"]),
        scores=st.none() | SCORES,
    ),
    max_size=12,
)
BARS = st.builds(
    RelevanceBars,
    relative=st.floats(0, 1),
    floor=st.floats(0, 1.5),
    reranker_floor=st.floats(0, 1),
)


@settings(max_examples=200, deadline=None)
@given(RECORDS, BARS, st.floats(0, 0.5))
def test_raising_a_bar_never_delivers_more(
    records: list[MemoryRecord], bars: RelevanceBars, more: float
) -> None:
    kept = {j.record.id for j in judge(records, bars) if j.kept}
    for name, top in (("relative", 1.0), ("floor", 4.0), ("reranker_floor", 1.0)):
        higher = bars.model_copy(update={name: min(getattr(bars, name) + more, top)})
        assert {j.record.id for j in judge(records, higher) if j.kept} <= kept
    # Every record is judged once, in order; a held one always says why.
    judged = judge(records, bars)
    assert [j.record.id for j in judged] == [r.id for r in records]
    assert all((j.detail is None) == j.kept for j in judged)


# -- settings ------------------------------------------------------------------------------------


def _settings(tmp_path: Path, relevance: Any) -> tuple[RelevanceSettings, list[str]]:
    (tmp_path / "config.json").write_text(json.dumps({"recall": {"relevance": relevance}}))
    loaded = load_config(tmp_path, env={})
    return loaded.settings.recall.relevance, [p.describe() for p in loaded.problems]


def test_settings_off_on_and_per_bank_overrides(tmp_path: Path) -> None:
    assert load_config(tmp_path, env={}).settings.recall.relevance.for_bank("b") == DEFAULT_BARS
    off, problems = _settings(tmp_path, "off")
    assert not off.enabled and problems == []
    assert not off.for_bank("pi-user").enabled  # an override cannot turn it on
    on, _ = _settings(tmp_path, "on")
    assert on.for_bank("b") == DEFAULT_BARS
    custom, problems = _settings(
        tmp_path,
        {"relative": 0.5, "banks": {"pi-user": {"floor": 0.3}, "scratch": "off"}},
    )
    assert problems == []
    assert custom.for_bank("pi-coding") == RelevanceBars(relative=0.5)
    assert custom.for_bank("pi-user") == RelevanceBars(relative=0.5, floor=0.3)
    assert not custom.for_bank("scratch").enabled


def test_a_bad_relevance_value_falls_back_with_the_key_named(tmp_path: Path) -> None:
    relevance, problems = _settings(tmp_path, {"relative": 2, "floor": 0.2})
    assert relevance.relative == DEFAULT_BARS.relative and relevance.floor == 0.2
    assert any("recall.relevance.relative" in problem for problem in problems)
    _, problems = _settings(tmp_path, "sometimes")
    assert problems and "recall.relevance" in problems[0]


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=8,
    )
)
def test_any_relevance_value_loads_to_valid_settings(value: object) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as place:
        relevance, _ = _settings(Path(place), value)
    assert 0 <= relevance.relative <= 1 and relevance.floor >= 0


# -- delivery and evidence -----------------------------------------------------------------------


def test_held_back_records_are_kept_with_scores_and_reason_and_counted(
    isolated_dirs: Path,
) -> None:
    kept, held, count = hold_back_irrelevant(
        [*MIGRATIONS, _record("leak", "The token is sk-live-0123456789abcdefABCDEF0123.")],
        "project",
        DEFAULT_BARS,
    )
    assert [r.id for r in kept] == ["obs-1", "fact-1"]
    assert count == 4 and [h.id for h in held] == ["naming", "backups", "linked", "leak"]
    naming = held[0]
    assert naming.reason == BELOW_RELEVANCE and naming.section == "project"
    assert naming.scores == RecallScores(final=1.0, semantic=0.32, keyword=0.1)
    assert naming.occurred == "2026-12-01T10:00:00+00:00"
    assert "sk-live-0123456789" not in held[3].text  # redacted like a delivered record

    details = DeliveryDetails(
        request_id="0190dddd-0001",
        scope_id="project:p",
        bank_ids=("pi-coding",),
        omitted=Omitted(relevance=count),
        held=tuple(held),
        queries={"project": "Which tool applies database migrations?"},
    )
    assert "held" not in details.to_json()  # never in the host's message details
    delivery = Delivery("nothing_found", None, details, reason="nothing cleared the bars")
    ledger = EvidenceLedger(isolated_dirs, retention_days=30, cap_bytes=50_000_000)
    try:
        ledger.record_prepared(
            prepared_record(UserRequest("0190dddd-0001", "s1", "q"), delivery, None)
        )
        detail = ledger.show("0190dddd-0001")
        share = ledger.held_share(0)
    finally:
        ledger.close()
    assert detail is not None and share == (4, 4)
    assert [item.record_id for item in detail.held] == ["naming", "backups", "linked", "leak"]
    assert detail.held[0].scores == {"final": 1.0, "semantic": 0.32, "keyword": 0.1}
    assert "below relevance" in " ".join(diagnose(detail.record).notes)

    for command in ("show", "explain"):
        result = CliRunner().invoke(cli, ["evidence", command, "0190dddd-0001"])
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        first = lines.index(
            "  1. [project] - (2026-12-01) Database tables are named in the singular."
        )
        assert lines[first + 1] == (
            "       why not: below relevance: strength 0.42 < 0.60 x best 1.11 of this recall"
        )
        assert "found by semantic 0.32 + keyword 0.10" in lines[first + 2]
        assert "held back (recalled, never shown to the model):" in lines
    shown = json.loads(
        CliRunner().invoke(cli, ["evidence", "show", "0190dddd-0001", "--json"]).stdout
    )
    assert [item["id"] for item in shown["heldBack"]][:2] == ["naming", "backups"]
    assert shown["omittedBy"] == {"relevance": 4}


def _held_delivery(request_id: str, *, prepared_at: float | None = None) -> PreparedRecord:
    _, held, count = hold_back_irrelevant(MIGRATIONS, "project", DEFAULT_BARS)
    details = DeliveryDetails(
        request_id=request_id, omitted=Omitted(relevance=count), held=tuple(held)
    )
    record = prepared_record(
        UserRequest(request_id, "s1", "q"),
        Delivery("nothing_found", None, details, reason="nothing cleared the bars"),
        None,
    )
    return dataclasses.replace(record, prepared_at=prepared_at)


def test_a_schema_3_ledger_migrates_and_held_rows_go_with_their_request(
    isolated_dirs: Path,
) -> None:
    isolated_dirs.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = isolated_dirs / EVIDENCE_FILE_NAME
    connection = sqlite3.connect(path)
    for migration in SCHEMA.migrations[:3]:
        for statement in migration.sql.split(";\n"):
            connection.execute(statement)
    connection.execute(
        "INSERT INTO requests (request_id, prepared_at, outcome) VALUES ('old-3', ?, 'skipped')",
        (time.time(),),
    )
    connection.execute(f"PRAGMA application_id = {SCHEMA.application_id}")
    connection.execute("PRAGMA user_version = 3")
    connection.commit()
    connection.close()

    ledger = EvidenceLedger(isolated_dirs, retention_days=1, cap_bytes=50_000_000)
    try:
        assert ledger.set_aside is None
        old = ledger.show("old-3")
        assert old is not None and old.held == ()
        ledger.record_prepared(_held_delivery("new-3"))
        ledger.record_prepared(_held_delivery("gone-3", prepared_at=time.time() - 3 * 86_400))
        new = ledger.show("new-3")
        assert new is not None and len(new.held) == 3
        assert ledger.held_share(time.time() - 86_400) == (3, 3)  # gone-3 is too old
        ledger.enforce_limits()
        assert ledger.show("gone-3") is None
    finally:
        ledger.close()
    rows = sqlite3.connect(path).execute("SELECT count(*) FROM held_records").fetchone()[0]
    assert rows == 3  # only new-3's: retention took gone-3's with it
