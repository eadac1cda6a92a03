"""The retain decision in the evidence ledger (issue 21): a ledger from before it upgrades in
place, its old records say no decision was recorded, and a decision reads back in `show`
(text and JSON) and `list`. Real SQLite, the real command line."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from click.testing import CliRunner

from pi_hindsight.cli.main import cli
from pi_hindsight.stores.evidence import EVIDENCE_FILE_NAME, EvidenceLedger, PreparedRecord
from pi_hindsight.stores.evidence.tables import SCHEMA


def _schema_4_ledger(state: Path) -> Path:
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state / EVIDENCE_FILE_NAME
    connection = sqlite3.connect(path)
    for migration in SCHEMA.migrations[:4]:
        for statement in migration.sql.split(";\n"):
            connection.execute(statement)
    connection.execute(
        "INSERT INTO requests (request_id, prepared_at, outcome, reason) "
        "VALUES ('old-4', ?, 'skipped', 'trivial prompt')",
        (time.time(),),
    )
    connection.execute(f"PRAGMA application_id = {SCHEMA.application_id}")
    connection.execute("PRAGMA user_version = 4")
    connection.commit()
    connection.close()
    return path


def test_a_schema_4_ledger_upgrades_and_records_the_retain_decision(isolated_dirs: Path) -> None:
    path = _schema_4_ledger(isolated_dirs)
    ledger = EvidenceLedger(isolated_dirs, retention_days=30, cap_bytes=50_000_000)
    try:
        assert ledger.set_aside is None
        old = ledger.show("old-4")
        assert old is not None and old.record.retain is None
        assert old.to_json()["retain"] is None
        for request_id in ("thanks-1", "fact-1"):
            ledger.record_prepared(PreparedRecord(request_id, "nothing_found", "s1", reason="x"))
        assert ledger.mark_retain("thanks-1", "skipped", "acknowledgement")
        assert ledger.mark_retain("fact-1", "queued")
        assert not ledger.mark_retain("never-prepared", "queued")  # no record: nothing made up
        thanks = ledger.show("thanks-1")
        listed = {record.request_id: record for record in ledger.list().records}
    finally:
        ledger.close()
    assert thanks is not None
    assert (thanks.record.retain, thanks.record.retain_reason) == ("skipped", "acknowledgement")
    assert (listed["fact-1"].retain, listed["fact-1"].retain_reason) == ("queued", None)
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    assert version == len(SCHEMA.migrations) == 6

    runner = CliRunner()
    shown = json.loads(runner.invoke(cli, ["evidence", "show", "thanks-1", "--json"]).stdout)
    assert shown["retain"] == {"decision": "skipped", "reason": "acknowledgement"}
    text = runner.invoke(cli, ["evidence", "show", "thanks-1"]).stdout
    assert "retain:       skipped: acknowledgement (not sent: no knowledge in it)" in text
    assert (
        "retain:       - (no decision recorded"
        in runner.invoke(cli, ["evidence", "show", "old-4"]).stdout
    )
    lines = runner.invoke(cli, ["evidence", "list"]).stdout.splitlines()
    assert [line for line in lines if "retain skipped" in line] == [
        next(line for line in lines if "thanks-1" in line)
    ]
    assert next(line for line in lines if "thanks-1" in line).endswith(
        "x; retain skipped: acknowledgement"
    )
    listed_json = json.loads(runner.invoke(cli, ["evidence", "list", "--json"]).stdout)
    decisions = {r["requestId"]: r["retain"] for r in listed_json["records"]}
    assert decisions == {
        "thanks-1": {"decision": "skipped", "reason": "acknowledgement"},
        "fact-1": {"decision": "queued", "reason": None},
        "old-4": None,
    }
