"""What the wheels contain: the stand-in is a distribution of its own, not part of pi-hindsight.

Both wheels are built for real with pip and hatchling (the build backend both pyproject.toml
files name), offline: no index, no build isolation (hatchling comes with the dev extra).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
STANDIN_ROOT = PROJECT_ROOT / "standin"


def _build_wheel(source: Path, out: Path) -> zipfile.ZipFile:
    if importlib.util.find_spec("hatchling") is None:
        pytest.fail("hatchling is not installed: install the dev extra (make install)")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("*.whl")
    return zipfile.ZipFile(wheel)


def test_the_core_wheel_contains_no_stand_in_code(tmp_path: Path) -> None:
    with _build_wheel(PROJECT_ROOT, tmp_path) as wheel:
        names = wheel.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = wheel.read(entry_points).decode()
    modules = [n for n in names if n.endswith(".py")]
    assert "pi_hindsight/cli/main.py" in modules  # the build is the real package
    # The Pi extension ships whole: its entry folder is the name Pi shows (pi-hindsight).
    assert {"pi_hindsight/shim/package.json", "pi_hindsight/shim/pi-hindsight/index.ts"} <= set(
        names
    )
    assert [n for n in modules if "standin" in Path(n).stem or "/standin/" in n] == [
        "pi_hindsight/cli/standin_cmd.py"  # the thin command that runs the other package
    ]
    assert not [n for n in names if n.startswith(("pi_hindsight_standin/", "tests/"))]
    assert not [n for n in names if "pi_role" in n or "hindsight_role" in n]
    assert "pi-hindsight-standin" not in scripts


def test_the_stand_in_wheel_builds_with_its_command_and_no_dependencies(tmp_path: Path) -> None:
    with _build_wheel(STANDIN_ROOT, tmp_path) as wheel:
        names = wheel.namelist()
        metadata_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = wheel.read(metadata_name).decode()
        entry_points_name = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        entry_points = wheel.read(entry_points_name).decode()
    packages = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert packages == {"pi_hindsight_standin"}
    assert "pi_hindsight_standin/server.py" in names
    assert "pi_hindsight_standin/hindsight_role.py" in names
    assert "pi_hindsight_standin/py.typed" in names
    assert not [n for n in names if "pi_role" in n]  # the Pi model is test infrastructure
    assert "Name: pi-hindsight-standin" in metadata
    assert "Requires-Dist" not in metadata  # standard library only
    assert "pi-hindsight-standin = pi_hindsight_standin.cli:main" in entry_points


def test_the_stand_in_imports_nothing_of_pi_hindsight() -> None:
    """Run in a fresh interpreter: importing the stand-in loads no pi_hindsight module."""
    code = (
        "import sys, pi_hindsight_standin.cli, pi_hindsight_standin.server; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pi_hindsight'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
