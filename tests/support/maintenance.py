"""Helpers for the bank maintenance tests: a fresh bank, retaining marked facts, waiting until
Hindsight has no work left on a bank, and what a bank holds."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from pi_hindsight.backend import BankMissions, MemoryBackend, RetainItem

T = 30.0  # per-call timeout in these tests


def fresh_bank(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def create_bank(backend: MemoryBackend, bank: str) -> None:
    await backend.create_bank(bank, BankMissions(mission=f"test bank {bank}"), timeout=T)


async def retain_documents(
    backend: MemoryBackend, bank: str, tags: Sequence[str], documents: dict[str, str]
) -> None:
    """Retain each ``{document id: text}`` and wait until every retain completed."""
    operations = []
    for document_id, text in documents.items():
        accepted = await backend.retain(
            bank,
            [RetainItem(content=text, document_id=document_id, tags=tuple(tags))],
            operation_id=str(uuid.uuid4()),
            timeout=T,
        )
        assert accepted.operation_id is not None
        operations.append(accepted.operation_id)
    for operation_id in operations:
        for _ in range(400):
            status = await backend.operation_status(bank, operation_id, timeout=T)
            if status.state == "completed":
                break
            assert status.state in ("pending", "processing"), status
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"retain {operation_id} did not complete")


async def settle(backend: MemoryBackend, *banks: str, timeout: float = 120.0) -> None:
    """Until no operation (consolidation, refresh, import…) is pending or running on ``banks``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for bank in banks:
        while True:
            busy = 0
            for state in ("pending", "processing"):
                busy += len(await backend.list_operations(bank, state=state, timeout=T))
            if not busy:
                break
            if loop.time() > deadline:
                raise AssertionError(f"bank {bank} still busy after {timeout}s")
            await asyncio.sleep(0.2)


async def snapshot(backend: MemoryBackend, bank: str) -> dict[str, Any]:
    """Config, mental models, directives, documents and memory units of ``bank``."""
    config = await backend.bank_config(bank, timeout=T)
    models = await backend.list_mental_models(bank, tags=None, timeout=T)
    directives = await backend.list_directives(bank, timeout=T)
    return {
        "overrides": dict(config.overrides),
        "models": sorted(
            (m.id, m.name, m.tags, m.source_query, m.max_tokens, sorted(m.trigger.items()))
            for m in models
        ),
        "directives": sorted((d.name, d.content, d.tags, d.priority) for d in directives),
    }


async def scope_contents(backend: MemoryBackend, bank: str, tags: Sequence[str]) -> dict[str, Any]:
    """Documents and memory units carrying exactly ``tags`` in ``bank``."""
    documents = await backend.list_documents(bank, tags=tags, tags_match="exact", timeout=T)
    units = await backend.list_memories(bank, tags=tags, tags_match="exact", timeout=T, limit=None)
    return {
        "documents": {doc.id: doc for doc in documents},
        "facts": [u for u in units if u.type != "observation"],
        "observations": [u for u in units if u.type == "observation"],
    }


async def recall_text(backend: MemoryBackend, bank: str, tags: Sequence[str], query: str) -> str:
    records = await backend.recall(
        bank, query, tags=tags, tags_match="exact", max_tokens=4000, timeout=T
    )
    return "\n".join(record.text for record in records)
