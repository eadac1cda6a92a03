"""The per-user daemon behind the Claude Code hooks and MCP server: one process holding the
engines (one per Claude Code session), the shared stores and one retain worker, on a unix socket.

- Owner-only: the socket is in a private directory (``runtime.py``), created under umask 077
  (0600), and every connection's peer uid is checked; a request must also name this daemon's
  key (its state dir and configuring environment).
- Started on demand by the hook client; one per key (an exclusive lock; a second one started in
  a race exits at once); exits after ``PI_HINDSIGHT_DAEMON_IDLE_S`` (default 900) seconds
  without a request, after submitting what is ready — the rest stays in the outbox.
- Protocol: one JSON line in, one JSON line out, per connection: ``{"v": 1, "key", "op": "hook"
  | "tools" | "call" | "ping" | "stop", …}`` → ``{"ok": true, "result": …}`` or ``{"ok":
  false, "error": "…"}``. Anything unusable gets a clean error, never a traceback; a hook whose
  handling fails unexpectedly gets a system message and Claude Code goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib
import json
import logging
import os
import signal
import socket
import struct
import time
from pathlib import Path

from pi_hindsight.app import build_engine, build_shared, make_backend_factory
from pi_hindsight.backend import MemoryBackend
from pi_hindsight.engine.connection import ServerAccess
from pi_hindsight.engine.shared import close_shared
from pi_hindsight.hosts.claude_code import runtime
from pi_hindsight.hosts.claude_code.hook import HOOK_PREFIX
from pi_hindsight.hosts.claude_code.host import ClaudeCodeHost
from pi_hindsight.hosts.claude_code.naming import CLAUDE_CODE_HOST
from pi_hindsight.hosts.claude_code.payloads import (
    DaemonAnswer,
    DaemonRequest,
    DaemonResult,
    HookOutput,
    PayloadError,
    PingAnswer,
    parse_request,
)
from pi_hindsight.rpc.sidecar import PrivateRotatingFileHandler

logger = logging.getLogger(__name__)

DEFAULT_IDLE_S = 900.0
SHUTDOWN_BOUND_S = 5.0
_TICK_S = 1.0


def _idle_seconds() -> float:
    raw = os.environ.get(runtime.IDLE_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_IDLE_S
    except ValueError:
        logger.warning("%s=%r is not a number of seconds; using %s", runtime.IDLE_ENV, raw, 900)
        return DEFAULT_IDLE_S
    return max(1.0, value)


def _peer_uid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    return int(struct.unpack("3i", raw)[1])


def _encode(answer: DaemonAnswer) -> bytes:
    return json.dumps(answer.to_json(), ensure_ascii=True).encode("ascii") + b"\n"


def _encode_hook(answer: DaemonAnswer) -> bytes:
    """``OK`` and the hook output to print (nothing when there is none), or ``ERR`` and why:
    the hook client passes it on without parsing JSON (``hook.py``)."""
    if not answer.ok:
        return b"ERR\n" + str(answer.error).encode("utf-8", "replace")
    result = answer.to_json()["result"]
    output = json.dumps(result, ensure_ascii=True) if result else ""
    return b"OK\n" + output.encode("ascii")


class Daemon:
    def __init__(self, address: runtime.Address, state_dir: Path, idle_s: float) -> None:
        self.address = address
        self.state_dir = state_dir
        self.idle_s = idle_s
        self._warm: asyncio.Future[None] | None = None
        self.parts = build_shared(CLAUDE_CODE_HOST, state_dir, backend_factory=self._backend)
        self.host = ClaudeCodeHost(
            state_dir, lambda: build_engine(CLAUDE_CODE_HOST, state_dir, shared=self.parts)
        )
        self._last = time.monotonic()
        self._active = 0
        self._stop = asyncio.Event()

    async def handle(self, request: DaemonRequest) -> DaemonResult:
        if request.key != self.address.key:
            raise PayloadError("this daemon serves another state dir or configuration")
        if request.op == "hook" and request.event is not None:
            try:
                return await self.host.hook(request.event, request.notes)
            except Exception:
                logger.exception("the %s hook failed", request.event.name)
                log = self.state_dir / "logs" / "claude-code-daemon.log"
                return HookOutput(
                    system_message=f"pi-hindsight: memory skipped for this event (see {log})"
                )
        if request.op == "tools" and request.session_id and request.cwd:
            return await self.host.tool_specs(request.session_id, request.cwd)
        if request.op == "call" and request.session_id and request.cwd and request.tool:
            return await self.host.call_tool(
                request.session_id, request.cwd, request.tool, request.arguments or {}
            )
        if request.op == "ping":
            return PingAnswer(pid=os.getpid(), sessions=self.host.session_count)
        if request.op == "stop":
            self._stop.set()
            return PingAnswer(pid=os.getpid())
        raise PayloadError(f"request {request.op!r} is incomplete")

    async def _backend(self, access: ServerAccess) -> MemoryBackend:
        """The official client, once its import (started at start-up) has finished: two threads
        importing one package at once can see it half-initialised."""
        if self._warm is not None:
            await asyncio.shield(self._warm)
        return await make_backend_factory(self.state_dir)(access)

    def _identity(self) -> tuple[int, int] | None:
        """The state dir's (device, inode): a daemon whose state dir went away (or was replaced)
        must not go on writing to stores nobody reads."""
        try:
            info = self.state_dir.stat()
        except OSError:
            return None
        return info.st_dev, info.st_ino

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._active += 1
        self._last = time.monotonic()
        try:
            peer = _peer_uid(writer)
            if peer is not None and peer != os.getuid():
                logger.warning("refused a connection from uid %s", peer)
                return
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as partial:
                line = partial.partial
            except asyncio.LimitOverrunError:
                writer.write(_encode(DaemonAnswer(ok=False, error="request too large")))
                return
            # A hook's request (HOOK_PREFIX): the answer is its output as it is printed.
            hook_output = line.startswith(HOOK_PREFIX)
            try:
                result = await self.handle(parse_request(line.removeprefix(HOOK_PREFIX)))
                answer = DaemonAnswer(ok=True, result=result)
            except PayloadError as error:
                answer = DaemonAnswer(ok=False, error=error.describe())
            except Exception as error:
                logger.exception("request failed")
                answer = DaemonAnswer(ok=False, error=f"internal error: {type(error).__name__}")
            writer.write(_encode_hook(answer) if hook_output else _encode(answer))
            await writer.drain()
        except (ConnectionError, OSError) as error:
            logger.info("client went away: %s", error)
        finally:
            self._active -= 1
            self._last = time.monotonic()
            with contextlib.suppress(OSError):
                writer.close()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        path = self.address.socket
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # stale: we hold the lock, so no daemon listens on it
        server = await asyncio.start_unix_server(
            self._client, path=str(path), limit=runtime.MAX_LINE_BYTES
        )
        path.chmod(0o600)
        self.address.pid_file.write_text(f"{os.getpid()}\n", encoding="ascii")
        logger.info("listening on %s (idle exit after %.0f s)", path, self.idle_s)
        identity = self._identity()
        # The official client's import takes 1-2 s: done now, off the loop, so the first recall
        # is not timed out by it. An import connects nowhere (unregistered sessions included).
        self._warm = asyncio.ensure_future(asyncio.to_thread(_import_client))
        pruned = await asyncio.to_thread(self.host.cursors.prune)
        if pruned:
            logger.info("removed %d stale transcript cursor(s)", pruned)
        try:
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), timeout=_TICK_S)
                self.host.evict_idle()
                if self._active == 0 and time.monotonic() - self._last > self.idle_s:
                    logger.info("idle for %.0f s: exiting", self.idle_s)
                    break
                if self._identity() != identity:
                    logger.warning("%s was removed or replaced: exiting", self.state_dir)
                    break
        finally:
            server.close()
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            with contextlib.suppress(FileNotFoundError):
                self.address.pid_file.unlink()
            summary = await close_shared(self.parts, SHUTDOWN_BOUND_S)
            logger.info("stopped: %s", summary)
        return 0


def _import_client() -> None:
    try:
        importlib.import_module("hindsight_client")
    except ImportError as error:  # reported where the backend is created
        logger.warning("the Hindsight client cannot be imported: %s", error)
    importlib.import_module("pi_hindsight.redaction")  # loaded on first use otherwise


def _configure_logging(state_dir: Path) -> None:
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    logs = state_dir / "logs"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    handler = PrivateRotatingFileHandler(
        logs / "claude-code-daemon.log", maxBytes=2_000_000, backupCount=2, encoding="utf-8"
    )
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    )
    root.addHandler(handler)


def serve() -> int:
    """Run the daemon for this environment's key until idle or stopped (exit status)."""
    os.umask(0o077)  # the socket, pid and lock files: owner-only from the start
    address = runtime.address(os.environ)
    state_dir = runtime.state_dir(os.environ)
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    _configure_logging(state_dir)
    try:
        runtime.ensure_private_dir(address.directory)
    except (runtime.RuntimeDirError, OSError) as error:
        logger.error("cannot serve: %s", error)
        return 1
    lock = _lock(address.lock)
    if lock is None:
        logger.info("another daemon serves %s; exiting", address.socket)
        return 0
    try:
        return asyncio.run(Daemon(address, state_dir, _idle_seconds()).run())
    finally:
        with contextlib.suppress(FileNotFoundError):
            address.lock.unlink()  # still held: a daemon starting now makes a new one
        os.close(lock)


def _lock(path: Path) -> int | None:
    """The exclusive lock of this key (its descriptor), or None when another daemon holds it.
    The lock file is removed on exit, so a lock on a file no longer at ``path`` is retried."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            if path.stat().st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # its holder removed it after we opened it: try the new one


def stop(timeout_s: float = 10.0) -> str:
    """Ask this environment's daemon to stop and wait until it has; says what happened."""
    from pi_hindsight.hosts.claude_code.hook import DaemonUnavailable, call  # noqa: PLC0415

    address = runtime.address(os.environ)
    if not address.socket.exists():
        return "no daemon is running"
    try:
        result = call({"op": "stop"}, timeout=5.0, spawn=False)
    except DaemonUnavailable as error:
        return f"no daemon answered ({error})"
    answer = PingAnswer.load_or_none(result)
    pid = None if answer is None else answer.pid
    deadline = time.monotonic() + timeout_s
    while pid is not None and time.monotonic() < deadline:
        if not _alive(pid):
            return f"stopped the daemon (pid {pid})"
        time.sleep(0.05)
    return f"asked the daemon (pid {pid}) to stop"


def _alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet has stopped, too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return True
    return fields[0] != "Z"
