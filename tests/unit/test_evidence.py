"""The evidence ledger (evidence.sqlite) against real SQLite in temp dirs."""

from __future__ import annotations

import shutil
import sqlite3
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pi_hindsight.errors import StateError
from pi_hindsight.stores.evidence import (
    EVIDENCE_FILE_NAME,
    EvidenceLedger,
    MemoInfo,
    PreparedRecord,
)

DAY = 86_400.0
BODY = "<hindsight-memory>\n" + "- (2025-01-01) the deploy target is Zephyr in Frankfurt\n" * 20


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[EvidenceLedger]:
    store = EvidenceLedger(tmp_path / "state", retention_days=30, cap_bytes=50_000_000)
    yield store
    store.close()


def _deliver(ledger: EvidenceLedger, request_id: str, **overrides: object) -> None:
    values: dict[str, object] = {
        "outcome": "delivered",
        "session_id": "session-1",
        "scope_id": "project:alpha",
        "bank_ids": ["pi-coding"],
        "body": BODY,
        "record_ids": ["rec-1", "rec-2"],
        "recall_ms": 40.5,
        "total_ms": 44.0,
        "tokens": 120,
    }
    values.update(overrides)
    ledger.record_prepared(PreparedRecord(request_id, **values))  # type: ignore[arg-type]


def test_prepared_attached_confirmed_are_three_separate_facts(ledger: EvidenceLedger) -> None:
    _deliver(ledger, "req-1", memo=MemoInfo(memo_id="memo-7", refreshed_at="2025-01-30T10:00:00Z"))
    record = ledger.show("req-1")
    assert record is not None
    assert record.body == BODY
    assert (record.record.attached, record.record.confirmed) == (None, None)  # unknown so far
    assert record.record.memo == MemoInfo(memo_id="memo-7", refreshed_at="2025-01-30T10:00:00Z")

    assert ledger.mark_attached("req-1")
    after_attach = ledger.show("req-1")
    assert after_attach is not None and after_attach.record.attached is True
    assert after_attach.record.entry_id is None
    # The Pi entry id and session file arrive later; they fill in, the attach time stays.
    assert ledger.mark_attached("req-1", entry_id="b8a32b24", transcript_path="/s/x.jsonl")
    later = ledger.show("req-1")
    assert later is not None
    assert later.record.entry_id == "b8a32b24" and later.record.transcript_path == "/s/x.jsonl"
    assert later.record.attached_at == after_attach.record.attached_at

    assert ledger.mark_confirmed("req-1", True, payload_bytes=12_345)
    final = ledger.show("req-1")
    assert final is not None
    assert final.record.confirmed is True and final.record.payload_bytes == 12_345
    assert final.record.confirmed_at is not None


def test_memory_missing_from_the_payload_is_recorded_as_not_confirmed(
    ledger: EvidenceLedger,
) -> None:
    """A request whose provider payload did not contain the memory: confirmed = false."""
    _deliver(ledger, "req-miss")
    assert ledger.mark_attached("req-miss", entry_id="e1")
    assert ledger.mark_confirmed("req-miss", False, payload_bytes=2_048)
    detail = ledger.show("req-miss")
    assert detail is not None
    assert detail.record.attached is True and detail.record.confirmed is False
    stats = ledger.stats()
    assert stats.delivered_confirmed == {"true": 0, "false": 1, "unknown": 0}
    # Records whose memory did not reach the payload are not "already delivered".
    assert ledger.delivered_record_ids("session-1") == frozenset()


def test_a_confirmed_payload_implies_attached_but_never_overrides_an_explicit_no(
    ledger: EvidenceLedger,
) -> None:
    _deliver(ledger, "a")
    _deliver(ledger, "b")
    ledger.mark_confirmed("a", True, 100)
    ledger.mark_attached("b", attached=False)
    ledger.mark_confirmed("b", True, 100)
    a, b = ledger.show("a"), ledger.show("b")
    assert a is not None and b is not None
    assert a.record.attached is True and a.record.attached_at is not None
    assert b.record.attached is False


def test_marks_for_unknown_requests_report_that_nothing_changed(ledger: EvidenceLedger) -> None:
    assert not ledger.mark_attached("nope")
    assert not ledger.mark_confirmed("nope", True, 1)
    assert ledger.show("nope") is None


def test_the_first_record_of_a_request_wins(ledger: EvidenceLedger) -> None:
    assert ledger.record_prepared(PreparedRecord("r", outcome="nothing_found", session_id="s"))
    assert not ledger.record_prepared(
        PreparedRecord("r", outcome="error", session_id="s", reason="late")
    )
    detail = ledger.show("r")
    assert detail is not None and detail.record.outcome == "nothing_found"


def test_every_outcome_is_kept_with_its_reason(ledger: EvidenceLedger) -> None:
    ledger.record_prepared(
        PreparedRecord("n", outcome="nothing_found", session_id="s", scope_id="project:a")
    )
    ledger.record_prepared(
        PreparedRecord("k", outcome="skipped", session_id="s", reason="empty prompt")
    )
    ledger.record_prepared(
        PreparedRecord("u", outcome="backend_unavailable", session_id="s", reason="timeout")
    )
    ledger.record_prepared(
        PreparedRecord("x", outcome="not_registered", session_id="s", reason="/tmp/x")
    )
    ledger.record_prepared(PreparedRecord("e", outcome="error", session_id="s", reason="boom"))
    by_outcome = ledger.stats().by_outcome
    assert by_outcome == {
        "nothing_found": 1,
        "skipped": 1,
        "backend_unavailable": 1,
        "not_registered": 1,
        "error": 1,
    }
    skipped = ledger.show("k")
    assert skipped is not None and skipped.record.reason == "empty prompt"
    assert skipped.body is None
    with pytest.raises(StateError, match="unknown evidence outcome"):
        ledger.record_prepared(PreparedRecord("bad", outcome="great", session_id="s"))  # type: ignore[arg-type]


def test_delivered_record_ids_are_per_session_and_skip_known_misses(
    ledger: EvidenceLedger,
) -> None:
    _deliver(ledger, "1", record_ids=["a", "b"])
    _deliver(ledger, "2", record_ids=["c"])
    _deliver(ledger, "3", record_ids=["d"])
    _deliver(ledger, "4", record_ids=["e"], session_id="other")
    ledger.mark_attached("3", attached=False)
    ledger.record_prepared(PreparedRecord("5", outcome="nothing_found", session_id="session-1"))
    assert ledger.delivered_record_ids("session-1") == frozenset({"a", "b", "c"})
    assert ledger.delivered_record_ids("other") == frozenset({"e"})


def test_bodies_live_in_their_own_table_and_listing_never_reads_them(
    ledger: EvidenceLedger,
) -> None:
    for n in range(30):
        _deliver(ledger, f"req-{n:02d}", scope_id=f"project:{n % 2}")
    columns = {
        row[1] for row in sqlite3.connect(ledger.path).execute("PRAGMA table_info(requests)")
    }
    assert "body" not in columns
    reads: set[str] = set()

    def authorizer(action: int, table: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_READ and table:
            reads.add(table)
        return sqlite3.SQLITE_OK

    ledger._connection.set_authorizer(authorizer)  # test-only: watch what the query reads
    try:
        page = ledger.list(limit=10)
        ledger.list(scope="project:1", limit=5, before=page.next_cursor)
        ledger.stats()
        ledger.delivered_record_ids("session-1")
        assert "bodies" not in reads and "requests" in reads
        ledger.show("req-01")
        assert "bodies" in reads
    finally:
        ledger._connection.set_authorizer(None)


def test_list_pages_newest_first_with_filters(ledger: EvidenceLedger) -> None:
    now = time.time()
    for n in range(25):
        _deliver(
            ledger,
            f"req-{n:02d}",
            prepared_at=now - (25 - n) * 60,
            session_id=f"s{n % 3}",
            scope_id=f"project:{n % 2}",
        )
    seen: list[str] = []
    cursor = None
    while True:
        page = ledger.list(limit=7, before=cursor)
        seen.extend(record.request_id for record in page.records)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"req-{n:02d}" for n in reversed(range(25))]
    scoped = ledger.list(scope="project:0", limit=100).records
    assert [r.request_id for r in scoped] == [f"req-{n:02d}" for n in range(24, -1, -2)]
    session = ledger.list(session="s1", scope="project:1", limit=100).records
    assert {r.request_id for r in session} == {f"req-{n:02d}" for n in (1, 7, 13, 19)}
    recent = ledger.list(since=now - 5.5 * 60, limit=100).records
    assert [r.request_id for r in recent] == ["req-24", "req-23", "req-22", "req-21", "req-20"]
    assert ledger.list(outcome="error").records == ()
    with pytest.raises(StateError, match="not a list cursor"):
        ledger.list(before="garbage")


def test_ids_resolve_from_a_unique_prefix(ledger: EvidenceLedger) -> None:
    _deliver(ledger, "0190aaaa-1111")
    _deliver(ledger, "0190aaaa-2222")
    assert ledger.resolve_id("0190aaaa-1111") == "0190aaaa-1111"
    assert ledger.resolve_id("0190aaaa-2") == "0190aaaa-2222"
    assert ledger.resolve_id("0190") is None  # too short to guess
    with pytest.raises(StateError, match="ambiguous"):
        ledger.resolve_id("0190aaaa")


def test_retention_removes_old_records_with_their_bodies(tmp_path: Path) -> None:
    state = tmp_path / "state"
    ledger = EvidenceLedger(state, retention_days=7, cap_bytes=50_000_000)
    now = time.time()
    _deliver(ledger, "old", prepared_at=now - 8 * DAY)
    _deliver(ledger, "new", prepared_at=now - 6 * DAY)
    result = ledger.enforce_limits()
    assert result.expired == 1 and result.evicted == 0
    assert ledger.show("old") is None and ledger.show("new") is not None
    assert ledger._connection.execute("SELECT count(*) FROM bodies").fetchone()[0] == 1
    _deliver(ledger, "older", prepared_at=now - 9 * DAY)
    ledger.close()
    reopened = EvidenceLedger(state, retention_days=7, cap_bytes=50_000_000)  # swept on open
    try:
        assert reopened.show("older") is None
        assert not reopened.stats().retention_shortened
    finally:
        reopened.close()


def _disk(path: Path) -> int:
    return sum(
        path.with_name(path.name + suffix).stat().st_size
        for suffix in ("", "-wal", "-shm")
        if path.with_name(path.name + suffix).exists()
    )


def test_the_cap_holds_within_two_percent_under_a_flood_and_says_it_cut_retention(
    tmp_path: Path,
) -> None:
    cap = 1_000_000
    ledger = EvidenceLedger(tmp_path / "state", retention_days=30, cap_bytes=cap)
    try:
        now = time.time()
        peak = 0
        for n in range(1_500):  # ~3.5 MB of bodies into a 1 MB cap
            _deliver(ledger, f"req-{n:05d}", prepared_at=now - (1_500 - n) * 60)
            peak = max(peak, _disk(ledger.path))
        assert peak <= cap * 1.02, f"peak {peak} bytes over a {cap} byte cap"
        stats = ledger.stats()
        assert stats.disk_bytes <= cap
        assert stats.cap_evicted > 0 and stats.retention_shortened
        assert "retention shortened to" in stats.retention_note
        assert "by the 1.0 MB cap" in stats.retention_note
        # The oldest went first; the newest are all there.
        assert ledger.show("req-00000") is None and ledger.show("req-01499") is not None
        newest = ledger.list(limit=50).records
        assert [r.request_id for r in newest][:3] == ["req-01499", "req-01498", "req-01497"]
        orphans = ledger._connection.execute(
            "SELECT count(*) FROM bodies WHERE seq NOT IN (SELECT seq FROM requests)"
        ).fetchone()[0]
        assert orphans == 0
    finally:
        ledger.close()


def test_lowering_the_cap_shrinks_the_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    big = EvidenceLedger(state, retention_days=30, cap_bytes=5_000_000)
    for n in range(2_000):
        _deliver(big, f"r{n}")
    big.close()
    assert _disk(state / EVIDENCE_FILE_NAME) > 1_500_000
    small = EvidenceLedger(state, retention_days=30, cap_bytes=1_000_000)
    try:
        small.enforce_limits()
        assert _disk(small.path) <= 1_000_000
    finally:
        small.close()


def test_files_are_owner_only_including_the_wal(ledger: EvidenceLedger) -> None:
    _deliver(ledger, "r")
    assert stat.S_IMODE(ledger.path.parent.stat().st_mode) == 0o700
    for suffix in ("", "-wal", "-shm"):
        path = ledger.path.with_name(ledger.path.name + suffix)
        assert path.exists(), path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    journal = ledger._connection.execute("PRAGMA journal_mode").fetchone()[0]
    assert journal == "wal"
    assert ledger._connection.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental


def test_a_damaged_file_is_set_aside_and_a_fresh_ledger_works(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / EVIDENCE_FILE_NAME).write_bytes(b"definitely not sqlite" * 200)
    ledger = EvidenceLedger(state, retention_days=30, cap_bytes=50_000_000)
    try:
        assert ledger.set_aside is not None and ledger.set_aside.moved_to.exists()
        _deliver(ledger, "r")
        assert ledger.show("r") is not None
    finally:
        ledger.close()


def test_a_file_damaged_while_open_raises_only_state_error(tmp_path: Path) -> None:
    ledger = EvidenceLedger(tmp_path / "state", retention_days=30, cap_bytes=50_000_000)
    try:
        for n in range(300):
            _deliver(ledger, f"r{n}")
        ledger.enforce_limits()  # checkpoint: the data is in the main file
        ledger._connection.execute("PRAGMA cache_size = -16")  # test-only: read pages from disk
        with ledger.path.open("r+b") as handle:  # overwrite everything after the header page
            handle.seek(4096)
            handle.write(b"\xff" * (ledger.path.stat().st_size - 4096))
        with pytest.raises(StateError, match="evidence store"):
            ledger.stats()
        with pytest.raises(StateError, match="evidence store"):
            _deliver(ledger, "after")
    finally:
        ledger.close()


def test_a_locked_ledger_fails_fast_with_state_error(tmp_path: Path) -> None:
    ledger = EvidenceLedger(
        tmp_path / "state", retention_days=30, cap_bytes=50_000_000, busy_timeout_ms=100
    )
    other = sqlite3.connect(ledger.path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with pytest.raises(StateError, match="locked"):
            _deliver(ledger, "r")
        assert time.monotonic() - started < 2.0
        other.execute("ROLLBACK")
        _deliver(ledger, "r")  # usable again once the lock is gone
    finally:
        other.close()
        ledger.close()


def test_a_closed_ledger_raises_state_error(tmp_path: Path) -> None:
    ledger = EvidenceLedger(tmp_path / "state", retention_days=30, cap_bytes=50_000_000)
    ledger.close()
    with pytest.raises(StateError):
        ledger.list()


def test_an_unusable_location_raises_state_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the state directory should be")
    with pytest.raises(StateError, match="cannot open"):
        EvidenceLedger(blocker / "state", retention_days=30, cap_bytes=50_000_000)


def test_a_read_only_evidence_file_raises_state_error(tmp_path: Path) -> None:
    """Root ignores file modes, so the file is made immutable (chattr +i) instead."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not available")
    state = tmp_path / "state"
    EvidenceLedger(state, retention_days=30, cap_bytes=50_000_000).close()
    path = state / EVIDENCE_FILE_NAME
    made = subprocess.run(["chattr", "+i", str(path)], check=False, capture_output=True)
    if made.returncode != 0:
        pytest.skip("cannot make a file immutable here (needs CAP_LINUX_IMMUTABLE on ext4)")
    try:
        with pytest.raises(StateError):
            EvidenceLedger(state, retention_days=30, cap_bytes=50_000_000)
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_newer_schema_is_refused_with_state_error(tmp_path: Path) -> None:
    state = tmp_path / "state"
    EvidenceLedger(state, retention_days=30, cap_bytes=50_000_000).close()
    raw = sqlite3.connect(state / EVIDENCE_FILE_NAME)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(StateError, match="newer"):
        EvidenceLedger(state, retention_days=30, cap_bytes=50_000_000)


def test_stats_count_states_sizes_and_limits(ledger: EvidenceLedger) -> None:
    _deliver(ledger, "a")
    _deliver(ledger, "b")
    ledger.mark_confirmed("a", True, 10)
    ledger.record_prepared(PreparedRecord("c", outcome="nothing_found", session_id="s"))
    stats = ledger.stats()
    assert stats.records == 3
    assert stats.by_outcome == {"delivered": 2, "nothing_found": 1}
    assert stats.delivered_attached == {"true": 1, "false": 0, "unknown": 1}
    assert stats.delivered_confirmed == {"true": 1, "false": 0, "unknown": 1}
    assert stats.disk_bytes >= stats.used_bytes > 0
    assert stats.budget_bytes == stats.cap_bytes == 50_000_000
    assert stats.retention_note == "retention 30 days, cap 50.0 MB"
    assert stats.to_json()["retentionShortened"] is False


def test_status_without_counts_reads_no_rows_and_still_reports_the_limits(
    ledger: EvidenceLedger,
) -> None:
    _deliver(ledger, "a", prepared_at=time.time() - 3 * DAY)
    reads: list[str] = []

    def authorizer(action: int, table: str | None, column: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_READ and table == "requests":
            reads.append(column or "")
        return sqlite3.SQLITE_OK

    ledger._connection.set_authorizer(authorizer)  # test-only: watch what the query reads
    try:
        cheap = ledger.stats(counts=False)
    finally:
        ledger._connection.set_authorizer(None)
    assert set(reads) == {"prepared_at"}  # min/max from the index, no count scan
    assert cheap.records is None and cheap.by_outcome is None
    assert cheap.retention_note == "retention 30 days, cap 50.0 MB"
    assert cheap.oldest_at is not None and cheap.disk_bytes > 0
