"""``pi-hindsight serve``: the sidecar Pi's shim spawns, one per Pi process.

stdout carries protocol messages only; logs go to stderr and ``<state dir>/logs/sidecar.log``.
The sidecar announces ``ready`` before it imports the Hindsight client (~0.8 s), which is then
warmed up in a thread while the user is still typing. Malformed input gets a JSON-RPC error and
the loop keeps serving; stdin EOF or SIGTERM ends it after a bounded flush.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from pi_hindsight import __version__
from pi_hindsight.backend.records import MemoryBackend
from pi_hindsight.config import Settings, load_config
from pi_hindsight.engine.engine import MemoryEngine
from pi_hindsight.errors import PiHindsightError, RpcError
from pi_hindsight.hosts.pi import PiHost, ShutdownParams, read_visible_context
from pi_hindsight.paths import ensure_private_dir
from pi_hindsight.paths import state_dir as default_state_dir
from pi_hindsight.rpc import protocol

logger = logging.getLogger(__name__)

_MAX_LINE_BYTES = 64 * 1024 * 1024  # one agent_end can carry large tool output
_BACKEND_MODULE = "pi_hindsight.backend.hindsight"


def _warm_up() -> None:
    """Import the Hindsight client off the loop (no connection is made by importing)."""
    try:
        importlib.import_module(_BACKEND_MODULE)
    except ImportError:  # pragma: no cover - reported when the backend is first used
        logger.exception("cannot import the Hindsight client")


async def create_backend(base_url: str, api_key: str | None) -> MemoryBackend:
    module = await asyncio.to_thread(importlib.import_module, _BACKEND_MODULE)
    backend: MemoryBackend = module.HindsightBackend(base_url, api_key=api_key)
    return backend


def resolve_base_url(state_dir: Path) -> Callable[[Settings], str | None]:
    def resolver(settings: Settings) -> str | None:
        if settings.hindsight.base_url:
            return settings.hindsight.base_url
        from pi_hindsight.launcher import recorded_base_url  # noqa: PLC0415 - only when needed

        return recorded_base_url(state_dir)

    return resolver


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
        file_handler = logging.handlers.RotatingFileHandler(
            logs / "sidecar.log", maxBytes=2_000_000, backupCount=2, encoding="utf-8"
        )
    except OSError as error:
        logger.warning("no log file: %s", error)
        return
    file_handler.setFormatter(formatter)
    root.addHandler(file_handler)


class Sidecar:
    def __init__(self, host: PiHost, output: BinaryIO, shutdown_bound_s: float = 2.0) -> None:
        self.host = host
        self._output = output
        self._tasks: dict[protocol.RequestId, asyncio.Task[None]] = {}
        self._stopping = asyncio.Event()
        self.shutdown_bound_s = shutdown_bound_s
        self._shutting_down = False

    def send(self, message: dict[str, Any]) -> None:
        try:
            self._output.write(protocol.encode(message))
            self._output.flush()
        except (BrokenPipeError, ValueError, OSError):
            # The shim is gone; nothing can be reported to it any more.
            self._stopping.set()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send(protocol.notification(method, params))

    async def _run_request(self, request: protocol.Request) -> None:
        handler = self.host.handlers.get(request.method)
        try:
            if handler is None:
                raise RpcError(protocol.METHOD_NOT_FOUND, f"unknown method {request.method!r}")
            value = await handler(request.params)
        except asyncio.CancelledError:
            if request.id is not None:
                self.send(
                    protocol.error(request.id, protocol.REQUEST_CANCELLED, "request cancelled")
                )
            return
        except RpcError as failure:
            if request.id is not None:
                self.send(protocol.error(request.id, failure.code, str(failure), failure.data))
            return
        except PiHindsightError as failure:
            if request.id is not None:
                self.send(
                    protocol.error(
                        request.id, protocol.INTERNAL_ERROR, str(failure), {"hint": failure.hint}
                    )
                )
            return
        except Exception as failure:
            # The loop survives a handler bug: log it with the traceback and answer the call.
            logger.exception("handler %s failed", request.method)
            if request.id is not None:
                self.send(
                    protocol.error(
                        request.id, protocol.INTERNAL_ERROR, f"internal error: {failure}"
                    )
                )
            return
        finally:
            if request.id is not None:
                self._tasks.pop(request.id, None)
        if request.id is not None:
            self.send(protocol.result(request.id, value))

    def handle_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            request = protocol.decode(line)
        except RpcError as failure:
            request_id = failure.data.get("id") if isinstance(failure.data, dict) else None
            self.send(protocol.error(request_id, failure.code, str(failure)))
            return
        if request.method == "$/cancelRequest":
            task = self._tasks.get(request.params.get("id"))  # type: ignore[arg-type]
            if task is not None:
                task.cancel()
            return
        if request.method == "shutdown":
            asyncio.get_running_loop().create_task(self._shutdown(request))
            return
        task = asyncio.get_running_loop().create_task(self._run_request(request))
        if request.id is not None:
            self._tasks[request.id] = task

    async def _shutdown(self, request: protocol.Request | None) -> None:
        if self._shutting_down:
            if request is not None and request.id is not None:
                await self._stopping.wait()
                self.send(protocol.result(request.id, {"flushed": 0, "pending": -1}))
            return
        self._shutting_down = True
        reason = "eof"
        if request is not None:
            try:
                reason = ShutdownParams.model_validate(request.params).reason
            except ValueError:
                reason = "unknown"
        logger.info("shutting down (%s)", reason)
        for task in list(self._tasks.values()):
            task.cancel()
        result = await self.host.engine.shutdown(self.shutdown_bound_s)
        if request is not None and request.id is not None:
            self.send(protocol.result(request.id, result))
        self._stopping.set()

    async def serve(self, lines: asyncio.Queue[bytes | None]) -> None:
        self.notify(
            "ready",
            {
                "protocolVersion": protocol.PROTOCOL_VERSION,
                "version": __version__,
                "pid": os.getpid(),
            },
        )
        threading.Thread(target=_warm_up, name="warm-up", daemon=True).start()
        stop_task = asyncio.create_task(self._stopping.wait())
        while not self._stopping.is_set():
            get_task = asyncio.create_task(lines.get())
            done, _ = await asyncio.wait({get_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
            if get_task not in done:
                get_task.cancel()
                break
            line = get_task.result()
            if line is None:  # stdin closed: Pi is gone
                await self._shutdown(None)
                break
            if line is _OVERSIZED:
                self.send(protocol.error(None, protocol.INVALID_REQUEST, "message too large"))
                continue
            self.handle_line(line)
        stop_task.cancel()
        # Let in-flight responses (e.g. the shutdown answer) go out before the process exits.
        await asyncio.sleep(0)


_OVERSIZED = b"\x00oversized"


def _read_lines(
    fd: int, loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[bytes | None]
) -> None:
    """Read LF-terminated lines from ``fd`` in a thread (pipes, files and terminals alike).

    Raw ``os.read`` (not a buffered reader) so that no buffer lock is held by this daemon thread
    when the interpreter exits. Lines are split on the LF byte only: exactly our framing.
    """
    pending = bytearray()
    skipping = False  # inside an oversized message: drop bytes until its LF
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            loop.call_soon_threadsafe(lines.put_nowait, None)
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
                loop.call_soon_threadsafe(lines.put_nowait, _OVERSIZED)
                continue
            loop.call_soon_threadsafe(lines.put_nowait, line)
        if len(pending) > _MAX_LINE_BYTES:
            pending.clear()
            skipping = True


async def _main(state_dir: Path, output: BinaryIO) -> None:
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    threading.Thread(
        target=_read_lines, args=(sys.stdin.fileno(), loop, lines), name="stdin", daemon=True
    ).start()
    engine = MemoryEngine(
        state_dir=state_dir,
        config_loader=lambda root: load_config(state_dir, project_root=root),
        backend_factory=create_backend,
        base_url_resolver=resolve_base_url(state_dir),
        context_reader=read_visible_context,
    )
    sidecar = Sidecar(PiHost(engine), output)
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(
            signal.SIGTERM,
            lambda: loop.create_task(sidecar._shutdown(None)),
        )
    await sidecar.serve(lines)


def run(state_dir: Path | None = None) -> None:
    directory = default_state_dir() if state_dir is None else state_dir
    try:
        ensure_private_dir(directory)
    except OSError as error:
        print(f"cannot create state dir {directory}: {error}", file=sys.stderr)
    output = _claim_stdout()
    _configure_logging(directory)
    asyncio.run(_main(directory, output))


def _claim_stdout() -> BinaryIO:
    """Keep the real stdout for protocol messages and point fd 1 at stderr, so a stray print
    (ours or a library's) can never corrupt the protocol stream."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb", buffering=0)
