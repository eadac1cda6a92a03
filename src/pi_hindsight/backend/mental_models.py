"""Mental models: get, list, create, update, refresh, clear, delete (``MentalModelsApi``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hindsight_client_api.api.mental_models_api import MentalModelsApi
from hindsight_client_api.models.create_mental_model_request import CreateMentalModelRequest
from hindsight_client_api.models.mental_model_trigger_input import MentalModelTriggerInput
from hindsight_client_api.models.refresh_mental_model_request import RefreshMentalModelRequest
from hindsight_client_api.models.update_mental_model_request import UpdateMentalModelRequest

from pi_hindsight.backend._client import Resource, built
from pi_hindsight.backend.resources import MentalModel, TagsMatch


def normalise_trigger(trigger: Mapping[str, Any] | None) -> dict[str, Any]:
    """A trigger with the server's defaults filled in and unset fields dropped, so a template's
    trigger compares equal to the stored one exactly when Hindsight would skip the update."""
    model = MentalModelTriggerInput.from_dict(dict(trigger or {}))
    values = {} if model is None else model.to_dict()
    return {key: value for key, value in values.items() if value is not None}


def _model(response: Any) -> MentalModel:
    trigger = response.trigger.to_dict() if response.trigger is not None else None
    return MentalModel(
        id=response.id,
        name=response.name,
        content=response.content,
        tags=tuple(response.tags or ()),
        last_refreshed_at=response.last_refreshed_at,
        is_stale=response.is_stale,
        source_query=response.source_query,
        max_tokens=response.max_tokens,
        trigger=normalise_trigger(trigger) if trigger is not None else {},
    )


class MentalModels(Resource):
    async def get_mental_model(
        self, bank: str, model_id: str, *, timeout: float
    ) -> MentalModel | None:
        api = self._client.api(MentalModelsApi)

        async def get() -> MentalModel:
            # The server's default detail ("full") is the only one that says whether it is stale.
            return _model(await api.get_mental_model(bank, model_id, _request_timeout=timeout))

        return await self._client.lookup("mental model lookup", bank, timeout, get)

    async def list_mental_models(
        self,
        bank: str,
        *,
        tags: Sequence[str] | None,
        tags_match: TagsMatch = "exact",
        timeout: float,
    ) -> list[MentalModel]:
        api = self._client.api(MentalModelsApi)
        return await self._client.collect(
            "mental model listing",
            bank,
            timeout,
            api.list_mental_models,
            _model,
            tags=list(tags) if tags is not None else None,
            tags_match=tags_match if tags is not None else None,
            detail="content",
            exclude_knowledge_pages=True,
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
        trigger: Mapping[str, Any],
        timeout: float,
    ) -> str | None:
        fields = {
            "id": model_id,
            "name": name,
            "source_query": source_query,
            "tags": list(tags),
            "max_tokens": max_tokens,
            "trigger": dict(trigger),
        }
        what = "mental model creation"
        request = built(CreateMentalModelRequest.from_dict(fields), what)
        api = self._client.api(MentalModelsApi)
        async with self._client.call(what, bank, timeout):
            response = await api.create_mental_model(bank, request, _request_timeout=timeout)
            return response.operation_id

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
        wanted = {"name": name, "source_query": source_query, "max_tokens": max_tokens}
        changes = {key: value for key, value in wanted.items() if value is not None}
        request = built(UpdateMentalModelRequest.from_dict(changes), "mental model update")
        api = self._client.api(MentalModelsApi)
        async with self._client.call("mental model update", bank, timeout):
            await api.update_mental_model(bank, model_id, request, _request_timeout=timeout)

    async def refresh_mental_model(
        self, bank: str, model_id: str, *, full: bool = False, timeout: float
    ) -> str:
        request = RefreshMentalModelRequest(mode="full") if full else None
        api = self._client.api(MentalModelsApi)
        async with self._client.call("mental model refresh", bank, timeout):
            response = await api.refresh_mental_model(
                bank, model_id, refresh_mental_model_request=request, _request_timeout=timeout
            )
            return str(response.operation_id)

    async def clear_mental_model(self, bank: str, model_id: str, *, timeout: float) -> None:
        api = self._client.api(MentalModelsApi)
        async with self._client.call("mental model clear", bank, timeout):
            await api.clear_mental_model(bank, model_id, _request_timeout=timeout)

    async def delete_mental_model(self, bank: str, model_id: str, *, timeout: float) -> None:
        api = self._client.api(MentalModelsApi)
        async with self._client.call("mental model deletion", bank, timeout):
            await api.delete_mental_model(bank, model_id, _request_timeout=timeout)

    def normalise_trigger(self, trigger: Mapping[str, Any] | None) -> dict[str, Any]:
        return normalise_trigger(trigger)
