"""Damaged store files (issue 9): a damaged store never passes for an empty one, every process
reports a set-aside store until it is acknowledged or restored, and restoring brings back what the
set-aside file still holds. Real SQLite files, real child processes killed with SIGKILL.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_hindsight.cli.main import cli
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.evidence import EvidenceLedger
from pi_hindsight.stores.outbox import Outbox
from pi_hindsight.stores.set_aside import RECORD_FILE_NAME, SetAsideRecord
from tests.support.outbox import retain_request

ENV = dict(os.environ)


def _enqueue(outbox: Outbox, count: int, *, session: str = "s") -> list[str]:
    return [
        outbox.enqueue(
            retain_request(
                session_id=session,
                bank_id="b",
                payload={"items": [{"content": f"turn {n} " + "x" * 400, "document_id": "d"}]},
                request_id=f"r{n}",
            )
        )
        for n in range(count)
    ]


def _cli(state: Path, *args: str) -> tuple[int, str]:
    """The CLI in another process: what *the next process* reports, not this one's memory
    (stdout; stderr too unless the output is JSON)."""
    completed = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", *args, "--state-dir", str(state)],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
        check=False,
    )
    if "--json" in args:
        return completed.returncode, completed.stdout
    return completed.returncode, completed.stdout + completed.stderr


def _register(catalog: Catalog, tmp_path: Path, name: str) -> None:
    location = tmp_path / name
    location.mkdir()
    catalog.register(
        scope_id=f"project:{name}",
        project_id=name,
        identity_source="directory",
        bank_id="bank",
        tags=(f"project:{name}",),
        location=location,
        consent="cli",
    )


# -- 0-byte and marker-less files ----------------------------------------------------------


def test_a_zero_byte_outbox_is_set_aside_and_reported_by_the_next_process(
    tmp_path: Path,
) -> None:
    """Bug: truncating outbox.sqlite to 0 bytes recreated it empty with no set-aside and no
    warning (7 pending retains gone, `status` said "0 pending")."""
    state = tmp_path / "state"
    outbox = Outbox(state)
    _enqueue(outbox, 7)
    outbox.close()
    os.truncate(state / "outbox.sqlite", 0)
    for leftover in state.glob("outbox.sqlite-*"):
        leftover.unlink()

    outbox = Outbox(state)
    try:
        assert outbox.set_aside is not None
        assert "empty (0 bytes)" in outbox.set_aside.reason
        assert outbox.set_aside.moved_to.exists() and outbox.set_aside.moved_to.stat().st_size == 0
    finally:
        outbox.close()
    # Another process (a later `status`, `outbox status`) still reports it.
    code, out = _cli(state, "outbox", "status", "--json")
    reports = json.loads(out)["setAsideReports"]
    assert code == 0 and [r["store"] for r in reports] == ["outbox"]
    assert "empty (0 bytes)" in reports[0]["reason"]
    code, out = _cli(state, "status", "--no-server")
    assert code == 0 and "set aside:" in out and "retain outbox" in out, out


def test_a_zero_byte_catalog_turns_memory_off_with_a_hint_naming_the_file_and_restore(
    tmp_path: Path,
) -> None:
    """Bug: a 0-byte catalog.sqlite was recreated empty: both registrations gone, memory "OFF —
    not registered" with no hint why."""
    state = tmp_path / "state"
    catalog = Catalog(state)
    _register(catalog, tmp_path, "alpha")
    catalog.close()
    os.truncate(state / "catalog.sqlite", 0)

    code, out = _cli(state, "status", "--no-server", "--json", "--cwd", str(tmp_path / "alpha"))
    data = json.loads(out)
    (event,) = data["setAside"]
    assert code == 0 and not data["registered"]
    assert event["moved_to"] in data["offReason"]
    assert f"state restore {event['id']}" in data["offReason"]
    assert "scope import" in data["offReason"]
    code, out = _cli(state, "scope", "list")
    assert code == 0 and event["id"] in out and "scope catalogue" in out


@pytest.mark.parametrize("kind", ["empty-sqlite", "foreign-tables", "no-version"])
def test_an_existing_file_without_our_schema_marker_is_set_aside_not_initialised(
    tmp_path: Path, kind: str
) -> None:
    """Bug: an existing SQLite file with application_id 0 and no tables looked "blank" and was
    initialised in place; any existing file without our marker must be set aside."""
    state = tmp_path / "state"
    state.mkdir()
    path = state / "outbox.sqlite"
    connection = sqlite3.connect(path)
    if kind == "empty-sqlite":
        connection.execute("PRAGMA user_version = 0")
        connection.execute("CREATE TABLE t (x)")
        connection.execute("DROP TABLE t")  # a valid SQLite file with no tables at all
    elif kind == "foreign-tables":
        connection.execute("CREATE TABLE notes (x)")
    else:
        connection.execute("PRAGMA application_id = 1346916145")  # ours ("PHO1"), no version
        connection.execute("CREATE TABLE notes (x)")
    connection.commit()
    connection.close()
    original = path.read_bytes()
    outbox = Outbox(state)
    try:
        assert outbox.set_aside is not None
        assert outbox.set_aside.moved_to.read_bytes() == original
    finally:
        outbox.close()
    assert [e.store for e in SetAsideRecord(state).open_events()] == ["outbox"]


def _open_store_in_child(kind: str, state: str, barrier: Any, results: Any) -> None:
    barrier.wait(timeout=60)  # every process opens the fresh store at the same moment
    if kind == "outbox":
        store: Any = Outbox(Path(state))
    elif kind == "catalog":
        store = Catalog(Path(state))
    else:
        store = EvidenceLedger(Path(state), retention_days=1, cap_bytes=10_000_000)
    results.put("set aside" if store.set_aside is not None else "ok")
    store.close()


@pytest.mark.parametrize("kind", ["outbox", "catalog", "evidence"])
def test_a_fresh_store_opened_by_many_processes_at_once_is_never_set_aside(
    tmp_path: Path, kind: str
) -> None:
    """Bug guard: creating a store must be race-free — a concurrent opener must never see our
    own half-created (0-byte) file as damaged and set it aside."""
    # Forked from a server that has imported this module once: 48 fresh interpreters importing
    # the stores cost most of a minute of CPU; the race is the same between forked processes.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    for round_ in range(2):
        state = tmp_path / f"state-{round_}"
        barrier, results = context.Barrier(8), context.Queue()
        processes = [
            context.Process(target=_open_store_in_child, args=(kind, str(state), barrier, results))
            for _ in range(8)
        ]
        for process in processes:
            process.start()
        outcomes = sorted(results.get(timeout=120) for _ in processes)
        for process in processes:
            process.join(timeout=60)
        assert outcomes == ["ok"] * 8
        assert not list(state.glob("*.corrupt-*")) and not SetAsideRecord(state).events()
        assert not list(state.glob(".*.new-*"))  # no temporary file left behind


# -- damaged write-ahead log / main file after a crash ---------------------------------------

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pi_hindsight.backend.resources import RetainItem
    from pi_hindsight.stores.outbox import Outbox
    from pi_hindsight.stores.outbox_items import RetainRequest
    outbox = Outbox(Path(sys.argv[1]))
    for n in range(int(sys.argv[2])):
        item = RetainItem(content=f"turn {n} " + "x" * 400, document_id="", tags=())
        outbox.enqueue(RetainRequest("s", "b", item, f"r{n}"))
    print("committed", flush=True)
    sys.stdin.read()
    """
)


def _commit_then_kill(state: Path, rows: int) -> None:
    """Commit ``rows`` in a child process and SIGKILL it: nothing is checkpointed at close."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(state), str(rows)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "committed"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdin.close()  # type: ignore[union-attr]
    child.stdout.close()


def _truncate_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _overwrite_middle(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        handle.write(b"\xa5" * 1024)


def _zero_header(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.write(b"\0" * 100)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncate": _truncate_half,
    "overwrite-middle": _overwrite_middle,
    "zero-header": _zero_header,
}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("target", ["outbox.sqlite-wal", "outbox.sqlite"])
def test_committed_rows_survive_or_the_damage_is_reported_never_silently_fewer(
    tmp_path: Path, damage: str, target: str
) -> None:
    """Bug: damage to outbox.sqlite-wal silently lost the rows not yet checkpointed (SQLite
    ignores frames after a bad checksum). Now every committed row is there, or the file is set
    aside and reported — never a store with silently fewer rows."""
    state = tmp_path / "state"
    rows = 80  # all in the log: an automatic checkpoint would move them to the main file
    _commit_then_kill(state, rows)
    assert (state / "outbox.sqlite-wal").stat().st_size > 0  # the rows sit in the log
    DAMAGE[damage](state / target)

    outbox = Outbox(state)
    try:
        if outbox.set_aside is None:
            assert outbox.unfinished_count() == rows
        else:
            assert outbox.unfinished_count() == 0  # a fresh outbox
            (event,) = SetAsideRecord(state).open_events()
            assert event.store == "outbox" and event.moved_to == str(outbox.set_aside.moved_to)
    finally:
        outbox.close()


def test_a_damaged_evidence_log_is_reported_not_silent(tmp_path: Path) -> None:
    """Bug: damage to evidence.sqlite-wal silently lost the records not yet checkpointed.
    Evidence is diagnostics: the loss is reported (set aside, acknowledge)."""
    state = tmp_path / "state"
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from pi_hindsight.stores.evidence import EvidenceLedger, PreparedRecord
        ledger = EvidenceLedger(Path(sys.argv[1]), retention_days=30, cap_bytes=50_000_000)
        for n in range(60):
            ledger.record_prepared(PreparedRecord(f"r{n}", outcome="nothing_found", session_id="s",
                                   scope_id=None, bank_ids=(), transcript_path=None, reason=None,
                                   body=None, record_ids=(), omitted=0, tokens=0, recall_ms=1,
                                   total_ms=1))
        print("committed", flush=True)
        sys.stdin.read()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "committed"
    child.kill()
    child.wait(timeout=30)
    child.stdin.close()  # type: ignore[union-attr]
    child.stdout.close()
    _truncate_half(state / "evidence.sqlite-wal")
    ledger = EvidenceLedger(state, retention_days=30, cap_bytes=50_000_000)
    try:
        assert ledger.set_aside is not None and "missing" in ledger.set_aside.reason
    finally:
        ledger.close()
    code, out = _cli(state, "state", "restore", ledger.set_aside.event_id or "")
    assert code == 0 and "nothing to restore" in out
    assert SetAsideRecord(state).open_events() == []


# -- the record: every process, until acknowledged -----------------------------------------


def test_the_report_persists_across_processes_until_acknowledged(tmp_path: Path) -> None:
    """Bug: a store set aside by one process was reported only by that process; the next
    session and `status` said nothing."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "evidence.sqlite").write_bytes(b"not a database at all" * 100)
    EvidenceLedger(state, retention_days=30, cap_bytes=50_000_000).close()
    for _ in range(2):  # each later process reports it again
        code, out = _cli(state, "state", "list", "--json")
        (event,) = json.loads(out)
        assert code == 0 and event["store"] == "evidence" and event["open"]
    code, out = _cli(state, "status", "--no-server", "--json")
    assert [e["id"] for e in json.loads(out)["setAside"]] == [event["id"]]
    code, out = _cli(state, "state", "acknowledge", event["id"][:4])
    assert code == 0 and "acknowledged" in out
    code, out = _cli(state, "status", "--no-server", "--json")
    assert json.loads(out)["setAside"] == []
    code, out = _cli(state, "state", "list", "--all", "--json")
    assert json.loads(out)[0]["acknowledged_at"] is not None


def test_the_record_is_owner_only_and_an_unreadable_record_is_itself_set_aside(
    tmp_path: Path,
) -> None:
    """The record is outside every SQLite store; damaged itself, it is set aside and reported,
    never a crash and never silence."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "catalog.sqlite").write_bytes(b"\0" * 5000)
    Catalog(state).close()
    record = state / RECORD_FILE_NAME
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    record.write_text("{ broken", encoding="utf-8")
    events = SetAsideRecord(state).open_events()
    assert [e.store for e in events] == ["record"]
    assert Path(events[0].moved_to).read_text(encoding="utf-8") == "{ broken"


def test_unknown_or_ambiguous_ids_are_clear_errors(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["state", "restore", "nope", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1 and "no set-aside store matches 'nope'" in result.output
    result = CliRunner().invoke(cli, ["state", "acknowledge", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1 and "--all" in result.output


# -- restore -------------------------------------------------------------------------------


def _damage_page_of(path: Path, name: str) -> None:
    """Overwrite the root page of index or table ``name``: quick_check fails, rows stay."""
    connection = sqlite3.connect(path)
    (root,) = connection.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)
    ).fetchone()
    page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    connection.close()
    with path.open("r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\xa5" * page_size)


def test_restore_queues_the_unfinished_items_again_idempotently(tmp_path: Path) -> None:
    """Restoring a set-aside outbox salvages its unfinished items, keeping their ids, batches
    and keys; delivered ones stay delivered; a request the host sent again meanwhile is not
    stored twice; a second restore adds nothing."""
    state = tmp_path / "state"
    outbox = Outbox(state)
    ids = _enqueue(outbox, 6)
    (done,) = outbox.claim("w", max_items=2)
    outbox.mark_done(done.batch_id, "w")
    (sending,) = outbox.claim("w", max_items=2)
    outbox.close()  # checkpointed into the main file
    _damage_page_of(state / "outbox.sqlite", "items_by_state")

    outbox = Outbox(state)
    assert outbox.set_aside is not None and "integrity check failed" in outbox.set_aside.reason
    assert outbox.unfinished_count() == 0
    outbox.enqueue(
        retain_request(
            session_id="s", bank_id="b", payload={"items": [{"content": "again"}]}, request_id="r5"
        )
    )
    outbox.close()
    event_id = outbox.set_aside.event_id or ""
    code, out = _cli(state, "state", "restore", event_id, "--json")
    restored = json.loads(out)
    assert code == 0, out
    assert (restored["added"], restored["already_present"], restored["unreadable"]) == (3, 1, 0)
    outbox = Outbox(state)
    try:
        items = {item.item_id: item for item in outbox.items(limit=50)}
        assert {item.request_id for item in items.values()} == {"r2", "r3", "r4", "r5"}
        assert {items[i].state for i in ids[2:4]} == {"sending"}
        assert {items[i].batch_id for i in ids[2:4]} == {sending.batch_id}  # same key
        assert items[ids[4]].state == "ready" and ids[5] not in items
        (replay,) = outbox.claim("w2")
        assert replay.idempotency_key == sending.idempotency_key
    finally:
        outbox.close()
    code, out = _cli(state, "state", "restore", event_id, "--json")
    assert json.loads(out)["added"] == 0
    assert SetAsideRecord(state).open_events() == []


def test_restore_of_a_damaged_catalog_brings_registrations_back(tmp_path: Path) -> None:
    """A catalogue set aside for a damaged page: `state restore` imports every scope and
    location that can still be read."""
    state = tmp_path / "state"
    catalog = Catalog(state)
    for name in ("alpha", "beta"):
        _register(catalog, tmp_path, name)
    catalog.close()
    _damage_page_of(state / "catalog.sqlite", "scopes_by_project")
    catalog = Catalog(state)
    assert catalog.set_aside is not None and catalog.scopes() == []
    catalog.close()
    code, out = _cli(state, "state", "restore", catalog.set_aside.event_id or "")
    assert code == 0 and "2 scope(s) and 2 location(s) restored" in out, out
    catalog = Catalog(state)
    try:
        restored = {record.scope_id: record for record in catalog.scopes()}
        assert sorted(restored) == ["project:alpha", "project:beta"]
        assert restored["project:alpha"].locations == (str((tmp_path / "alpha").resolve()),)
    finally:
        catalog.close()


def test_restore_says_so_when_nothing_can_be_read(tmp_path: Path) -> None:
    state = tmp_path / "state"
    catalog = Catalog(state)
    _register(catalog, tmp_path, "alpha")
    catalog.close()
    _zero_header(state / "catalog.sqlite")
    catalog = Catalog(state)
    catalog.close()
    assert catalog.set_aside is not None
    code, out = _cli(state, "state", "restore", catalog.set_aside.event_id or "", "--json")
    result = json.loads(out)
    assert code == 0 and result["recovered"] == 0 and "not readable" in result["read_error"]


def test_restore_reads_around_a_damaged_page(tmp_path: Path) -> None:
    """Salvage steps over a damaged table page and counts the rowids it could not read."""
    state = tmp_path / "state"
    outbox = Outbox(state)
    _enqueue(outbox, 400)
    outbox.close()  # checkpointed: everything is in the main file
    path = state / "outbox.sqlite"
    page = 4096
    offset = path.read_bytes().index(b"turn 200 ")
    with path.open("r+b") as handle:
        handle.seek(offset // page * page)
        handle.write(b"\xff" * page)  # the leaf page holding request 200
    outbox = Outbox(state)
    assert outbox.set_aside is not None
    outbox.close()
    code, out = _cli(state, "state", "restore", outbox.set_aside.event_id or "", "--json")
    result = json.loads(out)
    assert code == 0
    assert 380 <= result["added"] < 400 and result["unreadable"] >= 400 - result["added"], result


def test_a_locked_store_is_an_error_never_set_aside(tmp_path: Path) -> None:
    """Bug guard: "database is locked" (another process mid-write) says nothing about the
    file's contents; it must never make a healthy store look damaged and be set aside."""
    from pi_hindsight.errors import CorruptStateError, StateError
    from pi_hindsight.stores.catalog import SCHEMA as CATALOG_SCHEMA
    from pi_hindsight.stores.sqlite import open_store

    state = tmp_path / "state"
    catalog = Catalog(state)
    _register(catalog, tmp_path, "alpha")
    catalog.close()
    holder = sqlite3.connect(state / "catalog.sqlite", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # rollback journal: nobody else may read now
    try:
        with pytest.raises(StateError) as raised:
            open_store(state / "catalog.sqlite", CATALOG_SCHEMA, busy_timeout_ms=100)
        assert not isinstance(raised.value, CorruptStateError)
        assert "locked" in str(raised.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not list(state.glob("*.corrupt-*")) and SetAsideRecord(state).events() == []
    catalog = Catalog(state)
    try:
        assert [record.scope_id for record in catalog.scopes()] == ["project:alpha"]
    finally:
        catalog.close()


def test_a_process_whose_outbox_was_set_aside_elsewhere_writes_to_the_live_one(
    tmp_path: Path,
) -> None:
    """Bug guard: a Pi process that had the outbox open when another process set it aside must
    not go on queueing into the set-aside file (nobody would deliver it)."""
    state = tmp_path / "state"
    running = Outbox(state)  # a long-running sidecar
    try:
        running.enqueue(
            retain_request(session_id="s", bank_id="b", payload={"items": []}, request_id="r1")
        )
        stamp = "corrupt-test"
        for suffix in ("", "-wal", "-shm"):  # what another process's set-aside does
            (state / f"outbox.sqlite{suffix}").rename(state / f"outbox.sqlite.{stamp}{suffix}")
        other = Outbox(state)  # the other process: a fresh outbox
        running.enqueue(
            retain_request(session_id="s", bank_id="b", payload={"items": []}, request_id="r2")
        )
        assert [item.request_id for item in other.items()] == ["r2"]
        assert running.unfinished_count() == 1  # it reads the live outbox too
        other.close()
    finally:
        running.close()


@pytest.fixture(scope="module")
def crashed_outbox(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An outbox whose 80 committed items all sit in its write-ahead log, as a SIGKILL leaves
    it: the files are copied while the writer still has them open (nothing checkpointed)."""
    source = tmp_path_factory.mktemp("crashed") / "state"
    outbox = Outbox(source)
    _enqueue(outbox, 80)
    snapshot = {
        name: (source / name).read_bytes()
        for name in ("outbox.sqlite", "outbox.sqlite-wal", "outbox.sqlite.commits")
    }
    outbox.close()
    return snapshot


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    target=st.sampled_from(["outbox.sqlite", "outbox.sqlite-wal"]),
    where=st.floats(min_value=0.0, max_value=0.999),
    length=st.integers(min_value=1, max_value=8192),
    fill=st.sampled_from([b"\x00", b"\xff", b"\xa5"]),
    cut=st.booleans(),
)
def test_any_damage_to_a_crashed_outbox_keeps_every_row_or_is_reported(
    crashed_outbox: dict[str, bytes],
    tmp_path: Path,
    target: str,
    where: float,
    length: int,
    fill: bytes,
    cut: bool,
) -> None:
    """Property (issue 9): whatever bytes of the log or the main file are overwritten or cut
    after a crash, reopening gives every committed item or a reported set-aside — never a
    store with silently fewer items."""
    state = tmp_path / f"state-{os.urandom(4).hex()}"
    state.mkdir()
    for name, data in crashed_outbox.items():
        (state / name).write_bytes(data)
    path = state / target
    offset = int(path.stat().st_size * where)
    if cut:
        os.truncate(path, offset)
    else:
        with path.open("r+b") as handle:
            handle.seek(offset)
            handle.write(fill * length)
    outbox = Outbox(state)
    try:
        if outbox.set_aside is None:
            assert outbox.unfinished_count() == 80
        else:
            assert [e.store for e in SetAsideRecord(state).open_events()] == ["outbox"]
    finally:
        outbox.close()
