"""The shim folder is a proper Pi package (Pi 1.x docs/packages.md) that reports its version."""

from __future__ import annotations

import json
import re
from pathlib import Path

SHIM = Path(__file__).resolve().parents[2] / "src" / "pi_hindsight" / "shim"
HOST_PACKAGES = {"@earendil-works/pi-coding-agent", "@mariozechner/pi-coding-agent", "typebox"}


def test_the_shim_folder_is_a_pi_package_with_the_host_packages_as_peers() -> None:
    manifest = json.loads((SHIM / "package.json").read_text(encoding="utf-8"))
    assert "pi-package" in manifest["keywords"]
    assert manifest["pi"]["extensions"] == ["./pi-hindsight/index.ts"]
    assert (SHIM / "index.ts").is_file()
    # Host packages are peers ("*"), never dependencies: a physical copy would bypass Pi's module
    # mapping (and Pi warns about it). A local package is not npm-installed, so nothing else may
    # be needed at run time.
    assert manifest["peerDependencies"] == dict.fromkeys(HOST_PACKAGES, "*")
    assert "dependencies" not in manifest
    imported = set(re.findall(r'from "([^".][^"]*)"', (SHIM / "index.ts").read_text()))
    assert {name for name in imported if not name.startswith("node:")} <= HOST_PACKAGES


def test_the_version_the_shim_reports_is_the_package_version() -> None:
    manifest = json.loads((SHIM / "package.json").read_text(encoding="utf-8"))
    found = re.search(r'export const SHIM_VERSION = "([^"]+)";', (SHIM / "index.ts").read_text())
    assert found is not None and found[1] == manifest["version"]


def test_pi_names_the_extension_pi_hindsight_by_its_entry_folder() -> None:
    """Issue 19: Pi lists a local extension by the folder of its entry (``index.ts`` dropped), so
    an entry at ``shim/index.ts`` showed as ``shim`` in Pi's ``[Extensions]`` header. The entry is
    ``pi-hindsight/index.ts``, which only re-exports the shim (the e2e install test checks what
    Pi 0.73.1 and 1.x really show)."""
    manifest = json.loads((SHIM / "package.json").read_text(encoding="utf-8"))
    (entry,) = manifest["pi"]["extensions"]
    assert Path(entry).parent.name == "pi-hindsight" and Path(entry).name == "index.ts"
    code = [
        line
        for line in (SHIM / entry).read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith(("/*", "*"))
    ]
    assert code == ['export { default } from "../index.ts";']
