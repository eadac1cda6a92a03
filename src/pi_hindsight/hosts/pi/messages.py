"""Pi's message shapes: their text, and a completed request's messages as host-neutral turns."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pi_hindsight.engine.memory_block import FENCE
from pi_hindsight.engine.turn_text import TurnMessage
from pi_hindsight.hosts.pi.naming import CUSTOM_TYPE

# Pi's own text for summaries it hands the model as user messages (pi-coding-agent
# core/messages.js): such a message is Pi's summary, never the user's words.
_SUMMARY_PREFIXES = (
    "The conversation history before this point was compacted into the following summary:",
    "The following is a summary of a branch that this conversation came back from:",
)


def text_of(content: object) -> str:
    """The text of a Pi message's content (a string, or text blocks; images ignored)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block["text"]
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        )
    return ""


def readable_text(content: object) -> str:
    """The content for a person: text blocks, with images, tool calls and thinking as short
    mentions (``evidence explain``)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "image":
            parts.append("[image]")
        elif kind == "toolCall":
            arguments = json.dumps(block.get("arguments"), ensure_ascii=False)
            parts.append(f"[tool call: {block.get('name')} {arguments[:200]}]")
        elif kind == "thinking":
            parts.append("[thinking]")
    return "\n".join(parts)


# An assistant message that is not an answer: a failed attempt (provider error text) or one cut
# off by an abort. Neither is retained (the user's words of that request still are).
_NOT_AN_ANSWER = ("error", "aborted")


def request_messages(
    entries: Sequence[dict[str, Any]], request_id: str
) -> tuple[list[dict[str, Any]], str | None]:
    """A Pi 1.x request's messages from the session entries it added, and our memory entry's id.

    Pi 1.x keeps a failed attempt in the session and hides it with a ``context_edit`` whose
    ``replacement`` is null (the retry is not sent it either); ``role: system`` messages carry
    prompt sections, not conversation. Custom messages (ours and other extensions') are entries
    of their own kind and never messages here.
    """
    hidden = {
        str(entry.get("targetId"))
        for entry in entries
        if entry.get("type") == "context_edit" and entry.get("replacement") is None
    }
    messages: list[dict[str, Any]] = []
    memory_entry: str | None = None
    for entry in entries:
        kind = entry.get("type")
        if kind == "custom_message" and entry.get("customType") == CUSTOM_TYPE:
            details = entry.get("details")
            if isinstance(details, dict) and details.get("requestId") == request_id:
                entry_id = entry.get("id")
                memory_entry = entry_id if isinstance(entry_id, str) else memory_entry
            continue
        if kind != "message" or str(entry.get("id")) in hidden:
            continue
        message = entry.get("message")
        if isinstance(message, dict) and message.get("role") != "system":
            messages.append(message)
    return messages, memory_entry


def turn_messages(messages: Sequence[dict[str, Any]]) -> list[TurnMessage]:
    """Pi ``agent_end`` messages → host-neutral turn messages (the retain policy filters them).

    Dropped here: assistant messages that are no answer (a failed attempt, whose text is the
    provider's error, or one an abort cut off), custom messages (our injected memory and other
    extensions' messages),
    compaction and branch summaries (whether as their own roles or rendered as user text; never
    retained as if the user said them), our memory block arriving as user text, bash executions
    and thinking. Tool calls (with their arguments) and tool results are passed on; what of them
    is kept is ``retain.toolCalls`` / ``retain.toolResults`` (``engine/turn_text.py``).
    """
    turn: list[TurnMessage] = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            text = text_of(message.get("content"))
            head = text.lstrip()
            if head.startswith(f"<{FENCE}") or head.startswith(_SUMMARY_PREFIXES):
                continue  # defensive: our memory block or a summary, whatever role it has
            turn.append(TurnMessage("user", text))
        elif role == "assistant":
            if message.get("stopReason") in _NOT_AN_ANSWER:
                continue
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            text = text_of(blocks)
            if text.strip():
                turn.append(TurnMessage("assistant", text))
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    arguments = block.get("arguments")
                    turn.append(
                        TurnMessage(
                            "tool_call",
                            json.dumps(arguments, ensure_ascii=False, default=str)
                            if arguments
                            else "",
                            tool_name=str(block.get("name") or ""),
                        )
                    )
        elif role == "toolResult":
            turn.append(
                TurnMessage(
                    "tool_result",
                    text_of(message.get("content")),
                    tool_name=str(message.get("toolName") or ""),
                    is_error=message.get("isError") is True,
                )
            )
    return turn
