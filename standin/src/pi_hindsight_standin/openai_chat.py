"""Roles that speak OpenAI chat completions: ``decide`` what to say, this does the wire.

Both built-in kinds of model the project talks to — Hindsight's LLM and Pi's
``openai-completions`` provider — speak this protocol, so a role for either is only its
``decide(body) -> (kind, Reply)``::

    handle = openai_chat_role(decide, model="local-model")
    standin.register_role("pi", handle)           # serves /pi/v1/chat/completions, /pi/v1/models
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from http import HTTPStatus
from typing import Any

from pi_hindsight_standin.roles import (
    Answer,
    Handler,
    JsonObject,
    RoleRequest,
    SseEvent,
    unsupported,
)
from pi_hindsight_standin.wire import (
    CREATED,
    Reply,
    build_completion,
    error_body,
    iter_chunks,
    usage_of,
)

logger = logging.getLogger(__name__)

CHAT_ROUTE = "v1/chat/completions"
MODELS_ROUTE = "v1/models"

#: What a chat role decides for one request body: its kind (for the log) and the reply.
Decide = Callable[[JsonObject], tuple[str, Reply]]


def _events(body: Mapping[str, Any], reply: Reply, model: str) -> Iterator[SseEvent]:
    for chunk in iter_chunks(body, reply, default_model=model):
        yield SseEvent(chunk)
    yield SseEvent("[DONE]")


def openai_chat_role(decide: Decide, *, model: str) -> Handler:
    """A handler for ``POST v1/chat/completions`` and ``GET v1/models`` answering with ``decide``.

    ``model`` is the model listed, and named in replies to requests that name none. A chat
    body that is not a JSON object answers 400 (logged as ``invalid``); ``stream: true``
    gets the chunk stream ending in ``data: [DONE]``; any other route answers 404.
    """
    listed = {"id": model, "object": "model", "created": CREATED, "owned_by": "standin"}

    def handle(request: RoleRequest) -> Answer:
        if request.route == MODELS_ROUTE and request.method == "GET":
            return Answer(None, payload={"object": "list", "data": [listed]})
        if request.route != CHAT_ROUTE or request.method != "POST":
            return unsupported(request, error_body(f"no route for {request.method} {request.path}"))
        body = request.body
        if body is None:
            logger.warning(
                "%s request to %s is not a JSON object; answered 400", request.role, request.path
            )
            return Answer(
                "invalid",
                status=HTTPStatus.BAD_REQUEST,
                payload=error_body("the body must be a JSON object"),
            )
        kind, reply = decide(body)
        logger.debug("%s %s -> %s", request.role, kind, reply.finish_reason)
        usage = usage_of(body, reply)
        if body.get("stream"):
            return Answer(kind, events=_events(body, reply, model), usage=usage)
        return Answer(kind, payload=build_completion(body, reply, default_model=model), usage=usage)

    return handle
