"""The sidecar's transport: JSON-RPC 2.0 over stdio for whatever a host adapter dispatches.

It knows no engine: a *dispatcher* (``hosts/pi/host.py`` ``PiHost`` for Pi, built by
``app.pi_host`` for ``serve.serve_pi``) names its methods, the ones whose work must finish even
when a shutdown arrives, and how to shut down.

stdout carries protocol messages only; logs go to stderr and ``<state dir>/logs/sidecar.log``.
The sidecar announces ``ready`` as soon as its transport is up, before the dispatcher (the host
and its engine) is built: the shim sends ``initialize`` while the engine is imported, and lines
that arrive meanwhile wait in the inbox. The Hindsight client (~0.8 s) and the redaction tables
are imported in a thread once the first request is answered, while the user is still typing
(not earlier: that would slow ``initialize``, which Pi waits for).
Malformed input gets a JSON-RPC error and the loop keeps serving; stdin EOF or SIGTERM ends it
after a bounded flush.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import logging.handlers
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from pi_hindsight import __version__
from pi_hindsight.errors import NoSession, PiHindsightError, RpcError
from pi_hindsight.paths import ensure_private_dir
from pi_hindsight.rpc import jsonrpc

logger = logging.getLogger(__name__)

_MAX_LINE_BYTES = 64 * 1024 * 1024  # one agent_end can carry large tool output
# Backpressure: the stdin reader stops reading (the pipe then fills and the shim's writes wait)
# while this much is read but not yet handled; requests beyond MAX_IN_FLIGHT are refused.
_MAX_QUEUED_BYTES = 64 * 1024 * 1024
_MAX_QUEUED_LINES = 1_024
MAX_IN_FLIGHT = 64
# Imported ahead by the warm-up thread: what the first prompt needs and no session's start does.
WARM_UP_MODULES = (
    "pi_hindsight.backend.hindsight",
    "pi_hindsight.redaction",
    "pi_hindsight.engine.types",
)


def _warm_up() -> None:
    """Import what the first prompt needs off the loop (no connection is made by importing),
    and run a module's ``warm_up()`` where it has one (e.g. building validators pydantic would
    otherwise build on first use): milliseconds the first prompt need not pay."""
    for name in WARM_UP_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # pragma: no cover - reported when the module is first used
            logger.exception("cannot import %s", name)
            continue
        warm_up = getattr(module, "warm_up", None)
        if callable(warm_up):
            warm_up()


Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class Dispatcher(Protocol):
    """What a host adapter gives the transport."""

    @property
    def handlers(self) -> Mapping[str, Handler]: ...

    # Methods whose work is committed locally and must finish even when a shutdown arrives
    # while they run.
    @property
    def durable_methods(self) -> frozenset[str]: ...

    async def shutdown(self, params: dict[str, Any] | None, bound_s: float) -> Any:
        """Stop within ``bound_s``; ``params`` are the ``shutdown`` request's (None: stdin
        closed or SIGTERM). The result is the ``shutdown`` answer."""
        ...


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log whose files are owner-only (0600), like every other file we keep: a log
    names scopes, banks and paths."""

    def _open(self) -> Any:
        descriptor = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(descriptor, 0o600)  # also a file created by an older version with the umask
        return os.fdopen(descriptor, "a", encoding=self.encoding, errors=self.errors)


def _configure_logging(state_dir: Path) -> None:
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    formatter = logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.WARNING)
    stderr.setFormatter(formatter)
    root.addHandler(stderr)
    try:
        logs = ensure_private_dir(state_dir / "logs")
        file_handler = PrivateRotatingFileHandler(
            logs / "sidecar.log", maxBytes=2_000_000, backupCount=2, encoding="utf-8"
        )
    except OSError as error:
        logger.warning("no log file: %s", error)
        return
    file_handler.setFormatter(formatter)
    root.addHandler(file_handler)


def _error_answer(request: jsonrpc.Request, failure: Exception) -> dict[str, Any]:
    """The JSON-RPC error for a failed handler; a handler bug is logged with its traceback."""
    if isinstance(failure, RpcError):
        return jsonrpc.error(request.id, failure.code, str(failure), failure.data)
    if isinstance(failure, NoSession):
        return jsonrpc.error(request.id, jsonrpc.INVALID_REQUEST, str(failure))
    if isinstance(failure, PiHindsightError):
        return jsonrpc.error(
            request.id, jsonrpc.INTERNAL_ERROR, str(failure), {"hint": failure.hint}
        )
    # The loop survives a handler bug: log it with the traceback and answer the call.
    logger.error("handler %s failed", request.method, exc_info=failure)
    return jsonrpc.error(request.id, jsonrpc.INTERNAL_ERROR, f"internal error: {failure}")


class Sidecar:
    def __init__(self, host: Dispatcher, output: BinaryIO, shutdown_bound_s: float = 2.0) -> None:
        self.host = host
        self._output = output
        self._tasks: dict[jsonrpc.RequestId, asyncio.Task[None]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._durable: set[asyncio.Task[None]] = set()  # must finish even when shutting down
        self._stopping = asyncio.Event()
        self.shutdown_bound_s = shutdown_bound_s
        self._shutting_down = False
        self._warming = False
        self._inbox: Inbox | None = None

    def _warm_up_once(self) -> None:
        if not self._warming:
            self._warming = True
            threading.Thread(target=_warm_up, name="warm-up", daemon=True).start()

    def send(self, message: dict[str, Any]) -> None:
        try:
            line = jsonrpc.encode(message)
        except (TypeError, ValueError) as failure:
            # A value JSON cannot express (a handler bug): a caller still gets an answer.
            logger.error("cannot encode a message (%s): %s", message.get("method"), failure)
            if "id" not in message:
                return
            line = jsonrpc.encode(
                jsonrpc.error(
                    message.get("id"), jsonrpc.INTERNAL_ERROR, "internal error: unencodable result"
                )
            )
        self._write(line)

    def _write(self, line: bytes) -> None:
        """One line out, one unbuffered write (``_claim_stdout``): nothing is awaited."""
        try:
            self._output.write(line)
            self._output.flush()
        except (BrokenPipeError, OSError, ValueError):
            # The shim is gone (a closed pipe or file): nothing can be reported to it any more.
            self._stop()

    def _stop(self) -> None:
        """End the serve loop: it wakes on the sentinel, not by racing a stop wait per line."""
        if not self._stopping.is_set():
            self._stopping.set()
            if self._inbox is not None:
                self._inbox.queue.put_nowait(_STOP)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send(jsonrpc.notification(method, params))

    async def _run_request(self, request: jsonrpc.Request) -> None:
        handler = self.host.handlers.get(request.method)
        answer: dict[str, Any] | bytes | None
        try:
            if handler is None:
                raise RpcError(jsonrpc.METHOD_NOT_FOUND, f"unknown method {request.method!r}")
            value = await handler(request.params)
        except asyncio.CancelledError:
            answer = jsonrpc.error(request.id, jsonrpc.REQUEST_CANCELLED, "request cancelled")
        except Exception as failure:
            answer = _error_answer(request, failure)
        else:
            if request.id is None:
                answer = None
            elif isinstance(value, jsonrpc.Encoded):  # encoded once, by the host
                answer = jsonrpc.result_line(request.id, value)
            else:
                answer = jsonrpc.result(request.id, value)
        finally:
            if request.id is not None:
                self._tasks.pop(request.id, None)
        if request.id is None or answer is None:
            pass  # a notification is not answered, even when it fails
        elif isinstance(answer, bytes):
            self._write(answer)
        else:
            self.send(answer)
        self._warm_up_once()

    def handle_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            request = jsonrpc.decode(line)
        except RpcError as failure:
            request_id = failure.data.get("id") if isinstance(failure.data, dict) else None
            self.send(jsonrpc.error(request_id, failure.code, str(failure)))
            return
        if request.method == "$/cancelRequest":
            cancelled = jsonrpc.cancelled_id(request.params)
            task = None if cancelled is None else self._tasks.get(cancelled)
            if task is not None:
                task.cancel()
            if request.id is not None:  # sent as a request: it is answered like one
                self.send(jsonrpc.result(request.id, None))
            return
        if request.method == "shutdown":
            asyncio.get_running_loop().create_task(self._shutdown(request))
            return
        if request.id is not None and request.id in self._tasks:
            self.send(
                jsonrpc.error(
                    request.id, jsonrpc.INVALID_REQUEST, "a request with this id is in flight"
                )
            )
            return
        if len(self._running) >= MAX_IN_FLIGHT:
            # Bounded work: beyond the cap a request is refused at once (the shim goes on without
            # memory for it) and a notification is dropped; neither is queued without bound.
            if request.id is not None:
                self.send(
                    jsonrpc.error(
                        request.id,
                        jsonrpc.SERVER_BUSY,
                        f"busy: {MAX_IN_FLIGHT} requests are in flight; try again",
                    )
                )
            else:
                logger.warning("dropped a %s notification: too much in flight", request.method)
            return
        task = asyncio.get_running_loop().create_task(self._run_request(request))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        if request.method in self.host.durable_methods:
            self._durable.add(task)
            task.add_done_callback(self._durable.discard)
        if request.id is not None:
            self._tasks[request.id] = task

    async def _shutdown(self, request: jsonrpc.Request | None) -> None:
        if self._shutting_down:
            if request is not None and request.id is not None:
                await self._stopping.wait()
                self.send(jsonrpc.result(request.id, {"flushed": 0, "pending": -1}))
            return
        self._shutting_down = True
        # A turn received before the shutdown is committed to the outbox, never cancelled
        # (R-RETAIN-1: durable before anything else); the rest of the work in flight is dropped.
        committing = [task for task in self._running if task in self._durable]
        if committing:
            await asyncio.wait(committing, timeout=self.shutdown_bound_s)
        for task in list(self._tasks.values()):
            if task not in self._durable:
                task.cancel()
        result = await self.host.shutdown(
            None if request is None else request.params, self.shutdown_bound_s
        )
        if request is not None and request.id is not None:
            self.send(jsonrpc.result(request.id, result))
        self._stop()

    async def serve(self, inbox: Inbox) -> None:
        """Handle the inbox's lines until stdin closes or a shutdown ends (``ready`` is sent
        before, by :func:`announce_ready`)."""
        self._inbox = inbox
        if self._stopping.is_set():
            return
        while True:
            # One await per line (no task and no wait per line: issue 19); _stop() puts _STOP.
            line = await inbox.queue.get()
            if isinstance(line, _Stop) or self._stopping.is_set():
                break
            if line is None:  # stdin closed: Pi is gone
                await self._shutdown(None)
                break
            if isinstance(line, Oversized):
                inbox.taken(b"")
                self.send(
                    jsonrpc.error(
                        jsonrpc.salvage_id(line.head),
                        jsonrpc.INVALID_REQUEST,
                        f"message too large (over {_MAX_LINE_BYTES} bytes)",
                    )
                )
                continue
            inbox.taken(line)
            self.handle_line(line)
        # Let in-flight responses (e.g. the shutdown answer) go out before the process exits.
        await asyncio.sleep(0)


@dataclass(frozen=True)
class Oversized:
    """Stands for a line too long to keep; its first bytes are kept to find its id."""

    head: bytes


class _Stop:
    """The serve loop's wake-up to end (never read from stdin)."""


_STOP = _Stop()


class Inbox:
    """Lines read from stdin and not yet handled, bounded in count and bytes.

    The reader thread waits for room before it reads on, so a flood of input fills the pipe (and
    waits in the writer) instead of the sidecar's memory.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.queue: asyncio.Queue[bytes | Oversized | _Stop | None] = asyncio.Queue()
        self._room = threading.Condition()
        self._lines = 0
        self._bytes = 0

    def put(self, line: bytes | Oversized) -> None:
        """From the reader thread: wait for room, then hand ``line`` to the loop."""
        size = len(line) if isinstance(line, bytes) else 0
        with self._room:
            while self._lines and (
                self._lines >= _MAX_QUEUED_LINES or self._bytes + size > _MAX_QUEUED_BYTES
            ):
                self._room.wait()
            self._lines += 1
            self._bytes += size
        self._loop.call_soon_threadsafe(self.queue.put_nowait, line)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self.queue.put_nowait, None)

    def taken(self, line: bytes) -> None:
        """From the loop: ``line`` is being handled; make room for the next one."""
        with self._room:
            self._lines -= 1
            self._bytes -= len(line)
            self._room.notify()


def _read_lines(fd: int, inbox: Inbox) -> None:
    """Read LF-terminated lines from ``fd`` in a thread (pipes, files and terminals alike).

    Raw ``os.read`` (not a buffered reader) so that no buffer lock is held by this daemon thread
    when the interpreter exits. Lines are split on the LF byte only: exactly our framing.
    """
    pending = bytearray()
    skipping = False  # inside an oversized message: drop bytes until its LF
    head = b""  # the first bytes of an oversized message (its id is read from them)
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            inbox.close()
            return
        pending.extend(chunk)
        while True:
            end = pending.find(b"\n")
            if end < 0:
                break
            line = bytes(pending[: end + 1])
            del pending[: end + 1]
            if skipping:
                skipping = False
                inbox.put(Oversized(head))
                continue
            inbox.put(line)
        if len(pending) > _MAX_LINE_BYTES:
            if not skipping:
                head = bytes(pending[:4096])
            pending.clear()
            skipping = True


def announce_ready(output: BinaryIO) -> None:
    """The ``ready`` notification: the transport is up and speaks this protocol version."""
    params = {"protocolVersion": jsonrpc.PROTOCOL_VERSION, "version": __version__}
    output.write(jsonrpc.encode(jsonrpc.notification("ready", {**params, "pid": os.getpid()})))
    output.flush()


async def _main(output: BinaryIO, make_dispatcher: Callable[[], Dispatcher]) -> None:
    loop = asyncio.get_running_loop()
    inbox = Inbox(loop)
    threading.Thread(
        target=_read_lines, args=(sys.stdin.fileno(), inbox), name="stdin", daemon=True
    ).start()
    # Ready before the dispatcher is built: its imports (the engine, ~2/3 of the start) overlap
    # the shim's answer to ``ready`` and its ``initialize`` (issue 19).
    with contextlib.suppress(BrokenPipeError, OSError, ValueError):  # the shim is gone
        announce_ready(output)
    sidecar = Sidecar(make_dispatcher(), output)
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(
            signal.SIGTERM,
            lambda: loop.create_task(sidecar._shutdown(None)),
        )
    await sidecar.serve(inbox)


def run(state_dir: Path, make_dispatcher: Callable[[], Dispatcher]) -> None:
    """Serve on stdio until stdin closes, ``shutdown`` or SIGTERM; logs under ``state_dir``."""
    try:
        ensure_private_dir(state_dir)
    except OSError as error:
        print(f"cannot create state dir {state_dir}: {error}", file=sys.stderr)
    output = _claim_stdout()
    _configure_logging(state_dir)
    asyncio.run(_main(output, make_dispatcher))


def _claim_stdout() -> BinaryIO:
    """Keep the real stdout for protocol messages and point fd 1 at stderr, so a stray print
    (ours or a library's) can never corrupt the protocol stream."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb", buffering=0)
