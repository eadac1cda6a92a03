"""Selected-bank maintenance (R-CONF-8): the missions and the mental models of the session's bank
— a dry run unless ``apply`` — for the agent's tool and the command line. The backend work lives in
``pi_hindsight.maintenance``; these operations bind it to the session's scope, and their results
render through ``maintenance.plain_text`` (the one wording) and dump through ``maintenance.common``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from pydantic import ConfigDict, Field, PlainSerializer

from pi_hindsight.maintenance.common import as_json
from pi_hindsight.maintenance.missions import MissionChange, Missions
from pi_hindsight.maintenance.model_changes import ModelChange
from pi_hindsight.operations.base import (
    Operation,
    OperationArgs,
    OperationInputError,
    OperationResult,
)

if TYPE_CHECKING:
    from pi_hindsight.backend import MemoryBackend
    from pi_hindsight.config import Settings
    from pi_hindsight.engine.scope import Scope

ModelAction = Literal["list", "create", "update", "delete"]
_APPLY = "really change it (default: dry run)"
# The maintenance package's frozen dataclasses, kept as they are and dumped as their JSON data.
AsJson = PlainSerializer(as_json, return_type=Any)


class BankContext(Protocol):
    """What maintenance needs: the selected bank (the scope's, or the User bank the command line
    selects with ``--user``) and a backend for it. A session (``MemoryEngine``) provides it, and
    so does the command line's selected bank (``cli/_selected.py``)."""

    @property
    def settings(self) -> Settings: ...

    def scope(self) -> Scope | None: ...

    def off_reason(self) -> str: ...

    async def backend_with_bank(self, bank: str, mission: str) -> MemoryBackend: ...


def selected_scope(context: BankContext) -> Scope:
    scope = context.scope()
    if scope is None:
        raise OperationInputError(f"memory is off here: {context.off_reason()}")
    return scope


class MaintenanceResult(OperationResult):
    """A maintenance result holding the maintenance package's frozen dataclasses."""

    model_config = ConfigDict(arbitrary_types_allowed=True)


class MissionArgs(OperationArgs):
    mission: str | None = Field(
        default=None, min_length=1, max_length=4_000, description="the new reflect mission"
    )
    retain_mission: str | None = Field(
        default=None, min_length=1, max_length=4_000, description="what retain should extract"
    )
    observations_mission: str | None = Field(
        default=None, min_length=1, max_length=4_000, description="what is synthesised"
    )
    apply: bool = Field(default=False, description=_APPLY)


class MissionResult(MaintenanceResult):
    missions: Annotated[Missions | None, AsJson] = None  # read: the current missions
    change: Annotated[MissionChange | None, AsJson] = None  # set: what changes (or changed)

    def render(self) -> str:
        from pi_hindsight.maintenance import plain_text  # noqa: PLC0415 - rarely used

        if self.change is None:
            return plain_text.missions(self.missions) if self.missions else ""
        return plain_text.mission_change(self.change) + _dry_run_note(
            self.change.applied, "change it"
        )


def _dry_run_note(applied: bool, what: str) -> str:
    """What a dry run adds to the change it shows (nothing once applied)."""
    return "" if applied else f"\nDry run: nothing changed. Call again with apply: true to {what}."


async def _selected_bank(context: BankContext) -> tuple[Scope, MemoryBackend, float]:
    """The selected scope, its backend with the bank ready, and the per-call timeout in seconds."""
    scope = selected_scope(context)
    backend = await context.backend_with_bank(scope.bank_id, context.settings.banks.project.mission)
    return scope, backend, context.settings.timeout_ms / 1000


async def mission(context: BankContext, args: MissionArgs) -> MissionResult:
    from pi_hindsight.maintenance import missions  # noqa: PLC0415 - rarely used

    scope, backend, timeout = await _selected_bank(context)
    if args.mission is None and args.retain_mission is None and args.observations_mission is None:
        current = await missions.read_missions(backend, scope.bank_id, timeout=timeout)
        return MissionResult(missions=current)
    change = await missions.update_missions(
        backend,
        scope.bank_id,
        mission=args.mission,
        retain_mission=args.retain_mission,
        observations_mission=args.observations_mission,
        apply=args.apply,
        timeout=timeout,
    )
    return MissionResult(change=change)


class MentalModelsArgs(OperationArgs):
    model_action: ModelAction = Field(description="list, create, update or delete")
    model_id: str | None = Field(default=None, max_length=200, description="the model's id")
    name: str | None = Field(
        default=None, min_length=1, max_length=200, description="the model's name"
    )
    source_query: str | None = Field(
        default=None, min_length=1, max_length=2_000, description="what the model answers"
    )
    show_content: bool = Field(default=False, description="list: include each model's content")
    max_tokens: int | None = Field(
        default=None, alias="modelMaxTokens", description="create/update: the model's length"
    )
    apply: bool = Field(default=False, description=_APPLY)


class MentalModelsResult(MaintenanceResult):
    models: Annotated[tuple[Any, ...] | None, AsJson] = None  # list: the scope's models
    change: Annotated[ModelChange | None, AsJson] = None
    with_content: bool = Field(default=False, exclude=True)

    def render(self) -> str:
        from pi_hindsight.maintenance import plain_text  # noqa: PLC0415 - rarely used

        if self.change is None:
            return plain_text.models_list(self.models or (), content=self.with_content)
        return plain_text.model_change(self.change) + _dry_run_note(self.change.applied, "do it")


async def mental_models(context: BankContext, args: MentalModelsArgs) -> MentalModelsResult:
    from pi_hindsight.maintenance import model_changes as models  # noqa: PLC0415 - rarely used

    scope, backend, timeout = await _selected_bank(context)
    action, model_id = args.model_action, args.model_id
    if action == "list":
        found = await models.list_models(backend, scope.bank_id, tags=scope.tags, timeout=timeout)
        return MentalModelsResult(models=tuple(found), with_content=args.show_content)
    if action == "create":
        if not args.name or not args.source_query:
            raise OperationInputError("create needs 'name' and 'sourceQuery'")
        change = await models.create_model(
            backend,
            scope.bank_id,
            scope.tags,
            name=args.name,
            source_query=args.source_query,
            model_id=model_id,
            max_tokens=args.max_tokens or models.DEFAULT_MAX_TOKENS,
            apply=args.apply,
            timeout=timeout,
        )
    elif not model_id:
        raise OperationInputError(f"{action} needs 'modelId' (see modelAction: list)")
    elif action == "update":
        change = await models.update_model(
            backend,
            scope.bank_id,
            scope.tags,
            model_id,
            name=args.name,
            source_query=args.source_query,
            max_tokens=args.max_tokens,
            apply=args.apply,
            timeout=timeout,
        )
    else:
        change = await models.delete_model(
            backend, scope.bank_id, scope.tags, model_id, apply=args.apply, timeout=timeout
        )
    return MentalModelsResult(change=change)


MISSION = Operation(
    "mission",
    "read or change this bank's missions (a dry run unless apply is true)",
    MissionArgs,
    MissionResult,
    mission,
)
MENTAL_MODELS = Operation(
    "mental_models",
    "list, create, update or delete this scope's mental models (a dry run unless apply is true)",
    MentalModelsArgs,
    MentalModelsResult,
    mental_models,
)
