"""Our own types for what crosses the Hindsight boundary (cheap to import: no client here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

TagsMatch = Literal["any", "all", "any_strict", "all_strict", "exact"]
# "not_found": Hindsight answers 200 with this status for an id it does not know (deleted,
# pruned, or its bank deleted).
OperationState = Literal[
    "pending", "processing", "completed", "failed", "cancelled", "not_found", "unknown"
]


@dataclass(frozen=True)
class MemoryRecord:
    """One recalled memory, with what the response carried about its origin (R-RECALL-4)."""

    id: str
    text: str
    type: str | None = None
    context: str | None = None
    occurred_start: str | None = None
    occurred_end: str | None = None
    mentioned_at: str | None = None
    document_id: str | None = None
    chunk_id: str | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class RetainItem:
    content: str
    document_id: str
    tags: tuple[str, ...]
    timestamp: str | None = None
    context: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    update_mode: Literal["replace", "append"] = "append"


@dataclass(frozen=True)
class RetainAccepted:
    operation_id: str | None
    items: int


@dataclass(frozen=True)
class OperationStatus:
    operation_id: str
    state: OperationState
    operation_type: str | None
    error_message: str | None


@dataclass(frozen=True)
class BankMissions:
    """Missions for a bank we create (R-CONF-6)."""

    mission: str
    retain_mission: str | None = None
    reflect_mission: str | None = None


@dataclass(frozen=True)
class MentalModel:
    """A Hindsight mental model (the startup memo is one), with its refresh metadata."""

    id: str
    name: str
    content: str | None
    tags: tuple[str, ...]
    last_refreshed_at: str | None
    is_stale: bool | None
    source_query: str | None = None


@dataclass(frozen=True)
class ReflectResult:
    text: str
    memory_ids: tuple[str, ...]  # exactly what the backend cited; never invented
    mental_model_ids: tuple[str, ...]


class MemoryBackend(Protocol):
    """What the engine needs from a Hindsight server (``HindsightBackend`` implements it)."""

    base_url: str

    async def close(self) -> None: ...

    async def health(self, *, timeout: float) -> dict[str, Any]: ...

    async def bank_exists(self, bank: str, *, timeout: float) -> bool: ...

    async def create_bank(self, bank: str, missions: BankMissions, *, timeout: float) -> None: ...

    async def recall(
        self,
        bank: str,
        query: str,
        *,
        tags: Sequence[str],
        tags_match: TagsMatch,
        max_tokens: int,
        timeout: float,
        budget: Literal["low", "mid", "high"] = "mid",
        types: Sequence[str] | None = None,
        query_timestamp: str | None = None,
    ) -> list[MemoryRecord]: ...

    async def retain(
        self,
        bank: str,
        items: Sequence[RetainItem],
        *,
        operation_id: str,
        timeout: float,
        run_async: bool = True,
    ) -> RetainAccepted: ...

    async def operation_status(
        self, bank: str, operation_id: str, *, timeout: float
    ) -> OperationStatus: ...

    async def get_mental_model(
        self, bank: str, model_id: str, *, timeout: float
    ) -> MentalModel | None: ...

    async def create_mental_model(
        self,
        bank: str,
        *,
        model_id: str,
        name: str,
        source_query: str,
        tags: Sequence[str],
        max_tokens: int,
        trigger: dict[str, Any],
        timeout: float,
    ) -> str | None: ...

    async def refresh_mental_model(self, bank: str, model_id: str, *, timeout: float) -> str: ...

    async def reflect(
        self,
        bank: str,
        query: str,
        *,
        tags: Sequence[str],
        tags_match: TagsMatch,
        timeout: float,
        budget: Literal["low", "mid", "high"] = "mid",
        max_tokens: int = 2048,
        context: str | None = None,
    ) -> ReflectResult: ...

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
        limit: int = 50,
    ) -> list[MemoryRecord]: ...
