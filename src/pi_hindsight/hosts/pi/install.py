"""Installing the Pi extension the way Pi users install things, and undoing it exactly.

Two forms, never both (a shim loaded twice starts two sidecars):

- **package** (preferred): ``pi install <shim dir>`` registers the folder the Python package
  ships (``pi_hindsight/shim``) in ``<agent dir>/settings.json``; Pi loads it in place, so an
  upgrade of the Python package plus ``/reload`` runs the new shim (R-RECALL-8). ``pi list``
  shows it and ``pi remove`` removes it. Pi 0.73.1 and 1.x both have these commands.
- **copy** (fallback when no ``pi`` command is found): the shim's files copied into
  ``<agent dir>/extensions/pi-hindsight/``; ``setup`` must be run again after an upgrade.

Either way Pi loads the entry ``pi-hindsight/index.ts`` and names the extension after that folder.

``sidecar.json`` (which interpreter runs the sidecar) goes in the state dir, outside the files an
upgrade replaces; the shim looks there (``index.ts`` ``sidecarCandidates``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pi_hindsight.paths import ensure_private_dir

SHIM_PACKAGE_NAME = "pi-hindsight-shim"  # shim/package.json "name": how our folders are known
COPY_DIR_NAME = "pi-hindsight"
SIDECAR_FILE = "sidecar.json"
PI_BIN_ENV = "PI_BIN"
_SHIPPED_SUFFIXES = {".ts", ".json"}
_REMOTE_PREFIXES = ("npm:", "git:", "git+", "http://", "https://", "ssh://", "git@")
PI_TIMEOUT_S = 120


class InstallError(Exception):
    """Installing or removing failed; the message says what and how to fix it."""


@dataclass(frozen=True)
class PiCommand:
    """A ``pi`` executable to run package commands with."""

    path: Path
    found_by: str  # "--pi", "$PI_BIN" or "PATH"
    # A Node installed beside Pi (npm's `node` package, as in a checkout's pi1/): first on PATH.
    node_dir: Path | None = None

    def run(self, agent_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        env["PI_CODING_AGENT_DIR"] = str(agent_dir)
        env["PI_OFFLINE"] = "1"  # a local path needs no network; no update checks either
        if self.node_dir is not None:
            env["PATH"] = os.pathsep.join([str(self.node_dir), env.get("PATH", "")])
        try:
            return subprocess.run(
                [str(self.path), *args],
                cwd=agent_dir,
                env=env,
                capture_output=True,
                text=True,
                timeout=PI_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as error:
            raise InstallError(f"could not run {self.path} {' '.join(args)}: {error}") from error


def _node_beside(pi: Path) -> Path | None:
    for folder in (pi.parent.parent / "node" / "bin", pi.parent):
        node = folder / "node"
        if node.is_file() and os.access(node, os.X_OK):
            return folder
    return None


def find_pi(explicit: Path | None, env: Mapping[str, str] | None = None) -> PiCommand | None:
    """``--pi PATH``, else ``$PI_BIN``, else ``pi`` on PATH; ``None`` when there is none.

    A named path that is not an executable is an error, not a reason to fall back.
    """
    env = os.environ if env is None else env
    for value, found_by in ((explicit, "--pi"), (env.get(PI_BIN_ENV), f"${PI_BIN_ENV}")):
        if not value:
            continue
        path = Path(value).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise InstallError(f"{found_by} {value} is not an executable file")
        return PiCommand(path.absolute(), found_by, _node_beside(path.absolute()))
    on_path = shutil.which("pi", path=env.get("PATH"))
    if on_path is None:
        return None
    return PiCommand(Path(on_path), "PATH", _node_beside(Path(on_path)))


def shim_source() -> Path:
    """The folder holding the shim this Python package ships (site-packages or a checkout)."""
    folder = Path(str(resources.files("pi_hindsight") / "shim"))
    if not (folder / "package.json").is_file():
        raise InstallError(f"the shim is missing from this installation: no {folder}/package.json")
    return folder


def is_shim_folder(folder: Path) -> bool:
    """A folder of ours: its package.json names the shim, or (a folder an uninstall of the Python
    package removed) it was ``…/pi_hindsight/shim``."""
    try:
        manifest = json.loads((folder / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return not folder.exists() and folder.parts[-2:] == ("pi_hindsight", "shim")
    return isinstance(manifest, dict) and manifest.get("name") == SHIM_PACKAGE_NAME


def _package_source(entry: object) -> str | None:
    source = entry.get("source") if isinstance(entry, dict) else entry
    return source if isinstance(source, str) else None


def installed_packages(agent_dir: Path) -> list[Path]:
    """Our folders among the packages in ``<agent dir>/settings.json`` (resolved, in order)."""
    try:
        settings = json.loads((agent_dir / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    packages = settings.get("packages") if isinstance(settings, dict) else None
    found: list[Path] = []
    for entry in packages if isinstance(packages, list) else []:
        source = _package_source(entry)
        if source is None or source.startswith(_REMOTE_PREFIXES):
            continue
        # Pi resolves a local path from the settings file's folder (the agent dir).
        folder = (agent_dir / Path(source).expanduser()).resolve()
        if is_shim_folder(folder) and folder not in found:
            found.append(folder)
    return found


def installed_copy(agent_dir: Path) -> Path | None:
    folder = agent_dir / "extensions" / COPY_DIR_NAME
    return folder if folder.is_dir() and is_shim_folder(folder) else None


def write_sidecar_spec(state_dir: Path, python: str) -> Path:
    """``<state dir>/sidecar.json``: the interpreter the shim starts (0600, written atomically)."""
    ensure_private_dir(state_dir)
    target = state_dir / SIDECAR_FILE
    temporary = state_dir / f"{SIDECAR_FILE}.tmp"
    spec = {"python": python, "args": ["-m", "pi_hindsight", "serve"]}
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(spec, indent=2) + "\n")
    temporary.replace(target)
    return target


def copy_shim(agent_dir: Path, source: Path | None = None) -> Path:
    """The copy form: the shim's files in ``<agent dir>/extensions/pi-hindsight``."""
    source = shim_source() if source is None else source
    target = agent_dir / "extensions" / COPY_DIR_NAME
    if target.exists() and installed_copy(agent_dir) is None and any(target.iterdir()):
        raise InstallError(f"{target} exists and is not pi-hindsight's extension: move it away")
    target.mkdir(parents=True, exist_ok=True)
    # The shim's files and its entry folder (``pi-hindsight/index.ts``: the name Pi shows).
    for entry in sorted(source.rglob("*")):
        shipped = entry.suffix in _SHIPPED_SUFFIXES and entry.name != SIDECAR_FILE
        if entry.is_file() and shipped and "node_modules" not in entry.parts:
            destination = target / entry.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(entry, destination)
    # A sidecar.json beside index.ts (older versions wrote it there) would win over the state dir's.
    (target / SIDECAR_FILE).unlink(missing_ok=True)
    return target


@dataclass(frozen=True)
class InstallResult:
    form: Literal["package", "copy"]
    location: Path  # the package folder Pi loads, or the copy
    sidecar: Path
    pi: PiCommand | None
    removed: tuple[str, ...]  # older forms taken away
    note: str | None = None  # why this form


def _pi_failed(pi: PiCommand, what: str, completed: subprocess.CompletedProcess[str]) -> str:
    tail = (completed.stderr or completed.stdout).strip().splitlines()[-5:]
    detail = "\n  ".join(tail) if tail else "no output"
    return (
        f"`{pi.path} {what}` exited {completed.returncode} ({pi.found_by}):\n  {detail}\n"
        "Pass a working Pi with --pi PATH (Pi 1.x needs Node >= 22.19 on PATH)."
    )


def _remove_package(pi: PiCommand, agent_dir: Path, folder: Path) -> None:
    completed = pi.run(agent_dir, "remove", str(folder))
    if completed.returncode != 0:
        raise InstallError(_pi_failed(pi, f"remove {folder}", completed))


def install(
    agent_dir: Path,
    state_dir: Path,
    python: str,
    pi: PiCommand | None,
    source: Path | None = None,
) -> InstallResult:
    """Install the shim as a Pi package (or, without a ``pi``, as a copy) and remove the other
    form and any other copy of ours, so that exactly one is installed."""
    source = (shim_source() if source is None else source).resolve()
    agent_dir.mkdir(parents=True, exist_ok=True)
    removed: list[str] = []
    if pi is None:
        packages = installed_packages(agent_dir)
        if packages == [source]:
            sidecar = write_sidecar_spec(state_dir, python)
            copy = installed_copy(agent_dir)
            if copy is not None:
                shutil.rmtree(copy)
                removed.append(f"the copy in {copy}")
            note = "already installed as a Pi package (no `pi` command found to reinstall it)"
            return InstallResult("package", source, sidecar, None, tuple(removed), note)
        if packages:
            listed = ", ".join(str(folder) for folder in packages)
            raise InstallError(
                f"pi-hindsight is installed as a Pi package ({listed}) but no `pi` command was "
                "found to change that: pass --pi PATH (or set $PI_BIN)"
            )
        location = copy_shim(agent_dir, source)
        sidecar = write_sidecar_spec(state_dir, python)
        note = (
            "no `pi` command found (--pi, $PI_BIN, PATH): copied the extension instead; "
            "run setup again after upgrading pi-hindsight, or with --pi PATH to install it as "
            "a Pi package"
        )
        return InstallResult("copy", location, sidecar, None, (), note)
    completed = pi.run(agent_dir, "install", str(source))
    if completed.returncode != 0:
        raise InstallError(_pi_failed(pi, f"install {source}", completed))
    sidecar = write_sidecar_spec(state_dir, python)
    for folder in installed_packages(agent_dir):
        if folder != source:
            _remove_package(pi, agent_dir, folder)
            removed.append(f"the Pi package {folder}")
    copy = installed_copy(agent_dir)
    if copy is not None:
        shutil.rmtree(copy)
        removed.append(f"the copy in {copy}")
    return InstallResult("package", source, sidecar, pi, tuple(removed))


def uninstall(agent_dir: Path, state_dir: Path, pi: PiCommand | None) -> tuple[str, ...]:
    """Remove every form of ours (packages through ``pi remove``, the copy) and sidecar.json;
    other packages, extensions and the state (config, memory records) are left alone."""
    packages = installed_packages(agent_dir)
    removed: list[str] = []
    if packages:
        if pi is None:
            listed = ", ".join(str(folder) for folder in packages)
            raise InstallError(
                f"pi-hindsight is installed as a Pi package ({listed}) but no `pi` command was "
                "found to remove it: pass --pi PATH (or set $PI_BIN)"
            )
        for folder in packages:
            _remove_package(pi, agent_dir, folder)
            removed.append(f"the Pi package {folder}")
    copy = installed_copy(agent_dir)
    if copy is not None:
        shutil.rmtree(copy)
        removed.append(f"the copy in {copy}")
    sidecar = state_dir / SIDECAR_FILE
    if sidecar.exists():
        sidecar.unlink()
        removed.append(str(sidecar))
    return tuple(removed)
