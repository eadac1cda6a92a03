"""Bank templates and directives: the template import and the directive listing
(``BankTemplatesApi``, ``DirectivesApi``).

What was checked in the server's source (hindsight-api 1.1.0): ``POST /banks/{b}/import?
dry_run=true`` only validates: it lists *every* template model id as "created" and answers 200
for a bank that does not exist. Applying creates a missing bank.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hindsight_client_api.api.bank_templates_api import BankTemplatesApi
from hindsight_client_api.api.directives_api import DirectivesApi
from hindsight_client_api.models.bank_template_manifest import BankTemplateManifest

from pi_hindsight.backend._client import Resource, built
from pi_hindsight.backend.resources import DirectiveInfo, TemplateImportResult

_DIRECTIVE_PAGE = 1000


def _directive(item: Any) -> DirectiveInfo:
    return DirectiveInfo(
        id=item.id,
        name=item.name,
        content=item.content,
        priority=item.priority or 0,
        is_active=item.is_active if item.is_active is not None else True,
        tags=tuple(item.tags or ()),
    )


class Templates(Resource):
    async def list_directives(self, bank: str, *, timeout: float) -> list[DirectiveInfo]:
        api = self._client.api(DirectivesApi)
        return await self._client.collect(
            "directive listing",
            bank,
            timeout,
            api.list_directives,
            _directive,
            page_size=_DIRECTIVE_PAGE,
            active_only=False,
        )

    async def import_template(
        self, bank: str, manifest: Mapping[str, Any], *, dry_run: bool, timeout: float
    ) -> TemplateImportResult:
        request = built(BankTemplateManifest.from_dict(dict(manifest)), "template import")
        what = "template dry run" if dry_run else "template import"
        api = self._client.api(BankTemplatesApi)
        async with self._client.call(what, bank, timeout):
            response = await api.import_bank_template(
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
