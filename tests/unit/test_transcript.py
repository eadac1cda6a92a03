"""What of a Pi request is retained: the tool policy, memory tools, summaries, redaction."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pi_hindsight.config import RetainSettings
from pi_hindsight.engine.turn_text import ToolPolicy, render_turn
from pi_hindsight.hosts.pi.messages import turn_messages

SECRET = "ghp_" + "Z9y8X7w6V5" * 3 + "u4T3s2"


def _request() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"Deploy with token {SECRET} please"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking memory and files."},
                {
                    "type": "toolCall",
                    "id": "m",
                    "name": "hindsight_memory",
                    "arguments": {"q": "x"},
                },
                {"type": "toolCall", "id": "b", "name": "bash", "arguments": {"command": "ls"}},
                {"type": "toolCall", "id": "r", "name": "read", "arguments": {"path": "a.txt"}},
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "m",
            "toolName": "hindsight_memory",
            "content": [{"type": "text", "text": "RECALLED-MEMORY-TEXT"}],
            "isError": False,
        },
        {
            "role": "toolResult",
            "toolCallId": "b",
            "toolName": "bash",
            "content": [{"type": "text", "text": "deploy.sh\nsecrets.env"}],
            "isError": False,
        },
        {
            "role": "toolResult",
            "toolCallId": "r",
            "toolName": "read",
            "content": [{"type": "text", "text": "ENOENT: a.txt"}],
            "isError": True,
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
    ]


def _turns(policy: ToolPolicy) -> list[dict[str, str]]:
    rendered = render_turn(turn_messages(_request()), policy)
    turns: list[dict[str, str]] = json.loads(rendered.content)
    return turns


def test_defaults_mention_tool_calls_and_drop_results() -> None:
    defaults = RetainSettings()
    policy = ToolPolicy(defaults.tool_calls, defaults.tool_results, defaults.tool_result_max_chars)
    assert policy == ToolPolicy()
    assert [turn["content"] for turn in _turns(policy)] == [
        "Deploy with token [REDACTED:github_token] please",
        "Checking memory and files.",
        "(used tool bash)",
        "(used tool read)",
        "Done.",
    ]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (ToolPolicy(calls="omit"), ["Deploy", "Checking", "Done."]),
        (
            ToolPolicy(calls="arguments", results="errors"),
            [
                "Deploy",
                "Checking",
                '(used tool bash: {"command": "ls"})',
                '(used tool read: {"path": "a.txt"})',
                "(error from read) ENOENT: a.txt",
                "Done.",
            ],
        ),
        (
            ToolPolicy(calls="omit", results="all", max_chars=8),
            [
                "Deploy",
                "Checking",
                "(result of bash) deploy.s… (13 chars cut)",
                "(error from read) ENOENT: … (5 chars cut)",
                "Done.",
            ],
        ),
    ],
)
def test_the_tool_policy_decides_what_of_tool_traffic_is_kept(
    policy: ToolPolicy, expected: list[str]
) -> None:
    contents = [turn["content"] for turn in _turns(policy)]
    assert [content.split()[0] if i < 2 else content for i, content in enumerate(contents)] == [
        e.split()[0] if i < 2 else e for i, e in enumerate(expected)
    ]


def test_memory_tools_are_never_retained_whatever_the_policy() -> None:
    text = render_turn(turn_messages(_request()), ToolPolicy(calls="arguments", results="all"))
    assert "hindsight_memory" not in text.content
    assert "RECALLED-MEMORY-TEXT" not in text.content


def test_secrets_are_redacted_in_every_turn_and_counted() -> None:
    messages = _request()
    messages[3]["content"] = [{"type": "text", "text": f"export TOKEN={SECRET}"}]
    text = render_turn(turn_messages(messages), ToolPolicy(results="all"))
    assert SECRET not in text.content
    assert text.redacted == 2


def test_summaries_are_never_retained_as_user_speech() -> None:
    """Regression (field complaint 2): compaction summaries were retained as if the user said
    them. Pi hands them to the model as user text with a fixed prefix."""
    messages = [
        {
            "role": "user",
            "content": "The conversation history before this point was compacted into the "
            "following summary:\n\n<summary>\nthe user wants X\n</summary>",
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "The following is a summary of a branch that this conversation came "
                    "back from:\n\n<summary>\nY</summary>",
                }
            ],
        },
        {"role": "compactionSummary", "summary": "S", "tokensBefore": 10},
        {"role": "branchSummary", "summary": "B", "fromId": "x"},
        {"role": "user", "content": "Real question"},
    ]
    turns = json.loads(render_turn(turn_messages(messages)).content)
    assert turns == [{"role": "user", "content": "Real question"}]


def test_a_request_with_only_tool_traffic_is_not_retained() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "b", "name": "bash", "arguments": {}}],
        },
        {
            "role": "toolResult",
            "toolCallId": "b",
            "toolName": "bash",
            "content": [{"type": "text", "text": "x"}],
            "isError": False,
        },
    ]
    assert render_turn(turn_messages(messages), ToolPolicy(results="all")).content == ""
