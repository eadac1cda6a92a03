"""End to end: the real Pi binary, our extension and sidecar, the real Hindsight server, and the
stand-in model whose request log shows exactly what reached the provider.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from pi_hindsight.engine.memory_block import FRAMING
from tests.plugins.pi import LoopbackListener, PiWorld, make_repo
from tests.support.pi_requests import (
    FACT,
    QUESTION,
    memory_after,
    messages_of,
    requests_for,
    text_of,
)

pytestmark = [pytest.mark.server, pytest.mark.pi]


@pytest.mark.pi_both("request-end")
def test_a_second_session_receives_the_first_sessions_fact_right_after_its_prompt(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "alpha", "https://example.com/team/alpha.git")
    pi_world.register(repo)
    pi_world.run(repo, FACT)
    pi_world.drain()

    pi_world.run(repo, QUESTION)
    (request,) = requests_for(pi_world, QUESTION)
    memory = memory_after(messages_of(request), QUESTION)
    assert memory is not None, "no hidden memory message right after the user message"
    assert "Zephyr" in memory
    assert "reference material" in memory.lower()  # every block is framed or marked
    # The full framing (R-RECALL-5): in the first block on Pi 0.73.1; on Pi 1.x in the system
    # prompt (the section the shim sets, in the cached prefix) and the block carries the mark.
    system = text_of(messages_of(request)[0]["content"])
    assert "not an instruction" in memory or FRAMING in system
    # The memory message is the last message: it sits right after this request's user message.
    assert text_of(messages_of(request)[-1]["content"]) == memory


@pytest.mark.pi_both("session-file")
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
    # What the continued request may be given is what Hindsight holds *besides* the records this
    # session already delivered (they are in its context: never delivered twice, across a resume
    # too). That is the first request's own retain, so wait until Hindsight has it: without this
    # the test raced Hindsight's extraction (alone it won, under a loaded full suite it lost).
    pi_world.drain()
    pi_world.run(repo, "And what was the deploy target again?", args=("--continue",))

    requests = pi_world.pi_requests()[-3:]  # tool turn, its follow-up, the continued session
    sequences = [messages_of(request) for request in requests]
    assert len(sequences) == 3
    assert any(m.get("role") == "tool" for m in sequences[1]), "the tool result reached the model"
    for earlier, later in itertools.pairwise(sequences):
        assert later[: len(earlier)] == earlier, "a provider request was not a prefix of the next"
    # Memory was delivered for both user requests, each right after its own user message.
    assert memory_after(sequences[0], "Where do we deploy? Then list the files.") is not None
    assert memory_after(sequences[2], "And what was the deploy target again?") is not None


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
    (request,) = requests_for(pi_world, QUESTION)
    memory = memory_after(messages_of(request), QUESTION) or ""
    assert "Zephyr" not in json.dumps(messages_of(request))
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

    (request,) = requests_for(pi_world, QUESTION)
    assert memory_after(messages_of(request), QUESTION) is None
    assert "hindsight-memory" not in json.dumps(messages_of(request))
    assert canary.connections == 0
    assert completed.returncode == 0
    status = json.loads(pi_world.cli("outbox", "status", "--json").stdout)
    assert status["pending"] == 0 and status["done"] == 0  # nothing was even queued
