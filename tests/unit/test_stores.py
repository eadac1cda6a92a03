from __future__ import annotations

import sqlite3
import stat
import time
from pathlib import Path

from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.outbox import Outbox
from pi_hindsight.stores.sqlite import new_id
from tests.support.outbox import retain_request


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
        outbox.enqueue(retain_request(session_id="s", bank_id="b", payload={"items": []}))
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
