"""The one test driver of a real ``pi-hindsight serve`` process, spoken to over stdio as the shim
does: JSON-RPC lines in, every line it writes read by a thread and kept in order.

- ``call(method, params)`` sends a request with the next id and returns its ``result`` (an
  ``error`` answer fails with it); ``request(...)`` returns the whole answer message.
- ``send`` / ``send_raw`` write a message or raw bytes; ``read()`` returns the next message in
  the order the sidecar wrote them (answers and notifications), for tests that go step by step.
- ``answered(ids)`` waits until each id has an answer; ``answer_count(id)`` counts them;
  ``bad_lines`` keeps every stdout line that is not a JSON-RPC message (protocol only on stdout).
- ``shutdown()`` asks it to stop and waits for the exit; ``kill()`` is a crash; ``close()`` (also
  the context manager's exit) kills what is left and closes the pipes.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

READY_TIMEOUT_S = 30.0


class SidecarGone(Exception):
    """The sidecar process ended (killed, crashed, stopped) before answering."""


def is_protocol_message(message: object) -> bool:
    """A JSON-RPC 2.0 notification (no id) or answer (an id and exactly one of result/error)."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if "method" in message:
        return isinstance(message["method"], str) and "id" not in message
    return "id" in message and (("result" in message) != ("error" in message))


def id_key(request_id: Any) -> Any:
    """An answer's id as a counter key (1 and "1" are different ids, True is not 1)."""
    return ("int", request_id) if isinstance(request_id, int) else ("str", request_id)


class Sidecar:
    """A real ``pi-hindsight serve`` for ``state_dir``.

    ``env`` replaces the inherited environment (default ``os.environ``), ``extra_env`` adds to it;
    ``preexec_fn`` runs in the child before exec (a memory bound); ``stderr=False`` discards
    stderr. It waits for the ``ready`` notification unless ``ready=False``; ``reading=False``
    leaves stdout unread until ``start_reading()``.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        stderr: bool = True,
        ready: bool = True,
        reading: bool = True,
    ) -> None:
        environment = dict(os.environ if env is None else env)
        environment["PI_HINDSIGHT_STATE_DIR"] = str(state_dir)
        environment.update(extra_env or {})
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pi_hindsight", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
            env=environment,
            preexec_fn=preexec_fn,  # noqa: PLW1509 - tests pass only setrlimit
        )
        self.answers: Counter[Any] = Counter()
        self.bad_lines: list[bytes] = []
        self._messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._answers: dict[Any, dict[str, Any]] = {}
        self._taken: set[Any] = set()  # answers request() returned: read() skips them
        self._arrived = threading.Condition()
        self._stderr: list[bytes] = []
        self._next_id = 0
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        if reading:
            self._reader.start()
        self._stderr_reader: threading.Thread | None = None
        if stderr:
            self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
            self._stderr_reader.start()
        self.ready: dict[str, Any] | None = None
        if ready and reading:
            self.ready = self.read(timeout=READY_TIMEOUT_S)
            assert self.ready.get("method") == "ready", self.ready

    # -- reading ---------------------------------------------------------------------------

    def start_reading(self) -> None:
        """Start the stdout reader of a sidecar made with ``reading=False`` (a test that read
        ``process.stdout`` by hand until now: nobody reading is what it tests)."""
        if not self._reader.is_alive():
            self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                self.bad_lines.append(line)
                continue
            if not is_protocol_message(message):
                self.bad_lines.append(line)
                continue
            if "id" in message:
                with self._arrived:
                    self.answers[id_key(message["id"])] += 1
                    self._answers[id_key(message["id"])] = message
                    self._arrived.notify_all()
            self._messages.put(message)
        self._messages.put(None)
        with self._arrived:
            self._arrived.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        """What it wrote on stderr so far (all of it once it has exited)."""
        if self.process.poll() is not None and self._stderr_reader is not None:
            self._stderr_reader.join(timeout=5)
        return b"".join(self._stderr).decode(errors="replace")

    def read(self, *, timeout: float = 30.0) -> dict[str, Any]:
        """The next message it wrote (answer or notification), in order; answers ``request()``
        already returned are skipped."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self._messages.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no message from the sidecar in {timeout}s") from None
            if message is None:
                self._messages.put(None)
                raise SidecarGone(f"the sidecar closed stdout; stderr: {self.stderr}")
            key = id_key(message["id"]) if "id" in message else None
            with self._arrived:
                if key is not None and key in self._taken:
                    self._taken.discard(key)
                    continue
            return message

    def answered(self, ids: Iterable[Any], *, timeout: float = 30.0) -> None:
        """Wait until every id in ``ids`` has at least one answer."""
        missing = {id_key(item) for item in ids}
        deadline = time.monotonic() + timeout
        with self._arrived:
            while missing := {item for item in missing if self.answers[item] == 0}:
                if self.process.poll() is not None and self._reader_done():
                    raise SidecarGone(f"the sidecar died ({self.process.returncode})")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no answer for {sorted(map(repr, missing))[:5]}")
                self._arrived.wait(timeout=min(remaining, 0.5))

    def answer_count(self, request_id: Any) -> int:
        """How many answers carried ``request_id`` (exactly one is the protocol's promise)."""
        with self._arrived:
            return self.answers[id_key(request_id)]

    def _reader_done(self) -> bool:
        return not self._reader.is_alive()

    # -- writing ---------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        try:
            assert self.process.stdin is not None
            with self._write_lock:
                self.process.stdin.write(data)
                self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise SidecarGone(str(error)) from error

    def send(self, message: Mapping[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        request_id: Any = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """Send a request (the next id unless given) and return its answer message."""
        if request_id is None:
            with self._write_lock:
                self._next_id += 1
                request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        self.send(message)
        try:
            self.answered([request_id], timeout=timeout)
        except SidecarGone:
            raise SidecarGone(
                f"the sidecar exited during {method}; stderr: {self.stderr}"
            ) from None
        except TimeoutError:
            raise TimeoutError(f"{method} not answered in {timeout}s") from None
        with self._arrived:
            self._taken.add(id_key(request_id))
            return self._answers[id_key(request_id)]

    def call(self, method: str, params: Mapping[str, Any], *, timeout: float = 30.0) -> Any:
        """Send a request and return its ``result``; an ``error`` answer fails the test."""
        answer = self.request(method, params, timeout=timeout)
        if "error" in answer:
            raise AssertionError(f"{method} failed: {answer['error']}")
        return answer["result"]

    # -- the methods tests use most --------------------------------------------------------

    def initialize(self, cwd: Path, session_id: str = "s", **extra: Any) -> dict[str, Any]:
        params = {"protocolVersion": 1, "cwd": str(cwd), "sessionId": session_id, "hasUI": False}
        result: dict[str, Any] = self.call("initialize", {**params, **extra})
        return result

    def turn(self, session_id: str, request_id: str, messages: list[dict[str, Any]]) -> Any:
        return self.call(
            "turnCompleted",
            {"requestId": request_id, "sessionId": session_id, "messages": messages},
            timeout=10,
        )

    # -- ending ----------------------------------------------------------------------------

    def exited(self, *, timeout: float = 15.0) -> int:
        """Wait for the process to exit; its return code."""
        return self.process.wait(timeout=timeout)

    def shutdown(self, reason: str = "quit") -> Any:
        """Ask it to stop (as Pi's session_shutdown does) and wait for the exit."""
        try:
            result = self.call("shutdown", {"reason": reason}, timeout=15)
        except SidecarGone:
            result = None
        self.process.wait(timeout=15)
        return result

    def kill(self) -> None:
        """SIGKILL: no flush, no cleanup — a crash."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)

    def close(self) -> None:
        self.kill()
        if self._reader.is_alive():
            self._reader.join(timeout=5)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                # stdin of a killed process: its unflushed bytes have nowhere to go
                with contextlib.suppress(OSError):
                    stream.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
