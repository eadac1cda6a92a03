"""The Hindsight calls bank maintenance needs, behind our own types (templates, missions, mental
models, documents, transfers).

Every call goes through :meth:`HindsightBackend.guarded`, so failures arrive as our
:class:`~pi_hindsight.errors.BackendError` family with a per-call timeout. What was checked in
the server's source (hindsight-api 1.1.0) and shaped these calls:

- Missions are bank config fields: ``reflect_mission`` (the "mission"; ``mission`` is its
  deprecated alias), ``retain_mission`` and ``observations_mission``. ``PATCH /banks/{b}`` updates
  them and answers 404 for a missing bank; ``PATCH /banks/{b}/config`` would create the bank.
- ``POST /banks/{b}/import?dry_run=true`` only validates: it lists *every* template model id as
  "created" and answers 200 for a bank that does not exist. Applying creates a missing bank.
- Re-tagging is document-level: ``PATCH /banks/{b}/documents/{id}`` with ``tags`` replaces the
  document's tags on all its memory units in one transaction and invalidates (deletes, then
  re-consolidates) the observations built from them. ``PATCH /memories/{id}`` cannot re-tag.
- Moving documents between banks without re-extraction: ``POST …/transfer/export`` with
  ``document_id`` (an async operation whose ``result_metadata`` names a ZIP in file storage),
  ``GET /files/download/{key}``, then ``POST …/transfer/import?mode=merge`` into the target
  (``document_conflict=skip`` never overwrites). Facts travel verbatim and are re-embedded;
  document ids, text, metadata and ``created_at`` are kept; observations are not carried (the
  target re-consolidates the imported facts).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hindsight_client_api.api.bank_templates_api import BankTemplatesApi
from hindsight_client_api.api.bank_transfer_api import BankTransferApi
from hindsight_client_api.api.banks_api import BanksApi
from hindsight_client_api.api.directives_api import DirectivesApi
from hindsight_client_api.api.document_transfer_api import DocumentTransferApi
from hindsight_client_api.api.documents_api import DocumentsApi
from hindsight_client_api.api.memory_api import MemoryApi
from hindsight_client_api.api.mental_models_api import MentalModelsApi
from hindsight_client_api.api.operations_api import OperationsApi
from hindsight_client_api.models.bank_template_manifest import BankTemplateManifest
from hindsight_client_api.models.create_bank_request import CreateBankRequest
from hindsight_client_api.models.create_mental_model_request import CreateMentalModelRequest
from hindsight_client_api.models.mental_model_response import MentalModelResponse
from hindsight_client_api.models.mental_model_trigger_input import MentalModelTriggerInput
from hindsight_client_api.models.refresh_mental_model_request import RefreshMentalModelRequest
from hindsight_client_api.models.update_document_request import UpdateDocumentRequest
from hindsight_client_api.models.update_mental_model_request import UpdateMentalModelRequest

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.backend.records import TagsMatch
from pi_hindsight.errors import (
    BackendRejected,
    BackendServerError,
    BackendUnavailable,
    BankNotFound,
)

_Request = TypeVar("_Request")
MISSION_KEYS = ("reflect_mission", "retain_mission", "observations_mission")
_PAGE = 500
_POLL_S = 0.25


@dataclass(frozen=True)
class BankConfig:
    """A bank's resolved configuration and the keys set on the bank itself."""

    bank_id: str
    config: Mapping[str, Any]
    overrides: Mapping[str, Any]


@dataclass(frozen=True)
class MentalModelInfo:
    id: str
    name: str
    tags: tuple[str, ...]
    source_query: str | None
    max_tokens: int | None
    trigger: Mapping[str, Any]  # normalised: defaults filled in, unset (None) fields dropped
    content: str | None
    last_refreshed_at: str | None
    is_stale: bool | None


@dataclass(frozen=True)
class DirectiveInfo:
    id: str
    name: str
    content: str
    priority: int
    is_active: bool
    tags: tuple[str, ...]


@dataclass(frozen=True)
class TemplateImportResult:
    """The import endpoint's answer (for a dry run: validation only, see the module doc)."""

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
class MemoryUnit:
    """A fact (``world``/``experience``) or an ``observation`` as the listing returns it."""

    id: str
    fact_type: str
    text: str
    document_id: str | None
    tags: tuple[str, ...]
    source_memory_ids: tuple[str, ...]  # an observation's source facts; empty for a fact


@dataclass(frozen=True)
class OperationOutcome:
    operation_id: str
    status: str
    error_message: str | None
    result_metadata: Mapping[str, Any]


def normalise_trigger(trigger: Mapping[str, Any] | None) -> dict[str, Any]:
    """A trigger with the server's defaults filled in and unset fields dropped, so a template's
    trigger compares equal to the stored one exactly when Hindsight would skip the update."""
    model = MentalModelTriggerInput.from_dict(dict(trigger or {}))
    values = {} if model is None else model.to_dict()
    return {key: value for key, value in values.items() if value is not None}


def _built(request: _Request | None, what: str) -> _Request:
    if request is None:  # pragma: no cover - from_dict returns None only for None input
        raise BackendRejected(f"{what}: the request could not be built")
    return request


def _model_info(response: MentalModelResponse) -> MentalModelInfo:
    trigger = response.trigger.to_dict() if response.trigger is not None else None
    return MentalModelInfo(
        id=response.id,
        name=response.name,
        tags=tuple(response.tags or ()),
        source_query=response.source_query,
        max_tokens=response.max_tokens,
        trigger=normalise_trigger(trigger) if trigger is not None else {},
        content=response.content,
        last_refreshed_at=response.last_refreshed_at,
        is_stale=response.is_stale,
    )


class MaintenanceApi:
    """Maintenance calls on one Hindsight server, through ``backend``'s client and error mapping."""

    def __init__(self, backend: HindsightBackend) -> None:
        self.backend = backend
        client = backend.api_client
        self._banks = BanksApi(client)
        self._models = MentalModelsApi(client)
        self._directives = DirectivesApi(client)
        self._templates = BankTemplatesApi(client)
        self._documents = DocumentsApi(client)
        self._memory = MemoryApi(client)
        self._transfer = BankTransferApi(client)
        self._files = DocumentTransferApi(client)
        self._operations = OperationsApi(client)

    # -- banks ------------------------------------------------------------------------------

    async def bank_exists(self, bank: str, *, timeout: float) -> bool:
        return await self.backend.bank_exists(bank, timeout=timeout)

    async def require_bank(self, bank: str, *, timeout: float) -> None:
        """Refuse a bank that does not exist (through the listing, which cannot be fooled:
        several endpoints answer for a missing bank, and some would create it)."""
        if not await self.backend.bank_exists(bank, timeout=timeout):
            raise BankNotFound(
                f"bank {bank!r} does not exist",
                hint="a bank is created by the first Pi session in a registered location; "
                "maintenance never creates one",
            )

    async def bank_config(self, bank: str, *, timeout: float) -> BankConfig:
        async with self.backend.guarded("bank config", bank, timeout):
            response = await self._banks.get_bank_config(bank, _request_timeout=timeout)
        return BankConfig(
            bank_id=bank, config=dict(response.config), overrides=dict(response.overrides)
        )

    async def update_missions(
        self, bank: str, missions: Mapping[str, str], *, timeout: float
    ) -> None:
        """Set mission fields (keys of :data:`MISSION_KEYS`); 404 for a missing bank."""
        unknown = set(missions) - set(MISSION_KEYS)
        if unknown:
            raise ValueError(f"not mission fields: {sorted(unknown)}")
        request = _built(CreateBankRequest.from_dict(dict(missions)), "mission update")
        async with self.backend.guarded("mission update", bank, timeout):
            await self._banks.update_bank(bank, request, _request_timeout=timeout)

    # -- mental models and directives --------------------------------------------------------

    async def list_mental_models(
        self,
        bank: str,
        *,
        tags: Sequence[str] | None,
        tags_match: TagsMatch = "exact",
        timeout: float,
    ) -> list[MentalModelInfo]:
        """Standalone mental models with their configuration and content (every page)."""
        found: list[MentalModelInfo] = []
        while True:
            async with self.backend.guarded("mental model listing", bank, timeout):
                page = await self._models.list_mental_models(
                    bank,
                    tags=list(tags) if tags is not None else None,
                    tags_match=tags_match if tags is not None else None,
                    detail="content",
                    limit=_PAGE,
                    offset=len(found),
                    exclude_knowledge_pages=True,
                    _request_timeout=timeout,
                )
            found.extend(_model_info(item) for item in page.items)
            if not page.items or len(found) >= page.total:
                return found

    async def get_mental_model(
        self, bank: str, model_id: str, *, timeout: float
    ) -> MentalModelInfo | None:
        try:
            async with self.backend.guarded("mental model lookup", bank, timeout):
                response = await self._models.get_mental_model(
                    bank, model_id, detail="content", _request_timeout=timeout
                )
        except BackendRejected as error:
            if error.status == 404:
                return None
            raise
        return _model_info(response)

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
    ) -> str:
        """Create it; Hindsight queues its first refresh and returns that operation id."""
        request = _built(
            CreateMentalModelRequest.from_dict(
                {
                    "id": model_id,
                    "name": name,
                    "source_query": source_query,
                    "tags": list(tags),
                    "max_tokens": max_tokens,
                    "trigger": dict(trigger),
                }
            ),
            "mental model creation",
        )
        async with self.backend.guarded("mental model creation", bank, timeout):
            response = await self._models.create_mental_model(
                bank, request, _request_timeout=timeout
            )
        return str(response.operation_id)

    async def update_mental_model(
        self, bank: str, model_id: str, changes: Mapping[str, Any], *, timeout: float
    ) -> None:
        """Patch ``name``/``source_query``/``max_tokens`` (no refresh: see ``refresh``)."""
        request = _built(UpdateMentalModelRequest.from_dict(dict(changes)), "mental model update")
        async with self.backend.guarded("mental model update", bank, timeout):
            await self._models.update_mental_model(
                bank, model_id, request, _request_timeout=timeout
            )

    async def delete_mental_model(self, bank: str, model_id: str, *, timeout: float) -> None:
        async with self.backend.guarded("mental model deletion", bank, timeout):
            await self._models.delete_mental_model(bank, model_id, _request_timeout=timeout)

    async def clear_mental_model(self, bank: str, model_id: str, *, timeout: float) -> None:
        """Empty the model's content. A refresh that finds no memories keeps the content it
        has, so this is the only way a model stops describing memories that left its scope."""
        async with self.backend.guarded("mental model clear", bank, timeout):
            await self._models.clear_mental_model(bank, model_id, _request_timeout=timeout)

    async def queued_refreshes(self, bank: str, model_id: str, *, timeout: float) -> list[str]:
        """Refresh operations of this model that have not finished (pending or running)."""
        found: list[str] = []
        for status in ("pending", "processing"):
            async with self.backend.guarded("operation listing", bank, timeout):
                page = await self._operations.list_operations(
                    bank,
                    status=status,
                    type="refresh_mental_model",
                    limit=100,
                    _request_timeout=timeout,
                )
            found.extend(
                str(item.operation_id or item.id)
                for item in page.operations
                if item.mental_model_id == model_id
            )
        return found

    async def cancel_operation(self, bank: str, operation_id: str, *, timeout: float) -> None:
        async with self.backend.guarded("operation cancel", bank, timeout):
            await self._operations.cancel_operation(bank, operation_id, _request_timeout=timeout)

    async def refresh_mental_model(
        self, bank: str, model_id: str, *, full: bool = False, timeout: float
    ) -> str:
        """Queue a refresh now (``full``: regenerate rather than edit, whatever the model's
        mode); a refresh already queued for the model answers with the same operation id."""
        request = RefreshMentalModelRequest(mode="full") if full else None
        async with self.backend.guarded("mental model refresh", bank, timeout):
            response = await self._models.refresh_mental_model(
                bank, model_id, refresh_mental_model_request=request, _request_timeout=timeout
            )
        return str(response.operation_id)

    async def list_directives(self, bank: str, *, timeout: float) -> list[DirectiveInfo]:
        found: list[DirectiveInfo] = []
        while True:
            async with self.backend.guarded("directive listing", bank, timeout):
                page = await self._directives.list_directives(
                    bank, active_only=False, limit=1000, offset=len(found), _request_timeout=timeout
                )
            found.extend(
                DirectiveInfo(
                    id=item.id,
                    name=item.name,
                    content=item.content,
                    priority=item.priority or 0,
                    is_active=item.is_active if item.is_active is not None else True,
                    tags=tuple(item.tags or ()),
                )
                for item in page.items
            )
            if not page.items or len(found) >= page.total:
                return found

    async def import_template(
        self, bank: str, manifest: Mapping[str, Any], *, dry_run: bool, timeout: float
    ) -> TemplateImportResult:
        request = _built(BankTemplateManifest.from_dict(dict(manifest)), "template import")
        what = "template dry run" if dry_run else "template import"
        async with self.backend.guarded(what, bank, timeout):
            response = await self._templates.import_bank_template(
                bank, request, dry_run=dry_run, _request_timeout=timeout
            )
        return TemplateImportResult(
            dry_run=bool(response.dry_run),
            config_applied=response.config_applied,
            mental_models_created=tuple(response.mental_models_created or ()),
            mental_models_updated=tuple(response.mental_models_updated or ()),
            directives_created=tuple(response.directives_created or ()),
            directives_updated=tuple(response.directives_updated or ()),
            operation_ids=tuple(response.operation_ids or ()),
        )

    # -- documents and memories --------------------------------------------------------------

    async def list_documents(
        self, bank: str, *, tags: Sequence[str], tags_match: TagsMatch, timeout: float
    ) -> list[DocumentInfo]:
        found: list[DocumentInfo] = []
        while True:
            async with self.backend.guarded("document listing", bank, timeout):
                page = await self._documents.list_documents(
                    bank,
                    tags=list(tags),
                    tags_match=tags_match,
                    limit=_PAGE,
                    offset=len(found),
                    _request_timeout=timeout,
                )
            found.extend(
                DocumentInfo(
                    id=item.id,
                    tags=tuple(item.tags or ()),
                    memory_unit_count=item.memory_unit_count or 0,
                    content_hash=item.content_hash,
                    text_length=item.text_length or 0,
                    created_at=item.created_at or None,
                    metadata=dict(item.document_metadata or {}),
                )
                for item in page.items
            )
            if not page.items or len(found) >= page.total:
                return found

    async def get_document(
        self, bank: str, document_id: str, *, timeout: float
    ) -> DocumentInfo | None:
        try:
            async with self.backend.guarded("document lookup", bank, timeout):
                item = await self._documents.get_document(
                    bank, document_id, _request_timeout=timeout
                )
        except BackendRejected as error:
            if error.status == 404:
                return None
            raise
        return DocumentInfo(
            id=item.id,
            tags=tuple(item.tags or ()),
            memory_unit_count=item.memory_unit_count or 0,
            content_hash=item.content_hash,
            text_length=len(item.original_text or ""),
            created_at=item.created_at or None,
            metadata=dict(item.document_metadata or {}),
        )

    async def retag_document(
        self, bank: str, document_id: str, tags: Sequence[str], *, timeout: float
    ) -> None:
        """Replace the document's tags on it and all its memory units (see the module doc)."""
        request = UpdateDocumentRequest(tags=list(tags))
        async with self.backend.guarded("document re-tag", bank, timeout):
            await self._documents.update_document(
                bank, document_id, request, _request_timeout=timeout
            )

    async def delete_document(self, bank: str, document_id: str, *, timeout: float) -> int:
        """Delete the document and its memory units; returns how many units went with it."""
        async with self.backend.guarded("document deletion", bank, timeout):
            response = await self._documents.delete_document(
                bank, document_id, _request_timeout=timeout
            )
        return int(response.memory_units_deleted or 0)

    async def list_memories(
        self,
        bank: str,
        *,
        tags: Sequence[str],
        tags_match: TagsMatch,
        fact_type: str | None = None,
        timeout: float,
    ) -> list[MemoryUnit]:
        found: list[MemoryUnit] = []
        offset = 0
        while True:
            async with self.backend.guarded("memory listing", bank, timeout):
                page = await self._memory.list_memories(
                    bank,
                    type=fact_type,
                    tags=list(tags),
                    tags_match=tags_match,
                    limit=_PAGE,
                    offset=offset,
                    _request_timeout=timeout,
                )
            offset += len(page.items)
            found.extend(
                MemoryUnit(
                    id=item.id,
                    fact_type=item.fact_type or "",
                    text=item.text or "",
                    document_id=item.document_id,
                    tags=tuple(item.tags or ()),
                    source_memory_ids=tuple(item.source_memory_ids or ()),
                )
                for item in page.items
            )
            if not page.items or offset >= page.total:
                return found

    # -- transfers and operations ------------------------------------------------------------

    async def export_documents(
        self, bank: str, document_ids: Sequence[str], *, timeout: float
    ) -> str:
        """Start an export of these documents (facts, chunks, entities); returns the operation."""
        async with self.backend.guarded("document export", bank, timeout):
            response = await self._transfer.export_bank_transfer(
                bank,
                include_data=True,
                include_bank_config=False,
                include_history=False,
                document_id=list(document_ids),
                _request_timeout=timeout,
            )
        return str(response.operation_id)

    async def download(self, bank: str, storage_key: str, *, timeout: float) -> bytes:
        async with self.backend.guarded("archive download", bank, timeout):
            data = await self._files.download_file(storage_key, _request_timeout=timeout)
        return bytes(data)

    async def import_documents(self, bank: str, archive: bytes, *, timeout: float) -> str:
        """Merge an archive's documents into ``bank``; ids that exist there are skipped."""
        async with self.backend.guarded("document import", bank, timeout):
            response = await self._transfer.import_bank_transfer(
                bank,
                ("documents.zip", archive),
                mode="merge",
                document_conflict="skip",
                _request_timeout=timeout,
            )
        return str(response.operation_id)

    async def wait_operation(
        self, bank: str, operation_id: str, *, timeout: float, call_timeout: float
    ) -> OperationOutcome:
        """Poll until the operation ends; raise unless it completed."""
        deadline = time.monotonic() + timeout
        while True:
            async with self.backend.guarded("operation lookup", bank, call_timeout):
                response = await self._operations.get_operation_status(
                    bank, operation_id, _request_timeout=call_timeout
                )
            outcome = OperationOutcome(
                operation_id=operation_id,
                status=response.status,
                error_message=response.error_message,
                result_metadata=dict(response.result_metadata or {}),
            )
            if outcome.status == "completed":
                return outcome
            if outcome.status in ("failed", "cancelled", "not_found"):
                raise BackendServerError(
                    f"operation {operation_id} (bank {bank}) {outcome.status}: "
                    f"{outcome.error_message or 'no reason given'}",
                    hint="run the same command again: it resumes where it stopped",
                )
            if time.monotonic() > deadline:
                raise BackendUnavailable(
                    f"operation {operation_id} (bank {bank}) still {outcome.status} after "
                    f"{timeout:.0f}s",
                    hint="run the same command again later: it resumes where it stopped",
                )
            await asyncio.sleep(_POLL_S)
