"""Relevance end to end (issue 17): real Pi 1.x, the real server. A recalled record below the
relevance bars is held back — in the evidence with its scores and reason, not in the provider
payload — ``recall.relevance: off`` delivers it, and the explicit recall tool is not filtered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.pi import PiWorld, make_repo
from tests.support.pi_requests import memory_after, messages_of, requests_for

pytestmark = [pytest.mark.server, pytest.mark.pi, pytest.mark.pi_only("1.x")]

REMOTE = "https://example.com/team/relevance.git"
FACTS = (
    "Database migrations are applied with Alembic, and every migration must be reversible. "
    "Database tables are named in the singular, like invoice and customer. "
    "Backups of the production database run nightly at 02:00 UTC."
)
QUESTION = "Which tool applies database migrations?"
AGAIN = "Which tool applies the database migrations, again?"
NEEDED, SIMILAR = "Alembic", "named in the singular"


def _memory(world: PiWorld, prompt: str) -> str | None:
    requests = requests_for(world, prompt)
    assert requests, f"no provider request for {prompt!r}"
    return memory_after(messages_of(requests[-1]), prompt)


def _evidence_of(world: PiWorld, prompt_index: int) -> dict[str, Any]:
    records = json.loads(world.cli("evidence", "list", "--json", "--limit", "50").stdout)["records"]
    ordered = sorted(records, key=lambda record: record["preparedAt"])
    shown = world.cli("evidence", "show", ordered[prompt_index]["requestId"], "--json").stdout
    detail: dict[str, Any] = json.loads(shown)
    return detail


def test_a_record_below_relevance_is_held_back_in_evidence_and_off_delivers_it(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "relevance", REMOTE)
    pi_world.register(repo)
    pi_world.run(repo, FACTS)
    pi_world.drain()

    pi_world.run(repo, QUESTION)
    memory = _memory(pi_world, QUESTION)
    assert memory is not None and NEEDED in memory
    assert SIMILAR not in memory  # not in the provider payload
    detail = _evidence_of(pi_world, -1)
    held = {item["text"]: item for item in detail["heldBack"]}
    similar = next(text for text in held if SIMILAR in text)
    assert held[similar]["reason"] == "below relevance"
    assert held[similar]["detail"].startswith("strength ")
    assert {"final", "semantic"} <= held[similar]["scores"].keys()
    assert detail["omittedBy"]["relevance"] >= 1
    explained = pi_world.cli("evidence", "explain", detail["requestId"]).stdout
    assert "held back (recalled, never shown to the model):" in explained
    assert SIMILAR in explained.split("held back (recalled")[1]

    status = json.loads(pi_world.cli("status", "--cwd", str(repo), "--json").stdout)
    share = status["evidence"]["heldBackLastDay"]
    assert share["heldBack"] >= 1 and share["recalled"] > share["heldBack"]
    assert status["recall"]["relevance"].startswith("on (")

    # The agent's own recall is the ranked list, unfiltered: it asked.
    recalled = pi_world.cli("memory", "recall", QUESTION, "--cwd", str(repo), "--json").stdout
    assert any(SIMILAR in record["text"] for record in json.loads(recalled)["records"])

    config_path = pi_world.state_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["recall"]["relevance"] = "off"
    config_path.write_text(json.dumps(config))
    pi_world.run(repo, AGAIN)
    everything = _memory(pi_world, AGAIN)
    assert everything is not None and NEEDED in everything and SIMILAR in everything
    assert "relevance" not in _evidence_of(pi_world, -1)["omittedBy"]
