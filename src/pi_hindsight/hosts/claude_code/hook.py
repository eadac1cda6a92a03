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

# The C modules under ``socket`` and ``json``: the Python ones pull in enum, re, selectors and
# collections — a third of what the hook costs over a bare interpreter (issue 17). ``call``, for
# the long-lived MCP server and the CLI, imports ``json`` itself.
import _json
import _socket
import _struct
import os
import sys
import time

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


_UCRED = _struct.Struct("3i")
# A hook request: this prefix, then the request's JSON line. The daemon answers it with
# ``OK\n`` and the hook output to print as it is (JSON, possibly empty), or ``ERR\n`` and why.
HOOK_PREFIX = b"H "


def _peer_uid(connection: _socket.socket) -> int | None:
    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:  # not Linux: the private directory is the guard
        return None
    raw = connection.getsockopt(_socket.SOL_SOCKET, option, _UCRED.size)
    return int(_UCRED.unpack(raw)[1])


def _connect(path: str, timeout: float) -> _socket.socket:
    info = os.lstat(path)  # FileNotFoundError: no daemon
    if info.st_uid != os.getuid():
        raise DaemonUnavailable(f"{path} is not this user's; refusing it")
    connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    connection.settimeout(timeout)
    try:
        connection.connect(path)
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
) -> _socket.socket:
    try:
        return _connect(address.socket_text, timeout)
    except (FileNotFoundError, ConnectionRefusedError) as error:
        if not spawn:
            raise DaemonUnavailable("no daemon is running") from error
    _spawn(env)
    deadline = time.monotonic() + START_WAIT_S
    while True:
        try:
            return _connect(address.socket_text, timeout)
        except (FileNotFoundError, ConnectionRefusedError) as error:
            if time.monotonic() > deadline:
                raise DaemonUnavailable(
                    f"the daemon did not start within {START_WAIT_S:.0f} s (see "
                    f"{runtime.state_dir(env) / 'logs' / 'claude-code-daemon.log'})"
                ) from error
            time.sleep(0.02)


def _exchange(
    line: bytes, address: runtime.Address, env: Mapping[str, str], timeout: float, spawn: bool
) -> bytes:
    """Send ``line`` (one request) to the daemon, starting it when none answers (unless
    ``spawn`` is false); all it answers. Raises DaemonUnavailable with the reason."""
    try:
        runtime.ensure_private_dir(address.directory_text)
    except (runtime.RuntimeDirError, OSError) as error:
        raise DaemonUnavailable(str(error)) from error
    try:
        connection = _open(address, env, timeout, spawn)
        try:
            connection.sendall(line + b"\n")
            connection.shutdown(_socket.SHUT_WR)
            chunks: list[bytes] = []
            received = 0
            while chunk := connection.recv(65536):
                chunks.append(chunk)
                received += len(chunk)
                if received > runtime.MAX_LINE_BYTES:
                    raise DaemonUnavailable("the daemon's answer is too large")
        finally:
            connection.close()
    except TimeoutError as error:
        raise DaemonUnavailable(f"the daemon did not answer within {timeout:.0f} s") from error
    except OSError as error:
        raise DaemonUnavailable(f"the daemon could not be reached: {error}") from error
    return b"".join(chunks)


def call(
    request: dict[str, Any],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    spawn: bool = True,
) -> Any:
    """Send one request to the daemon (starting it when none answers, unless ``spawn`` is
    false); its answer's ``result``. Raises DaemonUnavailable with the reason."""
    import json  # noqa: PLC0415 - the hook's own path (``run``) does without it

    env = os.environ if env is None else env
    address = runtime.address(env)
    line = json.dumps({"v": runtime.PROTOCOL, "key": address.key, **request}, ensure_ascii=True)
    raw = _exchange(line.encode("ascii"), address, env, timeout, spawn)
    try:
        answer = json.loads(raw.decode("utf-8", "replace"))
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


def _string(text: str) -> str:
    """A JSON string, ASCII only (the C encoder ``json.dumps`` uses)."""
    return str(_json.encode_basestring_ascii(text))


def _hook_line(key: str, event: str, payload: str | None, size: int, ignored: list[str]) -> bytes:
    """The hook request, encoded by hand: what ``json.dumps`` would give, without importing it."""
    notes = ",".join(_string(note) for note in ignored)
    fields = (
        f'"v":{runtime.PROTOCOL}',
        f'"key":{_string(key)}',
        '"op":"hook"',
        f'"event":{_string(event)}',
        f'"payload":{"null" if payload is None else _string(payload)}',
        f'"payloadBytes":{int(size)}',
        f'"ignored":[{notes}]',
    )
    return HOOK_PREFIX + ("{" + ",".join(fields) + "}").encode("ascii")


def _message(text: str) -> str:
    """Hook output that shows ``text`` to the user (never to the model)."""
    return '{"systemMessage": ' + _string(text) + "}"


def run(event: str) -> str | None:
    """The hook output for ``event``, as the JSON text to print (None: print nothing)."""
    payload, size = _read_payload()
    try:
        env, ignored = runtime.user_env(os.environ, os.getcwd())  # noqa: PTH109 - no pathlib
    except runtime.RepositoryEnvError as error:  # nothing reached, nothing started
        return _message(f"pi-hindsight: {error}")
    address = runtime.address(env)
    line = _hook_line(address.key, event, payload, size, ignored)
    timeout = TIMEOUTS_S.get(event, DEFAULT_TIMEOUT_S)
    try:
        answer = _exchange(line, address, env, timeout, spawn=True)
    except DaemonUnavailable as error:
        return _message(f"pi-hindsight: memory unavailable for this event ({error})")
    status, _, body = answer.partition(b"\n")
    if status == b"OK":
        output = body.decode("ascii", "replace").strip()
        return output or None
    why = (
        body.decode("utf-8", "replace").strip()
        if status == b"ERR"
        else "the daemon's answer is not understood"
    )
    return _message(f"pi-hindsight: memory unavailable for this event ({why})")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        output = run(args[0] if args else "")
        if output:
            sys.stdout.write(output + "\n")
            sys.stdout.flush()
    except BaseException as error:  # a hook never fails Claude Code
        try:
            message = f"pi-hindsight: the hook failed ({type(error).__name__}); memory skipped"
            sys.stdout.write(_message(message) + "\n")
        except BaseException:  # noqa: S110 - stdout itself is gone: nothing to tell
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
