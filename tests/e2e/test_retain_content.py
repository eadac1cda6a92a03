"""End to end with the real Pi binary: what Pi's requests leave in Hindsight.

Never found in Hindsight afterwards: the memory Pi was given (no recall → retain loop,
R-RETAIN-3) and secrets typed by the user or printed by a tool. A damaged outbox is reported as
a warning by Pi and replaced.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from hindsight_client_api.api.documents_api import DocumentsApi
from hindsight_client_api.api_client import ApiClient
from hindsight_client_api.configuration import Configuration

from tests.plugins.pi import PiWorld, make_repo
from tests.support.retain import BankView

pytestmark = [pytest.mark.server, pytest.mark.pi]

NPM_TOKEN = "npm_" + "Pl4nt3d" * 5 + "x"
HINDSIGHT_KEY = "hsk_" + "c0ffee42" * 4


def _document_ids(world: PiWorld) -> list[str]:
    async def fetch() -> list[str]:
        async with ApiClient(Configuration(host=world.base_url)) as client:
            listing = await DocumentsApi(client).list_documents(world.bank_id, limit=100)
        return [str(item.id) for item in listing.items]

    return asyncio.run(fetch())


def _configure(world: PiWorld, **retain: str) -> None:
    path = world.state_dir / "config.json"
    config = json.loads(path.read_text())
    config["retain"] = retain
    path.write_text(json.dumps(config))


@pytest.mark.pi_both("request-end")
def test_injected_memory_and_planted_secrets_are_never_retained(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "delta", "https://example.com/team/delta.git")
    pi_world.register(repo)
    fact_marker = f"Orion{uuid.uuid4().hex[:8]}"
    pi_world.run(repo, f"Our staging cluster is called {fact_marker} and runs in Oslo.")
    pi_world.drain()
    bank = BankView(pi_world.base_url, pi_world.bank_id)
    facts_before = [m for m in bank.memories() if fact_marker in m["text"]]
    assert facts_before, "the first session's fact was not retained"

    # Keep every tool call's arguments and every tool result: only redaction stands between the
    # secrets and Hindsight.
    _configure(pi_world, toolCalls="arguments", toolResults="all")
    pi_world.standin.set_script(
        {
            "rules": [
                {
                    "match": "staging cluster",
                    "tool_calls": [
                        {
                            "name": "bash",
                            "arguments": {"command": f"echo HINDSIGHT_API_KEY={HINDSIGHT_KEY}"},
                        }
                    ],
                    "then_reply": "The staging cluster is in your memory; the key is set.",
                }
            ],
            "default_reply": "Understood.",
        }
    )
    question = f"What is our staging cluster called? My npm token is {NPM_TOKEN}."
    pi_world.run(repo, question)
    pi_world.drain()

    # The second request did receive the first session's fact as injected memory ...
    memory_messages = [
        message
        for request in pi_world.pi_requests()
        for message in request["body"]["messages"]  # type: ignore[index]
        if "<hindsight-memory" in json.dumps(message)
    ]
    assert any(fact_marker in json.dumps(message) for message in memory_messages)
    # ... and none of it, nor any secret, came back into Hindsight.
    documents = _document_ids(pi_world)
    held = bank.everything(documents)
    assert "What is our staging cluster called?" in held  # the second request was retained
    assert "[REDACTED:npm_token]" in held and "[REDACTED:hindsight_api_key]" in held
    for forbidden in (NPM_TOKEN, HINDSIGHT_KEY, "<hindsight-memory", "reference material"):
        assert forbidden not in held, forbidden
    second_document = [
        doc for doc in documents if "What is our staging" in json.dumps(bank.document_turns(doc))
    ]
    assert len(second_document) == 1
    assert fact_marker not in json.dumps(bank.document_turns(second_document[0]))
    facts_after = [m for m in bank.memories() if fact_marker in m["text"]]
    assert len(facts_after) == len(facts_before), "recalled memory was retained again"


def test_pi_warns_about_a_damaged_outbox_and_keeps_retaining(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "eps", "https://example.com/team/eps.git")
    pi_world.register(repo)
    outbox = pi_world.state_dir / "outbox.sqlite"
    outbox.write_bytes(b"\x00garbage, not SQLite\x00" * 300)

    completed = pi_world.run(repo, "Remember that the linter config lives in ruff.toml.")

    assert "[hindsight]" in completed.stderr and "set aside" in completed.stderr
    assert list(pi_world.state_dir.glob("outbox.sqlite.corrupt-*"))
    pi_world.drain()
    held = BankView(pi_world.base_url, pi_world.bank_id).everything(_document_ids(pi_world))
    assert "the linter config lives in ruff.toml" in held
