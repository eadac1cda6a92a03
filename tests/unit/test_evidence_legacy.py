"""Legacy JSONL evidence migration: formats, tolerance, resumption, and the cap."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pi_hindsight.errors import StateError
from pi_hindsight.legacy.evidence_import import MigrationNoSpace, migrate_file
from pi_hindsight.stores.evidence import EvidenceLedger
from pi_hindsight.stores.evidence.tables import LegacySource


def _iso(seconds_ago: float) -> str:
    return datetime.fromtimestamp(time.time() - seconds_ago, UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[EvidenceLedger]:
    store = EvidenceLedger(tmp_path / "state", retention_days=30, cap_bytes=50_000_000)
    yield store
    store.close()


def _write_lines(
    path: Path, objects: Sequence[object], *, raw: dict[int, str] | None = None
) -> Path:
    lines = [json.dumps(item) for item in objects]
    for index, text in (raw or {}).items():
        lines.insert(index, text)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _v1(n: int, **extra: object) -> dict[str, object]:
    return {
        "requestId": f"legacy-req-{n:05d}",
        "preparedAt": _iso(3_600 + n),
        "outcome": "delivered",
        "body": f"<hindsight-memory>\n- fact number {n}\n</hindsight-memory>",
        "recordIds": [f"r{n}"],
        "scopeId": "project:alpha",
        "bankId": "pi-coding",
        **extra,
    }


def test_the_abix5_operation_log_maps_recalls_and_drops_conversation_text(
    ledger: EvidenceLedger, tmp_path: Path
) -> None:
    log = _write_lines(
        tmp_path / "log.jsonl",
        [
            {
                "ts": _iso(100),
                "type": "recall",
                "user": "how do we deploy to production again?",
                "query": "deploy production target",
                "found": 5,
                "injected": 2,
                "skipped": 3,
                "injectedText": "- deploy target is Zephyr\n- deploys happen on Tuesdays",
                "rawHits": ["Zephyr", "Tuesdays"],
                "filter": "model",
            },
            {"ts": _iso(90), "type": "retain", "documentText": "user: hi\nassistant: hello"},
            {"ts": _iso(80), "type": "recall", "query": "lint rules", "found": 4, "injected": 0},
            {"ts": _iso(70), "type": "error", "operation": "recall", "message": "fetch failed"},
            {"ts": _iso(60), "type": "reflect", "query": "summarise", "operation": "reflect"},
        ],
    )
    report = migrate_file(ledger, log)
    assert report.complete and report.imported == 3 and report.totals.bad == 0
    assert report.totals.skipped == {
        "abix5 retain entry (not request evidence)": 1,
        "abix5 reflect entry (not request evidence)": 1,
    }
    records = {r.outcome: r for r in ledger.list(limit=10).records}
    delivered = records["delivered"]
    assert delivered.source == "legacy:abix5-log" and delivered.record_count == 2
    assert delivered.attached is None and delivered.confirmed is None  # not claimed by the log
    assert "user" not in delivered.meta and delivered.meta["droppedFields"] == ["user"]
    assert "query" not in delivered.meta and delivered.meta["queryChars"] == 24
    assert delivered.meta["found"] == 5 and delivered.meta["filter"] == "model"
    detail = ledger.show(delivered.request_id)
    assert detail is not None and detail.body is not None and "Zephyr" in detail.body
    assert records["nothing_found"].reason == "4 found, none injected (filtered out)"
    assert records["error"].reason == "fetch failed"
    # No raw conversation reached the ledger, in any table.
    dump = "\n".join(sqlite3.connect(ledger.path).iterdump())
    assert "how do we deploy" not in dump and "assistant: hello" not in dump


def test_a_luxus_last_recall_snapshot_document_is_one_record(
    ledger: EvidenceLedger, tmp_path: Path
) -> None:
    snapshot = {
        "createdAt": _iso(500),
        "query": "what is the deploy target",
        "rendered": "<hindsight_memories>\n- Zephyr cluster\n</hindsight_memories>",
        "blocks": [
            {
                "bankId": "project-bank",
                "query": "what is the deploy target",
                "rendered": "- Zephyr cluster",
                "memoryCount": 1,
                "results": [{"id": "mem-1", "text": "Zephyr cluster", "type": "world"}],
            }
        ],
        "failed": 0,
    }
    path = tmp_path / "last-recall.json"
    path.write_text(json.dumps(snapshot, indent=2) + "\n")  # pretty-printed, as luxus writes it
    report = migrate_file(ledger, path)
    assert report.mode == "document" and report.imported == 1 and report.complete
    (record,) = ledger.list().records
    assert record.source == "legacy:luxus-last-recall"
    assert record.bank_ids == ("project-bank",) and record.record_ids == ("mem-1",)
    assert record.outcome == "delivered" and record.meta["blockCount"] == 1
    failed = {**snapshot, "createdAt": _iso(400), "rendered": "", "blocks": [], "failed": 1}
    failed["failures"] = [{"bankId": "project-bank", "error": "recall timed out after 30000ms"}]
    lines = _write_lines(tmp_path / "snapshots.jsonl", [failed])  # one snapshot per line also works
    assert migrate_file(ledger, lines).imported == 1
    outcomes = {r.outcome for r in ledger.list().records}
    assert outcomes == {"delivered", "backend_unavailable"}


def test_the_documented_v1_format_accepts_aliases_and_keeps_unknown_fields(
    ledger: EvidenceLedger, tmp_path: Path
) -> None:
    path = _write_lines(
        tmp_path / "v1.jsonl",
        [
            _v1(1, attached=True, confirmed=False, payloadBytes=900, pluginVersion="0.3"),
            {
                "request_id": "snake",
                "timestamp": int((time.time() - 50) * 1000),  # epoch milliseconds
                "status": "empty",
                "bank": "b",
                "session_id": "sess-9",
            },
            {"retrievalId": "r-x", "ts": time.time() - 40, "rendered": "- a memory"},
        ],
    )
    report = migrate_file(ledger, path)
    assert report.imported == 3 and report.totals.formats == {"pi-hindsight-v1": 3}
    first = ledger.show("legacy-req-00001")
    assert first is not None
    assert first.record.attached is True and first.record.confirmed is False
    assert first.record.payload_bytes == 900 and first.record.meta == {"pluginVersion": "0.3"}
    snake = ledger.show("snake")
    assert snake is not None and snake.record.outcome == "nothing_found"
    assert snake.record.session_id == "sess-9" and snake.record.bank_ids == ("b",)
    inferred = ledger.show("r-x")
    assert inferred is not None and inferred.record.outcome == "delivered"
    assert inferred.body == "- a memory"


def test_bad_lines_are_counted_with_their_numbers_and_never_stop_the_migration(
    ledger: EvidenceLedger, tmp_path: Path
) -> None:
    good = [_v1(n) for n in range(6)]
    path = _write_lines(
        tmp_path / "mixed.jsonl",
        good,
        raw={
            1: "{not json",
            3: "[1, 2, 3]",
            5: json.dumps({"outcome": "delivered", "body": "x"}),  # no timestamp
            7: json.dumps({"ts": _iso(10), "outcome": "wonderful", "body": "x"}),
            8: "",  # blank lines are not counted at all
        },
    )
    report = migrate_file(ledger, path)
    assert report.imported == 6 and report.complete
    assert report.totals.bad == 4
    lines = [line for line, _ in report.totals.bad_lines]
    assert lines == [2, 4, 6, 8]
    reasons = dict(report.totals.bad_lines)
    assert reasons[2].startswith("not JSON")
    assert reasons[4] == "not a JSON object but list"
    assert reasons[6] == "no readable timestamp"
    assert reasons[8] == "unknown outcome 'wonderful'"


def test_lines_older_than_the_retention_period_are_skipped(
    ledger: EvidenceLedger, tmp_path: Path
) -> None:
    path = _write_lines(
        tmp_path / "old.jsonl", [_v1(1), {**_v1(2), "preparedAt": _iso(40 * 86_400)}]
    )
    report = migrate_file(ledger, path)
    assert report.imported == 1
    assert report.totals.skipped == {"older than the retention period": 1}


def test_an_interrupted_migration_resumes_exactly_where_it_stopped(
    ledger: EvidenceLedger, tmp_path: Path
) -> None:
    objects: list[object] = [_v1(n) for n in range(95)]
    path = _write_lines(tmp_path / "big.jsonl", objects, raw={12: "garbage", 40: "more garbage"})
    batches: list[int] = []

    def interrupt(source: LegacySource) -> None:
        batches.append(source.next_line)
        if len(batches) == 2:
            raise KeyboardInterrupt  # the user pressed Ctrl-C after the second batch

    with pytest.raises(KeyboardInterrupt):
        migrate_file(ledger, path, batch_lines=10, progress=interrupt)
    stopped = batches[-1]
    assert ledger.stats().records == 20
    report = migrate_file(ledger, path, batch_lines=10)
    assert report.resumed_at_line == stopped
    assert report.imported == 75 and report.duplicates == 0
    assert report.totals.imported == 95 and report.totals.bad == 2
    assert [line for line, _ in report.totals.bad_lines] == [13, 41]
    assert ledger.stats().records == 95
    again = migrate_file(ledger, path)  # complete: nothing left to read
    assert again.imported == 0 and again.resumed_at_line == report.next_line


_CHILD = """
import sys
from pathlib import Path
from pi_hindsight.stores.evidence import EvidenceLedger
from pi_hindsight.legacy.evidence_import import migrate_file
ledger = EvidenceLedger(Path(sys.argv[1]), retention_days=30, cap_bytes=500_000_000)
migrate_file(ledger, Path(sys.argv[2]), batch_lines=100)
"""


def test_a_process_killed_mid_migration_resumes_without_duplicates_or_gaps(
    tmp_path: Path,
) -> None:
    """SIGKILL lands inside a batch transaction: its rows and its cursor are both rolled back."""
    state = tmp_path / "state"
    count = 30_000
    path = _write_lines(tmp_path / "huge.jsonl", [_v1(n) for n in range(count)])
    EvidenceLedger(state, retention_days=30, cap_bytes=500_000_000).close()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(state), str(path)])
    deadline = time.monotonic() + 60
    killed_at = 0
    try:
        while time.monotonic() < deadline and child.poll() is None:
            probe = sqlite3.connect(state / "evidence.sqlite", timeout=5)
            row = probe.execute("SELECT max(next_line) FROM legacy_sources").fetchone()
            probe.close()
            if row[0]:
                os.kill(child.pid, signal.SIGKILL)
                killed_at = row[0]
                break
            time.sleep(0.005)
    finally:
        child.wait(timeout=30)
    if killed_at == 0 or child.returncode != -signal.SIGKILL:
        pytest.skip("the child finished before it could be killed")
    ledger = EvidenceLedger(state, retention_days=30, cap_bytes=500_000_000)
    try:
        before = ledger.stats().records
        source = ledger.list(limit=1).records  # the ledger is readable after the crash
        assert source
        report = migrate_file(ledger, path, batch_lines=100)
        assert report.resumed_at_line >= killed_at
        assert report.resumed_at_line == before  # every committed line has exactly one row
        assert report.duplicates == 0
        assert report.totals.imported == count
        assert ledger.stats().records == count
        ids = ledger._connection.execute("SELECT count(DISTINCT request_id) FROM requests")
        assert ids.fetchone()[0] == count
    finally:
        ledger.close()


def test_the_migration_refuses_to_exceed_the_cap_and_deletes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    bodies = [_v1(n, body="<hindsight-memory>\n" + f"- fact {n} " * 150) for n in range(350)]
    path = _write_lines(tmp_path / "legacy.jsonl", bodies)  # ~ 600 kB of originals
    original = hashlib.sha256(path.read_bytes()).hexdigest()
    ledger = EvidenceLedger(state, retention_days=30, cap_bytes=1_000_000)
    try:
        with pytest.raises(MigrationNoSpace) as stopped:
            migrate_file(ledger, path, batch_lines=20)
        error = stopped.value
        assert "Nothing was deleted and the cap was not raised" in str(error)
        assert "count against the cap" in str(error)
        assert error.hint is not None and "resumes at line" in error.hint
        partial = error.report.next_line
        assert 0 < partial < 350 and ledger.stats().records == partial
        assert hashlib.sha256(path.read_bytes()).hexdigest() == original  # original untouched
        stats = ledger.stats()
        assert stats.cap_bytes == 1_000_000 and stats.legacy_bytes == path.stat().st_size
        assert stats.used_bytes <= (1_000_000 - stats.legacy_bytes) * 0.9
        assert stats.cap_evicted == 0  # nothing was evicted to make room
        with pytest.raises(MigrationNoSpace):  # still no room: no progress, no damage
            migrate_file(ledger, path, batch_lines=20)
        assert ledger.stats().records == partial
    finally:
        ledger.close()
    roomy = EvidenceLedger(state, retention_days=30, cap_bytes=5_000_000)  # the user raised it
    try:
        report = migrate_file(roomy, path, batch_lines=20)
        assert report.resumed_at_line == partial and report.complete
        assert roomy.stats().records == 350
    finally:
        roomy.close()


def test_no_room_at_all_fails_before_reading(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "legacy.jsonl", [_v1(n) for n in range(10)])
    path.write_bytes(path.read_bytes() + b" " * 1_200_000)  # an original bigger than the cap
    ledger = EvidenceLedger(tmp_path / "state", retention_days=30, cap_bytes=1_000_000)
    try:
        with pytest.raises(MigrationNoSpace, match="no room left"):
            migrate_file(ledger, path)
        assert ledger.stats().records == 0
    finally:
        ledger.close()


def test_an_unfinished_last_line_waits_for_its_writer(
    ledger: EvidenceLedger, tmp_path: Path
) -> None:
    complete = json.dumps(_v1(1)) + "\n"
    partial = json.dumps(_v1(2))
    path = tmp_path / "live.jsonl"
    path.write_text(complete + partial[:40])
    first = migrate_file(ledger, path)
    assert first.imported == 1 and first.pending_tail and not first.complete
    path.write_text(complete + partial + "\n")  # the writer finished the line
    second = migrate_file(ledger, path)
    assert second.imported == 1 and second.complete and second.resumed_at_line == 1


def test_a_copied_or_overlapping_file_adds_no_duplicates(
    ledger: EvidenceLedger, tmp_path: Path
) -> None:
    lines = [_v1(n) for n in range(5)]
    original = _write_lines(tmp_path / "a.jsonl", lines)
    assert migrate_file(ledger, original).imported == 5
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(original.read_bytes())
    assert migrate_file(ledger, copy).imported == 0  # same identity: already complete
    overlap = _write_lines(tmp_path / "b.jsonl", [_v1(99), *lines])  # a different file
    report = migrate_file(ledger, overlap)
    assert report.imported == 1 and report.duplicates == 5
    assert ledger.stats().records == 6


def test_an_unreadable_legacy_file_raises_state_error(
    ledger: EvidenceLedger, tmp_path: Path
) -> None:
    with pytest.raises(StateError, match="cannot read legacy evidence"):
        migrate_file(ledger, tmp_path / "missing.jsonl")
