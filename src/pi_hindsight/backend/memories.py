"""Memories: recall, retain, reflect and the memory-unit listing (``MemoryApi``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hindsight_client_api.api.memory_api import MemoryApi
from hindsight_client_api.models.recall_request import RecallRequest
from hindsight_client_api.models.reflect_request import ReflectRequest
from hindsight_client_api.models.retain_request import RetainRequest

from pi_hindsight.backend._client import Resource, built
from pi_hindsight.backend.interface import Budget
from pi_hindsight.backend.resources import (
    MemoryRecord,
    RecallScores,
    ReflectResult,
    RetainAccepted,
    RetainItem,
    TagsMatch,
)
from pi_hindsight.errors import BackendRejected


def _scores(item: Any) -> RecallScores | None:
    scores = getattr(item, "scores", None)
    if scores is None or scores.final is None:
        return None
    return RecallScores(
        final=float(scores.final),
        reranker=None if scores.reranker is None else float(scores.reranker),
        semantic=None if scores.semantic is None else float(scores.semantic),
        keyword=None if scores.keyword is None else float(scores.keyword),
    )


def _record(item: Any, kind: str | None, sources: Sequence[str] | None) -> MemoryRecord:
    """A recall result or a listed memory unit (they name the type and the sources apart)."""
    return MemoryRecord(
        id=item.id,
        text=item.text or "",
        type=kind,
        context=item.context or None,
        occurred_start=item.occurred_start,
        occurred_end=item.occurred_end,
        mentioned_at=item.mentioned_at,
        document_id=item.document_id,
        chunk_id=item.chunk_id,
        tags=tuple(item.tags or ()),
        source_memory_ids=tuple(sources or ()),
        scores=_scores(item),
    )


def _unit(data: dict[str, Any]) -> MemoryRecord:
    """``GET …/memories/{id}`` answers a plain object (no generated model)."""

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) and value else None

    tags = data.get("tags")
    sources = data.get("source_memory_ids")
    return MemoryRecord(
        id=str(data.get("id") or ""),
        text=text("text") or "",
        type=text("type"),
        context=text("context"),
        occurred_start=text("occurred_start"),
        occurred_end=text("occurred_end"),
        mentioned_at=text("mentioned_at"),
        document_id=text("document_id"),
        chunk_id=text("chunk_id"),
        tags=tuple(str(tag) for tag in tags) if isinstance(tags, list) else (),
        source_memory_ids=tuple(str(s) for s in sources) if isinstance(sources, list) else (),
    )


def _listed(item: Any) -> MemoryRecord:
    return _record(item, item.fact_type, item.source_memory_ids)


class Memories(Resource):
    async def recall(
        self,
        bank: str,
        query: str,
        *,
        tags: Sequence[str],
        tags_match: TagsMatch,
        max_tokens: int,
        timeout: float,
        budget: Budget = "mid",
        types: Sequence[str] | None = None,
        query_timestamp: str | None = None,
    ) -> list[MemoryRecord]:
        request = RecallRequest(
            query=query,
            types=list(types) if types else None,
            budget=budget,
            max_tokens=max_tokens,
            query_timestamp=query_timestamp,
            tags=list(tags),
            tags_match=tags_match,
        )
        api = self._client.api(MemoryApi)
        async with self._client.call("recall", bank, timeout):
            response = await api.recall_memories(bank, request, _request_timeout=timeout)
            return [_record(r, r.type, r.source_fact_ids) for r in response.results]

    async def retain(
        self,
        bank: str,
        items: Sequence[RetainItem],
        *,
        operation_id: str,
        timeout: float,
        run_async: bool = True,
    ) -> RetainAccepted:
        wire = [
            {
                "content": item.content,
                "document_id": item.document_id,
                "tags": list(item.tags),
                "timestamp": item.timestamp,
                "context": item.context,
                "metadata": dict(item.metadata) or None,
                "update_mode": item.update_mode,
            }
            for item in items
        ]
        request = built(
            RetainRequest.from_dict(
                {"items": wire, "async": run_async, "operation_id": operation_id}
            ),
            "retain",
        )
        api = self._client.api(MemoryApi)
        async with self._client.call("retain", bank, timeout):
            response = await api.retain_memories(bank, request, _request_timeout=timeout)
            accepted_id = response.operation_id or (
                response.operation_ids[0] if response.operation_ids else None
            )
            return RetainAccepted(operation_id=accepted_id, items=response.items_count)

    async def reflect(
        self,
        bank: str,
        query: str,
        *,
        tags: Sequence[str],
        tags_match: TagsMatch,
        timeout: float,
        budget: Budget = "mid",
        max_tokens: int = 2048,
        context: str | None = None,
    ) -> ReflectResult:
        request = built(
            ReflectRequest.from_dict(
                {
                    "query": query,
                    "budget": budget,
                    "context": context,
                    "max_tokens": max_tokens,
                    "include": {"facts": {}},
                    "tags": list(tags),
                    "tags_match": tags_match,
                }
            ),
            "reflect",
        )
        api = self._client.api(MemoryApi)
        async with self._client.call("reflect", bank, timeout):
            response = await api.reflect(bank, request, _request_timeout=timeout)
            based_on = response.based_on
            memories = based_on.memories if based_on and based_on.memories else []
            models = based_on.mental_models if based_on and based_on.mental_models else []
            return ReflectResult(
                text=response.text,
                memory_ids=tuple(str(memory.id) for memory in memories if memory.id),
                mental_model_ids=tuple(str(model.id) for model in models if model.id),
                # A provider that reports no usage leaves the server's defaults (0): not a count.
                tokens_used=(response.usage.total_tokens or None) if response.usage else None,
            )

    async def list_memories(
        self,
        bank: str,
        *,
        tags: Sequence[str],
        tags_match: TagsMatch,
        timeout: float,
        start_date: str | None = None,
        end_date: str | None = None,
        time_field: str | None = None,
        fact_type: str | None = None,
        limit: int | None = 50,
        document_id: str | None = None,
    ) -> list[MemoryRecord]:
        api = self._client.api(MemoryApi)
        return await self._client.collect(
            "memory listing",
            bank,
            timeout,
            api.list_memories,
            _listed,
            limit=limit,
            type=fact_type,
            tags=list(tags),
            tags_match=tags_match,
            time_field=time_field or ("created_at" if start_date or end_date else None),
            start_date=start_date,
            end_date=end_date,
            document_id=document_id,
        )

    async def get_memory(self, bank: str, memory_id: str, *, timeout: float) -> MemoryRecord | None:
        """One memory unit by id; None when this bank has no such unit (or the id is no UUID:
        Hindsight answers 400 for that, and to a caller both mean "unknown")."""
        api = self._client.api(MemoryApi)

        async def get() -> MemoryRecord | None:
            data = await api.get_memory(bank, memory_id, _request_timeout=timeout)
            return _unit(data) if isinstance(data, dict) else None

        try:
            return await self._client.lookup("memory lookup", bank, timeout, get)
        except BackendRejected as error:
            if error.status == 400:
                return None
            raise
