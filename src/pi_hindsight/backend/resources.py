"""Our own types for what crosses the Hindsight boundary: one frozen record per resource.

Cheap to import (no official client here): the engine, maintenance, the CLI and tests use these
without paying for the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

TagsMatch = Literal["any", "all", "any_strict", "all_strict", "exact"]
# "not_found": Hindsight answers 200 with this status for an id it does not know (deleted,
# pruned, or its bank deleted).
OperationState = Literal[
    "pending", "processing", "completed", "failed", "cancelled", "not_found", "unknown"
]
ListedState = Literal["pending", "processing", "completed", "failed", "cancelled"]  # a filter
# A bank's missions as Hindsight 1.1.0 names them in its config: ``reflect_mission`` (what the
# bank is for; ``mission`` is its deprecated alias), ``retain_mission`` and
# ``observations_mission``.
MissionKey = Literal["reflect_mission", "retain_mission", "observations_mission"]
MISSION_KEYS: tuple[MissionKey, ...] = ("reflect_mission", "retain_mission", "observations_mission")


@dataclass(frozen=True)
class RecallScores:
    """Hindsight's per-result recall scores: ``final`` ranks the results (the reranker's score
    with the recency, temporal and proof boosts); the others are diagnostic — ``semantic`` and
    ``keyword`` are the raw scores of those retrieval arms (None when that arm did not surface
    the result), ``reranker`` the cross-encoder's normalised relevance."""

    final: float
    reranker: float | None = None
    semantic: float | None = None
    keyword: float | None = None


@dataclass(frozen=True)
class MemoryRecord:
    """One memory unit (a fact, or an ``observation``), from recall or from the listing, with
    what the answer carried about its origin (R-RECALL-4)."""

    id: str
    text: str
    type: str | None = None  # world, experience, observation
    context: str | None = None
    occurred_start: str | None = None
    occurred_end: str | None = None
    mentioned_at: str | None = None
    document_id: str | None = None
    chunk_id: str | None = None
    tags: tuple[str, ...] = ()
    source_memory_ids: tuple[str, ...] = ()  # an observation's source facts; empty for a fact
    scores: RecallScores | None = None  # why recall returned it (recall only)


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
    """An asynchronous operation (retain, refresh, export, import…) as Hindsight reports it."""

    operation_id: str
    state: OperationState
    operation_type: str | None
    error_message: str | None
    mental_model_id: str | None = None  # for a mental model refresh
    result_metadata: Mapping[str, Any] = field(default_factory=dict)  # e.g. an export's archive


@dataclass(frozen=True)
class BankMissions:
    """Missions for a bank we create (R-CONF-6)."""

    mission: str
    retain_mission: str | None = None
    reflect_mission: str | None = None


@dataclass(frozen=True)
class BankConfig:
    """A bank's resolved configuration and the keys set on the bank itself."""

    bank_id: str
    config: Mapping[str, Any]
    overrides: Mapping[str, Any]


@dataclass(frozen=True)
class MentalModel:
    """A Hindsight mental model (the startup memo is one): content, refresh state, configuration."""

    id: str
    name: str
    content: str | None
    tags: tuple[str, ...]
    last_refreshed_at: str | None
    is_stale: bool | None
    source_query: str | None = None
    max_tokens: int | None = None
    # Normalised: the server's defaults filled in, unset (None) fields dropped.
    trigger: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DirectiveInfo:
    id: str
    name: str
    content: str
    priority: int
    is_active: bool
    tags: tuple[str, ...]


@dataclass(frozen=True)
class ReflectResult:
    text: str
    memory_ids: tuple[str, ...]  # exactly what the backend cited; never invented
    mental_model_ids: tuple[str, ...]
    tokens_used: int | None = None  # the server's own count; None when it reports none


@dataclass(frozen=True)
class TemplateImportResult:
    """The template import endpoint's answer (a dry run only validates: ``backend/templates``)."""

    dry_run: bool
    config_applied: bool
    mental_models_created: tuple[str, ...]
    mental_models_updated: tuple[str, ...]
    directives_created: tuple[str, ...]
    directives_updated: tuple[str, ...]
    operation_ids: tuple[str, ...]


@dataclass(frozen=True)
class DocumentInfo:
    id: str
    tags: tuple[str, ...]
    memory_unit_count: int
    content_hash: str | None
    text_length: int
    created_at: str | None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UsageBucket:
    """One day of a bank's model calls as the server recorded them (``backend/usage.py``)."""

    day: str  # YYYY-MM-DD (UTC)
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
