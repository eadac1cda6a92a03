"""The outbox state machine on real SQLite files: batching, order, leases, keys, dead letters."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.engine.retain_worker import Backoff, compose
from pi_hindsight.stores.outbox import Outbox, owner_id
from pi_hindsight.stores.outbox_schema import SCHEMA
from pi_hindsight.stores.sqlite import new_id
from tests.support.outbox import retain_request


def _payload(n: int, session: str = "s", document: str | None = None) -> dict[str, Any]:
    turns = [{"role": "user", "content": f"request {n}"}]
    return {
        "items": [
            {
                "content": json.dumps(turns),
                "document_id": document or f"pi-session-{session}",
                "tags": ["project:p"],
                "timestamp": f"2026-01-01T00:00:{n % 60:02d}+00:00",
                "context": "ctx",
                "metadata": {"source": "pi", "request_id": f"r{n}"},
                "update_mode": "append",
            }
        ]
    }


@pytest.fixture
def outbox(tmp_path: Path) -> Any:
    store = Outbox(tmp_path)
    yield store
    store.close()


def _enqueue(outbox: Outbox, n: int, session: str = "s", bank: str = "b") -> str:
    return outbox.enqueue(
        retain_request(
            session_id=session, bank_id=bank, payload=_payload(n, session), request_id=f"r{n}"
        )
    )


def test_consecutive_items_of_a_session_form_one_batch_and_the_next_waits(
    outbox: Outbox,
) -> None:
    a1, a2 = _enqueue(outbox, 1, "a"), _enqueue(outbox, 2, "a")
    b1 = _enqueue(outbox, 3, "b")
    batches = outbox.claim("w", limit=10)
    assert [[item.item_id for item in batch.items] for batch in batches] == [[a1, a2], [b1]]
    a3 = _enqueue(outbox, 4, "a")
    # Session a has an open batch: a3 waits even though it is ready.
    assert outbox.claim("w2", limit=10) == []
    first = batches[0]
    assert outbox.mark_submitted(first.batch_id, "w", str(uuid.uuid4()))
    assert outbox.claim("w2", limit=10) == []  # submitted but not confirmed: still waits
    assert outbox.mark_done(first.batch_id, "w")
    (next_batch,) = outbox.claim("w2", limit=10)
    assert [item.item_id for item in next_batch.items] == [a3]


def test_batches_respect_item_and_byte_limits_and_never_mix_banks(outbox: Outbox) -> None:
    for n in range(5):
        _enqueue(outbox, n, "s")
    _enqueue(outbox, 5, "s", bank="other")
    _enqueue(outbox, 6, "s")
    (batch,) = outbox.claim("w", limit=1, max_items=3)
    assert len(batch.items) == 3
    outbox.mark_done(batch.batch_id, "w")
    (batch,) = outbox.claim("w", limit=1, max_items=10)
    assert len(batch.items) == 2  # items 3 and 4; item 5 goes to another bank
    outbox.mark_done(batch.batch_id, "w")
    (batch,) = outbox.claim("w", limit=1, max_items=10)
    assert [item.bank_id for item in batch.items] == ["other"]
    outbox.mark_done(batch.batch_id, "w")
    (batch,) = outbox.claim("w", limit=1, max_items=10, max_bytes=1)
    assert len(batch.items) == 1  # one item always fits, however large


def test_a_replay_after_a_crash_resends_exactly_the_same_batch_under_the_same_key(
    tmp_path: Path,
) -> None:
    """Regression: batch membership must be durable. Recomposing a replayed batch with items
    enqueued since the crash would send a different batch under a new key (a duplicate)."""
    crashed = Outbox(tmp_path, lease_s=0.05)
    try:
        first_ids = [_enqueue(crashed, n) for n in range(3)]
        (batch,) = crashed.claim(owner_id("crashed"), limit=1)
        later = _enqueue(crashed, 99)
    finally:
        crashed.close()
    time.sleep(0.1)
    restarted = Outbox(tmp_path)
    try:
        (replay,) = restarted.claim("restarted", limit=5)
        assert replay.batch_id == batch.batch_id
        assert replay.idempotency_key == batch.idempotency_key
        assert [item.item_id for item in replay.items] == first_ids
        assert later not in [item.item_id for item in replay.items]
        assert compose(replay) == compose(batch)
    finally:
        restarted.close()


def test_leases_of_a_dead_process_are_recovered_at_once(outbox: Outbox) -> None:
    _enqueue(outbox, 1)
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_owner = owner_id("x").replace(f":{os.getpid()}:", f":{child.stdout.strip()}:")
    (batch,) = outbox.claim(dead_owner, limit=1)
    assert outbox.claim("alive", limit=1) == []  # the lease (60 s) has not expired
    assert outbox.recover_stale_leases() == 1
    (again,) = outbox.claim("alive", limit=1)
    assert again.batch_id == batch.batch_id
    # A live owner's lease is left alone.
    outbox.release(again.batch_id, "alive")
    outbox.claim(owner_id("me"), limit=1)
    assert outbox.recover_stale_leases() == 0


def test_acks_report_whether_the_row_changed(outbox: Outbox) -> None:
    _enqueue(outbox, 1)
    (batch,) = outbox.claim("owner-1")
    assert not outbox.mark_done(batch.batch_id, "someone-else")
    assert outbox.mark_done(batch.batch_id, "owner-1")
    assert not outbox.mark_done(batch.batch_id, "owner-1")


def test_idempotency_keys_are_uuids_and_change_only_after_a_failed_operation(
    outbox: Outbox,
) -> None:
    """Regression: the key of a later generation was ``<id>.g1``, not a UUID; Hindsight
    rejects a non-UUID ``operation_id`` with 422, so the retry was dead-lettered."""
    _enqueue(outbox, 1)
    (batch,) = outbox.claim("w")
    key = batch.idempotency_key
    assert str(uuid.UUID(key)) == key
    outbox.retry_later(batch.batch_id, "w", error="connection refused", delay_s=0)
    (batch,) = outbox.claim("w")
    assert batch.idempotency_key == key and batch.attempts == 1 and batch.failures == 0
    outbox.retry_later(
        batch.batch_id, "w", error="operation failed", delay_s=0, new_generation=True, failure=True
    )
    (batch,) = outbox.claim("w")
    second = batch.idempotency_key
    assert second != key and str(uuid.UUID(second)) == second
    assert batch.failures == 1 and batch.last_error == "operation failed"
    assert uuid.UUID(second).version == 5  # derived, so every replay of generation 1 agrees


def test_retry_delays_hold_a_batch_back(outbox: Outbox) -> None:
    _enqueue(outbox, 1)
    (batch,) = outbox.claim("w")
    outbox.retry_later(batch.batch_id, "w", error="HTTP 503", delay_s=60, failure=True)
    assert outbox.claim("w") == []
    assert outbox.health().last_error == "HTTP 503"


def test_dead_letters_keep_their_reason_do_not_block_and_retry_keeps_the_key(
    outbox: Outbox,
) -> None:
    first = _enqueue(outbox, 1)
    (batch,) = outbox.claim("w", max_items=1)
    second = _enqueue(outbox, 2)
    outbox.dead_letter(batch.batch_id, "w", error="HTTP 400 invalid item")
    (next_batch,) = outbox.claim("w")
    assert [item.item_id for item in next_batch.items] == [second]
    health = outbox.health()
    assert health.dead == 1 and health.last_error == "HTTP 400 invalid item"
    (dead,) = outbox.items(states=["dead"])
    assert dead.item_id == first and dead.last_error == "HTTP 400 invalid item"
    assert outbox.retry_dead([first]) == 1
    assert outbox.claim("w") == []  # the session's later batch is still in flight
    outbox.mark_done(next_batch.batch_id, "w")
    (revived,) = outbox.claim("w")
    assert revived.batch_id == batch.batch_id
    assert revived.idempotency_key == batch.idempotency_key and revived.failures == 0


def test_the_same_request_is_enqueued_once(outbox: Outbox) -> None:
    first = _enqueue(outbox, 7)
    assert _enqueue(outbox, 7) == first
    assert outbox.unfinished_count() == 1
    # Without a request id every call is a new item.
    outbox.enqueue(retain_request(session_id="s", bank_id="b", payload=_payload(8)))
    outbox.enqueue(retain_request(session_id="s", bank_id="b", payload=_payload(8)))
    assert outbox.unfinished_count() == 3


def test_purge_keeps_pending_work_unless_told(outbox: Outbox) -> None:
    _enqueue(outbox, 1)
    (batch,) = outbox.claim("w")
    outbox.mark_done(batch.batch_id, "w")
    _enqueue(outbox, 2)
    assert outbox.purge(["done"], dry_run=True).items == 1
    assert outbox.purge(["done"]).items == 1
    assert outbox.unfinished_count() == 1 and outbox.health().done == 0
    assert outbox.purge(["done"], older_than_s=3600).items == 0
    assert outbox.purge(["ready", "sending", "submitted"]).items == 1
    assert outbox.unfinished_count() == 0


def test_claims_from_many_threads_never_hand_out_an_item_twice(tmp_path: Path) -> None:
    setup = Outbox(tmp_path)
    ids = {_enqueue(setup, n, session=f"s{n % 40}") for n in range(400)}
    setup.close()
    claimed: list[str] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        store = Outbox(tmp_path)
        try:
            while True:
                batches = store.claim(name, limit=3, max_items=4)
                if not batches:
                    if store.unfinished_count() == 0:
                        return
                    continue
                for batch in batches:
                    assert store.mark_done(batch.batch_id, name)
                with lock:
                    claimed.extend(item.item_id for batch in batches for item in batch.items)
        finally:
            store.close()

    threads = [threading.Thread(target=worker, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(claimed) == sorted(ids)
    assert len(claimed) == len(set(claimed))


def test_a_schema_1_outbox_migrates_with_in_flight_items_keeping_their_keys(
    tmp_path: Path,
) -> None:
    path = tmp_path / "outbox.sqlite"
    connection = sqlite3.connect(path)
    for statement in SCHEMA.migrations[0].sql.split(";\n"):
        connection.execute(statement)
    rows = [("ready", None), ("leased", None), ("submitted", "op-1"), ("done", None)]
    ids = []
    for n, (state, operation) in enumerate(rows):
        item_id = new_id()
        ids.append(item_id)
        connection.execute(
            "INSERT INTO items (item_id, session_id, bank_id, payload, payload_bytes, state, "
            "next_attempt_at, server_operation_id, created_at, updated_at) "
            "VALUES (?, ?, 'b', ?, 10, ?, 0, ?, 0, 0)",
            (item_id, f"s{n}", json.dumps(_payload(n, f"s{n}")), state, operation),
        )
    connection.execute(f"PRAGMA application_id = {SCHEMA.application_id}")
    connection.execute("PRAGMA user_version = 1")
    connection.commit()
    connection.close()

    outbox = Outbox(tmp_path)
    try:
        assert outbox.set_aside is None
        states = {item.item_id: item.state for item in outbox.items(limit=10, states=None)}
        assert states == dict(zip(ids, ["ready", "sending", "submitted", "done"], strict=True))
        batches = {batch.batch_id: batch for batch in outbox.claim("w", limit=10)}
        # The in-flight items became one-item batches keyed by their own id (same key as before).
        assert batches[ids[1]].idempotency_key == ids[1]
        assert batches[ids[2]].server_operation_id == "op-1"
        assert len(batches) == 3  # plus a new batch for the ready item
    finally:
        outbox.close()


def test_compose_sends_one_item_unchanged_and_merges_several_in_order(outbox: Outbox) -> None:
    _enqueue(outbox, 1)
    (single,) = outbox.claim("w", max_items=1)
    (item,) = compose(single)
    assert item.metadata["request_id"] == "r1" and item.document_id == "pi-session-s"
    outbox.mark_done(single.batch_id, "w")
    for n in (2, 3, 4):
        _enqueue(outbox, n)
    (batch,) = outbox.claim("w")
    (merged,) = compose(batch)
    assert [turn["content"] for turn in json.loads(merged.content)] == [
        "request 2",
        "request 3",
        "request 4",
    ]
    assert merged.metadata["request_ids"] == "r2,r3,r4"
    assert merged.update_mode == "append" and merged.tags == ("project:p",)


@pytest.mark.parametrize("attempts", [1, 3, 10, 30])
def test_backoff_grows_is_capped_and_honours_retry_after(attempts: int) -> None:
    backoff = Backoff(base_s=1.0, cap_s=60.0)
    ceiling = min(60.0, 2 ** (attempts - 1))
    for _ in range(20):
        delay = backoff.delay(attempts)
        assert ceiling / 2 <= delay <= ceiling
    assert backoff.delay(attempts, retry_after=500.0) == 500.0


def test_a_revived_dead_batch_never_runs_beside_a_later_batch_of_its_session(
    outbox: Outbox,
) -> None:
    """Regression: ``retry`` re-opens a dead batch while a later batch of the same session may
    be open too; claiming both would race two appends on one document."""
    first = _enqueue(outbox, 1)
    (dead,) = outbox.claim("w", max_items=1)
    outbox.dead_letter(dead.batch_id, "w", error="HTTP 400")
    _enqueue(outbox, 2)
    (later,) = outbox.claim("w")
    outbox.retry_later(later.batch_id, "w", error="HTTP 503", delay_s=0)
    assert outbox.retry_dead([first]) == 1
    (one,) = outbox.claim("a", limit=5)  # two open batches of one session: one at a time
    assert outbox.claim("b", limit=5) == []
    outbox.mark_done(one.batch_id, "a")
    (other,) = outbox.claim("b", limit=5)
    assert {one.batch_id, other.batch_id} == {dead.batch_id, later.batch_id}
