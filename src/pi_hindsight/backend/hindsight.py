"""The Hindsight boundary: the official ``hindsight-client`` (its async API) behind our own types.

Why the low-level generated API and not the ``Hindsight`` convenience class: the convenience class
has one client-wide timeout, while we need a short one for recall and a long one for reflect, and
its sync wrappers run their own event loop (unsafe inside the sidecar's loop). The generated API
takes ``_request_timeout`` per call and runs on our loop, so cancellation (the user's Esc) works.

Importing ``hindsight_client_api`` costs ~0.8 s, so this module is imported lazily by the sidecar
after it has answered ``ready`` (see ``rpc/sidecar.py``).

Nothing above this module sees ``aiohttp`` or ``hindsight_client_api`` exceptions: they become
:class:`~pi_hindsight.errors.BackendError` subclasses here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import aiohttp
from hindsight_client_api.api.banks_api import BanksApi
from hindsight_client_api.api.memory_api import MemoryApi
from hindsight_client_api.api.mental_models_api import MentalModelsApi
from hindsight_client_api.api.monitoring_api import MonitoringApi
from hindsight_client_api.api.operations_api import OperationsApi
from hindsight_client_api.api_client import ApiClient
from hindsight_client_api.configuration import Configuration
from hindsight_client_api.exceptions import ApiException
from hindsight_client_api.models.create_bank_request import CreateBankRequest
from hindsight_client_api.models.create_mental_model_request import CreateMentalModelRequest
from hindsight_client_api.models.recall_request import RecallRequest
from hindsight_client_api.models.reflect_request import ReflectRequest
from hindsight_client_api.models.retain_request import RetainRequest

from pi_hindsight.backend.records import (
    BankMissions,
    MemoryRecord,
    MentalModel,
    OperationStatus,
    ReflectResult,
    RetainAccepted,
    RetainItem,
    TagsMatch,
)
from pi_hindsight.config_display import display_url, scrub, url_secrets
from pi_hindsight.errors import (
    BackendError,
    BackendMalformed,
    BackendRejected,
    BackendServerError,
    BackendUnavailable,
    BankNotFound,
)

logger = logging.getLogger(__name__)


def _retry_after(headers: Any) -> float | None:
    if not headers:
        return None
    value = None
    with contextlib.suppress(AttributeError, TypeError):
        value = headers.get("Retry-After") or headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _server_message(body: str | None) -> str:
    if not body:
        return ""
    try:
        parsed = json.loads(body)
    except ValueError:
        return body[:300]
    if isinstance(parsed, dict):
        detail = parsed.get("detail") or parsed.get("message") or parsed.get("error")
        if detail is not None:
            return str(detail)[:300]
    return body[:300]


_NOT_HINDSIGHT_HINT = (
    "check that hindsight.baseUrl points at a Hindsight server (`pi-hindsight status`); "
    "retains stay in the outbox and are retried"
)


def translate_api_exception(error: ApiException, what: str, bank: str | None) -> BackendError:
    status = int(error.status or 0)
    message = _server_message(error.body)
    where = f" (bank {bank})" if bank else ""
    if status == 0:  # the client could not read the answer at all (e.g. its content type)
        return BackendMalformed(
            f"{what}{where} failed: the answer is not Hindsight's ({error.reason or message})",
            hint=_NOT_HINDSIGHT_HINT,
        )
    text = f"{what}{where} failed: HTTP {status} {message}".rstrip()
    if status == 429 or status >= 500:
        return BackendServerError(text, status=status, retry_after=_retry_after(error.headers))
    if status == 408:
        return BackendUnavailable(text, status=status)
    if status == 404 and "bank" in message.lower():
        return BankNotFound(text, status=status)
    return BackendRejected(text, status=status)


def _malformed(error: BaseException) -> str:
    """What was wrong with an answer, in a few words (never a parser's field-by-field dump)."""
    title = getattr(error, "title", None)  # pydantic's ValidationError names the model
    if isinstance(title, str) and title:
        return f"it is not a {title}"
    if isinstance(error, RecursionError):
        return "it is nested too deeply"
    return f"it could not be read ({type(error).__name__})"


class HindsightBackend:
    """Async access to one Hindsight server. One instance per sidecar; call :meth:`close`."""

    def __init__(self, base_url: str, *, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._shown_url = display_url(self.base_url)  # errors never quote a password
        configuration = Configuration(host=self.base_url)
        self._client = ApiClient(configuration)
        self._client.user_agent = "pi-hindsight"
        if api_key:
            self._client.default_headers["Authorization"] = f"Bearer {api_key}"
        self._memory = MemoryApi(self._client)
        self._banks = BanksApi(self._client)
        self._operations = OperationsApi(self._client)
        self._monitoring = MonitoringApi(self._client)
        self._mental_models = MentalModelsApi(self._client)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._client.close()  # type: ignore[no-untyped-call]  # generated code

    @property
    def api_client(self) -> ApiClient:
        """The official client's API client, for modules that use more of its generated APIs
        (``backend/maintenance.py``); wrap every call in :meth:`guarded`."""
        return self._client

    def guarded(
        self, what: str, bank: str | None, timeout: float
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Translate foreign failures of the wrapped call and bound it by ``timeout``."""
        return self._call(what, bank, timeout)

    @contextlib.asynccontextmanager
    async def _call(self, what: str, bank: str | None, timeout: float) -> AsyncIterator[None]:
        """Translate every foreign failure of the wrapped call and bound it by ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                yield
        except ApiException as error:
            raise translate_api_exception(error, what, bank) from error
        except TimeoutError as error:
            raise BackendUnavailable(
                f"{what} timed out after {timeout:.1f}s ({self._shown_url})",
                hint="the Hindsight server is slow or unreachable; check `pi-hindsight status`",
            ) from error
        except (aiohttp.ClientError, OSError) as error:
            raise BackendUnavailable(
                f"{what}: cannot reach Hindsight at {self._shown_url}: "
                f"{scrub(str(error), url_secrets(self.base_url))}",
                hint="start it with `pi-hindsight server start` or set the server URL",
            ) from error
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as error:
            # The answer did not parse into the API's models (pydantic's ValidationError is a
            # ValueError), or lacked what we read from it: the server's fault, never the item's.
            raise BackendMalformed(
                f"{what}{f' (bank {bank})' if bank else ''}: the answer from {self.base_url} "
                f"is not Hindsight's: {_malformed(error)}",
                hint=_NOT_HINDSIGHT_HINT,
            ) from error

    async def health(self, *, timeout: float) -> dict[str, Any]:
        async with self._call("health check", None, timeout):
            result = await self._monitoring.health_endpoint_health_get(_request_timeout=timeout)
            return result if isinstance(result, dict) else {"status": str(result)}

    async def bank_exists(self, bank: str, *, timeout: float) -> bool:
        """Whether ``bank`` exists, from the bank listing.

        ``GET /banks/{b}/config`` answers 200 for a missing bank, so it cannot tell; the listing
        filtered by id can (exact match on ``bank_id``).
        """
        async with self._call("bank lookup", bank, timeout):
            listing = await self._banks.list_banks(q=bank, _request_timeout=timeout)
            return any(item.bank_id == bank for item in listing.banks)

    async def create_bank(self, bank: str, missions: BankMissions, *, timeout: float) -> None:
        request = CreateBankRequest(
            name=bank,
            mission=missions.mission,
            retain_mission=missions.retain_mission,
            reflect_mission=missions.reflect_mission,
        )
        async with self._call("bank creation", bank, timeout):
            await self._banks.create_or_update_bank(bank, request, _request_timeout=timeout)

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
        async with self._call("recall", bank, timeout):
            response = await self._memory.recall_memories(bank, request, _request_timeout=timeout)
            return [
                MemoryRecord(
                    id=result.id,
                    text=result.text,
                    type=result.type,
                    context=result.context,
                    occurred_start=result.occurred_start,
                    occurred_end=result.occurred_end,
                    mentioned_at=result.mentioned_at,
                    document_id=result.document_id,
                    chunk_id=result.chunk_id,
                    tags=tuple(result.tags or ()),
                )
                for result in response.results
            ]

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
        request = RetainRequest.from_dict(
            {
                "items": [
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
                ],
                "async": run_async,
                "operation_id": operation_id,
            }
        )
        if request is None:  # pragma: no cover - from_dict only returns None for None input
            raise BackendRejected("retain request could not be built")
        async with self._call("retain", bank, timeout):
            response = await self._memory.retain_memories(bank, request, _request_timeout=timeout)
            accepted_id = response.operation_id or (
                response.operation_ids[0] if response.operation_ids else None
            )
            return RetainAccepted(operation_id=accepted_id, items=response.items_count)

    async def operation_status(
        self, bank: str, operation_id: str, *, timeout: float
    ) -> OperationStatus:
        async with self._call("operation lookup", bank, timeout):
            response = await self._operations.get_operation_status(
                bank, operation_id, _request_timeout=timeout
            )
            state = response.status if response.status in _STATES else "unknown"
            return OperationStatus(
                operation_id=response.operation_id,
                state=state,  # type: ignore[arg-type]  # narrowed by the membership test above
                operation_type=response.operation_type,
                error_message=response.error_message,
            )

    async def get_mental_model(
        self, bank: str, model_id: str, *, timeout: float
    ) -> MentalModel | None:
        """The mental model, or None when it does not exist (HTTP 404)."""
        try:
            async with self._call("mental model lookup", bank, timeout):
                response = await self._mental_models.get_mental_model(
                    bank, model_id, _request_timeout=timeout
                )
        except BackendRejected as error:
            if error.status == 404:
                return None
            raise
        return MentalModel(
            id=response.id,
            name=response.name,
            content=response.content,
            tags=tuple(response.tags or ()),
            last_refreshed_at=response.last_refreshed_at,
            is_stale=response.is_stale,
            source_query=response.source_query,
        )

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
    ) -> str | None:
        """Create a mental model; returns the operation id of its first refresh."""
        request = CreateMentalModelRequest.from_dict(
            {
                "id": model_id,
                "name": name,
                "source_query": source_query,
                "tags": list(tags),
                "max_tokens": max_tokens,
                "trigger": trigger,
            }
        )
        if request is None:  # pragma: no cover - from_dict only returns None for None input
            raise BackendRejected("mental model request could not be built")
        async with self._call("mental model creation", bank, timeout):
            response = await self._mental_models.create_mental_model(
                bank, request, _request_timeout=timeout
            )
            return response.operation_id

    async def refresh_mental_model(self, bank: str, model_id: str, *, timeout: float) -> str:
        """Ask Hindsight to refresh; returns the operation id (accepted is not completed)."""
        async with self._call("mental model refresh", bank, timeout):
            response = await self._mental_models.refresh_mental_model(
                bank, model_id, _request_timeout=timeout
            )
            return str(response.operation_id)

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
    ) -> ReflectResult:
        request = ReflectRequest.from_dict(
            {
                "query": query,
                "budget": budget,
                "context": context,
                "max_tokens": max_tokens,
                "include": {"facts": {}},
                "tags": list(tags),
                "tags_match": tags_match,
            }
        )
        if request is None:  # pragma: no cover
            raise BackendRejected("reflect request could not be built")
        async with self._call("reflect", bank, timeout):
            response = await self._memory.reflect(bank, request, _request_timeout=timeout)
            based_on = response.based_on
            memories = based_on.memories if based_on and based_on.memories else []
            models = based_on.mental_models if based_on and based_on.mental_models else []
            return ReflectResult(
                text=response.text,
                memory_ids=tuple(str(memory.id) for memory in memories if memory.id),
                mental_model_ids=tuple(str(model.id) for model in models if model.id),
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
        limit: int = 50,
    ) -> list[MemoryRecord]:
        """The listing endpoint: the only place with hard date windows (recall has none)."""
        async with self._call("memory listing", bank, timeout):
            response = await self._memory.list_memories(
                bank,
                type=fact_type,
                tags=list(tags),
                tags_match=tags_match,
                time_field=time_field or ("created_at" if start_date or end_date else None),
                start_date=start_date,
                end_date=end_date,
                limit=limit,
                _request_timeout=timeout,
            )
            return [
                MemoryRecord(
                    id=item.id,
                    text=item.text or "",
                    type=item.fact_type,
                    context=item.context or None,
                    occurred_start=item.occurred_start,
                    occurred_end=item.occurred_end,
                    mentioned_at=item.mentioned_at,
                    document_id=item.document_id,
                    chunk_id=item.chunk_id,
                    tags=tuple(item.tags or ()),
                )
                for item in response.items
            ]


_STATES = {"pending", "processing", "completed", "failed", "cancelled", "not_found"}
