"""`pi-hindsight setup`: scriptable with flags, interactive with a terminal, never waiting."""

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
    env = dict(os.environ, PI_CODING_AGENT_DIR=str(agent))
    env.pop("PI_HINDSIGHT_STATE_DIR", None)
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
    extension = agent / "extensions" / "pi-hindsight"
    assert (extension / "index.ts").is_file() and (extension / "rpc-client.ts").is_file()
    sidecar = json.loads((extension / "sidecar.json").read_text())
    assert sidecar == {"python": sys.executable, "args": ["-m", "pi_hindsight", "serve"]}
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
