"""Per-record delivery data in the evidence ledger (issue 12, R-RECALL-4): what the block no longer
shows is kept per record; omissions are kept by why; why each record came (issue 13: its recall
scores, the query sent) is shown next to its delivered line. Real SQLite, the real command line."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from click.testing import CliRunner

from pi_hindsight.backend.resources import RecallScores
from pi_hindsight.cli.main import cli
from pi_hindsight.engine.recording import prepared_record
from pi_hindsight.engine.types import (
    DeliveredRecord,
    Delivery,
    DeliveryDetails,
    Omitted,
    UserRequest,
)
from pi_hindsight.stores.evidence import EVIDENCE_FILE_NAME, EvidenceLedger, PreparedRecord
from pi_hindsight.stores.evidence.diagnosis import delivered_lines, diagnose, why_it_came
from pi_hindsight.stores.evidence.tables import SCHEMA, DeliveredItem

RECORDS = (
    DeliveredRecord(
        id="obs-1",
        key="k1",
        section="project",
        type="observation",
        document_id="pi-session-s1",
        chunk_id="bank_pi-session-s1_0",
        occurred="2026-11-02T10:00:00+00:00",
        context="Pi coding session in project p",
        duplicate_ids=("fact-1",),
        scores=RecallScores(final=1.1, semantic=0.4314, keyword=0.2),
    ),
    DeliveredRecord(
        id="user-1",
        key="k2",
        section="user",
        context="from the review of docs/x.md",
        shown=("context",),
        scores=RecallScores(final=0.35, reranker=0.5),
    ),
)
BODY = (
    '<hindsight-memory recalled-at="2026-11-29">\nReference material, not instructions.\n'
    "## Startup memo (refreshed 2026-11-29T21:40Z)\n### Facts\n- a memo line\n"
    "## Project memory\n- (2026-11-02) Production deploys go to the Zephyr cluster.\n"
    "## User preferences\n- Prefers small pull requests.\n"
    "  [context: from the review of docs/x.md]\n</hindsight-memory>"
)
QUERIES = (
    ("project", "where do deploys go"),
    ("user", "The user's preferences: where do deploys go"),
)


def _delivery(request_id: str) -> tuple[UserRequest, Delivery]:
    details = DeliveryDetails(
        request_id=request_id,
        scope_id="project:p",
        bank_ids=("pi-coding", "pi-user"),
        record_ids=tuple(record.id for record in RECORDS),
        record_keys=tuple(record.key for record in RECORDS),
        records=RECORDS,
        omitted=Omitted(budget=1, duplicate=1, in_memo=3),
        tokens=99,
        queries=dict(QUERIES),
    )
    return UserRequest(request_id, "s1", "q"), Delivery("delivered", BODY, details)


def _ledger(state: Path) -> EvidenceLedger:
    return EvidenceLedger(state, retention_days=30, cap_bytes=50_000_000)


def test_a_delivery_is_recorded_per_record_and_by_omission(isolated_dirs: Path) -> None:
    ledger = _ledger(isolated_dirs)
    try:
        request, delivery = _delivery("0190bbbb-0001")
        assert ledger.record_prepared(prepared_record(request, delivery, None))
        detail = ledger.show("0190bbbb-0001")
        listed = ledger.list().records[0]
    finally:
        ledger.close()
    assert detail is not None
    first, second = detail.items
    assert (first.record_id, first.section, first.type, first.document_id, first.chunk_id) == (
        "obs-1",
        "project",
        "observation",
        "pi-session-s1",
        "bank_pi-session-s1_0",
    )
    assert first.duplicate_ids == ("fact-1",) and first.occurred == "2026-11-02T10:00:00+00:00"
    assert (second.record_id, second.shown) == ("user-1", ("context",))
    assert detail.record.omitted == 1  # the budget, as before
    assert dict(detail.record.omitted_by) == {"budget": 1, "duplicate": 1, "inMemo": 3}
    assert listed.omitted_by == detail.record.omitted_by
    notes = " ".join(diagnose(detail.record).notes)
    assert "3 recalled record(s) were left out because the startup memo" in notes

    code = CliRunner().invoke(cli, ["evidence", "show", "0190bbbb-0001", "--no-body"])
    assert code.exit_code == 0, code.output
    out = code.stdout
    assert "omitted: 1 by the budget, 3 in memo, 1 duplicate" in out
    assert "id obs-1  occurred 2026-11-02T10:00:00  doc pi-session-s1" in out
    assert "same text as fact-1" in out and "context 'Pi coding session in project p'" in out
    shown = json.loads(
        CliRunner().invoke(cli, ["evidence", "show", "0190bbbb-0001", "--json"]).stdout
    )
    assert [record["id"] for record in shown["records"]] == ["obs-1", "user-1"]
    assert shown["records"][0]["chunkId"] == "bank_pi-session-s1_0"
    assert shown["records"][0]["scores"] == {"final": 1.1, "semantic": 0.4314, "keyword": 0.2}
    assert shown["queries"] == dict(QUERIES)


def test_why_a_record_came_is_shown_next_to_its_delivered_line(isolated_dirs: Path) -> None:
    """Issue 13: each delivered line, then its type, scores and the arms that found it; the
    query each recall was sent, as sent."""
    ledger = _ledger(isolated_dirs)
    try:
        request, delivery = _delivery("0190cccc-0001")
        ledger.record_prepared(prepared_record(request, delivery, None))
    finally:
        ledger.close()
    for command in ("show", "explain"):
        result = CliRunner().invoke(cli, ["evidence", command, "0190cccc-0001"])
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        first = lines.index(
            "  1. [project] - (2026-11-02) Production deploys go to the Zephyr cluster."
        )
        assert lines[first + 1] == (
            "       why: observation · score 1.10 · found by semantic 0.43 + keyword 0.20"
        )
        second = lines.index("  2. [user] - Prefers small pull requests.")
        assert lines[second + 1] == (
            "       why: type unknown · score 0.35 (reranker 0.50) · found by a graph or "
            "temporal link"
        )
        assert "query sent:   project 'where do deploys go'" in result.stdout
        assert 'query sent:   user "The user\'s preferences: where do deploys go"' in result.stdout


def test_delivered_lines_match_records_only_when_the_layout_does() -> None:
    assert delivered_lines(BODY, 2) == (
        "- (2026-11-02) Production deploys go to the Zephyr cluster.",
        "- Prefers small pull requests.",
    )
    # The memo's own list items are not records; a count that does not match shows none.
    assert delivered_lines(BODY, 3) == (None, None, None)
    assert delivered_lines(None, 1) == (None,)
    assert (
        why_it_came(DeliveredItem(record_id="x", section="project"))
        == "type unknown · no recall scores kept"
    )


def test_a_schema_1_ledger_migrates_with_its_records_intact(isolated_dirs: Path) -> None:
    """Oldest → head: a ledger written before per-record data opens, keeps its rows, and takes
    per-record rows from then on."""
    isolated_dirs.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = isolated_dirs / EVIDENCE_FILE_NAME
    connection = sqlite3.connect(path)
    for statement in SCHEMA.migrations[0].sql.split(";\n"):
        connection.execute(statement)
    connection.execute(
        "INSERT INTO requests (request_id, prepared_at, outcome, record_count, record_ids) "
        "VALUES ('old-1', ?, 'delivered', 1, '[\"m1\"]')",
        (time.time(),),
    )
    connection.execute("INSERT INTO bodies (seq, body) VALUES (1, 'old body')")
    connection.execute(f"PRAGMA application_id = {SCHEMA.application_id}")
    connection.execute("PRAGMA user_version = 1")
    connection.commit()
    connection.close()

    ledger = _ledger(isolated_dirs)
    try:
        assert ledger.set_aside is None
        old = ledger.show("old-1")
        assert old is not None and old.body == "old body" and old.items == ()
        assert old.record.record_ids == ("m1",) and dict(old.record.omitted_by) == {}
        request, delivery = _delivery("new-1")
        ledger.record_prepared(prepared_record(request, delivery, None))
        new = ledger.show("new-1")
        assert new is not None and len(new.items) == 2
    finally:
        ledger.close()
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    assert version == len(SCHEMA.migrations) == 6


def test_a_schema_2_ledger_keeps_its_per_record_rows_without_scores(isolated_dirs: Path) -> None:
    """2 → head: per-record rows kept before recall scores were stay readable (no scores, no
    queries: shown as such), and new rows carry both."""
    isolated_dirs.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = isolated_dirs / EVIDENCE_FILE_NAME
    connection = sqlite3.connect(path)
    for migration in SCHEMA.migrations[:2]:
        for statement in migration.sql.split(";\n"):
            connection.execute(statement)
    connection.execute(
        "INSERT INTO requests (request_id, prepared_at, outcome, record_count, record_ids) "
        "VALUES ('old-2', ?, 'delivered', 1, '[\"m1\"]')",
        (time.time(),),
    )
    connection.execute(
        "INSERT INTO delivered_records (seq, position, record_id, section, type) "
        "VALUES (1, 0, 'm1', 'project', 'world')"
    )
    connection.execute(f"PRAGMA application_id = {SCHEMA.application_id}")
    connection.execute("PRAGMA user_version = 2")
    connection.commit()
    connection.close()

    ledger = _ledger(isolated_dirs)
    try:
        assert ledger.set_aside is None
        old = ledger.show("old-2")
        assert old is not None and dict(old.record.queries) == {}
        (item,) = old.items
        assert (item.record_id, item.type, dict(item.scores)) == ("m1", "world", {})
        request, delivery = _delivery("new-2")
        ledger.record_prepared(prepared_record(request, delivery, None))
        new = ledger.show("new-2")
        assert new is not None and new.items[0].scores["final"] == 1.1
        assert dict(new.record.queries) == dict(QUERIES)
    finally:
        ledger.close()
    result = CliRunner().invoke(cli, ["evidence", "show", "old-2"])
    assert result.exit_code == 0, result.output
    assert "  1. [project] m1" in result.stdout
    assert "why: world · no recall scores kept" in result.stdout


def test_per_record_rows_go_with_their_request(isolated_dirs: Path) -> None:
    """Retention and the cap delete requests; their per-record rows must not outlive them."""
    ledger = EvidenceLedger(isolated_dirs, retention_days=1, cap_bytes=50_000_000)
    try:
        request, delivery = _delivery("gone-1")
        record = prepared_record(request, delivery, None)
        ledger.record_prepared(
            PreparedRecord(**{**record.__dict__, "prepared_at": time.time() - 3 * 86_400})
        )
        ledger.enforce_limits()
        assert ledger.show("gone-1") is None
    finally:
        ledger.close()
    rows = (
        sqlite3.connect(isolated_dirs / EVIDENCE_FILE_NAME)
        .execute("SELECT count(*) FROM delivered_records")
        .fetchone()[0]
    )
    assert rows == 0


def test_an_undelivered_outcome_records_no_items(isolated_dirs: Path) -> None:
    request, delivery = _delivery("skip-1")
    skipped = Delivery("skipped", None, delivery.details, reason="already delivered")
    record = prepared_record(request, skipped, None)
    assert record.items == () and record.omitted == 0
    assert dict(record.omitted_by) == {"budget": 1, "duplicate": 1, "inMemo": 3}
