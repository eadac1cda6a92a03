"""Documents: list, get, re-tag, delete, and moving them between banks (``DocumentsApi``,
``BankTransferApi``, ``DocumentTransferApi``).

What was checked in the server's source (hindsight-api 1.1.0) and shaped these calls:

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

from collections.abc import Sequence
from typing import Any

from hindsight_client_api.api.bank_transfer_api import BankTransferApi
from hindsight_client_api.api.document_transfer_api import DocumentTransferApi
from hindsight_client_api.api.documents_api import DocumentsApi
from hindsight_client_api.models.update_document_request import UpdateDocumentRequest

from pi_hindsight.backend._client import Resource
from pi_hindsight.backend.resources import DocumentInfo, TagsMatch


def _document(item: Any, text_length: int) -> DocumentInfo:
    return DocumentInfo(
        id=item.id,
        tags=tuple(item.tags or ()),
        memory_unit_count=item.memory_unit_count or 0,
        content_hash=item.content_hash,
        text_length=text_length,
        created_at=item.created_at or None,
        metadata=dict(item.document_metadata or {}),
    )


def _listed(item: Any) -> DocumentInfo:
    return _document(item, item.text_length or 0)


class Documents(Resource):
    async def list_documents(
        self, bank: str, *, tags: Sequence[str], tags_match: TagsMatch, timeout: float
    ) -> list[DocumentInfo]:
        api = self._client.api(DocumentsApi)
        return await self._client.collect(
            "document listing",
            bank,
            timeout,
            api.list_documents,
            _listed,
            tags=list(tags),
            tags_match=tags_match,
        )

    async def get_document(
        self, bank: str, document_id: str, *, timeout: float
    ) -> DocumentInfo | None:
        api = self._client.api(DocumentsApi)

        async def get() -> DocumentInfo:
            item = await api.get_document(bank, document_id, _request_timeout=timeout)
            return _document(item, len(item.original_text or ""))

        return await self._client.lookup("document lookup", bank, timeout, get)

    async def retag_document(
        self, bank: str, document_id: str, tags: Sequence[str], *, timeout: float
    ) -> None:
        request = UpdateDocumentRequest(tags=list(tags))
        api = self._client.api(DocumentsApi)
        async with self._client.call("document re-tag", bank, timeout):
            await api.update_document(bank, document_id, request, _request_timeout=timeout)

    async def delete_document(self, bank: str, document_id: str, *, timeout: float) -> int:
        api = self._client.api(DocumentsApi)
        async with self._client.call("document deletion", bank, timeout):
            response = await api.delete_document(bank, document_id, _request_timeout=timeout)
            return int(response.memory_units_deleted or 0)

    async def export_documents(
        self, bank: str, document_ids: Sequence[str], *, timeout: float
    ) -> str:
        api = self._client.api(BankTransferApi)
        async with self._client.call("document export", bank, timeout):
            response = await api.export_bank_transfer(
                bank,
                include_data=True,
                include_bank_config=False,
                include_history=False,
                document_id=list(document_ids),
                _request_timeout=timeout,
            )
            return str(response.operation_id)

    async def download_archive(self, bank: str, storage_key: str, *, timeout: float) -> bytes:
        api = self._client.api(DocumentTransferApi)
        async with self._client.call("archive download", bank, timeout):
            return bytes(await api.download_file(storage_key, _request_timeout=timeout))

    async def import_documents(self, bank: str, archive: bytes, *, timeout: float) -> str:
        api = self._client.api(BankTransferApi)
        async with self._client.call("document import", bank, timeout):
            response = await api.import_bank_transfer(
                bank,
                ("documents.zip", archive),
                mode="merge",
                document_conflict="skip",
                _request_timeout=timeout,
            )
            return str(response.operation_id)
