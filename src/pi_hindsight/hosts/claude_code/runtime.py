"""Where the daemon listens, and the checks that keep it owner-only. Standard library only: the
hook client imports this on every event.

One daemon per user, state directory and configuring environment: the socket's name carries a
checksum of the state directory and of the ``HINDSIGHT_*`` / ``PI_HINDSIGHT_*`` variables, so a
session started with another server or profile never talks to a daemon configured otherwise.
Sockets live in a short private directory (a unix socket path is limited to ~100 bytes, too
little for a state dir under a deep home): ``$XDG_RUNTIME_DIR/pi-hindsight`` when that is set,
else ``/tmp/pi-hindsight-<uid>``, which must be a real directory, ours, and 0700 — anything else
is refused, never used.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from pathlib import Path

# Annotations only (``from __future__ import annotations``): ``typing``, ``collections`` and
# ``dataclasses`` cost the hook client measurable start-up time on every event.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

PROTOCOL = 1
# One request or answer line. A hook payload is bounded first (MAX_PAYLOAD_BYTES); tool results
# and contexts are far smaller.
MAX_LINE_BYTES = 16 << 20
MAX_PAYLOAD_BYTES = 8 << 20
STATE_DIR_ENV = "PI_HINDSIGHT_STATE_DIR"
AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"
IDLE_ENV = "PI_HINDSIGHT_DAEMON_IDLE_S"
_CONFIG_PREFIXES = ("HINDSIGHT_", "PI_HINDSIGHT_")
# Variables that name no configuration (the daemon's own knobs) are not part of its identity.
_NOT_CONFIG = frozenset({IDLE_ENV})


# How the daemon reaches a remote server (transport.py): a proxy could read the key and the
# memories on their way, a CA file could let one impersonate the server. Part of the daemon's
# identity, and never taken from a repository.
_TRANSPORT = frozenset(
    {
        *(f"{kind}_proxy" for kind in ("http", "https", "all", "no")),
        *(f"{kind}_PROXY" for kind in ("HTTP", "HTTPS", "ALL", "NO")),
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    }
)
# What a repository must not set: Claude Code applies a launch directory's .claude/settings.json
# (and settings.local.json) "env" to the hooks and MCP servers it starts, without any trust
# prompt in -p. Our configuration, state dir, socket dir and transport come from the user alone.
_GUARDED_PREFIXES = (*_CONFIG_PREFIXES, "PI_CODING_AGENT_DIR", "XDG_RUNTIME_DIR")


def _guarded(name: str) -> bool:
    return name.startswith(_GUARDED_PREFIXES) or name in _TRANSPORT


_PROJECT_SETTINGS = (".claude/settings.json", ".claude/settings.local.json")
_MAX_PROJECT_SETTINGS_BYTES = 1 << 20


def repository_set(directories: list[str]) -> list[tuple[str, str]]:
    """(variable, file) for each of our variables a launch directory's Claude Code settings
    set through ``env``: those values come from the repository, not the user."""
    found: list[tuple[str, str]] = []
    for directory in dict.fromkeys(d for d in directories if d):
        for name in _PROJECT_SETTINGS:
            path = Path(directory) / name
            try:
                with path.open("rb") as handle:
                    data = handle.read(_MAX_PROJECT_SETTINGS_BYTES + 1)
                value = json.loads(data) if len(data) <= _MAX_PROJECT_SETTINGS_BYTES else None
            except (OSError, ValueError, RecursionError):
                continue  # absent or unreadable: Claude Code applies nothing from it either
            env = value.get("env") if isinstance(value, dict) else None
            if isinstance(env, dict):
                found.extend((str(key), str(path)) for key in env if _guarded(str(key)))
    return found


def _ppid(pid: int) -> int | None:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return int(stat_line.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def launcher_env(env: Mapping[str, str]) -> dict[str, str] | None:
    """Claude Code's own environment (the user's, before any settings' ``env``), read from
    ``/proc`` — only when ``CLAUDE_PID`` is really an ancestor of this process (Linux)."""
    try:
        claude = int(env.get("CLAUDE_PID", ""))
    except ValueError:
        return None
    pid: int | None = os.getpid()
    for _ in range(6):  # hook <- sh -c <- claude; MCP server <- claude
        pid = None if pid is None else _ppid(pid)
        if pid is None or pid <= 1:
            return None
        if pid == claude:
            try:
                raw = Path(f"/proc/{claude}/environ").read_bytes()
            except OSError:
                return None
            pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
            return {
                k.decode("utf-8", "surrogateescape"): v.decode("utf-8", "surrogateescape")
                for k, v in pairs
            }
    return None


class RepositoryEnvError(Exception):
    """A launch directory's settings set our variables and the user's own values cannot be
    read: memory is off for this event (dropping them could redirect it); says why."""


def user_env(env: Mapping[str, str], cwd: str) -> tuple[dict[str, str], list[str]]:
    """``env`` with our variables as the user set them: what the launch directory's settings
    set among them is replaced by Claude Code's own value (the user's environment), or dropped
    when the user's environment does not have it; and a note per variable replaced. Raises
    RepositoryEnvError when Claude Code's environment cannot be read (not an ancestor any
    more, no ``/proc``): falling back to defaults would let the repository move memory."""
    overridden = repository_set([cwd, env.get("CLAUDE_PROJECT_DIR", "")])
    if not overridden:
        return dict(env), []
    original = launcher_env(env)
    if original is None:
        names = ", ".join(sorted({name for name, _ in overridden}))
        files = ", ".join(sorted({path for _, path in overridden}))
        raise RepositoryEnvError(
            f"{files} sets {names} and Claude Code's own environment cannot be read, so "
            "memory is off here (a repository cannot configure memory); remove those "
            "variables from the repository's settings to use memory"
        )
    cleaned = dict(env)
    for name, _ in overridden:
        if name in original:
            cleaned[name] = original[name]
        else:
            cleaned.pop(name, None)
    notes = [
        f"ignored {name} set by {path}: a repository cannot configure memory"
        for name, path in overridden
    ]
    return cleaned, list(dict.fromkeys(notes))


class RuntimeDirError(Exception):
    """The socket directory is not safe to use; the message says why and how to fix it."""


def state_dir(env: Mapping[str, str]) -> Path:
    """The state directory, by the same rule as ``pi_hindsight.paths`` (kept import-free)."""
    configured = env.get(STATE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    agent = env.get(AGENT_DIR_ENV)
    base = Path(agent).expanduser() if agent else Path.home() / ".pi" / "agent"
    return base / "hindsight"


def runtime_dir(env: Mapping[str, str]) -> Path:
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_absolute() and Path(xdg).is_dir():
        return Path(xdg) / "pi-hindsight"
    return Path("/tmp") / f"pi-hindsight-{os.getuid()}"  # noqa: S108 - checked: ours, 0700


def _key_variable(state: Path) -> str | None:
    """The variable the user config's ``hindsight.apiKey`` names (``{"source": "env"}``), if any:
    a key exported anew under any name must reach a daemon that uses it."""
    try:
        with (state / "config.json").open("rb") as handle:
            data = handle.read(_MAX_PROJECT_SETTINGS_BYTES + 1)
        reference = json.loads(data)["hindsight"]["apiKey"]
        name = reference["name"] if reference.get("source") == "env" else None
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return None
    return name if isinstance(name, str) and name else None


def daemon_key(state: Path, env: Mapping[str, str]) -> str:
    """What one daemon serves: the state dir and the configuring variables (values included,
    so a changed server URL, key or proxy starts a daemon of its own; only a checksum is
    shown)."""
    named = _key_variable(state)
    configured = sorted(
        (name, value)
        for name, value in env.items()
        if (name.startswith(_CONFIG_PREFIXES) and name not in _NOT_CONFIG)
        or name in _TRANSPORT
        or name == named
    )
    parts = [str(state), *(f"{name}={value}" for name, value in configured)]
    return "\0".join(parts)


class Address:
    """Where the daemon for ``key`` listens (a plain class: see the imports)."""

    __slots__ = ("directory", "key")

    def __init__(self, directory: Path, key: str) -> None:
        self.directory = directory
        self.key = key  # the daemon's identity (daemon_key); the daemon checks it on every request

    @property
    def name(self) -> str:
        checksum = zlib.crc32(self.key.encode("utf-8", "surrogateescape")) & 0xFFFFFFFF
        return f"cc-{checksum:08x}"

    @property
    def socket(self) -> Path:
        return self.directory / f"{self.name}.sock"

    @property
    def lock(self) -> Path:
        return self.directory / f"{self.name}.lock"

    @property
    def pid_file(self) -> Path:
        return self.directory / f"{self.name}.pid"


def address(env: Mapping[str, str]) -> Address:
    state = state_dir(env)
    return Address(runtime_dir(env), daemon_key(state, env))


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` 0700 if missing; refuse it unless it is a real directory owned by this
    user with no group or other permissions (then a socket in it is reachable by us alone)."""
    not_a_directory = f"{path} is not a directory; remove it so a private one is made"
    try:
        try:
            path.mkdir(mode=0o700, parents=False, exist_ok=True)
        except FileNotFoundError:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            path.mkdir(mode=0o700, exist_ok=True)
    except FileExistsError as error:  # a file (or a dangling link) of that name
        raise RuntimeDirError(not_a_directory) from error
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise RuntimeDirError(not_a_directory)
    if info.st_uid != os.getuid():
        raise RuntimeDirError(
            f"{path} belongs to another user (uid {info.st_uid}); remove it, or set "
            "XDG_RUNTIME_DIR to a private directory"
        )
    if info.st_mode & 0o077:
        path.chmod(0o700)  # ours: make it private rather than refuse
    return path
