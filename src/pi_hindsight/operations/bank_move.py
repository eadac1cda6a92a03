"""Moving the selected scope's memories to another bank or other tags (R-SCOPE-10,
docs/bank-maintenance.md#moving-a-scopes-memories): the dry run unless ``apply``, for
``pi-hindsight bank move``. The backend work lives in ``maintenance/move.py``; this binds it to
the selected scope and adds what must hold before anything moves: no unconfirmed retain of the
source scope waits in the outbox (it would land in the source after the move).

Only the command line offers it. An agent's tool or a host command runs inside a session of a
scope, and a move must run while no session uses the source scope (that session's later
retains go to the source); a move also deletes at the source, which is not an agent's call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import Field, model_serializer

from pi_hindsight.errors import ScopeError
from pi_hindsight.maintenance.common import as_json
from pi_hindsight.maintenance.move import MoveResult, MoveSelection, ScopeRef
from pi_hindsight.operations.bank_upkeep import BankContext, MaintenanceResult, selected_scope
from pi_hindsight.operations.base import Operation, OperationArgs

if TYPE_CHECKING:
    from pi_hindsight.engine.scope import Scope


class MoveContext(BankContext, Protocol):
    """The selected bank, and how many retains of a scope the outbox has not had confirmed."""

    async def unfinished_retains(self, bank: str, tags: tuple[str, ...]) -> int: ...


class MoveArgs(OperationArgs):
    to_bank: str | None = Field(
        default=None, min_length=1, max_length=200, description="target bank (default: the source)"
    )
    to_tags: tuple[Annotated[str, Field(min_length=1, max_length=500)], ...] = Field(
        default=(), max_length=50, description="target tags (default: the source scope's)"
    )
    document_ids: tuple[Annotated[str, Field(min_length=1, max_length=500)], ...] = Field(
        default=(), max_length=10_000, description="move only these documents"
    )
    prefix: str | None = Field(
        default=None, min_length=1, max_length=500, description="move only ids starting so"
    )
    operation_timeout: float = Field(
        default=300.0, gt=0, le=86_400, description="seconds to wait for each export or import"
    )
    apply: bool = Field(default=False, description="really move (default: dry run)")


class MoveOutcome(MaintenanceResult):
    """What the move would do (the dry run) or did; its JSON is the move's, as it always was."""

    move: MoveResult

    def render(self) -> str:
        from pi_hindsight.maintenance import plain_text  # noqa: PLC0415 - rarely used

        return plain_text.move_result(self.move)

    @model_serializer(mode="plain")
    def _the_move(self) -> Any:
        return as_json(self.move)


def _source(scope: Scope) -> ScopeRef:
    return ScopeRef(scope.bank_id, tuple(scope.tags))


async def move(context: MoveContext, args: MoveArgs) -> MoveOutcome:
    from pi_hindsight.maintenance.move import move_scope  # noqa: PLC0415 - rarely used

    scope = selected_scope(context)
    source = _source(scope)
    target = ScopeRef(args.to_bank or source.bank, args.to_tags or source.tags)
    if args.apply and (pending := await context.unfinished_retains(source.bank, source.tags)):
        raise ScopeError(
            f"{pending} retain(s) of the source scope are still in the outbox; they would "
            "arrive in the source after the move",
            hint="close the agent sessions there and run `pi-hindsight outbox drain` first",
        )
    backend = await context.backend_with_bank(scope.bank_id, context.settings.banks.project.mission)
    result = await move_scope(
        backend,
        source,
        target,
        MoveSelection(args.document_ids, args.prefix),
        apply=args.apply,
        timeout=context.settings.timeout_ms / 1000,
        operation_timeout=args.operation_timeout,
    )
    return MoveOutcome(move=result)


MOVE = Operation(
    "move",
    "move the selected scope's memories to another bank or tags (a dry run unless apply)",
    MoveArgs,
    MoveOutcome,
    move,
)
