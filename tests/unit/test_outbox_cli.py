"""``pi-hindsight outbox status|list|retry|purge``: output, --json, and purge's safety."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from pi_hindsight.cli.main import cli
from pi_hindsight.stores.outbox import Outbox
from tests.support.outbox import retain_request


def _fill(state: Path) -> None:
    outbox = Outbox(state)
    try:
        for n in range(3):
            outbox.enqueue(
                retain_request(
                    session_id=f"s{n}",
                    bank_id="b",
                    payload={"items": [{"content": f"text {n}", "document_id": f"d{n}"}]},
                    request_id=f"r{n}",
                )
            )
        done, dead = outbox.claim("w", limit=2)
        outbox.mark_done(done.batch_id, "w")
        outbox.dead_letter(dead.batch_id, "w", error="HTTP 400 bad")
    finally:
        outbox.close()


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["outbox", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_status_and_list_report_states_and_the_last_error(tmp_path: Path) -> None:
    _fill(tmp_path)
    code, out = _run("status", "--json", "--state-dir", str(tmp_path))
    status = json.loads(out)
    assert code == 0
    assert (status["pending"], status["dead"], status["done"]) == (1, 1, 1)
    assert status["lastError"] == "HTTP 400 bad" and status["setAside"] is None
    code, out = _run("status", "--state-dir", str(tmp_path))
    assert "1 dead" in out and "HTTP 400 bad" in out and "outbox retry" in out
    code, out = _run("list", "--json", "--state-dir", str(tmp_path))
    assert sorted(item["state"] for item in json.loads(out)) == ["dead", "ready"]
    code, out = _run("list", "--state", "done", "--content", "--state-dir", str(tmp_path))
    assert "done" in out and "text " in out


def test_retry_needs_ids_or_all_and_revives_dead_letters(tmp_path: Path) -> None:
    _fill(tmp_path)
    code, out = _run("retry", "--state-dir", str(tmp_path))
    assert code == 1 and "name the items to retry" in out
    code, out = _run("retry", "--all", "--json", "--state-dir", str(tmp_path))
    assert code == 0 and json.loads(out) == {"retried": 1}


def test_purge_never_touches_pending_work_without_the_flag(tmp_path: Path) -> None:
    _fill(tmp_path)
    code, out = _run("purge", "--dry-run", "--json", "--state-dir", str(tmp_path))
    assert json.loads(out)["items"] == 1  # done only
    _run("purge", "--state-dir", str(tmp_path))
    code, out = _run("status", "--json", "--state-dir", str(tmp_path))
    status = json.loads(out)
    assert (status["pending"], status["dead"], status["done"]) == (1, 1, 0)
    _run("purge", "--dead", "--state-dir", str(tmp_path))
    code, out = _run("purge", "--include-pending", "--json", "--state-dir", str(tmp_path))
    assert json.loads(out)["items"] == 1
    code, out = _run("purge", "--older-than", "soon", "--state-dir", str(tmp_path))
    assert code == 1 and "not a duration" in out
