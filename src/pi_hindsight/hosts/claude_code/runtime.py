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

# The hook's path stays free of pathlib (see the imports): os.path throughout.
# ruff: noqa: PTH101, PTH102, PTH103, PTH111, PTH112, PTH117, PTH118, PTH123
from __future__ import annotations

import os
import stat
import zlib

# Annotations only (``from __future__ import annotations``): ``typing``, ``collections``,
# ``dataclasses`` and ``pathlib`` cost the hook client measurable start-up time on every event
# (pathlib alone pulls in re, enum, fnmatch and urllib). The hook's path works on ``str``; what
# the daemon uses returns ``Path``, imported when asked for.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


def _path(text: str) -> Path:
    from pathlib import Path  # noqa: PLC0415 - see the imports

    return Path(text)


# The hook ↔ daemon protocol; part of the socket's name, so a hook never talks to a daemon of
# another version (an upgrade leaves the old one to exit when idle).
PROTOCOL = 2
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
            path = os.path.join(directory, name)
            try:
                with open(path, "rb") as handle:
                    data = handle.read(_MAX_PROJECT_SETTINGS_BYTES + 1)
                import json  # noqa: PLC0415 - only when a settings file is there: cheap hooks

                value = json.loads(data) if len(data) <= _MAX_PROJECT_SETTINGS_BYTES else None
            except (OSError, ValueError, RecursionError):
                continue  # absent or unreadable: Claude Code applies nothing from it either
            env = value.get("env") if isinstance(value, dict) else None
            if isinstance(env, dict):
                found.extend((str(key), path) for key in env if _guarded(str(key)))
    return found


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat_line = handle.read()
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
                with open(f"/proc/{claude}/environ", "rb") as handle:
                    raw = handle.read()
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


def state_dir_text(env: Mapping[str, str]) -> str:
    """The state directory, by the same rule as ``pi_hindsight.paths`` (kept import-free)."""
    configured = env.get(STATE_DIR_ENV)
    if configured:
        return _clean(os.path.expanduser(configured))
    agent = env.get(AGENT_DIR_ENV)
    base = os.path.expanduser(agent) if agent else os.path.expanduser("~/.pi/agent")
    return _clean(os.path.join(base, "hindsight"))


def _clean(path: str) -> str:
    """What ``str(Path(path))`` gives: no trailing or doubled slashes, no ``.`` parts."""
    absolute = path.startswith("/")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    joined = "/".join(parts)
    return ("/" + joined) if absolute else (joined or ".")


def state_dir(env: Mapping[str, str]) -> Path:
    return _path(state_dir_text(env))


def runtime_dir_text(env: Mapping[str, str]) -> str:
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg) and os.path.isdir(xdg):
        return _clean(os.path.join(xdg, "pi-hindsight"))
    return f"/tmp/pi-hindsight-{os.getuid()}"  # noqa: S108 - checked: ours, 0700


def runtime_dir(env: Mapping[str, str]) -> Path:
    return _path(runtime_dir_text(env))


def _key_variable(state: Path | str) -> str | None:
    """The variable the user config's ``hindsight.apiKey`` names (``{"source": "env"}``), if any:
    a key exported anew under any name must reach a daemon that uses it. JSON is parsed only
    when the file names a key variable at all (the hook's path stays cheap)."""
    try:
        with open(os.path.join(str(state), "config.json"), "rb") as handle:
            data = handle.read(_MAX_PROJECT_SETTINGS_BYTES + 1)
        if b"apiKey" not in data:
            return None
        import json  # noqa: PLC0415 - see above

        reference = json.loads(data)["hindsight"]["apiKey"]
        name = reference["name"] if reference.get("source") == "env" else None
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return None
    return name if isinstance(name, str) and name else None


def daemon_key(state: Path | str, env: Mapping[str, str]) -> str:
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

    __slots__ = ("directory_text", "key")

    def __init__(self, directory: str, key: str) -> None:
        self.directory_text = directory
        self.key = key  # the daemon's identity (daemon_key); the daemon checks it on every request

    @property
    def directory(self) -> Path:
        return _path(self.directory_text)

    @property
    def socket_text(self) -> str:
        return os.path.join(self.directory_text, f"{self.name}.sock")

    @property
    def name(self) -> str:
        checksum = zlib.crc32(self.key.encode("utf-8", "surrogateescape")) & 0xFFFFFFFF
        return f"cc{PROTOCOL}-{checksum:08x}"

    @property
    def socket(self) -> Path:
        return _path(self.socket_text)

    @property
    def lock(self) -> Path:
        return self.directory / f"{self.name}.lock"

    @property
    def pid_file(self) -> Path:
        return self.directory / f"{self.name}.pid"


def address(env: Mapping[str, str]) -> Address:
    return Address(runtime_dir_text(env), daemon_key(state_dir_text(env), env))


def ensure_private_dir(path: Path | str) -> Path | str:
    """Create ``path`` 0700 if missing; refuse it unless it is a real directory owned by this
    user with no group or other permissions (then a socket in it is reachable by us alone)."""
    not_a_directory = f"{path} is not a directory; remove it so a private one is made"
    try:
        try:
            os.mkdir(path, mode=0o700)
        except FileNotFoundError:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except FileExistsError:
            pass  # a directory (checked below), or something else (refused below)
    except FileExistsError as error:  # a file (or a dangling link) of that name
        raise RuntimeDirError(not_a_directory) from error
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise RuntimeDirError(not_a_directory)
    if info.st_uid != os.getuid():
        raise RuntimeDirError(
            f"{path} belongs to another user (uid {info.st_uid}); remove it, or set "
            "XDG_RUNTIME_DIR to a private directory"
        )
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path
