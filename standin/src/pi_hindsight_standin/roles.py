"""What a role is: a name and a handler from one parsed request to one answer.

The server routes ``/{name}/{route}`` to the handler registered under ``name``::

    def handle(request: RoleRequest) -> Answer: ...
    standin.register_role("claude", handle)      # or StandIn(roles={"claude": handle})

A handler returns a JSON answer (``Answer(kind, payload=...)``) or a server-sent-event
stream (``Answer(kind, events=[SseEvent(...), ...])``); the server writes it and, when
``kind`` is not ``None``, logs the request under that kind *before* writing. A handler object
that also has ``set_script(script)`` is :class:`Scripted`: ``StandIn.set_script``, ``PUT
/_standin/script`` and ``--script`` hand it the script (it raises :class:`ScriptError`, keeping
its old one, when the script is invalid). Roles that speak OpenAI chat completions are built
with :func:`pi_hindsight_standin.openai_chat.openai_chat_role` from a ``decide`` function.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Protocol, runtime_checkable

logger = logging.getLogger(__name__)

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class RoleRequest:
    """One HTTP request to a role, parsed.

    ``path`` is the whole request path (``/pi/v1/chat/completions``, what the log records);
    ``route`` is the part after the role's name (``v1/chat/completions``). ``body`` is the
    JSON object the request carried, ``None`` when it carried none or something else
    (``raw`` holds the bytes either way). ``headers`` has lower-case names.
    """

    role: str
    method: str
    path: str
    route: str
    query: Mapping[str, list[str]] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: JsonObject | None = None
    raw: bytes = b""


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: ``data`` (JSON, or a literal such as ``[DONE]``), optional name."""

    data: JsonObject | str
    event: str | None = None

    def encode(self) -> bytes:
        data = (
            self.data if isinstance(self.data, str) else json.dumps(self.data, ensure_ascii=False)
        )
        head = f"event: {self.event}\n" if self.event else ""
        return f"{head}data: {data}\n\n".encode()


@dataclass(frozen=True)
class Answer:
    """What a role answers: a JSON ``payload``, or a stream of ``events`` (not both).

    ``kind`` names the request in the log (``None``: not logged, e.g. a model list).
    """

    kind: str | None
    status: int = HTTPStatus.OK
    payload: Any = None
    events: Iterable[SseEvent] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The token usage the answer reports (chat completions), logged with the request.
    usage: JsonObject | None = None


#: A role's handler: one parsed request in, one answer out. Called on the server's threads.
Handler = Callable[[RoleRequest], Answer]


@runtime_checkable
class Scripted(Protocol):
    """A handler that takes a script (what its model says); see the module docstring."""

    def set_script(self, script: Any) -> None:
        """Validate and use ``script``; raise ScriptError and keep the old one if invalid."""


def unsupported(request: RoleRequest, payload: Any) -> Answer:
    """The answer to a route the role does not serve: 404, logged as ``unsupported``."""
    logger.warning(
        "stand-in has no %s %s (%s role); answered 404", request.method, request.path, request.role
    )
    return Answer("unsupported", status=HTTPStatus.NOT_FOUND, payload=payload)
