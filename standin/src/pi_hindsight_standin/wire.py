"""The OpenAI chat-completions wire format, as the stand-in speaks it.

The roles that speak it (Hindsight's LLM, Pi's model) decide *what* to answer as a
:class:`Reply` (text, or tool calls); this module turns a reply into the exact JSON a client
parses: one ``chat.completion`` object, or a
stream of ``chat.completion.chunk`` objects for ``stream: true`` requests.

Everything is derived from the request body, so the same request always gets the same
bytes back: ids are hashes of the body, ``created`` is a constant, and token counts are a
length estimate rather than a real tokenizer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pi_hindsight_standin.roles import JsonObject

#: ``created`` in every object: a fixed instant, so no clock reaches the content.
CREATED = 1_700_000_000
#: Characters per streamed text delta; small enough that a reply arrives in pieces.
TEXT_DELTA_CHARS = 24
#: Characters per streamed tool-argument delta.
ARGUMENT_DELTA_CHARS = 40


@dataclass(frozen=True)
class ToolCall:
    """One function call the stand-in asks the client to run."""

    id: str
    name: str
    arguments: JsonObject = field(default_factory=dict)

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False, sort_keys=False)


@dataclass(frozen=True)
class Reply:
    """What an assistant turn says: text, or tool calls (never both empty)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


def text_reply(text: str) -> Reply:
    return Reply(text=text)


def json_reply(payload: Any) -> Reply:
    """A text reply whose content is ``payload`` as JSON (``response_format`` answers)."""
    return Reply(text=json.dumps(payload, ensure_ascii=False))


def digest(*parts: Any, length: int = 24) -> str:
    """A short, stable hash of JSON-serializable parts."""
    raw = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:length]


def tool_call_id(*parts: Any) -> str:
    """A deterministic tool-call id shaped like OpenAI's (``call_…``)."""
    return f"call_{digest(*parts, length=20)}"


def content_text(content: Any) -> str:
    """The text of a message's ``content``: a string, or the text parts of a part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") in ("text", "input_text")
        ]
        return "\n".join(texts)
    return ""


def messages_of(body: Mapping[str, Any]) -> list[JsonObject]:
    """The request's messages, keeping only well-formed (dict) entries."""
    raw = body.get("messages")
    if not isinstance(raw, list):
        return []
    return [m for m in raw if isinstance(m, dict)]


def message_texts(body: Mapping[str, Any], role: str) -> list[str]:
    """The text of every message with ``role``, in order."""
    return [content_text(m.get("content")) for m in messages_of(body) if m.get("role") == role]


def estimate_tokens(value: Any) -> int:
    """A deterministic token estimate: about four characters per token."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return max(1, len(text) // 4)


def usage_of(body: Mapping[str, Any], reply: Reply) -> JsonObject:
    """The reply's ``usage``: deterministic, about four characters per token."""
    prompt_tokens = estimate_tokens(body.get("messages", []))
    completion_tokens = estimate_tokens(
        reply.text or [[c.name, c.arguments_json()] for c in reply.tool_calls]
    )
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _model(body: Mapping[str, Any], default: str) -> str:
    model = body.get("model")
    return model if isinstance(model, str) and model else default


def completion_id(body: Mapping[str, Any]) -> str:
    return f"chatcmpl-standin-{digest(body)}"


def build_completion(body: Mapping[str, Any], reply: Reply, *, default_model: str) -> JsonObject:
    """The non-streaming ``chat.completion`` object for ``reply``."""
    message: JsonObject = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for call in reply.tool_calls
        ]
    return {
        "id": completion_id(body),
        "object": "chat.completion",
        "created": CREATED,
        "model": _model(body, default_model),
        "choices": [
            {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
        ],
        "usage": usage_of(body, reply),
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def iter_chunks(
    body: Mapping[str, Any], reply: Reply, *, default_model: str
) -> Iterator[JsonObject]:
    """The ``chat.completion.chunk`` objects of a streamed ``reply``, in order.

    A role delta first, then text deltas (or, per tool call, a delta naming it followed by
    argument fragments), then an empty delta carrying ``finish_reason``, and, when the
    request asked for ``stream_options.include_usage``, a last chunk with no choices and
    the usage. The caller writes ``data: [DONE]`` after these.
    """
    base = {
        "id": completion_id(body),
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": _model(body, default_model),
    }

    def chunk(delta: JsonObject, finish_reason: str | None = None) -> JsonObject:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        return {**base, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    if reply.tool_calls:
        for index, call in enumerate(reply.tool_calls):
            opening = {"index": index, "id": call.id, "type": "function"}
            yield chunk(
                {"tool_calls": [{**opening, "function": {"name": call.name, "arguments": ""}}]}
            )
            for fragment in _pieces(call.arguments_json(), ARGUMENT_DELTA_CHARS):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
    else:
        for piece in _pieces(reply.text, TEXT_DELTA_CHARS):
            if piece:
                yield chunk({"content": piece})
    yield chunk({}, reply.finish_reason)
    options = body.get("stream_options")
    if isinstance(options, Mapping) and options.get("include_usage"):
        yield {**base, "choices": [], "usage": usage_of(body, reply)}


def error_body(message: str, *, kind: str = "invalid_request_error") -> JsonObject:
    """An OpenAI-shaped error object."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def tool_names(body: Mapping[str, Any]) -> list[str]:
    """Names of the function tools offered in the request, in order."""
    names: list[str] = []
    tools = body.get("tools")
    if not isinstance(tools, Sequence):
        return names
    for tool in tools:
        if isinstance(tool, Mapping):
            function = tool.get("function")
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                names.append(function["name"])
    return names


def tool_parameters(body: Mapping[str, Any], name: str) -> JsonObject:
    """The JSON schema of tool ``name``'s parameters ({} when absent)."""
    tools = body.get("tools")
    if isinstance(tools, Sequence):
        for tool in tools:
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if isinstance(function, Mapping) and function.get("name") == name:
                params = function.get("parameters")
                return dict(params) if isinstance(params, Mapping) else {}
    return {}
