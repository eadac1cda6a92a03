"""``MemoryBackend``: everything pi-hindsight asks of a Hindsight server, in our own types.

The engine, the tools, bank maintenance and the CLI depend on this protocol only;
``HindsightBackend`` (``backend/hindsight.py``) implements it over the official client, and
tests put their own implementation at this boundary (``tests/plugins/scripted_backend.py``
scripts failures over the real one). Every method raises only our
:class:`~pi_hindsight.errors.BackendError` family, and ``timeout`` bounds each call in seconds.
Cheap to import (no official client here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from pi_hindsight.backend.resources import (
    BankConfig,
    BankMissions,
    DirectiveInfo,
    DocumentInfo,
    ListedState,
    MemoryRecord,
    MentalModel,
    MissionKey,
    OperationStatus,
    ReflectResult,
    RetainAccepted,
    RetainItem,
    TagsMatch,
    TemplateImportResult,
    UsageBucket,
)

Budget = Literal["low", "mid", "high"]


class MemoryBackend(Protocol):
    """One Hindsight server (``base_url``); call :meth:`close` when done."""

    base_url: str

    async def close(self) -> None: ...

    # -- the server and its banks ----------------------------------------------------------

    async def health(self, *, timeout: float) -> str:
        """The server's word for its state ("healthy"); raises when it does not answer."""
        ...

    async def bank_exists(self, bank: str, *, timeout: float) -> bool:
        """From the bank listing: several endpoints answer for a missing bank (some create it)."""
        ...

    async def create_bank(self, bank: str, missions: BankMissions, *, timeout: float) -> None: ...

    async def bank_config(self, bank: str, *, timeout: float) -> BankConfig: ...

    async def update_missions(
        self, bank: str, missions: Mapping[MissionKey, str], *, timeout: float
    ) -> None:
        """Set these mission fields on an existing bank (404 for a missing one)."""
        ...

    # -- memories ----------------------------------------------------------------------------

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
    ) -> list[MemoryRecord]: ...

    async def retain(
        self,
        bank: str,
        items: Sequence[RetainItem],
        *,
        operation_id: str,
        timeout: float,
        run_async: bool = True,
    ) -> RetainAccepted:
        """Submit ``items``; ``operation_id`` makes a replay of the same submission idempotent."""
        ...

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
        limit: int | None = 50,
        document_id: str | None = None,
    ) -> list[MemoryRecord]:
        """The listing (the only place with hard date windows); ``limit=None``: every unit;
        ``document_id``: only the units extracted from that document."""
        ...

    async def get_memory(self, bank: str, memory_id: str, *, timeout: float) -> MemoryRecord | None:
        """One memory unit of ``bank`` by id (an observation with its source ids); None when the
        bank has no such unit."""
        ...

    # -- operations --------------------------------------------------------------------------

    async def operation_status(
        self, bank: str, operation_id: str, *, timeout: float
    ) -> OperationStatus: ...

    async def list_operations(
        self, bank: str, *, state: ListedState, operation_type: str | None = None, timeout: float
    ) -> list[OperationStatus]:
        """The bank's operations in ``state`` (of one type, e.g. ``refresh_mental_model``)."""
        ...

    async def cancel_operation(self, bank: str, operation_id: str, *, timeout: float) -> None: ...

    async def wait_operation(
        self, bank: str, operation_id: str, *, timeout: float, call_timeout: float
    ) -> OperationStatus:
        """Poll until the operation ends (``timeout`` in all); raise unless it completed."""
        ...

    # -- mental models -----------------------------------------------------------------------

    async def get_mental_model(
        self, bank: str, model_id: str, *, timeout: float
    ) -> MentalModel | None:
        """The mental model, or None when it does not exist."""
        ...

    async def list_mental_models(
        self,
        bank: str,
        *,
        tags: Sequence[str] | None,
        tags_match: TagsMatch = "exact",
        timeout: float,
    ) -> list[MentalModel]:
        """Standalone mental models with their configuration and content (every page)."""
        ...

    async def create_mental_model(
        self,
        bank: str,
        *,
        model_id: str,
        name: str,
        source_query: str,
        tags: Sequence[str],
        max_tokens: int,
        trigger: Mapping[str, Any],
        timeout: float,
    ) -> str | None:
        """Create it; returns the operation id of the first refresh Hindsight queued."""
        ...

    async def update_mental_model(
        self,
        bank: str,
        model_id: str,
        *,
        name: str | None = None,
        source_query: str | None = None,
        max_tokens: int | None = None,
        timeout: float,
    ) -> None:
        """Change the given fields (None leaves one alone); this does not refresh it."""
        ...

    async def refresh_mental_model(
        self, bank: str, model_id: str, *, full: bool = False, timeout: float
    ) -> str:
        """Queue a refresh (``full``: regenerate whatever the model's mode); returns the
        operation id. Accepted is not completed; a refresh already queued answers its own id."""
        ...

    async def clear_mental_model(self, bank: str, model_id: str, *, timeout: float) -> None:
        """Empty its content (a refresh that finds no memories keeps the content it has)."""
        ...

    async def delete_mental_model(self, bank: str, model_id: str, *, timeout: float) -> None: ...

    def normalise_trigger(self, trigger: Mapping[str, Any] | None) -> dict[str, Any]:
        """``trigger`` as the server stores it (its defaults filled in, unset fields dropped),
        so it compares equal to a stored trigger exactly when Hindsight would skip an update."""
        ...

    # -- directives and bank templates -------------------------------------------------------

    async def list_directives(self, bank: str, *, timeout: float) -> list[DirectiveInfo]: ...

    async def import_template(
        self, bank: str, manifest: Mapping[str, Any], *, dry_run: bool, timeout: float
    ) -> TemplateImportResult: ...

    # -- documents and their transfer between banks ------------------------------------------

    async def list_documents(
        self, bank: str, *, tags: Sequence[str], tags_match: TagsMatch, timeout: float
    ) -> list[DocumentInfo]: ...

    async def get_document(
        self, bank: str, document_id: str, *, timeout: float
    ) -> DocumentInfo | None: ...

    async def retag_document(
        self, bank: str, document_id: str, tags: Sequence[str], *, timeout: float
    ) -> None:
        """Replace the tags of the document and of all its memory units."""
        ...

    async def delete_document(self, bank: str, document_id: str, *, timeout: float) -> int:
        """Delete the document and its memory units; returns how many units went with it."""
        ...

    async def export_documents(
        self, bank: str, document_ids: Sequence[str], *, timeout: float
    ) -> str:
        """Start an export of these documents; returns the operation (its result names the
        archive: ``result_metadata["storage_key"]``)."""
        ...

    async def download_archive(self, bank: str, storage_key: str, *, timeout: float) -> bytes: ...

    async def import_documents(self, bank: str, archive: bytes, *, timeout: float) -> str:
        """Merge an archive's documents into ``bank`` (ids it has are skipped); the operation."""
        ...

    async def usage_stats(
        self,
        bank: str,
        *,
        period: str,
        operation: str | None = None,
        call_type: str | None = "llm",
        timeout: float,
    ) -> list[UsageBucket]:
        """The bank's model calls and tokens per day over ``period`` (``backend/usage.py``)."""
        ...
