"""Which Pi the suite runs on (tests/plugins/pi_versions.py): the project's two installs, the
``PI_BIN`` / ``PI1_BIN`` overrides, and a skip reason that says what to do when one is missing."""

from __future__ import annotations

import re
from pathlib import Path

from tests.plugins.pi_versions import LINES, PROJECT_ROOT, SHIM_DIFFERENCES, discover


def test_a_missing_override_names_the_variable_and_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-pi"
    for line in LINES:
        pi = discover(line, {line.env_var: str(missing)})
        assert pi.path is None
        assert pi.unusable() == f"${line.env_var}={missing} is not an executable file"


def test_an_override_is_used_and_its_version_read_from_its_package(tmp_path: Path) -> None:
    package = tmp_path / "node_modules" / "@earendil-works" / "pi-coding-agent"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(
        '{"name": "@earendil-works/pi-coding-agent", "version": "1.9.9"}'
    )
    binary = package / "dist" / "cli.js"
    binary.write_text("#!/usr/bin/env node\n")
    binary.chmod(0o755)
    node_bin = tmp_path / "node_modules" / "node" / "bin"
    node_bin.mkdir(parents=True)
    (node_bin / "node").write_text("#!/bin/sh\necho v22.19.0\n")
    (node_bin / "node").chmod(0o755)
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "pi").symlink_to(binary)

    pi = discover(LINES[1], {"PI1_BIN": str(bin_dir / "pi")})
    assert (pi.version, pi.test_id, pi.path) == ("1.9.9", "pi-1.9.9", bin_dir / "pi")
    assert pi.node_dir == node_bin  # the Node beside it goes first on PATH for the Pi process
    assert pi.env({"PATH": "/usr/bin"})["PATH"] == f"{node_bin}:/usr/bin"
    assert pi.unusable() == ""


def test_pi_1x_under_a_node_too_old_is_skipped_with_the_fix(tmp_path: Path) -> None:
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "pi").write_text("#!/bin/sh\n")
    (bin_dir / "pi").chmod(0o755)
    (bin_dir / "node").write_text("#!/bin/sh\necho v20.19.0\n")
    (bin_dir / "node").chmod(0o755)
    pi = discover(LINES[1], {"PI1_BIN": str(bin_dir / "pi")})
    reason = pi.unusable()
    assert "Pi 1.x needs Node >= 22.19" in reason and "v20.19.0" in reason
    assert "make install" in reason


def test_the_differences_tested_on_both_lines_are_the_ones_docs_shim_md_lists() -> None:
    """docs/shim.md's "Pi versions" table names, per row, the ``pi_both`` key that tests it; the
    keys, SHIM_DIFFERENCES and the markers in the tests are the same set, so a difference cannot
    lose its 0.73.1 test and a marker cannot name one the docs do not describe."""
    table = (PROJECT_ROOT / "docs" / "shim.md").read_text(encoding="utf-8")
    documented = set(re.findall(r'\| `"([a-z-]+)"` \|$', table, flags=re.MULTILINE))
    sources = [*(PROJECT_ROOT / "tests").rglob("test_*.py")]
    used = {
        key
        for path in sources
        for key in re.findall(r'pi_both\("([a-z-]+)"\)', path.read_text(encoding="utf-8"))
    }
    assert documented == set(SHIM_DIFFERENCES) == used
