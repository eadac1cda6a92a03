"""What of a completed request is retained: host-neutral turn messages → retain text.

Only the request's *new* messages arrive (the host sends a delta), so retain cost per request does
not grow with the session. Never retained (R-RETAIN-3): injected memory messages (the host adapter
drops them before they reach here), thinking, and tool traffic beyond a short mention.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Role = Literal["user", "assistant", "tool"]


@dataclass(frozen=True)
class TurnMessage:
    role: Role
    text: str
    tool_name: str | None = None


def render_turn(messages: Sequence[TurnMessage]) -> str:
    """The content Hindsight receives for one request: a JSON array of conversation turns.

    This is Hindsight's native conversation shape: it chunks at turn boundaries, keeps the
    speaker of each turn, and merges the arrays of successive appends to one session document
    into one valid array. Tool calls become short assistant mentions; empty turns are dropped.
    An empty string means there is nothing to retain.
    """
    turns: list[dict[str, str]] = []
    spoken = False
    for message in messages:
        text = message.text.strip()
        if message.role == "tool":
            mention = f"(used tool {message.tool_name or 'unknown'})"
            turns.append({"role": "assistant", "content": mention})
        elif text:
            turns.append({"role": message.role, "content": text})
            spoken = True
    return json.dumps(turns, ensure_ascii=False) if spoken else ""
