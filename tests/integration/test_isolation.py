"""Scope isolation against the real Hindsight server (R-SCOPE-1, R-SCOPE-2, R-SCOPE-8).

Property: for many scopes sharing one domain bank, plus untagged memories and memories carrying a
superset of a scope's tags, every memory a scope recall returns carries exactly that scope's tags.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from typing import Any

import pytest

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.backend.resources import BankMissions, RetainItem
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH

pytestmark = pytest.mark.server

SCOPES = 8
FACTS_PER_SCOPE = 6
QUERIES_PER_SCOPE = 12
TOPICS = [
    "deploys to the {m} cluster",
    "uses the {m} database for billing",
    "pins the {m} compiler version",
    "stores secrets in the {m} vault",
    "runs nightly jobs on the {m} scheduler",
    "names its release branch {m}",
]


async def _wait_for(backend: HindsightBackend, bank: str, operation_ids: list[str]) -> None:
    pending = set(operation_ids)
    for _ in range(600):
        for operation_id in list(pending):
            status = await backend.operation_status(bank, operation_id, timeout=10)
            if status.state == "completed":
                pending.discard(operation_id)
            elif status.state in ("failed", "cancelled"):
                raise AssertionError(
                    f"retain {operation_id} {status.state}: {status.error_message}"
                )
        if not pending:
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"retains did not complete: {pending}")


async def _scenario(base_url: str) -> dict[str, Any]:
    rng = random.Random(20261129)
    bank = f"isolation-{uuid.uuid4().hex[:10]}"
    backend = HindsightBackend(base_url)
    try:
        await backend.create_bank(bank, BankMissions(mission="isolation test"), timeout=30)
        markers: dict[tuple[str, ...], list[str]] = {}
        operations: list[str] = []
        tag_sets: list[tuple[str, ...]] = [(f"project:p{n}",) for n in range(SCOPES)]
        # Adversarial neighbours: untagged memories, and memories carrying a scope's tag plus more.
        extra: list[tuple[str, ...]] = [
            (),
            ("project:p0", "scope:other"),
            ("project:p1", "project:p2"),
        ]
        for tags in [*tag_sets, *extra]:
            facts = []
            for index in range(FACTS_PER_SCOPE):
                marker = f"zq{rng.randrange(10**8):08d}"
                facts.append(marker)
                text = f"The project {TOPICS[index % len(TOPICS)].format(m=marker)}."
                accepted = await backend.retain(
                    bank,
                    [RetainItem(content=text, document_id=f"doc-{marker}", tags=tags)],
                    operation_id=str(uuid.uuid4()),
                    timeout=30,
                )
                assert accepted.operation_id is not None
                operations.append(accepted.operation_id)
            markers[tags] = facts
        await _wait_for(backend, bank, operations)
        leaks: list[str] = []
        returned = 0
        for tags in tag_sets:
            for _ in range(QUERIES_PER_SCOPE):
                topic = rng.choice(TOPICS).format(m="")
                when = rng.choice(["", "now", "today"])
                query = f"Which {topic.split()[-1]} does the project use {when}?"
                results = await backend.recall(
                    bank, query, tags=tags, tags_match=SCOPE_TAGS_MATCH, max_tokens=2000, timeout=30
                )
                returned += len(results)
                for record in results:
                    if tuple(sorted(record.tags)) != tuple(sorted(tags)):
                        leaks.append(f"{tags}: {record.tags} {record.text!r}")
                    foreign = [
                        m for t, ms in markers.items() if t != tags for m in ms if m in record.text
                    ]
                    if foreign:
                        leaks.append(f"{tags}: foreign marker {foreign} in {record.text!r}")
        return {"leaks": leaks, "returned": returned, "markers": markers, "bank": bank}
    finally:
        await backend.close()


def test_zero_memories_are_returned_outside_their_scope(hindsight_server: Any) -> None:
    outcome = asyncio.run(_scenario(hindsight_server.base_url))
    assert outcome["returned"] >= SCOPES * QUERIES_PER_SCOPE  # recall did return memories
    assert outcome["leaks"] == []
