"""Our own types for what crosses the Hindsight boundary (cheap to import: no client here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

TagsMatch = Literal["any", "all", "any_strict", "all_strict", "exact"]
OperationState = Literal["pending", "processing", "completed", "failed", "cancelled", "unknown"]


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
