"""Asynchronous operations: status, listing, cancel, waiting for the end (``OperationsApi``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hindsight_client_api.api.operations_api import OperationsApi

from pi_hindsight.backend._client import Resource
from pi_hindsight.backend.resources import ListedState, OperationState, OperationStatus
from pi_hindsight.errors import BackendServerError, BackendUnavailable

_STATES = {"pending", "processing", "completed", "failed", "cancelled", "not_found"}
_LIST_PAGE = 100  # the server's maximum for this listing
_POLL_S = 0.25


def _status(response: Any) -> OperationStatus:
    state: OperationState = response.status if response.status in _STATES else "unknown"
    return OperationStatus(
        operation_id=str(response.operation_id or response.id),  # a listed one may lack the first
        state=state,
        operation_type=response.operation_type,
        error_message=response.error_message,
        mental_model_id=response.mental_model_id,
        result_metadata=dict(getattr(response, "result_metadata", None) or {}),
    )


class Operations(Resource):
    async def operation_status(
        self, bank: str, operation_id: str, *, timeout: float
    ) -> OperationStatus:
        api = self._client.api(OperationsApi)
        async with self._client.call("operation lookup", bank, timeout):
            response = await api.get_operation_status(bank, operation_id, _request_timeout=timeout)
            return _status(response)

    async def list_operations(
        self, bank: str, *, state: ListedState, operation_type: str | None = None, timeout: float
    ) -> list[OperationStatus]:
        api = self._client.api(OperationsApi)
        return await self._client.collect(
            "operation listing",
            bank,
            timeout,
            api.list_operations,
            _status,
            field="operations",
            page_size=_LIST_PAGE,
            status=state,
            type=operation_type,
        )

    async def cancel_operation(self, bank: str, operation_id: str, *, timeout: float) -> None:
        api = self._client.api(OperationsApi)
        async with self._client.call("operation cancel", bank, timeout):
            await api.cancel_operation(bank, operation_id, _request_timeout=timeout)

    async def wait_operation(
        self, bank: str, operation_id: str, *, timeout: float, call_timeout: float
    ) -> OperationStatus:
        deadline = time.monotonic() + timeout
        while True:
            status = await self.operation_status(bank, operation_id, timeout=call_timeout)
            if status.state == "completed":
                return status
            if status.state in ("failed", "cancelled", "not_found"):
                raise BackendServerError(
                    f"operation {operation_id} (bank {bank}) {status.state}: "
                    f"{status.error_message or 'no reason given'}",
                    hint="run the same command again: it resumes where it stopped",
                )
            if time.monotonic() > deadline:
                raise BackendUnavailable(
                    f"operation {operation_id} (bank {bank}) still {status.state} after "
                    f"{timeout:.0f}s",
                    hint="run the same command again later: it resumes where it stopped",
                )
            await asyncio.sleep(_POLL_S)
