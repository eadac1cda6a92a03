"""``pi-hindsight evidence …`` through the real command line (click runner, real SQLite)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from click.testing import CliRunner

from pi_hindsight.cli.main import cli
from pi_hindsight.stores.evidence import EvidenceLedger, PreparedRecord


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["evidence", *args])
    return result.exit_code, result.stdout, result.stderr


def _fill(state: Path, count: int = 5) -> None:
    ledger = EvidenceLedger(state, retention_days=30, cap_bytes=50_000_000)
    now = time.time()
    for n in range(count):
        ledger.record_prepared(
            PreparedRecord(
                f"0190aaaa-{n:04d}",
                outcome="delivered" if n % 2 == 0 else "nothing_found",
                session_id="sess",
                scope_id="project:alpha",
                bank_ids=["pi-coding"],
                body="<hindsight-memory>\n- fact\n</hindsight-memory>" if n % 2 == 0 else None,
                record_ids=["m1"] if n % 2 == 0 else [],
                prepared_at=now - (count - n) * 60,
            )
        )
    ledger.mark_confirmed("0190aaaa-0004", False, 999)
    ledger.close()


def test_path_does_not_create_the_file(isolated_dirs: Path) -> None:
    code, out, _ = _run("path")
    assert code == 0 and out.strip() == str(isolated_dirs / "evidence.sqlite")
    assert not (isolated_dirs / "evidence.sqlite").exists()
    code, out, _ = _run("stats")
    assert code == 0 and "no evidence recorded yet" in out
    assert not (isolated_dirs / "evidence.sqlite").exists()


def test_list_show_and_stats(isolated_dirs: Path) -> None:
    _fill(isolated_dirs)
    code, out, _ = _run("list", "--limit", "2")
    assert code == 0
    lines = out.splitlines()
    assert "0190aaaa-0004" in lines[0] and "attached ?, confirmed no" in lines[0]
    assert lines[-1].startswith("more: add --before ")
    cursor = lines[-1].split("--before ")[1]
    code, out, _ = _run("list", "--before", cursor, "--json")
    data = json.loads(out)
    assert [r["requestId"] for r in data["records"]] == [f"0190aaaa-{n:04d}" for n in (2, 1, 0)]
    assert data["nextCursor"] is None and "body" not in data["records"][0]
    code, out, _ = _run("list", "--outcome", "nothing_found", "--since", "1d", "--json")
    assert {r["outcome"] for r in json.loads(out)["records"]} == {"nothing_found"}

    code, out, _ = _run("show", "0190aaaa-0004")  # a unique prefix would do as well
    assert code == 0 and "confirmed:    no" in out and "- fact" in out
    code, out, _ = _run("show", "0190aaaa-0002", "--json", "--no-body")
    assert json.loads(out)["requestId"] == "0190aaaa-0002" and "body" not in json.loads(out)

    code, out, _ = _run("stats", "--json")
    stats = json.loads(out)
    assert stats["records"] == 5 and stats["byOutcome"] == {"delivered": 3, "nothing_found": 2}
    assert stats["deliveredConfirmed"] == {"true": 0, "false": 1, "unknown": 2}
    code, out, _ = _run("status")
    assert code == 0 and "retention:  retention 30 days, cap 50.0 MB" in out


def test_an_unknown_request_is_a_clean_error(isolated_dirs: Path) -> None:
    _fill(isolated_dirs)
    result = CliRunner().invoke(cli, ["evidence", "show", "no-such-request"])
    assert result.exit_code == 1
    assert "error: no evidence for request no-such-request" in result.stderr
    assert "hint:" in result.stderr and "Traceback" not in result.output


def test_migrate_reports_counts_and_bad_lines(isolated_dirs: Path, tmp_path: Path) -> None:
    legacy = tmp_path / "log.jsonl"
    ts = time.time() - 60
    legacy.write_text(
        json.dumps({"ts": ts, "type": "recall", "injected": 1, "injectedText": "- a fact"})
        + "\n{broken\n"
        + json.dumps({"ts": ts, "type": "retain", "documentText": "raw"})
        + "\n"
    )
    code, out, _ = _run("migrate", str(legacy))
    assert code == 0, out
    assert "imported 1" in out and "bad 1 (line 2: not JSON" in out
    assert "abix5 retain entry (not request evidence): 1" in out and "complete" in out
    code, out, _ = _run("migrate", str(legacy), "--json")
    report = json.loads(out)["reports"][0]
    assert report["imported"] == 0 and report["importedTotal"] == 1 and report["complete"]
    code, out, _ = _run("stats")
    assert "legacy:     1 file(s)" in out


def test_migrate_without_room_fails_with_the_reason(isolated_dirs: Path, tmp_path: Path) -> None:
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    (isolated_dirs / "config.json").write_text(json.dumps({"evidence": {"capBytes": 1_000_000}}))
    legacy = tmp_path / "big.jsonl"
    legacy.write_bytes(b"\n" * 1_100_000)  # an original larger than the whole cap
    result = CliRunner().invoke(cli, ["evidence", "migrate", str(legacy)])
    assert result.exit_code == 1
    assert "Nothing was deleted and the cap was not raised" in result.stderr
    assert legacy.stat().st_size == 1_100_000
