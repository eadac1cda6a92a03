"""The bundled starter bank templates (docs/bank-maintenance.md): the list, a preview (Hindsight's
dry run: changes nothing) and apply, on the session's selected bank — the User bank for the
personal template. Rendered through ``maintenance.plain_text``, dumped through
``maintenance.common``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import ConfigDict, Field, PlainSerializer, computed_field

from pi_hindsight.engine.scope import USER_SCOPE_TAGS
from pi_hindsight.errors import ScopeError
from pi_hindsight.maintenance.common import as_json
from pi_hindsight.operations.bank_upkeep import BankContext, selected_scope
from pi_hindsight.operations.base import Operation, OperationArgs, OperationResult

USER_TEMPLATE = "personal-preferences"
AsJson = PlainSerializer(as_json, return_type=Any)


@dataclass(frozen=True)
class Target:
    bank: str
    tags: tuple[str, ...]
    label: str
    mission: str


def template_target(context: BankContext, name: str) -> Target:
    """The already-selected bank for a template: the User bank for the personal template."""
    settings = context.settings
    if name != USER_TEMPLATE:
        scope = selected_scope(context)
        return Target(
            scope.bank_id,
            scope.tags,
            f"bank {scope.bank_id} ({scope.scope_id})",
            settings.banks.project.mission,
        )
    if not settings.user_bank_active:
        raise ScopeError(
            f"{USER_TEMPLATE} is for the User bank, which is not part of profile "
            f"{settings.profile}",
            hint="choose project+user or user-only with `pi-hindsight setup --profile …`",
        )
    bank = settings.banks.user.bank_id
    return Target(bank, USER_SCOPE_TAGS, f"User bank {bank}", settings.banks.user.mission)


class _TemplateResult(OperationResult):
    model_config = ConfigDict(arbitrary_types_allowed=True)


class TemplatesArgs(OperationArgs):
    pass


class TemplatesResult(_TemplateResult):
    templates: Annotated[tuple[Any, ...], AsJson]

    def render(self) -> str:
        from pi_hindsight.maintenance import plain_text  # noqa: PLC0415 - rarely used

        return plain_text.templates_list(self.templates)


async def list_templates(context: object, args: TemplatesArgs) -> TemplatesResult:
    from pi_hindsight.maintenance import template_import  # noqa: PLC0415 - rarely used

    return TemplatesResult(templates=template_import.list_templates())


class TemplateArgs(OperationArgs):
    name: str = Field(min_length=1, max_length=200, description="a bundled template's name")


class TemplatePreviewResult(_TemplateResult):
    target: str
    plan: Annotated[Any, AsJson]  # maintenance.templates.TemplatePlan
    applied: bool = False  # a preview never changes anything

    @computed_field  # type: ignore[prop-decorator]
    @property
    def changes(self) -> bool:
        return bool(self.plan.changes_anything)

    def render(self) -> str:
        from pi_hindsight.maintenance import plain_text  # noqa: PLC0415 - rarely used

        return plain_text.template_plan(self.plan)


async def _on_target(context: BankContext, name: str, *, apply: bool) -> tuple[str, Any]:
    """Preview or apply template ``name`` on its bank: (the bank's label, what it said)."""
    from pi_hindsight.maintenance import template_import  # noqa: PLC0415 - rarely used

    target = template_target(context, name)
    backend = await context.backend_with_bank(target.bank, target.mission)
    act = template_import.apply_template if apply else template_import.preview_template
    done = await act(
        backend, target.bank, name, tags=target.tags, timeout=context.settings.timeout_ms / 1000
    )
    return target.label, done


async def preview_template(context: BankContext, args: TemplateArgs) -> TemplatePreviewResult:
    label, plan = await _on_target(context, args.name, apply=False)
    return TemplatePreviewResult(target=label, plan=plan)


class TemplateAppliedResult(_TemplateResult):
    target: str
    applied: Annotated[Any, AsJson]  # maintenance.templates.TemplateApplied

    @computed_field  # type: ignore[prop-decorator]
    @property
    def matches_plan(self) -> bool:
        return bool(self.applied.matches_plan)

    def render(self) -> str:
        from pi_hindsight.maintenance import plain_text  # noqa: PLC0415 - rarely used

        return plain_text.template_applied(self.applied)


async def apply_template(context: BankContext, args: TemplateArgs) -> TemplateAppliedResult:
    label, applied = await _on_target(context, args.name, apply=True)
    return TemplateAppliedResult(target=label, applied=applied)


TEMPLATES = Operation(
    "templates",
    "the bundled starter bank templates",
    TemplatesArgs,
    TemplatesResult,
    list_templates,
)
TEMPLATE_PREVIEW = Operation(
    "template_preview",
    "what applying a template to the selected bank would change (changes nothing)",
    TemplateArgs,
    TemplatePreviewResult,
    preview_template,
)
TEMPLATE_APPLY = Operation(
    "template_apply",
    "apply a template to the selected bank",
    TemplateArgs,
    TemplateAppliedResult,
    apply_template,
)
