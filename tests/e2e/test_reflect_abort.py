"""Reflect's own long timeout, and a user abort that ends it at once (R-REFLECT-2)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.plugins.pi import LoopbackListener, PiRpc, PiWorld, make_repo
from tests.support.retain import register
from tests.support.sidecar import Sidecar

pytestmark = [pytest.mark.pi]


def _hung_state(tmp_path: Path, url: str) -> tuple[Path, Path]:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "config.json").write_text(
        json.dumps(
            {
                "hindsight": {"baseUrl": url},
                "timeoutMs": 1500,
                "recall": {"timeoutMs": 1000},
                "reflectTimeoutMs": 120000,
            }
        )
    )
    repo = make_repo(tmp_path / "repo", "https://example.com/team/reflect.git")
    register(state, repo)
    return state, repo


def test_only_reflect_waits_long_and_a_cancel_ends_it_at_once(
    black_hole: LoopbackListener, tmp_path: Path
) -> None:
    state, repo = _hung_state(tmp_path, black_hole.url)
    sidecar = Sidecar(state)
    try:
        tools = {tool["name"]: tool for tool in sidecar.initialize(repo)["tools"]}
        assert tools["hindsight_memory"]["timeoutMs"] >= 120_000  # the host waits for reflect

        started = time.monotonic()
        sidecar.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "toolCall",
                "params": {
                    "toolCallId": "t1",
                    "name": "hindsight_memory",
                    "params": {"action": "recall", "query": "x"},
                },
            }
        )
        recall = sidecar.read()
        assert (
            recall["result"]["isError"] is True
            and "timed out" in recall["result"]["content"][0]["text"]
        )
        # Ordinary calls keep timeoutMs (1.5 s): far below reflect's 120 s bound, whatever the load.
        assert time.monotonic() - started < 60.0

        sidecar.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "toolCall",
                "params": {
                    "toolCallId": "t2",
                    "name": "hindsight_memory",
                    "params": {"action": "reflect", "query": "x"},
                },
            }
        )
        time.sleep(3.0)  # well past timeoutMs: reflect is still waiting on its own bound
        sidecar.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 3}})
        cancelled_at = time.monotonic()
        answer = sidecar.read()
        assert answer["id"] == 3 and answer["error"]["code"] == -32800
        assert time.monotonic() - cancelled_at < 60.0  # at once, not at the 120 s bound
    finally:
        sidecar.close()


def test_esc_in_pi_ends_a_running_reflect_promptly(
    pi_world: PiWorld, black_hole: LoopbackListener, tmp_path: Path
) -> None:
    state, repo = _hung_state(tmp_path, black_hole.url)
    pi_world.state_dir = state
    pi_world.standin.set_script(
        {
            "rules": [
                {
                    "match": "reflect",
                    "tool_calls": [
                        {
                            "name": "hindsight_memory",
                            "arguments": {"action": "reflect", "query": "x"},
                        }
                    ],
                    "then_reply": "done: {tool_result}",
                }
            ]
        }
    )
    rpc = PiRpc(pi_world, repo)
    try:
        rpc.wait_for(lambda e: e.get("method") == "setStatus", "the status line")
        start = len(rpc.events)
        rpc.send({"type": "prompt", "message": "Please reflect on our deployments."})
        rpc.wait_for(
            lambda e: (
                e.get("type") == "tool_execution_start" and e.get("toolName") == "hindsight_memory"
            ),
            "the reflect tool to start",
            after=start,
        )
        time.sleep(2.5)  # past the ordinary timeout: reflect is still running
        aborted_at = time.monotonic()
        rpc.send({"type": "abort"})
        rpc.wait_for(
            lambda e: e.get("type") == "agent_end",
            "the aborted run to end",
            after=start,
            timeout=20,
        )
        assert time.monotonic() - aborted_at < 60.0  # not the 120 s reflect bound
    finally:
        assert rpc.close() == 0
