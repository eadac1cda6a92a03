"""The Claude Code hook: a tiny client of the per-user daemon. Standard library only.

Claude Code starts a hook process per event, so this must not pay for the engine, pydantic or
the Hindsight client (1 to 2 s of imports): it reads the event's JSON from stdin, forwards it
unparsed to the daemon over its unix socket (starting the daemon when none answers), and prints
the daemon's hook output. ``bench/claude_code_hooks.py`` measures what it adds.

It always exits 0 and never blocks a prompt: when the daemon cannot be reached or fails, the hook
prints at most a ``systemMessage`` saying so (shown to the user, never to the model) and Claude
Code goes on; what was not retained is picked up later from the transcript cursor.

    python -m pi_hindsight.hosts.claude_code.hook <EventName>   # settings.json hooks
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time
from pathlib import Path

from pi_hindsight.hosts.claude_code import runtime

# Annotations only: ``typing`` and ``collections`` cost start-up time on every event.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# The client's own bound per event (the daemon bounds its work well inside these; the hook
# entries' ``timeout`` in settings.json are larger still).
TIMEOUTS_S: Mapping[str, float] = {
    "SessionStart": 14.0,
    "UserPromptSubmit": 25.0,
    "Stop": 25.0,
    "SubagentStop": 25.0,
    "PreCompact": 25.0,
    "SessionEnd": 8.0,
}
DEFAULT_TIMEOUT_S = 10.0
START_WAIT_S = 10.0  # for a daemon just started: its imports and stores


class DaemonUnavailable(Exception):
    """The daemon could not be reached or answered nothing usable; the message says why."""


def _peer_uid(connection: socket.socket) -> int | None:
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # not Linux: the private directory is the guard
        return None
    raw = connection.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


def _connect(path: Path, timeout: float) -> socket.socket:
    info = path.lstat()  # FileNotFoundError: no daemon
    if info.st_uid != os.getuid():
        raise DaemonUnavailable(f"{path} is not this user's; refusing it")
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(timeout)
    try:
        connection.connect(str(path))
        peer = _peer_uid(connection)
        if peer is not None and peer != os.getuid():
            raise DaemonUnavailable(f"the daemon at {path} runs as uid {peer}; refusing it")
    except BaseException:
        connection.close()
        raise
    return connection


def _spawn(env: Mapping[str, str]) -> None:
    import subprocess  # noqa: PLC0415 - only when no daemon answers
    import threading  # noqa: PLC0415

    state = runtime.state_dir(env)
    logs = state / "logs"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    log = os.open(logs / "claude-code-daemon.out", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        # Detached, with nothing of ours inherited: Claude Code waits for the hook's stdout to
        # close, so the daemon must not hold it.
        daemon = subprocess.Popen(
            [sys.executable, "-m", "pi_hindsight", "claude-code", "daemon"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=dict(env),
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(log)
    # Reaped when it exits, should this process outlive it (the MCP server does).
    threading.Thread(target=daemon.wait, name="daemon-reaper", daemon=True).start()


def _open(
    address: runtime.Address, env: Mapping[str, str], timeout: float, spawn: bool
) -> socket.socket:
    try:
        return _connect(address.socket, timeout)
    except (FileNotFoundError, ConnectionRefusedError) as error:
        if not spawn:
            raise DaemonUnavailable("no daemon is running") from error
    _spawn(env)
    deadline = time.monotonic() + START_WAIT_S
    while True:
        try:
            return _connect(address.socket, timeout)
        except (FileNotFoundError, ConnectionRefusedError) as error:
            if time.monotonic() > deadline:
                raise DaemonUnavailable(
                    f"the daemon did not start within {START_WAIT_S:.0f} s (see "
                    f"{runtime.state_dir(env) / 'logs' / 'claude-code-daemon.log'})"
                ) from error
            time.sleep(0.02)


def call(
    request: dict[str, Any],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    spawn: bool = True,
) -> Any:
    """Send one request to the daemon (starting it when none answers, unless ``spawn`` is
    false); its answer's ``result``. Raises DaemonUnavailable with the reason."""
    env = os.environ if env is None else env
    address = runtime.address(env)
    try:
        runtime.ensure_private_dir(address.directory)
    except (runtime.RuntimeDirError, OSError) as error:
        raise DaemonUnavailable(str(error)) from error
    line = json.dumps({"v": runtime.PROTOCOL, "key": address.key, **request}, ensure_ascii=True)
    try:
        with _open(address, env, timeout, spawn) as connection:
            connection.sendall(line.encode("ascii") + b"\n")
            connection.shutdown(socket.SHUT_WR)
            chunks: list[bytes] = []
            received = 0
            while chunk := connection.recv(65536):
                chunks.append(chunk)
                received += len(chunk)
                if received > runtime.MAX_LINE_BYTES:
                    raise DaemonUnavailable("the daemon's answer is too large")
    except TimeoutError as error:
        raise DaemonUnavailable(f"the daemon did not answer within {timeout:.0f} s") from error
    except OSError as error:
        raise DaemonUnavailable(f"the daemon could not be reached: {error}") from error
    try:
        answer = json.loads(b"".join(chunks).decode("utf-8", "replace"))
    except ValueError as error:
        raise DaemonUnavailable("the daemon's answer is not JSON") from error
    if not isinstance(answer, dict):
        raise DaemonUnavailable("the daemon's answer is not an object")
    if answer.get("ok") is not True:
        raise DaemonUnavailable(str(answer.get("error") or "the daemon refused the request"))
    return answer.get("result")


def _read_payload() -> tuple[str | None, int]:
    """stdin as text (bad UTF-8 replaced, parsed by the daemon), or None when over the bound."""
    try:
        data = sys.stdin.buffer.read(runtime.MAX_PAYLOAD_BYTES + 1)
    except (OSError, ValueError):
        return "", 0
    if len(data) > runtime.MAX_PAYLOAD_BYTES:
        return None, len(data)
    return data.decode("utf-8", "replace"), len(data)


def run(event: str) -> dict[str, Any] | None:
    """The hook output for ``event`` (None: print nothing)."""
    payload, size = _read_payload()
    try:
        env, ignored = runtime.user_env(os.environ, os.getcwd())  # noqa: PTH109 - no pathlib
    except runtime.RepositoryEnvError as error:  # nothing reached, nothing started
        return {"systemMessage": f"pi-hindsight: {error}"}
    request = {
        "op": "hook",
        "event": event,
        "payload": payload,
        "payloadBytes": size,
        "ignored": ignored,
    }
    try:
        result = call(request, timeout=TIMEOUTS_S.get(event, DEFAULT_TIMEOUT_S), env=env)
    except DaemonUnavailable as error:
        return {"systemMessage": f"pi-hindsight: memory unavailable for this event ({error})"}
    return result if isinstance(result, dict) and result else None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        output = run(args[0] if args else "")
        if output:
            sys.stdout.write(json.dumps(output, ensure_ascii=True) + "\n")
            sys.stdout.flush()
    except BaseException as error:  # a hook never fails Claude Code
        try:
            message = f"pi-hindsight: the hook failed ({type(error).__name__}); memory skipped"
            sys.stdout.write(json.dumps({"systemMessage": message}) + "\n")
        except BaseException:  # noqa: S110 - stdout itself is gone: nothing to tell
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
