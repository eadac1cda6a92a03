"""The stores as awaitable methods, for code outside the engine: each method runs its store call on
the store thread (``runner.py``), so a caller awaits it and never needs to know the store-thread
rule. Only what a tool, a command or a host asks of a store is here; the engine's own store work
uses ``run_store`` directly."""

from __future__ import annotations

from collections.abc import Sequence

from pi_hindsight.stores.catalog import Catalog, OperationRecord
from pi_hindsight.stores.corrections import CorrectionRecord
from pi_hindsight.stores.runner import run_store


class AsyncCatalog:
    """The catalogue's corrections, lifecycle log and requested operations."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    async def operation(self, operation_id: str) -> OperationRecord | None:
        return await run_store(self._catalog.operation, operation_id)

    async def record_operation(
        self, *, operation_id: str, scope_id: str, bank_id: str, kind: str, subject: str
    ) -> None:
        await run_store(
            self._catalog.record_operation,
            operation_id=operation_id,
            scope_id=scope_id,
            bank_id=bank_id,
            kind=kind,
            subject=subject,
        )

    async def log_forget(
        self,
        scope_id: str,
        bank_id: str,
        *,
        record_ids: Sequence[str],
        document_ids: Sequence[str],
        actor: str,
        detail: str | None = None,
    ) -> None:
        await run_store(
            self._catalog.log_forget,
            scope_id,
            bank_id,
            record_ids=record_ids,
            document_ids=document_ids,
            actor=actor,
            detail=detail,
        )

    async def add_correction(self, correction: CorrectionRecord, *, bank_id: str) -> None:
        await run_store(self._catalog.add_correction, correction, bank_id=bank_id)

    async def corrections(self, scope_id: str) -> list[CorrectionRecord]:
        return await run_store(self._catalog.corrections, scope_id)

    async def remove_correction(
        self, scope_id: str, record_id: str, *, bank_id: str, actor: str
    ) -> bool:
        return await run_store(
            self._catalog.remove_correction, scope_id, record_id, bank_id=bank_id, actor=actor
        )
