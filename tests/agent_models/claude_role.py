"""The Claude role: a scripted model behind Anthropic's Messages API, for Claude Code.

Test infrastructure, not product: :class:`ClaudeRole` is registered into the stand-in server
(``pi_hindsight_standin``) as the role ``claude`` by ``tests/agent_models`` (``AgentStandIn``);
Claude Code talks to it with ``ANTHROPIC_BASE_URL=<stand-in>/claude``, so it posts to
``/claude/v1/messages?beta=true``. Ported from the scratch stand-in the Claude Code notes were
checked with (docs/hosts/claude-code.md).

The script is the Pi role's (``PiScript``): one grammar for every agent model, so one script
serves a test that runs both agents. A rule's tool calls name Claude Code's tools (``Bash``,
``mcp__hindsight__hindsight_memory``) and their ``arguments`` become the ``tool_use`` input.

**The prompt** a rule matches is the last text block of the last user message that has text
of its own: ``<system-reminder>…</system-reminder>`` sections are removed first (Claude Code
wraps injected hook context that way inside user messages for models without system turns), a
user message carrying a ``tool_result`` is never a prompt (Claude Code puts "Tool loaded."
beside a ToolSearch result), and ``role: "system"`` messages (hook context for models with
mid-conversation system turns) are never prompts.

**Replies.** The first matching rule wins; a tool rule answers with one round of ``tool_use``
blocks per model turn since that prompt, then ``then_reply`` (``{tool_result}`` becomes the
last tool result's text, system-reminders removed, cut to 2000 characters). No match:
``default_reply``. Claude Code's compaction request (its prompt asks for "a detailed summary
of the conversation") gets :data:`COMPACT_REPLY`.

The log's ``kind``: ``prompt`` (the last message is the user's prompt), ``tool_result``,
``compact``, ``count_tokens`` or ``unsupported``. Non-streaming requests get one JSON message;
``stream: true`` the Messages SSE events (message_start, content blocks with text_delta or
input_json_delta, message_delta, message_stop).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pi_hindsight_standin import Answer, RoleRequest, SseEvent
from pi_hindsight_standin.roles import JsonObject, unsupported
from tests.agent_models.pi_role import PiScript

ROLE = "claude"
COMPACT_MARKER = "detailed summary of the conversation"
COMPACT_REPLY = (
    "<analysis>Stand-in analysis.</analysis>\n"
    "<summary>Stand-in summary of the conversation.</summary>"
)
MAX_TOOL_RESULT_CHARS = 2000
TEXT_DELTA_CHARS = 64
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []


def own_texts(message: Mapping[str, Any]) -> list[str]:
    """The text a user message holds of its own (system-reminders removed); empty for other
    roles and for a message carrying a tool_result."""
    if message.get("role") != "user":
        return []
    blocks = _blocks(message.get("content"))
    if any(block.get("type") == "tool_result" for block in blocks):
        return []
    texts = (
        _REMINDER.sub("", str(block.get("text", ""))).strip()
        for block in blocks
        if block.get("type") == "text"
    )
    return [text for text in texts if text]


def _tool_result_text(block: Mapping[str, Any]) -> str:
    texts = [
        str(part.get("text", ""))
        for part in _blocks(block.get("content"))
        if part.get("type") == "text"
    ]
    return _REMINDER.sub("", "\n".join(texts)).strip()


@dataclass(frozen=True)
class Turn:
    """What the script needs of one request."""

    prompt: str
    prompt_index: int | None
    tool_rounds: int
    last_tool_result: str
    last_is_tool_result: bool


def read_turn(body: Mapping[str, Any]) -> Turn:
    raw = body.get("messages")
    messages = [m for m in raw if isinstance(m, Mapping)] if isinstance(raw, list) else []
    prompt, index = "", None
    for position in range(len(messages) - 1, -1, -1):
        texts = own_texts(messages[position])
        if texts:
            prompt, index = texts[-1], position
            break
    rounds, last_result, last_is_result = 0, "", False
    for message in messages[(index + 1) if index is not None else 0 :]:
        blocks = _blocks(message.get("content"))
        if message.get("role") == "assistant" and any(b.get("type") == "tool_use" for b in blocks):
            rounds += 1
        for block in blocks:
            if block.get("type") == "tool_result":
                last_result = _tool_result_text(block)
    if messages:
        last_is_result = any(
            b.get("type") == "tool_result" for b in _blocks(messages[-1].get("content"))
        )
    return Turn(prompt, index, rounds, last_result, last_is_result)


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    input: JsonObject


@dataclass(frozen=True)
class ClaudeReply:
    text: str = ""
    tool_uses: tuple[ToolUse, ...] = ()

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.tool_uses else "end_turn"


def _digest(*parts: Any) -> str:
    raw = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()
    return hashlib.sha256(raw).hexdigest()[:24]


def answer(script: PiScript, body: Mapping[str, Any]) -> tuple[str, ClaudeReply]:
    """The kind of request and what the scripted model says next."""
    turn = read_turn(body)
    lowered = turn.prompt.lower()
    kind = "tool_result" if turn.last_is_tool_result else "prompt"
    if COMPACT_MARKER in lowered:
        return "compact", ClaudeReply(text=COMPACT_REPLY)
    rule = next((r for r in script.rules if r.match.lower() in lowered), None)
    if rule is None:
        return kind, ClaudeReply(text=script.default_reply)
    if rule.reply is not None:
        return kind, ClaudeReply(text=rule.reply)
    if turn.tool_rounds < len(rule.steps):
        uses = tuple(
            ToolUse(
                id=f"toolu_{_digest(turn.prompt_index, lowered, turn.tool_rounds, n, call.name)}",
                name=call.name,
                input=dict(call.arguments),
            )
            for n, call in enumerate(rule.steps[turn.tool_rounds])
        )
        return kind, ClaudeReply(tool_uses=uses)
    text = rule.then_reply.replace("{tool_result}", turn.last_tool_result[:MAX_TOOL_RESULT_CHARS])
    return kind, ClaudeReply(text=text)


def message_json(body: Mapping[str, Any], reply: ClaudeReply, body_bytes: int) -> JsonObject:
    """The complete (non-streamed) Messages API response."""
    seed = _digest(body.get("messages"), body.get("system"))
    blocks: list[JsonObject] = []
    if reply.text or not reply.tool_uses:
        blocks.append({"type": "text", "text": reply.text})
    blocks.extend(
        {"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}
        for use in reply.tool_uses
    )
    return {
        "id": f"msg_{seed}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "standin"),
        "content": blocks,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": max(1, body_bytes // 4),
            "output_tokens": sum(len(json.dumps(b)) for b in blocks) // 4 + 1,
        },
    }


def sse_events(message: JsonObject) -> list[SseEvent]:
    """The Messages SSE events that stream ``message``, in order."""
    start = dict(message, content=[], stop_reason=None)
    start["usage"] = {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1}
    events = [SseEvent({"type": "message_start", "message": start}, event="message_start")]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            first: JsonObject = {"type": "text", "text": ""}
            text = block["text"]
            deltas: Sequence[JsonObject] = [
                {"type": "text_delta", "text": text[i : i + TEXT_DELTA_CHARS]}
                for i in range(0, len(text), TEXT_DELTA_CHARS)
            ] or [{"type": "text_delta", "text": ""}]
        else:
            first = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(
            SseEvent(
                {"type": "content_block_start", "index": index, "content_block": first},
                event="content_block_start",
            )
        )
        events.extend(
            SseEvent(
                {"type": "content_block_delta", "index": index, "delta": delta},
                event="content_block_delta",
            )
            for delta in deltas
        )
        events.append(
            SseEvent({"type": "content_block_stop", "index": index}, event="content_block_stop")
        )
    events.append(
        SseEvent(
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
            event="message_delta",
        )
    )
    events.append(SseEvent({"type": "message_stop"}, event="message_stop"))
    return events


def _error(message: str, kind: str = "not_found_error") -> JsonObject:
    return {"type": "error", "error": {"type": kind, "message": message}}


class ClaudeRole:
    """The ``claude`` role's handler: Anthropic Messages answered from a script (Scripted)."""

    def __init__(self, script: Any = None) -> None:
        self._script = PiScript.from_json(script)
        self._lock = threading.Lock()

    @property
    def script(self) -> PiScript:
        with self._lock:
            return self._script

    def set_script(self, script: Any) -> None:
        parsed = PiScript.from_json(script)
        with self._lock:
            self._script = parsed

    def __call__(self, request: RoleRequest) -> Answer:
        headers = {"request-id": "req_standin"}
        if request.method == "POST" and request.route == "v1/messages/count_tokens":
            tokens = {"input_tokens": max(1, len(request.raw) // 4)}
            return Answer("count_tokens", payload=tokens, headers=headers)
        if request.method != "POST" or request.route != "v1/messages":
            return unsupported(request, _error(f"stand-in: no {request.method} {request.path}"))
        body = request.body
        if body is None:
            error = _error("the body must be a JSON object", "invalid_request_error")
            return Answer("invalid", status=400, payload=error, headers=headers)
        kind, reply = answer(self.script, body)
        message = message_json(body, reply, len(request.raw))
        if not body.get("stream"):
            return Answer(kind, payload=message, headers=headers)
        return Answer(kind, events=sse_events(message), headers=headers)
