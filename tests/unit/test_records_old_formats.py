"""Files written by earlier versions still load now that their records are pydantic models
(docs/adr/0010-one-serialisation-mechanism.md): ``server.json`` and a Claude Code cursor file,
each as the hand-written ``to_json`` of the previous release wrote it, byte for byte; and a
tolerant read leaves an odd field at its default instead of failing the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pi_hindsight.engine.budget import PAUSE_FILE, read_pause, resume
from pi_hindsight.errors import CorruptStateError
from pi_hindsight.hosts.claude_code.cursors import Cursor, CursorStore
from pi_hindsight.launcher.procs import ProcessIdentity
from pi_hindsight.launcher.reranker import Reranker
from pi_hindsight.launcher.server_record import ServerPaths, load_record, save_record
from pi_hindsight.stores.set_aside import SetAsideRecord

# server.json as release 2026-12-03 wrote it (its to_json, json.dumps(indent=2)).
OLD_SERVER_JSON = """{
  "version": 1,
  "state_dir": "/home/u/.local/state/pi-hindsight",
  "llm": "offline",
  "started_at": "2026-12-03T10:00:00Z",
  "phase": "running",
  "host": "127.0.0.1",
  "port": 8888,
  "base_url": "http://127.0.0.1:8888",
  "processes": {
    "postgres": {"pid": 101, "start_ticks": 5000},
    "standin": {"pid": 102, "start_ticks": 5001},
    "hindsight": {"pid": 103, "start_ticks": 5002}
  },
  "postgres": {
    "port": 5433,
    "data_dir": "/home/u/.local/state/pi-hindsight/server/pgdata",
    "install_dir": "/opt/pg",
    "os_user": null,
    "database": "hindsight"
  },
  "standin_url": "http://127.0.0.1:9999",
  "auth": {"api_key_env": "TEAM_KEY"},
  "database": null,
  "reranker": {"provider": "cross-encoder", "model": null, "why": "its model is in the cache"}
}
"""


def test_an_old_server_json_loads_and_writes_back_the_same_keys(tmp_path: Path) -> None:
    paths = ServerPaths(tmp_path)
    paths.ensure()
    paths.record.write_text(OLD_SERVER_JSON)
    record = load_record(paths)
    assert record is not None
    assert record.processes["hindsight"] == ProcessIdentity(pid=103, start_ticks=5002)
    assert record.postgres is not None and record.postgres.port == 5433
    assert record.postgres.os_user is None
    assert record.api_key_env == "TEAM_KEY" and record.standin_url == "http://127.0.0.1:9999"
    assert record.reranker == Reranker(provider="cross-encoder", why="its model is in the cache")
    assert record.base_url == "http://127.0.0.1:8888"
    save_record(paths, record)
    written = json.loads(paths.record.read_text())
    old = json.loads(OLD_SERVER_JSON)
    assert set(old) <= set(written)  # every key an older reader looks for is still written
    assert {key: written[key] for key in old if key != "reranker"} == {
        key: value for key, value in old.items() if key != "reranker"
    }
    assert written["reranker"] == {**old["reranker"], "download": False}


def test_a_damaged_server_json_is_named_with_the_fix(tmp_path: Path) -> None:
    paths = ServerPaths(tmp_path)
    paths.ensure()
    old = json.loads(OLD_SERVER_JSON)
    paths.record.write_text(json.dumps({**old, "port": "not a port"}))
    with pytest.raises(CorruptStateError, match="port") as caught:
        load_record(paths)
    assert "delete" in (caught.value.hint or "")
    # An unknown reranker (a newer release's) is no reranker recorded, not a damaged record.
    paths.record.write_text(json.dumps({**old, "reranker": {"provider": "new", "why": "x"}}))
    loaded = load_record(paths)
    assert loaded is not None and loaded.reranker is None


def test_an_old_cursor_file_loads(tmp_path: Path) -> None:
    store = CursorStore(tmp_path)
    transcript = tmp_path / "t.jsonl"
    store.directory.mkdir(parents=True)
    # As release 2026-12-03 wrote it: {"transcript", "updatedAt", **Cursor.to_json()}.
    old = {
        "transcript": str(transcript),
        "updatedAt": 1764756000.5,
        "offset": 120,
        "planned": None,
        "openTools": {"toolu_1": "Bash"},
        "skipBefore": "2026-12-03T10:00:00.000Z",
        "fileId": [2049, 77],
    }
    store._path(transcript).write_text(json.dumps(old))
    assert store.load(transcript) == Cursor(
        offset=120,
        open_tools={"toolu_1": "Bash"},
        skip_before="2026-12-03T10:00:00.000Z",
        file_id=(2049, 77),
    )
    # Odd fields are left at their defaults, the rest is kept.
    store._path(transcript).write_text(
        json.dumps({**old, "planned": -4, "fileId": "x", "openTools": [1], "offset": True})
    )
    assert store.load(transcript) == Cursor(offset=0, skip_before="2026-12-03T10:00:00.000Z")
    store.save(transcript, store.load(transcript))
    assert json.loads(store._path(transcript).read_text())["skipBefore"] == old["skipBefore"]


# set-aside.json as release 2026-12-03 wrote it (asdict of each event).
OLD_SET_ASIDE = {
    "format": "pi-hindsight-set-aside/1",
    "events": [
        {
            "event_id": "a1b2c3d4",
            "store": "outbox",
            "original": "/s/outbox.sqlite",
            "moved_to": "/s/outbox.sqlite.corrupt-20261203T100000-42",
            "reason": "not a database",
            "at": 1764756000.25,
            "pid": 42,
            "host": "box",
            "acknowledged_at": None,
            "restored_at": None,
            "restore_note": None,
        }
    ],
}


def test_an_old_set_aside_record_loads_and_is_written_back_unchanged(tmp_path: Path) -> None:
    record = SetAsideRecord(tmp_path)
    record.path.parent.mkdir(parents=True, exist_ok=True)
    record.path.write_text(json.dumps(OLD_SET_ASIDE))
    [event] = record.open_events()
    assert (event.event_id, event.store, event.pid, event.at) == (
        "a1b2c3d4",
        "outbox",
        42,
        1764756000.25,
    )
    shown = event.to_json()
    assert shown["id"] == "a1b2c3d4" and shown["open"] is True and "state restore" in shown["next"]
    acknowledged = record.acknowledge("a1b2c3d4")
    assert acknowledged.acknowledged_at is not None and not acknowledged.open
    written = json.loads(record.path.read_text())
    expected = {**OLD_SET_ASIDE["events"][0], "acknowledged_at": acknowledged.acknowledged_at}
    assert written == {"format": OLD_SET_ASIDE["format"], "events": [expected]}


def test_an_old_budget_pause_file_loads_and_resumes(tmp_path: Path) -> None:
    # retain-budget.json as release 2026-12-03 wrote it.
    old = {
        "paused": {"pi-coding": {"since": 1764756000.0, "tokens": 120000, "budget": 100000}},
        "resumed": {"other-bank": 1764750000.0},
    }
    (tmp_path / PAUSE_FILE).write_text(json.dumps(old, indent=2))
    pause = read_pause(tmp_path, "pi-coding")
    assert pause is not None and (pause.tokens, pause.budget) == (120000, 100000)
    assert pause.to_json() == {
        "bankId": "pi-coding",
        "since": 1764756000.0,
        "tokens": 120000,
        "budget": 100000,
    }
    assert resume(tmp_path, now=1764757000.0) == ["pi-coding"]
    assert json.loads((tmp_path / PAUSE_FILE).read_text()) == {
        "paused": {},
        "resumed": {"other-bank": 1764750000.0, "pi-coding": 1764757000.0},
    }
