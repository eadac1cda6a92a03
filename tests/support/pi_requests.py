"""What reached the model: the stand-in's log of Pi's provider requests, read as messages, and the
scripts that make the stand-in call a tool. Shared by the end-to-end tests."""

from __future__ import annotations

import json
from typing import Any

from tests.plugins.pi import PiWorld

FACT = "Our production deploy target is the Zephyr cluster in Frankfurt."
QUESTION = "Where do we deploy production?"


def text_of(content: Any) -> str:
    """A message's text: the string, or its text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def messages_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    body = request["body"]
    assert isinstance(body, dict)
    messages = body["messages"]
    assert isinstance(messages, list)
    return messages


def memory_after(messages: list[dict[str, Any]], prompt: str) -> str | None:
    """The hidden memory message right after the user message ``prompt``, if there is one."""
    for index, message in enumerate(messages):
        if message.get("role") == "user" and text_of(message.get("content")) == prompt:
            following = messages[index + 1] if index + 1 < len(messages) else None
            if following and following.get("role") == "user":
                text = text_of(following.get("content"))
                if text.startswith("<hindsight-memory"):
                    return text
            return None
    raise AssertionError(f"prompt {prompt!r} not found in {json.dumps(messages)[:2000]}")


def requests_for(world: PiWorld, prompt: str) -> list[dict[str, Any]]:
    """Every provider request whose messages hold the user message ``prompt``."""
    found = []
    for request in world.pi_requests():
        messages = messages_of(request)
        if any(m.get("role") == "user" and text_of(m.get("content")) == prompt for m in messages):
            found.append(request)
    return found


def script_tool_call(world: PiWorld, match: str, tool: str, arguments: dict[str, Any]) -> None:
    """The stand-in answers a prompt containing ``match`` by calling ``tool``, then quotes the
    tool's result (``TOOL SAID: …``)."""
    world.standin.set_script(
        {
            "rules": [
                {
                    "match": match,
                    "tool_calls": [{"name": tool, "arguments": arguments}],
                    "then_reply": "TOOL SAID: {tool_result}",
                }
            ],
            "default_reply": "Understood.",
        }
    )


def last_tool_result(world: PiWorld) -> str:
    """The text of the last tool result the model received."""
    for request in reversed(world.pi_requests()):
        messages = request["body"]["messages"]  # type: ignore[index]
        for message in reversed(messages):
            if message.get("role") == "tool":
                content = message.get("content")
                return content if isinstance(content, str) else json.dumps(content)
    raise AssertionError("no tool result reached the model")
