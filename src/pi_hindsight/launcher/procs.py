"""Process plumbing for the launcher: identities, spawning, signalling, ports.

A pid alone does not name a process: after a crash the number can be reused by anything. The
launcher therefore records a :class:`ProcessIdentity` — the pid plus the kernel's start time of
that process (``/proc/<pid>/stat`` field 22) — and only signals a pid whose start time still
matches. Nothing here ever looks processes up by name.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import BinaryIO, Literal

from pi_hindsight.serialisation import SnakeRecord

logger = logging.getLogger(__name__)

PROC = Path("/proc")

# Children we spawned from this Python process. Holding the Popen objects lets us reap them
# (a dead child stays a zombie, with a /proc entry, until its parent waits for it) and keeps
# Popen.__del__ from warning that a deliberately long-lived child is "still running".
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class ProcessIdentity(SnakeRecord):
    """A pid plus the start time that makes it unambiguous."""

    pid: int
    start_ticks: int


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name, or None if there is no such pid."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name is in parentheses and may itself contain spaces or parentheses.
    return raw[raw.rindex(")") + 2 :].split()


def identify(pid: int) -> ProcessIdentity | None:
    """The identity of a live process, or None if it is gone (or a zombie)."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    # fields[0] is field 3 (state); field 22 (starttime) is therefore fields[19].
    return ProcessIdentity(pid=pid, start_ticks=int(fields[19]))


def cmdline(pid: int) -> list[str]:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def process_uid(pid: int) -> int | None:
    """The real uid of a process, from ``/proc/<pid>/status``."""
    try:
        lines = (PROC / str(pid) / "status").read_text().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in lines:
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return None


def rss_bytes(pid: int) -> int | None:
    """Resident set size of one process."""
    try:
        lines = (PROC / str(pid) / "status").read_text().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in lines:
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def is_running(identity: ProcessIdentity) -> bool:
    """True if the very process recorded in ``identity`` is alive (not merely its pid)."""
    _reap(identity.pid)
    return identify(identity.pid) == identity


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]


def spawn(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    log_file: Path,
) -> ProcessIdentity:
    """Start a long-lived process in its own session, output appended to ``log_file``.

    Its own session keeps a Ctrl-C in the launching terminal (or pytest's) from reaching it: the
    launcher decides when it stops.
    """
    with open_log(log_file) as log:
        child = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN[child.pid] = child
    identity = identify(child.pid)
    if identity is None:
        child.wait()
        del _CHILDREN[child.pid]
        raise OSError(errno.ESRCH, f"{argv[0]} exited immediately (status {child.returncode})")
    return identity


def open_log(path: Path) -> BinaryIO:
    """Open a log file for appending, creating it owner-only (logs can quote memories)."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")


def send_signal(identity: ProcessIdentity, signum: signal.Signals) -> bool:
    """Signal the recorded process if it is still the same process. Returns whether it was sent."""
    if not is_running(identity):
        return False
    try:
        os.kill(identity.pid, signum)
    except ProcessLookupError:
        return False
    return True


def wait_gone(identity: ProcessIdentity, timeout: float) -> bool:
    """Wait until the recorded process has exited; True if it did within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        if not is_running(identity):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


StopOutcome = Literal["terminated", "killed", "not_running", "survived"]


def terminate(identity: ProcessIdentity, *, timeout: float, first: signal.Signals) -> StopOutcome:
    """Send ``first`` (e.g. SIGTERM), wait up to ``timeout``, then SIGKILL."""
    if not send_signal(identity, first):
        return "not_running"
    if wait_gone(identity, timeout):
        return "terminated"
    logger.warning(
        "pid %d ignored %s for %.0fs; sending SIGKILL", identity.pid, first.name, timeout
    )
    send_signal(identity, signal.SIGKILL)
    return "killed" if wait_gone(identity, 10.0) else "survived"


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` (an IPv4 or IPv6 address) right now."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def log_tail(path: Path, *, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file (empty if it does not exist)."""
    with contextlib.suppress(FileNotFoundError):
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            text = handle.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])
    return ""
