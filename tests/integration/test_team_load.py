"""``bench/team_load.py`` at a small size (issue 20, "Load that loses nothing"): three people,
one of them on Claude Code, two sessions of two requests each, in their own and in a shared
repository, against a keyed Hindsight of the bench's own — with one person's key refused for a
while and the server restarted mid-run. The bench checks its invariants from real data (the
server's documents, every evidence ledger and outbox, what each person was delivered) and exits
0 only when all of them hold; its report must show the run it describes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.server, pytest.mark.slow]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "team_load.py"


@pytest.mark.timeout(1200)
def test_a_small_team_under_load_loses_nothing_and_mixes_nothing(
    tmp_path: Path, hindsight_system_dir: Path
) -> None:
    report_file = tmp_path / "report.json"
    env = dict(os.environ, PI_HINDSIGHT_SYSTEM_DIR=str(hindsight_system_dir))
    done = subprocess.run(
        [sys.executable, str(BENCH), "--people", "3", "--claude", "1", "--sessions", "2",
         "--requests", "2", "--pause", "0.3", "--timeout", "900", "--json", str(report_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_file.read_text())
    assert report["sent"] == report["planned"] == 12
    assert report["documents_on_server"] == 6  # one per session
    assert set(report["outages"]) == {"refused key", "server restart"}
    for outage in report["outages"].values():
        assert outage["requests_failed"] >= 1, report["outages"]
    for name, check in report["invariants"].items():
        assert check["ok"] and check["checked"] > 0, (name, check)
    assert report["delivered_texts_with_tokens"] > 0  # the crossing check saw real deliveries
    assert report["wait_for_memory"]["pi"]["all"]["n"] == 8
    assert report["wait_for_memory"]["claude-code"]["all"]["n"] == 4
