"""The ``claude`` agent-model role: Anthropic Messages answered from a script, and the real
Claude Code binary talking to it (what reached the provider is in the request log)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.agent_models import AgentStandIn
from tests.agent_models.claude_role import COMPACT_REPLY, read_turn
from tests.plugins.claude_code import claude_env

SCRIPT = {
    "rules": [
        {"match": "hello", "reply": "Hi there."},
        {
            "match": "list files",
            "steps": [
                [{"name": "Bash", "arguments": {"command": "ls"}}],
                [{"name": "Read", "arguments": {"file_path": "/a"}}],
            ],
            "then_reply": "Listed: {tool_result}",
        },
    ],
    "default_reply": "Understood.",
}


def _post(standin: AgentStandIn, body: dict[str, Any]) -> httpx.Response:
    with httpx.Client(timeout=30, trust_env=False) as client:
        return client.post(f"{standin.claude_base_url}/v1/messages?beta=true", json=body)


def _sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_injected_context_and_system_turns_are_never_the_prompt() -> None:
    body = {
        "messages": [
            _user("<system-reminder>\nUserPromptSubmit hook additional context: hello\n"),
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>say hello</system-reminder>"},
                    {"type": "text", "text": "what is the port?"},
                ],
            },
            {"role": "system", "content": [{"type": "text", "text": "hello from a hook"}]},
        ]
    }
    assert read_turn(body).prompt == "what is the port?"


def test_tool_rounds_then_the_final_reply_streamed(chat_standin: AgentStandIn) -> None:
    chat_standin.set_script(SCRIPT)
    messages: list[dict[str, Any]] = [_user("please list files")]
    names = []
    for _ in range(2):
        events = _sse(_post(chat_standin, {"stream": True, "messages": messages}).text)
        assert events[0][0] == "message_start" and events[-1][0] == "message_stop"
        start = next(data for name, data in events if name == "content_block_start")
        block = start["content_block"]
        assert block["type"] == "tool_use"
        names.append(block["name"])
        messages += [
            {"role": "assistant", "content": [{**block, "input": {}}]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": block["id"],
                        "content": [{"type": "text", "text": "a.txt"}],
                    }
                ],
            },
        ]
    final = _post(chat_standin, {"messages": messages}).json()
    assert names == ["Bash", "Read"]
    assert final["content"] == [{"type": "text", "text": "Listed: a.txt"}]
    assert final["stop_reason"] == "end_turn"
    kinds = [entry["kind"] for entry in chat_standin.requests("claude")]
    assert kinds == ["prompt", "tool_result", "tool_result"]


def test_compaction_count_tokens_and_unknown_routes(chat_standin: AgentStandIn) -> None:
    prompt = "Your task is to create a detailed summary of the conversation so far"
    reply = _post(chat_standin, {"messages": [_user(prompt)]}).json()
    assert reply["content"][0]["text"] == COMPACT_REPLY
    with httpx.Client(timeout=30, trust_env=False) as client:
        counted = client.post(f"{chat_standin.claude_base_url}/v1/messages/count_tokens", json={})
        missing = client.get(f"{chat_standin.claude_base_url}/v1/models")
    assert counted.json()["input_tokens"] >= 1
    assert missing.status_code == 404 and missing.json()["type"] == "error"
    assert [e["kind"] for e in chat_standin.requests("claude")] == [
        "compact",
        "count_tokens",
        "unsupported",
    ]


def test_the_real_claude_code_runs_a_tool_through_the_role(
    claude_binary: Path, chat_standin: AgentStandIn, tmp_path: Path
) -> None:
    chat_standin.set_script(
        {
            "rules": [
                {
                    "match": "run it",
                    "tool_calls": [
                        {"name": "Bash", "arguments": {"command": "echo ran", "description": "e"}}
                    ],
                    "then_reply": "Tool said: {tool_result}",
                }
            ]
        }
    )
    home = tmp_path / "home"
    home.mkdir()
    completed = subprocess.run(
        [str(claude_binary), "-p", "please run it", "--allowedTools", "Bash"],
        cwd=tmp_path,
        env=claude_env(home, chat_standin),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "Tool said: ran"
    logged = chat_standin.requests("claude")
    assert [entry["kind"] for entry in logged] == ["prompt", "tool_result"]
    assert logged[0]["path"] == "/claude/v1/messages"


@pytest.mark.parametrize("bad", [[], {"rules": "x"}, {"rules": [{"match": "a"}]}])
def test_a_bad_script_is_refused_and_the_old_one_kept(
    chat_standin: AgentStandIn, bad: object
) -> None:
    chat_standin.set_script(SCRIPT)
    with pytest.raises(Exception, match="script"):
        chat_standin.set_script(bad)
    reply = _post(chat_standin, {"messages": [_user("hello")]}).json()
    assert reply["content"][0]["text"] == "Hi there."
