"""What of a completed request is retained: host-neutral turn messages → clean, redacted text.

Only the request's *new* messages arrive (the host sends a delta), so retain cost per request does
not grow with the session. Never retained (R-RETAIN-3): injected memory messages and compaction or
branch summaries (the host adapter drops them before they reach here), thinking, and the memory
tools' own calls and results (tools named ``hindsight_*``). Other tool traffic follows the
configured :class:`ToolPolicy`. Every retained text goes through
:func:`~pi_hindsight.redaction.redact` before it leaves this module, so no secret is enqueued.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pi_hindsight.redacting import redact

Role = Literal["user", "assistant", "tool_call", "tool_result"]
ToolCalls = Literal["omit", "name", "arguments"]
ToolResults = Literal["omit", "errors", "all"]

#: Tools whose calls and results are never retained: the memory tools themselves (what they
#: return is recalled memory; retaining it would feed recall back into retain).
MEMORY_TOOL_PREFIX = "hindsight_"


@dataclass(frozen=True)
class TurnMessage:
    """One message of a request, host-neutral. ``text`` of a tool call is its arguments (JSON)."""

    role: Role
    text: str
    tool_name: str | None = None
    is_error: bool = False


@dataclass(frozen=True)
class ToolPolicy:
    """What tool traffic is retained (config ``retain.toolCalls`` / ``retain.toolResults``).

    Safe defaults: a call is a short "(used tool X)" mention, results are not retained.
    """

    calls: ToolCalls = "name"
    results: ToolResults = "omit"
    max_chars: int = 1_000


@dataclass(frozen=True)
class RetainText:
    """The content for Hindsight (a JSON array of turns; empty: nothing to retain)."""

    content: str
    turns: int
    redacted: int  # how many secrets were replaced


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} chars cut)"


def _tool_turn(message: TurnMessage, policy: ToolPolicy) -> dict[str, str] | None:
    name = message.tool_name or "unknown"
    if message.role == "tool_call":
        if policy.calls == "omit":
            return None
        arguments = message.text.strip()
        if policy.calls == "arguments" and arguments and arguments != "{}":
            return {
                "role": "assistant",
                "content": f"(used tool {name}: {_clip(arguments, policy.max_chars)})",
            }
        return {"role": "assistant", "content": f"(used tool {name})"}
    wanted = policy.results == "all" or (policy.results == "errors" and message.is_error)
    text = message.text.strip()
    if not wanted or not text:
        return None
    label = "error from" if message.is_error else "result of"
    return {"role": "tool", "content": f"({label} {name}) {_clip(text, policy.max_chars)}"}


def render_turn(messages: Sequence[TurnMessage], policy: ToolPolicy | None = None) -> RetainText:
    """The content Hindsight receives for one request: a JSON array of conversation turns.

    This is Hindsight's native conversation shape: it chunks at turn boundaries, keeps the
    speaker of each turn, and merges the arrays of successive appends to one session document
    into one valid array. Empty turns are dropped; a request in which nobody spoke (only tool
    traffic) is not retained at all. Secrets are redacted in every turn.
    """
    policy = policy or ToolPolicy()
    turns: list[dict[str, str]] = []
    spoken = False
    redacted = 0
    for message in messages:
        if message.role in ("tool_call", "tool_result"):
            if (message.tool_name or "").startswith(MEMORY_TOOL_PREFIX):
                continue
            turn = _tool_turn(message, policy)
        else:
            text = message.text.strip()
            turn = {"role": message.role, "content": text} if text else None
            spoken = spoken or turn is not None
        if turn is None:
            continue
        cleaned = redact(turn["content"])
        redacted += len(cleaned.findings)
        turns.append({"role": turn["role"], "content": cleaned.text})
    if not spoken:
        return RetainText("", 0, 0)
    return RetainText(json.dumps(turns, ensure_ascii=False), len(turns), redacted)
