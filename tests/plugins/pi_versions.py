"""The Pi versions the suite runs on: Pi 0.73.1 (root ``node_modules``, the machine's Node) and
Pi 1.x (``pi1/node_modules``, with the Node 22 from npm's ``node`` package first on ``PATH`` for
the Pi process only).

Every test that uses ``pi_binary`` (directly or through ``pi_world``) runs on Pi 1.x; one marked
``@pytest.mark.pi_both("<difference>")`` runs on 0.73.1 too, naming what the shim does differently
there (a key of ``SHIM_DIFFERENCES``, each a row of the table in docs/shim.md, "Pi versions"). The
test id says which (``[pi-0.73.1]``, ``[pi-1.6.0]``). ``@pytest.mark.pi_only("0.x")`` keeps a test
to one version line. ``$PI_BIN`` / ``$PI1_BIN`` point at your own
installs; a missing binary (or a Node too old for Pi 1.x) skips the test with the reason.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PI_PACKAGES = ("@mariozechner/pi-coding-agent", "@earendil-works/pi-coding-agent")
# Pi 1.x (since 0.75.0) needs Node >= 22.19: under Node 20 it dies with a SyntaxError at once.
PI1_MIN_NODE = (22, 19)


@dataclass(frozen=True)
class PiLine:
    """One supported version line: where its binary is looked for, and what it is pinned to."""

    name: str  # "0.x" or "1.x"
    env_var: str
    default_bin: Path
    manifest: Path  # the package.json that pins it
    package: str
    min_node: tuple[int, int] | None


LINES = (
    PiLine(
        "0.x",
        "PI_BIN",
        PROJECT_ROOT / "node_modules" / ".bin" / "pi",
        PROJECT_ROOT / "package.json",
        PI_PACKAGES[0],
        None,
    ),
    PiLine(
        "1.x",
        "PI1_BIN",
        PROJECT_ROOT / "pi1" / "node_modules" / ".bin" / "pi",
        PROJECT_ROOT / "pi1" / "package.json",
        PI_PACKAGES[1],
        PI1_MIN_NODE,
    ),
)
DEFAULT_LINE = "1.x"  # what a Pi test runs on unless marked pi_both / pi_only

# What the shim does differently on Pi 0.73.1 (docs/shim.md, "Pi versions", names each in its
# `pi_both` column): a test that covers one runs on both lines with ``pi_both("<key>")``.
SHIM_DIFFERENCES = {
    "request-end": "a request ends at agent_end (0.73.1) or agent_settled (1.x)",
    "framing": "the framing is in the first memory block (0.73.1) or a system section (1.x)",
    "session-file": "the session file is written after the first answer (0.73.1) or before",
    "install": "the Pi package, its Node and how `pi install` loads the shim",
    "tool-params": "0.73.1 validates tool arguments with typebox 1.x against our JSON Schema",
}
PROJECT_NODE_DIR = PROJECT_ROOT / "pi1" / "node_modules" / "node" / "bin"


@dataclass(frozen=True)
class PiInstall:
    """A Pi executable of one version line, and how to run it."""

    line: str
    version: str
    path: Path | None
    # Prepended to PATH for the Pi process (Pi's launcher is `#!/usr/bin/env node`).
    node_dir: Path | None
    missing: str = ""
    min_node: tuple[int, int] | None = None

    @property
    def test_id(self) -> str:
        return f"pi-{self.version}"

    @property
    def major(self) -> int:
        return int(self.line.split(".")[0])

    def argv(self, *args: str) -> list[str]:
        assert self.path is not None, self.missing
        return [str(self.path), *args]

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with this Pi's Node first on PATH (a copy; unchanged for Pi 0.x)."""
        result = dict(env)
        if self.node_dir is not None:
            result["PATH"] = os.pathsep.join([str(self.node_dir), result.get("PATH", "")])
        return result

    def unusable(self) -> str:
        """Why this Pi cannot run here ("" when it can); checked when a test needs it."""
        if self.path is None:
            return self.missing
        if self.min_node is None:
            return ""
        return _node_too_old(self.node_dir, self.min_node)


@functools.cache
def _node_too_old(node_dir: Path | None, minimum: tuple[int, int]) -> str:
    node = str(node_dir / "node") if node_dir is not None else "node"
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return f"Pi 1.x needs Node >= {minimum[0]}.{minimum[1]}; `{node} --version` failed: {error}"
    found = re.match(r"v(\d+)\.(\d+)", out.strip())
    if found is None or (int(found[1]), int(found[2])) < minimum:
        return (
            f"Pi 1.x needs Node >= {minimum[0]}.{minimum[1]}, {node} is {out.strip()!r}: "
            "run `make install` (it installs Node 22 into pi1/)"
        )
    return ""


def _pinned(line: PiLine) -> str:
    try:
        manifest = json.loads(line.manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return line.name
    for key in ("dependencies", "devDependencies"):
        version = manifest.get(key, {}).get(line.package)
        if isinstance(version, str):
            return version.lstrip("^~=")
    return line.name


def _installed_version(binary: Path) -> str | None:
    """The version in the package.json of the Pi package the binary belongs to, if any."""
    for folder in binary.resolve().parents:
        manifest = folder / "package.json"
        if not manifest.is_file():
            continue
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if data.get("name") in PI_PACKAGES and isinstance(data.get("version"), str):
            return str(data["version"])
        return None
    return None


def _node_dir(binary: Path, line: PiLine) -> Path | None:
    if line.min_node is None:
        return None
    # npm's `node` package installed beside Pi (node_modules/node/bin holds only `node`, unlike
    # node_modules/.bin), else the project's, else whatever `node` is on PATH.
    for folder in (binary.parent.parent / "node" / "bin", binary.parent, PROJECT_NODE_DIR):
        node = folder / "node"
        if node.is_file() and os.access(node, os.X_OK):
            return folder
    return None


def discover(line: PiLine, env: Mapping[str, str] | None = None) -> PiInstall:
    env = os.environ if env is None else env
    configured = env.get(line.env_var)
    binary = Path(configured) if configured else line.default_bin
    usable = binary.is_file() and os.access(binary, os.X_OK)
    if not usable:
        why = (
            f"${line.env_var}={configured} is not an executable file"
            if configured
            else f"no Pi {line.name}: set ${line.env_var} or run `make install` "
            f"(looked for {binary})"
        )
        return PiInstall(line.name, _pinned(line), None, None, why, line.min_node)
    version = _installed_version(binary) or (_pinned(line) if not configured else line.name)
    return PiInstall(line.name, version, binary, _node_dir(binary, line), "", line.min_node)


PI_INSTALLS = tuple(discover(line) for line in LINES)


def default_install() -> PiInstall:
    return next(pi for pi in PI_INSTALLS if pi.line == DEFAULT_LINE)
