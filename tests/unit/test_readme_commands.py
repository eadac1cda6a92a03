"""The README's command reference is generated from the definitions and checked (issue 19: the
hand-written table had missed ``scope seed``, ``state …``, ``memory forget|correct|corrections``
and ``/hindsight:seed``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "readme_commands.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_readme_lists_the_commands_as_they_are_defined() -> None:
    completed = _run("--check")
    assert completed.returncode == 0, completed.stderr


def test_every_command_of_every_face_is_listed() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for expected in (
        "`pi-hindsight scope seed [DIRECTORY] [--json]`",
        "`pi-hindsight state list [--json]`",
        "`pi-hindsight state acknowledge",
        "`pi-hindsight state restore EVENT_ID",
        "`pi-hindsight memory forget RECORD_ID",
        "`pi-hindsight memory correct RECORD_ID TEXT",
        "`pi-hindsight memory corrections",
        "`pi-hindsight claude-code hook EVENT`",
        "`/hindsight:seed [sessions\\|git]`",
        "`/hindsight:template-apply NAME`",
        "tool `hindsight_memory`",
        "`forget`, `correct`, `corrections`",
        "tool `hindsight_retain_global`",
        "`/hindsight-register [path]`",
        "tool `mcp__hindsight__hindsight_memory`",
    ):
        assert expected in readme, f"README.md does not list {expected}"


def test_a_stale_readme_fails_the_check_with_what_to_run(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stale = tmp_path / "README.md"
    stale.write_text(readme.replace("| `pi-hindsight scope seed", "| `pi-hindsight scope sow"))
    completed = _run("--check", "--readme", str(stale))
    assert completed.returncode == 1
    assert "scope sow" in completed.stderr  # the diff shows what differs
    assert "stale" in completed.stderr and "scripts/readme_commands.py" in completed.stderr
    assert _run("--readme", str(stale)).returncode == 0  # writing it repairs it
    assert stale.read_text(encoding="utf-8") == readme


def test_a_readme_without_the_markers_is_an_error_that_says_so(tmp_path: Path) -> None:
    bare = tmp_path / "README.md"
    bare.write_text("# no markers here\n", encoding="utf-8")
    completed = _run("--check", "--readme", str(bare))
    assert completed.returncode != 0
    assert "<!-- commands:start -->" in completed.stderr
