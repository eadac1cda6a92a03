from __future__ import annotations

import sqlite3
import stat
import threading
import time
from pathlib import Path

import pytest

from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.outbox import Backoff, Outbox
from pi_hindsight.stores.sqlite import new_id


def test_store_files_are_owner_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    Outbox(state).close()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert stat.S_IMODE((state / "outbox.sqlite").stat().st_mode) == 0o600


def test_a_corrupted_store_is_set_aside_not_deleted(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    garbage = b"this is not a database" * 100
    (state / "outbox.sqlite").write_bytes(garbage)
    outbox = Outbox(state)
    try:
        assert outbox.set_aside is not None
        assert outbox.set_aside.moved_to.read_bytes() == garbage
        assert "not" in outbox.set_aside.reason
        outbox.enqueue(session_id="s", bank_id="b", payload={"items": []})
        assert outbox.unfinished_count() == 1
    finally:
        outbox.close()


def test_a_foreign_sqlite_file_is_set_aside(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    foreign = sqlite3.connect(state / "catalog.sqlite")
    foreign.execute("CREATE TABLE notes (x)")
    foreign.execute("INSERT INTO notes VALUES ('keep me')")
    foreign.commit()
    foreign.close()
    catalog = Catalog(state)
    try:
        assert catalog.set_aside is not None
        assert "not a pi-hindsight store" in catalog.set_aside.reason
        kept = sqlite3.connect(catalog.set_aside.moved_to)
        assert kept.execute("SELECT x FROM notes").fetchone() == ("keep me",)
        kept.close()
    finally:
        catalog.close()


def test_an_outbox_file_is_not_accepted_as_a_catalog(tmp_path: Path) -> None:
    state = tmp_path / "state"
    Outbox(state).close()
    (state / "outbox.sqlite").rename(state / "catalog.sqlite")
    catalog = Catalog(state)
    try:
        assert catalog.set_aside is not None
        assert "foreign application id" in catalog.set_aside.reason
    finally:
        catalog.close()


def test_new_ids_sort_by_time() -> None:
    first = new_id()
    time.sleep(0.002)
    assert new_id() > first


def _payload(n: int) -> dict[str, object]:
    return {"items": [{"content": f"turn {n}"}]}


def test_outbox_delivers_each_session_strictly_in_order(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path)
    try:
        a1 = outbox.enqueue(session_id="a", bank_id="b", payload=_payload(1))
        a2 = outbox.enqueue(session_id="a", bank_id="b", payload=_payload(2))
        b1 = outbox.enqueue(session_id="b", bank_id="b", payload=_payload(3))
        claimed = outbox.claim("w", limit=10)
        assert [item.item_id for item in claimed] == [a1, b1]  # a2 waits for a1
        assert outbox.mark_submitted(a1, "w", "op-1", poll_in_s=0)
        # a1 is submitted but not confirmed: a2 still waits (appends to one document serialise).
        assert [item.item_id for item in outbox.claim("w", limit=10)] == [a1]
        assert outbox.mark_done(a1, "w")
        assert [item.item_id for item in outbox.claim("w", limit=10)] == [a2]
    finally:
        outbox.close()


def test_acks_report_whether_the_row_changed(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path)
    try:
        item_id = outbox.enqueue(session_id="s", bank_id="b", payload=_payload(1))
        outbox.claim("owner-1")
        assert not outbox.mark_done(item_id, "someone-else")
        assert outbox.mark_done(item_id, "owner-1")
        assert not outbox.mark_done(item_id, "owner-1")
    finally:
        outbox.close()


def test_stale_leases_return_to_ready(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path, lease_s=0.05)
    try:
        item_id = outbox.enqueue(session_id="s", bank_id="b", payload=_payload(1))
        assert [item.item_id for item in outbox.claim("crashed")] == [item_id]
        assert outbox.claim("other") == []
        time.sleep(0.1)
        assert outbox.recover_stale_leases() == 1
        reclaimed = outbox.claim("other")
        assert [item.item_id for item in reclaimed] == [item_id]
        assert reclaimed[0].idempotency_key == item_id  # same key: a replay is idempotent
    finally:
        outbox.close()


def test_a_failed_operation_gets_a_new_idempotency_key_a_transport_error_does_not(
    tmp_path: Path,
) -> None:
    outbox = Outbox(tmp_path)
    try:
        item_id = outbox.enqueue(session_id="s", bank_id="b", payload=_payload(1))
        outbox.claim("w")
        outbox.retry_later(item_id, "w", error="connection refused", delay_s=0)
        (item,) = outbox.claim("w")
        assert item.idempotency_key == item_id and item.attempts == 1
        outbox.retry_later(item_id, "w", error="operation failed", delay_s=0, new_generation=True)
        (item,) = outbox.claim("w")
        assert item.idempotency_key == f"{item_id}.g1"
        assert item.last_error == "operation failed"
    finally:
        outbox.close()


def test_dead_letters_keep_their_reason_and_do_not_block_the_session(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path)
    try:
        first = outbox.enqueue(session_id="s", bank_id="b", payload=_payload(1))
        second = outbox.enqueue(session_id="s", bank_id="b", payload=_payload(2))
        outbox.claim("w")
        outbox.dead_letter(first, "w", error="HTTP 400 invalid item")
        assert [item.item_id for item in outbox.claim("w")] == [second]
        health = outbox.health()
        assert health.dead == 1
        (dead,) = outbox.items(states=["dead"])
        assert dead.last_error == "HTTP 400 invalid item"
    finally:
        outbox.close()


def test_claims_from_many_threads_never_hand_out_an_item_twice(tmp_path: Path) -> None:
    setup = Outbox(tmp_path)
    ids = {setup.enqueue(session_id=f"s{n}", bank_id="b", payload=_payload(n)) for n in range(200)}
    setup.close()
    claimed: list[str] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        outbox = Outbox(tmp_path)
        try:
            while True:
                items = outbox.claim(name, limit=3)
                if not items:
                    return
                for item in items:
                    assert outbox.mark_done(item.item_id, name)
                with lock:
                    claimed.extend(item.item_id for item in items)
        finally:
            outbox.close()

    threads = [threading.Thread(target=worker, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(claimed) == sorted(ids)
    assert len(claimed) == len(set(claimed))


@pytest.mark.parametrize("attempts", [1, 3, 10, 30])
def test_backoff_grows_is_capped_and_honours_retry_after(attempts: int) -> None:
    backoff = Backoff(base_s=1.0, cap_s=60.0)
    ceiling = min(60.0, 2 ** (attempts - 1))
    for _ in range(20):
        delay = backoff.delay(attempts)
        assert ceiling / 2 <= delay <= ceiling
    assert backoff.delay(attempts, retry_after=500.0) == 500.0


def test_catalog_registration_and_lookup(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    try:
        repo = tmp_path / "repo"
        (repo / "sub").mkdir(parents=True)
        record = catalog.register(
            scope_id="project:x",
            project_id="x",
            identity_source="directory",
            bank_id="bank",
            tags=("project:x",),
            location=repo,
            consent="cli",
        )
        assert record.tags == ("project:x",)
        assert catalog.find_for("x", tmp_path) == record
        # A different project id under a registered directory finds it through the location.
        assert catalog.find_for("other", repo / "sub") == record
        assert catalog.find_for("other", tmp_path) is None
        assert catalog.unregister("project:x")
        assert catalog.find_for("x", repo) is None
    finally:
        catalog.close()
