"""`pi-hindsight setup`: scriptable with flags, interactive with a terminal, never waiting;
without a `pi` command it copies the extension (the package form: tests/e2e/test_install.py).
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path


def _env(agent: Path) -> dict[str, str]:
    """No `pi` to be found: no $PI_BIN, and a PATH with only what Python's folder holds."""
    env = dict(os.environ, PI_CODING_AGENT_DIR=str(agent), PATH=str(Path(sys.executable).parent))
    for name in ("PI_HINDSIGHT_STATE_DIR", "PI_BIN"):
        env.pop(name, None)
    return env


def test_without_a_terminal_setup_uses_flags_and_defaults_and_never_waits(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    completed = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "setup", "--json"],
        env=_env(agent),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(completed.stdout)
    assert result["profile"] == "project-only"
    # No `pi` command: the extension is copied, and setup says so.
    extension = agent / "extensions" / "pi-hindsight"
    assert (result["form"], result["extension"]) == ("copy", str(extension))
    assert "no `pi` command found" in result["note"]
    assert (extension / "index.ts").is_file() and (extension / "rpc-client.ts").is_file()
    assert (extension / "pi-hindsight" / "index.ts").is_file()  # the entry, named as Pi shows it
    assert not (extension / "sidecar.json").exists()
    # sidecar.json lives in the state dir, where an upgrade of the files never replaces it.
    sidecar_file = agent / "hindsight" / "sidecar.json"
    sidecar = json.loads(sidecar_file.read_text())
    assert sidecar == {"python": sys.executable, "args": ["-m", "pi_hindsight", "serve"]}
    assert sidecar_file.stat().st_mode & 0o777 == 0o600
    assert (agent / "hindsight").stat().st_mode & 0o777 == 0o700

    subprocess.run(
        [
            sys.executable,
            "-m",
            "pi_hindsight",
            "setup",
            "--profile",
            "recall-only",
            "--bank",
            "team-code",
        ],
        env=_env(agent),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=True,
    )
    config = json.loads((agent / "hindsight" / "config.json").read_text())
    assert (
        config["profile"] == "recall-only" and config["banks"]["project"]["bankId"] == "team-code"
    )
    assert (agent / "hindsight" / "config.json").stat().st_mode & 0o777 == 0o600


def _expect(fd: int, text: str, buffer: bytearray, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while text.encode() not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(
                f"{text!r} never appeared; got {buffer.decode(errors='replace')!r}"
            )
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                buffer.extend(os.read(fd, 4096))
            except OSError:
                break


def test_with_a_terminal_setup_asks_for_the_profile_and_the_user_bank(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "pi_hindsight", "setup"],
        env=_env(agent),
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        close_fds=True,
    )
    os.close(secondary)
    buffer = bytearray()
    try:
        _expect(primary, "Profile", buffer)
        os.write(primary, b"project+user\n")
        _expect(primary, "User bank id", buffer)
        os.write(primary, b"me-everywhere\n")
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        os.close(primary)
    config = json.loads((agent / "hindsight" / "config.json").read_text())
    assert config["profile"] == "project+user"
    assert config["banks"]["user"] == {"bankId": "me-everywhere", "enabled": True}


def _setup(agent: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "setup", "--yes", *args],
        env=_env(agent),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_uninstall_removes_the_copy_and_sidecar_json_and_nothing_else(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    other = agent / "extensions" / "other-extension"
    other.mkdir(parents=True)
    (other / "index.ts").write_text("export default function () {}\n")
    (agent / "extensions" / "single.ts").write_text("export default function () {}\n")
    assert _setup(agent, "--json").returncode == 0
    assert (agent / "extensions" / "pi-hindsight" / "index.ts").is_file()

    completed = _setup(agent, "--uninstall", "--json")
    assert completed.returncode == 0, completed.stderr
    removed = json.loads(completed.stdout)["removed"]
    assert removed == [
        f"the copy in {agent / 'extensions' / 'pi-hindsight'}",
        str(agent / "hindsight" / "sidecar.json"),
    ]
    assert sorted(p.name for p in (agent / "extensions").iterdir()) == [
        "other-extension",
        "single.ts",
    ]
    assert (agent / "hindsight" / "config.json").is_file()  # the user's choices stay
    again = _setup(agent, "--uninstall")
    assert again.returncode == 0 and "nothing to remove" in again.stdout


def test_an_unusable_pi_is_a_clear_error_that_changes_nothing(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    completed = _setup(agent, "--pi", str(tmp_path / "no-such-pi"))
    assert completed.returncode == 2
    assert f"--pi {tmp_path / 'no-such-pi'} is not an executable file" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert not agent.exists()

    broken = tmp_path / "pi"
    broken.write_text("#!/bin/sh\necho 'SyntaxError: node is too old' >&2\nexit 1\n")
    broken.chmod(0o755)
    completed = _setup(agent, "--pi", str(broken))
    assert completed.returncode == 1
    assert (
        "exited 1 (--pi)" in completed.stderr and "SyntaxError: node is too old" in completed.stderr
    )
    assert "Pi 1.x needs Node >= 22.19" in completed.stderr
    assert (
        not (agent / "extensions").exists() and not (agent / "hindsight" / "sidecar.json").exists()
    )
