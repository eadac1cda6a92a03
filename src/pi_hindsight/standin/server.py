"""The stand-in's HTTP server: routing, SSE streaming and the request log.

One ``ThreadingHTTPServer`` (standard library only, so it starts in milliseconds) serves
both roles under their base paths, plus a small admin surface for tests::

    POST /hindsight/v1/chat/completions   Hindsight's LLM calls      (hindsight_role)
    POST /pi/v1/chat/completions          Pi's model calls            (pi_role)
    GET  /{role}/v1/models                one model, for clients that list them
    GET  /_standin/health                 {"status": "ok", ...}
    PUT  /_standin/script                 replace the Pi script (JSON body)
    GET  /_standin/requests?role=pi       the logged requests

Every chat request body is appended to the log before the reply is written, so a test
that has the reply can already find the request.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

from pi_hindsight.errors import LauncherError, PiHindsightError
from pi_hindsight.standin import hindsight_role, pi_role
from pi_hindsight.standin.wire import (
    CREATED,
    JsonObject,
    Reply,
    build_completion,
    error_body,
    iter_chunks,
    sse_event,
)

logger = logging.getLogger(__name__)

HINDSIGHT = "hindsight"
PI = "pi"
ROLES = (HINDSIGHT, PI)
#: The model name answered when a request names none.
DEFAULT_MODELS = {HINDSIGHT: "standin-hindsight", PI: "local-model"}
#: Requests kept in memory when there is no log file.
MEMORY_LOG_SIZE = 1000
#: Seconds an idle keep-alive connection is held open.
IDLE_TIMEOUT = 60
#: Largest request body accepted.
MAX_BODY_BYTES = 64 * 1024 * 1024


class RequestLog:
    """Append-only JSON-lines record of every request body, flushed per line."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._memory: deque[JsonObject] = deque(maxlen=MEMORY_LOG_SIZE)
        self._file: IO[str] | None = None

    def open(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Owner-only: the bodies are whole conversations.
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._file = os.fdopen(descriptor, "a", encoding="utf-8")
        except OSError as error:
            raise LauncherError(
                f"stand-in: cannot open the request log {self.path}: {error.strerror}",
                hint="pass a --log path in a writable directory",
            ) from error

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def append(self, role: str, path: str, kind: str, body: Any) -> None:
        entry = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "role": role,
            "path": path,
            "kind": kind,
            "body": body,
        }
        line = json.dumps(entry, ensure_ascii=False)
        with self._lock:
            self._memory.append(entry)
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    def entries(self, role: str | None = None) -> list[JsonObject]:
        """Logged requests, oldest first: the whole log file, else the recent in-memory ones."""
        with self._lock:
            if self.path is not None and self.path.exists():
                lines = self.path.read_text(encoding="utf-8").splitlines()
                found = [json.loads(line) for line in lines if line.strip()]
            else:
                found = list(self._memory)
        return [e for e in found if role is None or e.get("role") == role]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], standin: StandIn) -> None:
        self.standin = standin
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Into the log (with the traceback), not socketserver's bare print to stderr.
        logger.exception("stand-in: unhandled error serving %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pi-hindsight-standin"
    timeout = IDLE_TIMEOUT
    server: _Server

    # -- plumbing -------------------------------------------------------------------

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError) as error:
            # A keep-alive client (Pi, an SDK) dropping its idle connection: routine.
            logger.debug("client %s closed the connection: %s", self.address_string(), error)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError(f"request body of {length} bytes is too large")
        return self.rfile.read(length) if length else b""

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        try:
            self._route(method, url.path, parse_qs(url.query))
        except (BrokenPipeError, ConnectionResetError):
            logger.info("client went away during %s %s", method, url.path)
            self.close_connection = True
        except Exception:
            logger.exception("stand-in failed to answer %s %s", method, url.path)
            self.close_connection = True
            try:
                self._send_json(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    error_body("stand-in error", kind="server_error"),
                )
            except OSError as error:
                logger.info("could not report the failure to the client: %s", error)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    # -- routes ---------------------------------------------------------------------

    def _route(self, method: str, path: str, query: Mapping[str, list[str]]) -> None:
        standin = self.server.standin
        if path == "/_standin/health" and method == "GET":
            self._send_json(HTTPStatus.OK, {"status": "ok", "base_url": standin.base_url})
            return
        if path == "/_standin/requests" and method == "GET":
            roles = query.get("role")
            role = roles[0] if roles else None
            self._send_json(HTTPStatus.OK, standin.requests(role))
            return
        if path == "/_standin/script" and method == "PUT":
            self._put_script()
            return
        role, _, rest = path.strip("/").partition("/")
        if role in ROLES and rest == "v1/models" and method == "GET":
            model = {
                "id": DEFAULT_MODELS[role],
                "object": "model",
                "created": CREATED,
                "owned_by": "standin",
            }
            self._send_json(HTTPStatus.OK, {"object": "list", "data": [model]})
            return
        if role in ROLES and rest == "v1/chat/completions" and method == "POST":
            self._chat(role, path)
            return
        if role in ROLES:
            body = self._read_body()
            standin.log.append(role, path, "unsupported", body.decode("utf-8", "replace") or None)
            logger.warning("stand-in has no %s %s (%s role); answered 404", method, path, role)
        self._send_json(HTTPStatus.NOT_FOUND, error_body(f"no route for {method} {path}"))

    def _put_script(self) -> None:
        try:
            self.server.standin.set_script(json.loads(self._read_body() or b"null"))
        except ValueError as error:
            self._send_json(HTTPStatus.BAD_REQUEST, error_body(f"script is not JSON: {error}"))
            return
        except PiHindsightError as error:
            self._send_json(HTTPStatus.BAD_REQUEST, error_body(error.describe()))
            return
        self._send_json(HTTPStatus.OK, {"status": "ok"})

    def _chat(self, role: str, path: str) -> None:
        standin = self.server.standin
        raw = self._read_body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            standin.log.append(role, path, "invalid", raw.decode("utf-8", "replace"))
            logger.warning("%s request to %s is not a JSON object; answered 400", role, path)
            self._send_json(HTTPStatus.BAD_REQUEST, error_body("the body must be a JSON object"))
            return
        if role == HINDSIGHT:
            kind, reply = hindsight_role.answer(body)
            kind_name = kind.value
        else:
            kind_name = pi_role.classify(body)
            reply = pi_role.answer(standin.script, body)
        standin.log.append(role, path, kind_name, body)
        logger.debug("%s %s -> %s", role, kind_name, reply.finish_reason)
        if body.get("stream"):
            self._stream(body, reply, DEFAULT_MODELS[role])
        else:
            self._send_json(
                HTTPStatus.OK, build_completion(body, reply, default_model=DEFAULT_MODELS[role])
            )

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream(self, body: Mapping[str, Any], reply: Reply, model: str) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in iter_chunks(body, reply, default_model=model):
            self._write_chunk(sse_event(chunk))
        self._write_chunk(sse_event("[DONE]"))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class StandIn:
    """The deterministic OpenAI-compatible LLM stand-in, serving in a background thread.

    ``StandIn(log_path=..., script=...)``, then ``start()`` (returns once listening) and
    ``stop()``, or use it as a context manager. Binds 127.0.0.1 unless told otherwise;
    ``port=0`` picks a free port (see :attr:`base_url`).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: Path | None = None,
        script: Mapping[str, Any] | None = None,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.log = RequestLog(log_path)
        self._script = pi_role.PiScript.from_json(script)
        self._script_lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> StandIn:
        if self._server is not None:
            raise LauncherError("stand-in: already started")
        self.log.open()
        try:
            server = _Server((self.host, self.requested_port), self)
        except OSError as error:
            self.log.close()
            raise LauncherError(
                f"stand-in: cannot listen on {self.host}:{self.requested_port}: {error.strerror}",
                hint="choose another --port (0 picks a free one)",
            ) from error
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="standin", daemon=True
        )
        self._thread.start()
        logger.info("stand-in listening on %s", self.base_url)
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()
        self._server = self._thread = None
        self.log.close()

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise LauncherError("stand-in: not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def pi_base_url(self) -> str:
        return f"{self.base_url}/pi/v1"

    @property
    def hindsight_base_url(self) -> str:
        return f"{self.base_url}/hindsight/v1"

    # -- script and log -------------------------------------------------------------

    @property
    def script(self) -> pi_role.PiScript:
        with self._script_lock:
            return self._script

    def set_script(self, script: Mapping[str, Any] | None) -> None:
        """Replace the Pi script; raises ``ConfigError`` (and keeps the old one) if invalid."""
        parsed = pi_role.PiScript.from_json(script)
        with self._script_lock:
            self._script = parsed

    def requests(self, role: str | None = None) -> list[JsonObject]:
        """The logged requests (``role`` ``"pi"`` or ``"hindsight"`` to filter), oldest first."""
        return self.log.entries(role)
