"""Selected-bank maintenance for the agent (R-CONF-8): the mission and the mental models of the
session's bank — dry run first, ``apply: true`` to change anything — and bank templates for the
``/hindsight:template…`` commands. The operations live in ``pi_hindsight.maintenance``; this
module binds them to the session's scope and renders the result for a model or a person.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pi_hindsight.engine.scope import USER_SCOPE_TAGS, Scope
from pi_hindsight.errors import ConfigError, ScopeError
from pi_hindsight.maintenance import mental_models, missions, plain_text, templates
from pi_hindsight.maintenance.common import as_json
from pi_hindsight.tools.context import ToolContext

ModelAction = Literal["list", "create", "update", "delete"]
USER_TEMPLATE = "personal-preferences"


@dataclass(frozen=True)
class Rendered:
    text: str
    details: dict[str, Any]


@dataclass(frozen=True)
class Target:
    bank: str
    tags: tuple[str, ...]
    label: str
    mission: str


def project_target(context: ToolContext, scope: Scope) -> Target:
    return Target(
        scope.bank_id,
        scope.tags,
        f"bank {scope.bank_id} ({scope.scope_id})",
        context.settings.banks.project.mission,
    )


def template_target(context: ToolContext, scope: Scope, name: str) -> Target:
    """The already-selected bank for a template: the User bank for the personal template."""
    if name != USER_TEMPLATE:
        return project_target(context, scope)
    settings = context.settings
    if not settings.user_bank_active:
        raise ScopeError(
            f"{USER_TEMPLATE} is for the User bank, which is not part of profile "
            f"{settings.profile}",
            hint="choose project+user or user-only with `pi-hindsight setup --profile …`",
        )
    bank = settings.banks.user.bank_id
    return Target(bank, USER_SCOPE_TAGS, f"User bank {bank}", settings.banks.user.mission)


async def mission(
    context: ToolContext,
    scope: Scope,
    *,
    new_mission: str | None,
    retain_mission: str | None,
    observations_mission: str | None,
    apply: bool,
) -> Rendered:
    backend = await context.backend_with_bank(scope.bank_id, context.settings.banks.project.mission)
    timeout = context.settings.timeout_ms / 1000
    if new_mission is None and retain_mission is None and observations_mission is None:
        current = await missions.read_missions(backend, scope.bank_id, timeout=timeout)
        return Rendered(plain_text.missions(current), {"missions": as_json(current)})
    change = await missions.update_missions(
        backend,
        scope.bank_id,
        mission=new_mission,
        retain_mission=retain_mission,
        observations_mission=observations_mission,
        apply=apply,
        timeout=timeout,
    )
    note = "" if apply else "\nDry run: nothing changed. Call again with apply: true to change it."
    return Rendered(plain_text.mission_change(change) + note, {"change": as_json(change)})


async def models(
    context: ToolContext,
    scope: Scope,
    *,
    action: ModelAction,
    model_id: str | None,
    name: str | None,
    source_query: str | None,
    apply: bool,
) -> Rendered:
    backend = await context.backend_with_bank(scope.bank_id, context.settings.banks.project.mission)
    timeout = context.settings.timeout_ms / 1000
    if action == "list":
        found = await mental_models.list_models(
            backend, scope.bank_id, tags=scope.tags, timeout=timeout
        )
        return Rendered(plain_text.models_list(found), {"models": as_json(found)})
    if action == "create":
        if not name or not source_query:
            raise ConfigError("create needs 'name' and 'sourceQuery'")
        change = await mental_models.create_model(
            backend,
            scope.bank_id,
            scope.tags,
            name=name,
            source_query=source_query,
            model_id=model_id,
            apply=apply,
            timeout=timeout,
        )
    elif not model_id:
        raise ConfigError(f"{action} needs 'modelId' (see modelAction: list)")
    elif action == "update":
        change = await mental_models.update_model(
            backend,
            scope.bank_id,
            scope.tags,
            model_id,
            name=name,
            source_query=source_query,
            apply=apply,
            timeout=timeout,
        )
    else:
        change = await mental_models.delete_model(
            backend, scope.bank_id, scope.tags, model_id, apply=apply, timeout=timeout
        )
    note = "" if apply else "\nDry run: nothing changed. Call again with apply: true to do it."
    return Rendered(plain_text.model_change(change) + note, {"change": as_json(change)})


def templates_text() -> str:
    return plain_text.templates_list(templates.list_templates())


async def template_preview(context: ToolContext, target: Target, name: str) -> Rendered:
    backend = await context.backend_with_bank(target.bank, target.mission)
    plan = await templates.preview_template(
        backend, target.bank, name, tags=target.tags, timeout=context.settings.timeout_ms / 1000
    )
    return Rendered(
        plain_text.template_plan(plan), {"plan": as_json(plan), "changes": plan.changes_anything}
    )


async def template_apply(context: ToolContext, target: Target, name: str) -> Rendered:
    backend = await context.backend_with_bank(target.bank, target.mission)
    applied = await templates.apply_template(
        backend, target.bank, name, tags=target.tags, timeout=context.settings.timeout_ms / 1000
    )
    return Rendered(plain_text.template_applied(applied), {"matchesPlan": applied.matches_plan})
