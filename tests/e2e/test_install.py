"""Installed the way Pi users install things, on every Pi version: `pi-hindsight setup` installs a
Pi package (`pi list` shows it, `setup --uninstall` takes it away and nothing else), and after an
upgrade of the Python package a `/reload` runs the new shim (R-RECALL-8)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from pi_hindsight.hosts.pi import install as pi_install
from tests.plugins.pi import PiRpc, PiWorld
from tests.plugins.pi_versions import PiInstall
from tests.plugins.standin import pi_env
from tests.support.waiting import wait_for_text

pytestmark = [pytest.mark.pi]

SHIM = Path(pi_install.__file__).resolve().parents[2] / "shim"
# A command that reloads like the TUI's /reload (RPC mode has no /reload of its own).
RELOADER = """
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
export default function (pi: ExtensionAPI) {
  pi.registerCommand("test-reload", { description: "reload", handler: async (_args, ctx) => {
    await ctx.reload();
  } });
}
"""


def _pi_list(pi: PiInstall, agent: Path) -> str:
    completed = subprocess.run(
        pi.argv("list"),
        cwd=agent,
        env=pi_env(agent, pi=pi),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return completed.stdout


def _setup(pi: PiInstall, agent: Path, *args: str) -> dict[str, object]:
    env = pi_env(agent, pi=pi)
    env.pop("PI_HINDSIGHT_STATE_DIR", None)
    completed = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "setup", "--yes", "--json", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    result: dict[str, object] = json.loads(completed.stdout)
    return result


@pytest.mark.pi_both("install")
def test_setup_installs_a_pi_package_replacing_the_copy_and_uninstall_undoes_it_exactly(
    pi_binary: PiInstall, tmp_path: Path
) -> None:
    agent = tmp_path / "agent"
    extensions = agent / "extensions"
    (extensions / "mine").mkdir(parents=True)
    (extensions / "mine" / "index.ts").write_text("export default function () {}\n")
    other = tmp_path / "other-package"
    other.mkdir()
    (other / "package.json").write_text(json.dumps({"name": "other", "keywords": ["pi-package"]}))
    settings = {"packages": ["../other-package"], "theme": "dark"}
    (agent / "settings.json").write_text(json.dumps(settings))
    # An older install: the copy in extensions/ (never two copies: setup takes it away).
    pi_install.copy_shim(agent)

    result = _setup(pi_binary, agent, "--pi", str(pi_binary.path))
    shim = SHIM.resolve()
    assert (result["form"], result["extension"]) == ("package", str(shim))
    assert result["removed"] == [f"the copy in {extensions / 'pi-hindsight'}"]
    assert sorted(p.name for p in extensions.iterdir()) == ["mine"]
    listed = _pi_list(pi_binary, agent)
    assert str(shim) in listed and str(other) in listed
    sidecar = json.loads((agent / "hindsight" / "sidecar.json").read_text())
    assert sidecar["python"] == sys.executable

    again = _setup(pi_binary, agent, "--pi", str(pi_binary.path))  # idempotent: still one entry
    assert again["removed"] == []
    packages = json.loads((agent / "settings.json").read_text())["packages"]
    assert len(packages) == 2

    removed = _setup(pi_binary, agent, "--uninstall", "--pi", str(pi_binary.path))["removed"]
    assert removed == [f"the Pi package {shim}", str(agent / "hindsight" / "sidecar.json")]
    after = json.loads((agent / "settings.json").read_text())
    assert after == settings  # the other package and setting untouched
    listed = _pi_list(pi_binary, agent)
    assert str(shim) not in listed and str(other) in listed
    assert sorted(p.name for p in extensions.iterdir()) == ["mine"]
    assert (agent / "hindsight" / "config.json").is_file()


# Pi's start-up listing in its terminal UI: "[Extensions]" then the extensions' names.
_TERMINAL_CODES = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]"
)
_EXTENSIONS = re.compile(r"\[Extensions\]\s+(\S[^\r\n]*?)(?:\s{2,}|\r|\n)")


def _extensions_listed(pi: PiInstall, agent: Path, work: Path, timeout: float = 90) -> list[str]:
    """The names interactive Pi shows under ``[Extensions]`` at start-up (in a terminal)."""
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    env = pi_env(agent, pi=pi)
    env["TERM"] = "xterm-256color"
    process = subprocess.Popen(
        pi.argv(),
        cwd=work,
        env=env,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        close_fds=True,
        start_new_session=True,
    )
    os.close(secondary)
    screen = ""
    deadline = time.monotonic() + timeout
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            found = _EXTENSIONS.search(_TERMINAL_CODES.sub("", screen))
            if found:
                return [name.strip() for name in found[1].split(",")]
            ready, _, _ = select.select([primary], [], [], remaining)
            if not ready:
                break
            try:
                screen += os.read(primary, 65536).decode("utf-8", errors="replace")
            except OSError:  # Pi exited
                break
        raise AssertionError(f"no [Extensions] listing; Pi showed {screen[-2000:]!r}")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        os.close(primary)


@pytest.mark.parametrize("form", ["package", "copy"])
def test_pi_lists_the_extension_as_pi_hindsight(
    pi_binary: PiInstall, tmp_path: Path, form: str
) -> None:
    """Issue 19: Pi named the extension after its entry's folder, ``shim``; a user could not tell
    what it was. Installed by setup, either form shows as ``pi-hindsight``."""
    agent = tmp_path / "agent"
    agent.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    if form == "package":
        assert _setup(pi_binary, agent, "--pi", str(pi_binary.path))["form"] == "package"
    else:
        pi_install.copy_shim(agent)
    assert _extensions_listed(pi_binary, agent, work) == ["pi-hindsight"]


def _wait_for_log(log: Path, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = log.read_text(encoding="utf-8") if log.exists() else ""
        if text in content:
            return content
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {log}")


@pytest.mark.pi_both("install")
def test_a_reload_after_upgrading_the_python_package_runs_the_new_shim(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    """R-RECALL-8: Pi loads the package folder in place, so replacing its files (what a pip
    upgrade does) and running /reload starts the new shim; sidecar.json lives in the state dir
    and survives the upgrade."""
    site = tmp_path / "site-packages" / "pi_hindsight" / "shim"
    shutil.copytree(SHIM, site, ignore=shutil.ignore_patterns("sidecar.json"))
    pi = pi_world.pi
    assert pi.path is not None
    command = pi_install.PiCommand(pi.path, "test", pi.node_dir)
    result = pi_install.install(
        pi_world.agent_dir, pi_world.state_dir, sys.executable, command, source=site
    )
    assert result.form == "package" and result.removed  # the fixture's copy is gone
    (pi_world.agent_dir / "extensions" / "reloader.ts").write_text(RELOADER)
    work = tmp_path / "work"
    work.mkdir()
    log = pi_world.state_dir / "logs" / "sidecar.log"

    rpc = PiRpc(pi_world, work)
    try:
        wait_for_text(log, f"initialize (startup): Pi {pi.version}, shim 0.1.0", timeout=60)
        # The upgrade: the old files go, the new ones arrive (pip removes and rewrites).
        upgraded = (site / "index.ts").read_text(encoding="utf-8")
        upgraded = upgraded.replace('SHIM_VERSION = "0.1.0"', 'SHIM_VERSION = "0.2.0-upgraded"')
        shutil.rmtree(site)
        shutil.copytree(SHIM, site, ignore=shutil.ignore_patterns("sidecar.json"))
        (site / "index.ts").write_text(upgraded, encoding="utf-8")
        rpc.send({"id": "reload", "type": "prompt", "message": "/test-reload"})
        rpc.wait_for(
            lambda e: e.get("type") == "response" and e.get("id") == "reload", "the reload"
        )
        content = wait_for_text(
            log, f"initialize (reload): Pi {pi.version}, shim 0.2.0-upgraded", timeout=60
        )
        assert "shutting down (reload)" in content  # the old shim's sidecar stopped
    finally:
        assert rpc.close() == 0
