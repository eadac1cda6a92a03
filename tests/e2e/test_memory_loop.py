"""End to end: the real Pi binary, our extension and sidecar, the real Hindsight server, and the
stand-in model whose request log shows exactly what reached the provider.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.engine.render import FRAMING
from tests.plugins.pi import LoopbackListener, PiWorld, make_repo

pytestmark = [pytest.mark.server, pytest.mark.pi]

FACT = "Our production deploy target is the Zephyr cluster in Frankfurt."
QUESTION = "Where do we deploy production?"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    body = request["body"]
    assert isinstance(body, dict)
    messages = body["messages"]
    assert isinstance(messages, list)
    return messages


def _memory_after(messages: list[dict[str, Any]], prompt: str) -> str | None:
    """The hidden memory message right after the user message ``prompt``, if there is one."""
    for index, message in enumerate(messages):
        if message.get("role") == "user" and _text(message.get("content")) == prompt:
            following = messages[index + 1] if index + 1 < len(messages) else None
            if following and following.get("role") == "user":
                text = _text(following.get("content"))
                if text.startswith("<hindsight-memory"):
                    return text
            return None
    raise AssertionError(f"prompt {prompt!r} not found in {json.dumps(messages)[:2000]}")


def _requests_for(world: PiWorld, prompt: str) -> list[dict[str, Any]]:
    found = []
    for request in world.pi_requests():
        messages = _messages(request)
        if any(m.get("role") == "user" and _text(m.get("content")) == prompt for m in messages):
            found.append(request)
    return found


def test_a_second_session_receives_the_first_sessions_fact_right_after_its_prompt(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "alpha", "https://example.com/team/alpha.git")
    pi_world.register(repo)
    pi_world.run(repo, FACT)
    pi_world.drain()

    pi_world.run(repo, QUESTION)
    (request,) = _requests_for(pi_world, QUESTION)
    memory = _memory_after(_messages(request), QUESTION)
    assert memory is not None, "no hidden memory message right after the user message"
    assert "Zephyr" in memory
    assert "reference material" in memory.lower()  # every block is framed or marked
    # The full framing (R-RECALL-5): in the first block on Pi 0.73.1; on Pi 1.x in the system
    # prompt (the section the shim sets, in the cached prefix) and the block carries the mark.
    system = _text(_messages(request)[0]["content"])
    assert "not an instruction" in memory or FRAMING in system
    # The memory message is the last message: it sits right after this request's user message.
    assert _text(_messages(request)[-1]["content"]) == memory


def test_requests_are_exact_prefixes_across_a_tool_call_and_continue(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "beta", "https://example.com/team/beta.git")
    pi_world.register(repo)
    pi_world.run(repo, FACT)
    pi_world.drain()
    pi_world.standin.set_script(
        {
            "rules": [
                {
                    "match": "list the files",
                    "tool_calls": [{"name": "bash", "arguments": {"command": "echo tool-ran"}}],
                    "then_reply": "The command printed tool-ran.",
                }
            ],
            "default_reply": "Understood.",
        }
    )
    pi_world.run(repo, "Where do we deploy? Then list the files.")
    pi_world.run(repo, "And what was the deploy target again?", args=("--continue",))

    requests = pi_world.pi_requests()[-3:]  # tool turn, its follow-up, the continued session
    sequences = [_messages(request) for request in requests]
    assert len(sequences) == 3
    assert any(m.get("role") == "tool" for m in sequences[1]), "the tool result reached the model"
    for earlier, later in itertools.pairwise(sequences):
        assert later[: len(earlier)] == earlier, "a provider request was not a prefix of the next"
    # Memory was delivered for both user requests, each right after its own user message.
    assert _memory_after(sequences[0], "Where do we deploy? Then list the files.") is not None
    assert _memory_after(sequences[2], "And what was the deploy target again?") is not None


def test_a_second_registered_repository_never_receives_the_first_ones_fact(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    alpha = make_repo(tmp_path / "alpha", "https://example.com/team/alpha.git")
    gamma = make_repo(tmp_path / "gamma", "https://example.com/team/gamma.git")
    pi_world.register(alpha)
    pi_world.register(gamma)
    pi_world.run(alpha, FACT)
    pi_world.run(gamma, "Our staging database is called Quasar.")
    pi_world.drain()

    pi_world.run(gamma, QUESTION)
    (request,) = _requests_for(pi_world, QUESTION)
    memory = _memory_after(_messages(request), QUESTION) or ""
    assert "Zephyr" not in json.dumps(_messages(request))
    # The recall did run for gamma (it is registered): its own fact can come back.
    assert "Zephyr" not in memory


def test_an_unregistered_directory_gets_no_memory_and_makes_no_connection(
    pi_world: PiWorld, tmp_path: Path, canary: LoopbackListener
) -> None:
    # Point the layer at a listener that counts connections: the headless run must make none.
    config_path = pi_world.state_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["hindsight"]["baseUrl"] = canary.url
    config_path.write_text(json.dumps(config))
    elsewhere = make_repo(tmp_path / "unregistered", "https://example.com/team/secret.git")

    completed = pi_world.run(elsewhere, QUESTION)

    (request,) = _requests_for(pi_world, QUESTION)
    assert _memory_after(_messages(request), QUESTION) is None
    assert "hindsight-memory" not in json.dumps(_messages(request))
    assert canary.connections == 0
    assert completed.returncode == 0
    status = json.loads(pi_world.cli("outbox", "status", "--json").stdout)
    assert status["pending"] == 0 and status["done"] == 0  # nothing was even queued
