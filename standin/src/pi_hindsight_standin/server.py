"""The stand-in's HTTP server: routing to the registered roles, SSE streaming, the admin surface.

One ``ThreadingHTTPServer`` (standard library only, so it starts in milliseconds) serves every
registered role under its name, plus a small admin surface for tests::

    ANY  /{role}/{route}              the role's handler (roles.py); "hindsight" is built in:
    POST /hindsight/v1/chat/completions   Hindsight's LLM calls (hindsight_role)
    GET  /{role}/v1/models            one model, for clients that list them (OpenAI roles)
    GET  /_standin/health             {"status": "ok", "base_url": ..., "roles": [...]}
    PUT  /_standin/script             replace the script of the scripted roles (JSON body)
    GET  /_standin/requests?role=pi   the logged requests

Every request a role logs is appended to the log before the reply is written, so a test that
has the reply can already find the request.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pi_hindsight_standin import hindsight_role
from pi_hindsight_standin.errors import ScriptError, StandInError
from pi_hindsight_standin.request_log import RequestLog
from pi_hindsight_standin.roles import Answer, Handler, JsonObject, RoleRequest, Scripted
from pi_hindsight_standin.wire import error_body

logger = logging.getLogger(__name__)

#: Seconds an idle keep-alive connection is held open.
IDLE_TIMEOUT = 60
#: Largest request body accepted.
MAX_BODY_BYTES = 64 * 1024 * 1024
#: What a role may be called: one lower-case path segment (it is the role's base path).
ROLE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
ADMIN_PREFIX = "_standin"


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

    def _send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
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
                    {"Connection": "close"},  # so the client does not reuse it
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
        # Read first, whatever the answer: a body left unread would be taken for the next
        # request on this keep-alive connection.
        raw = self._read_body()
        name, _, route = path.strip("/").partition("/")
        if name == ADMIN_PREFIX:
            self._admin(method, route, query, raw)
            return
        handler = standin.role(name)
        if handler is None:
            self._send_json(HTTPStatus.NOT_FOUND, error_body(f"no route for {method} {path}"))
            return
        request = RoleRequest(
            role=name,
            method=method,
            path=path,
            route=route,
            query=query,
            headers={key.lower(): value for key, value in self.headers.items()},
            body=_json_object(raw),
            raw=raw,
        )
        answer = handler(request)
        if answer.kind is not None:
            logged = request.body if request.body is not None else raw.decode("utf-8", "replace")
            standin.log.append(name, path, answer.kind, logged or None, usage=answer.usage)
        self._answer(answer)

    def _admin(self, method: str, route: str, query: Mapping[str, list[str]], raw: bytes) -> None:
        standin = self.server.standin
        if route == "health" and method == "GET":
            health = {"status": "ok", "base_url": standin.base_url, "roles": list(standin.roles)}
            self._send_json(HTTPStatus.OK, health)
        elif route == "requests" and method == "GET":
            roles = query.get("role")
            self._send_json(HTTPStatus.OK, standin.requests(roles[0] if roles else None))
        elif route == "script" and method == "PUT":
            self._put_script(raw)
        else:
            message = f"no route for {method} /{ADMIN_PREFIX}/{route}"
            self._send_json(HTTPStatus.NOT_FOUND, error_body(message))

    def _put_script(self, raw: bytes) -> None:
        try:
            self.server.standin.set_script(json.loads(raw or b"null"))
        except ValueError as error:
            self._send_json(HTTPStatus.BAD_REQUEST, error_body(f"script is not JSON: {error}"))
            return
        except ScriptError as error:
            self._send_json(HTTPStatus.BAD_REQUEST, error_body(error.describe()))
            return
        self._send_json(HTTPStatus.OK, {"status": "ok"})

    def _answer(self, answer: Answer) -> None:
        if answer.events is None:
            self._send_json(answer.status, answer.payload, answer.headers)
            return
        self.send_response(answer.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        for event in answer.events:
            self._write_chunk(event.encode())
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _json_object(raw: bytes) -> JsonObject | None:
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _scripted(handler: Handler) -> Scripted | None:
    """``handler`` as a scripted role, if it is one."""
    candidate: object = handler  # (a Callable type does not narrow to the protocol)
    return candidate if isinstance(candidate, Scripted) else None


class StandIn:
    """The deterministic LLM stand-in, serving its roles in a background thread.

    ``StandIn(log_path=..., roles={"pi": handler}, script=...)``, then ``start()`` (returns
    once listening) and ``stop()``, or use it as a context manager. The Hindsight role is
    always registered (``roles`` may replace it); more roles can be added with
    :meth:`register_role`, also while serving. Binds 127.0.0.1 unless told otherwise;
    ``port=0`` picks a free port (see :attr:`base_url`).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: Path | None = None,
        roles: Mapping[str, Handler] | None = None,
        script: Any = None,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.log = RequestLog(log_path)
        self._lock = threading.Lock()
        self._roles: dict[str, Handler] = {}
        self._script: Any = None
        self.register_role(hindsight_role.ROLE, hindsight_role.handle)
        for name, handler in (roles or {}).items():
            self.register_role(name, handler)
        if script is not None:
            self.set_script(script)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- roles and their script -----------------------------------------------------

    def register_role(self, name: str, handler: Handler) -> None:
        """Serve ``handler`` under ``/{name}/``, replacing any role of that name.

        A :class:`~pi_hindsight_standin.roles.Scripted` handler is handed the current
        script, if one was set.
        """
        if not ROLE_NAME.fullmatch(name) or name == ADMIN_PREFIX:
            raise StandInError(
                f"stand-in: {name!r} cannot name a role",
                hint="a role's name is one lower-case path segment: letters, digits, '-' or '_'",
            )
        with self._lock:
            scripted = _scripted(handler)
            if self._script is not None and scripted is not None:
                scripted.set_script(self._script)
            self._roles[name] = handler

    def role(self, name: str) -> Handler | None:
        """The handler registered under ``name``, if any."""
        with self._lock:
            return self._roles.get(name)

    @property
    def roles(self) -> tuple[str, ...]:
        """The registered roles' names, in registration order."""
        with self._lock:
            return tuple(self._roles)

    def set_script(self, script: Any) -> None:
        """Give ``script`` to every scripted role; all of them, or none (``ScriptError``)."""
        with self._lock:
            scripted = [s for s in map(_scripted, self._roles.values()) if s is not None]
            if not scripted:
                raise ScriptError(
                    "stand-in: no registered role takes a script",
                    hint="register one: StandIn(roles=...), or --role NAME=MODULE:FACTORY",
                )
            updated: list[Scripted] = []
            try:
                for handler in scripted:
                    handler.set_script(script)
                    updated.append(handler)
            except ScriptError:
                for handler in updated:  # back to the script every one of them accepted
                    handler.set_script(self._script)
                raise
            self._script = script

    def requests(self, role: str | None = None) -> list[JsonObject]:
        """The logged requests (``role`` such as ``"pi"`` or ``"hindsight"``), oldest first."""
        return self.log.entries(role)

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> StandIn:
        if self._server is not None:
            raise StandInError("stand-in: already started")
        self.log.open()
        try:
            server = _Server((self.host, self.requested_port), self)
        except OSError as error:
            self.log.close()
            raise StandInError(
                f"stand-in: cannot listen on {self.host}:{self.requested_port}: {error.strerror}",
                hint="choose another --port (0 picks a free one)",
            ) from error
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="standin", daemon=True
        )
        self._thread.start()
        logger.info("stand-in listening on %s (roles: %s)", self.base_url, ", ".join(self.roles))
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
            raise StandInError("stand-in: not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def url(self, role: str) -> str:
        """The base URL of ``role``: ``{base_url}/{role}`` (OpenAI clients append ``/v1``)."""
        return f"{self.base_url}/{role}"

    @property
    def hindsight_base_url(self) -> str:
        """What Hindsight's ``HINDSIGHT_API_LLM_BASE_URL`` is set to."""
        return f"{self.url(hindsight_role.ROLE)}/v1"
