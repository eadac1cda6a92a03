"""The ledger's names are host-neutral (issue 19, item 4): a ledger written before the rename
(schema 5, its ``session_file`` column) upgrades in place, and its records read back under
``transcriptPath`` in `show --json` and `explain --json`, which still finds the conversation
through the recorded path. Real SQLite, a Pi session file in the real format, the real CLI."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from click.testing import CliRunner

from pi_hindsight.cli.main import cli
from pi_hindsight.stores.evidence import EVIDENCE_FILE_NAME, EvidenceLedger
from pi_hindsight.stores.evidence.tables import SCHEMA
from tests.support.pi_sessions import Exchange, write_session

BODY = '<hindsight-memory scope="x">\n- the build uses uv\n</hindsight-memory>'


def _schema_5_ledger(state: Path, transcript: Path) -> Path:
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state / EVIDENCE_FILE_NAME
    connection = sqlite3.connect(path)
    for migration in SCHEMA.migrations[:5]:
        for statement in migration.sql.split(";\n"):
            connection.execute(statement)
    seq = connection.execute(
        "INSERT INTO requests (request_id, prepared_at, outcome, session_id, session_file, "
        "entry_id, record_count, body_bytes, record_ids, attached, confirmed) "
        "VALUES ('req-0', ?, 'delivered', 's-old', ?, 'e1', 1, ?, '[\"mem-1\"]', 1, 1) "
        "RETURNING seq",
        (time.time(), str(transcript), len(BODY.encode())),
    ).fetchone()[0]
    connection.execute("INSERT INTO bodies (seq, body) VALUES (?, ?)", (seq, BODY))
    connection.execute(f"PRAGMA application_id = {SCHEMA.application_id}")
    connection.execute("PRAGMA user_version = 5")
    connection.commit()
    connection.close()
    return path


def test_a_schema_5_ledger_renames_its_columns_and_reads_back(isolated_dirs: Path) -> None:
    agent = isolated_dirs / "elsewhere"  # not where explain would search by session id
    transcript = write_session(
        agent, isolated_dirs, [Exchange("which build tool?", "uv", memory="- the build uses uv")]
    )
    path = _schema_5_ledger(isolated_dirs, transcript)

    ledger = EvidenceLedger(isolated_dirs, retention_days=30, cap_bytes=50_000_000)
    try:
        assert ledger.set_aside is None
        old = ledger.show("req-0")
        assert ledger.mark_attached("req-0", entry_id="e2", transcript_path="/t/new.jsonl")
        moved = ledger.show("req-0")
        assert ledger.mark_attached("req-0", entry_id="e1", transcript_path=str(transcript))
    finally:
        ledger.close()
    assert old is not None and old.record.transcript_path == str(transcript)
    assert moved is not None and moved.record.transcript_path == "/t/new.jsonl"
    columns = {row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(requests)")}
    assert "transcript_path" in columns and "session_file" not in columns
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 6

    runner = CliRunner()
    shown = json.loads(runner.invoke(cli, ["evidence", "show", "req-0", "--json"]).stdout)
    assert shown["transcriptPath"] == str(transcript) and "sessionFile" not in shown
    assert shown["body"] == BODY
    explained = json.loads(runner.invoke(cli, ["evidence", "explain", "req-0", "--json"]).stdout)
    assert explained["transcriptPath"] == str(transcript)
    assert explained["matchedBy"] == "requestId" and explained["bodyMatchesSession"] is True
    memory = explained["memoryMessage"]
    assert memory["messageKind"] == "hindsight-memory" and "customType" not in memory
    assert explained["userMessage"]["text"] == "which build tool?"
