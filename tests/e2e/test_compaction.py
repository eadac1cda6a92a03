"""Compaction: Pi's own handling; old memory snapshots are never re-injected separately, and what
was compacted away may be delivered again when a later request needs it (R-RECALL-7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.pi import PiRpc, PiWorld, make_repo
from tests.support.pi_requests import (
    FACT,
    QUESTION,
    memory_after,
    messages_of,
    requests_for,
    text_of,
)

pytestmark = [pytest.mark.server, pytest.mark.pi]


def _memory_messages(messages: list[dict[str, Any]]) -> list[int]:
    return [
        index
        for index, message in enumerate(messages)
        if message.get("role") == "user"
        and text_of(message.get("content")).startswith("<hindsight-memory")
    ]


@pytest.mark.pi_both("session-file")
def test_after_compaction_old_memory_is_not_reinjected_and_may_be_delivered_again(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    settings_path = pi_world.agent_dir / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings["compaction"] = {"keepRecentTokens": 1}  # summarise everything but the last turn
    settings_path.write_text(json.dumps(settings))
    repo = make_repo(tmp_path / "compact", "https://example.com/team/compact.git")
    pi_world.register(repo)
    pi_world.run(repo, FACT)
    pi_world.drain()

    again = "Tell me about production deploys once more."
    after = "After the summary: where is production deployed?"
    rpc = PiRpc(pi_world, repo)
    try:
        rpc.prompt(QUESTION)
        rpc.prompt(again)
        start = len(rpc.events)
        rpc.send({"type": "compact"})
        _, response = rpc.wait_for(
            lambda e: e.get("type") == "response" and e.get("command") == "compact",
            "compaction",
            after=start,
        )
        assert response["success"] is True, response
        rpc.prompt(after)
    finally:
        assert rpc.close() == 0

    assert "Zephyr" in (_memory(pi_world, QUESTION) or "")
    assert "Zephyr" not in (_memory(pi_world, again) or "")  # visible: not delivered twice
    (request,) = requests_for(pi_world, after)
    messages = messages_of(request)
    memories = _memory_messages(messages)
    # Exactly one memory message: the new request's, right after its user message. The earlier
    # snapshot was summarised by Pi and is not injected again separately.
    assert len(memories) == 1
    assert text_of(messages[memories[0] - 1].get("content")) == after
    assert "Zephyr" in (memory_after(messages, after) or "")  # compacted away: deliverable again


def _memory(world: PiWorld, prompt: str) -> str | None:
    requests = requests_for(world, prompt)
    return memory_after(messages_of(requests[-1]), prompt) if requests else None
