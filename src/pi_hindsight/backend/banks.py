"""The server and its banks: health, existence, creation, config and missions (``BanksApi``,
``MonitoringApi``).

What was checked in the server's source (hindsight-api 1.1.0): ``GET /banks/{b}/config`` answers
200 for a missing bank, so only the listing tells whether a bank exists. Missions are bank config
fields (``records.MISSION_KEYS``); ``PATCH /banks/{b}`` updates them and answers 404 for a missing
bank, while ``PATCH /banks/{b}/config`` would create the bank.
"""

from __future__ import annotations

from collections.abc import Mapping

from hindsight_client_api.api.banks_api import BanksApi
from hindsight_client_api.api.monitoring_api import MonitoringApi
from hindsight_client_api.models.create_bank_request import CreateBankRequest

from pi_hindsight.backend._client import Resource, built
from pi_hindsight.backend.resources import MISSION_KEYS, BankConfig, BankMissions, MissionKey


class Banks(Resource):
    async def health(self, *, timeout: float) -> str:
        """The server's own word for its state ("healthy"); raises when it does not answer."""
        api = self._client.api(MonitoringApi)
        async with self._client.call("health check", None, timeout):
            result = await api.health_endpoint_health_get(_request_timeout=timeout)
            status = result.get("status") if isinstance(result, dict) else result
            return str(status)

    async def bank_exists(self, bank: str, *, timeout: float) -> bool:
        """From the listing filtered by id (exact match on ``bank_id``): see the module doc."""
        api = self._client.api(BanksApi)
        async with self._client.call("bank lookup", bank, timeout):
            listing = await api.list_banks(q=bank, _request_timeout=timeout)
            return any(item.bank_id == bank for item in listing.banks)

    async def create_bank(self, bank: str, missions: BankMissions, *, timeout: float) -> None:
        request = CreateBankRequest(
            name=bank,
            mission=missions.mission,
            retain_mission=missions.retain_mission,
            reflect_mission=missions.reflect_mission,
        )
        api = self._client.api(BanksApi)
        async with self._client.call("bank creation", bank, timeout):
            await api.create_or_update_bank(bank, request, _request_timeout=timeout)

    async def bank_config(self, bank: str, *, timeout: float) -> BankConfig:
        api = self._client.api(BanksApi)
        async with self._client.call("bank config", bank, timeout):
            response = await api.get_bank_config(bank, _request_timeout=timeout)
            return BankConfig(
                bank_id=bank, config=dict(response.config), overrides=dict(response.overrides)
            )

    async def update_missions(
        self, bank: str, missions: Mapping[MissionKey, str], *, timeout: float
    ) -> None:
        unknown = set(missions) - set(MISSION_KEYS)
        if unknown:
            raise ValueError(f"not mission fields: {sorted(unknown)}")
        fields = {str(key): text for key, text in missions.items()}
        request = built(CreateBankRequest.from_dict(fields), "mission update")
        api = self._client.api(BanksApi)
        async with self._client.call("mission update", bank, timeout):
            await api.update_bank(bank, request, _request_timeout=timeout)
