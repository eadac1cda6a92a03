"""The agent's tools, declared by the core and registered by the host (R-TOOLS-1..2).

``hindsight_memory`` — status (with a startup-memo operation lookup), recall (more, inside the
current scope only), reflect (its own long timeout; a cancel ends it), refresh_memo (returns the
operation id at once), retain (an explicit project-bank note), selected-bank maintenance
(``mission``, ``mental_models``: dry run first), and fixing a wrong memory (``forget``: dry run
first; ``correct``; ``corrections``). ``hindsight_retain_global`` — the only way to
write the User bank (R-CONF-2).

One module per concern: ``specs`` (names, argument models, schemas), ``search`` (recall,
reflect), ``memo`` (status, refresh_memo), ``notes`` (retain, retain_global), ``maintenance``
(missions, mental models, templates), ``lifecycle`` (forget, correct, corrections); ``context`` is
what they need from the session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pi_hindsight.errors import BackendError, PiHindsightError
from pi_hindsight.tools import forget_correct, notes, search, status_memo
from pi_hindsight.tools.context import ToolContext, require_scope
from pi_hindsight.tools.specs import (
    MEMORY_DESCRIPTION,
    MEMORY_LABEL,
    MEMORY_PARAMETERS,
    MEMORY_TOOL,
    RETAIN_GLOBAL_DESCRIPTION,
    RETAIN_GLOBAL_LABEL,
    RETAIN_GLOBAL_PARAMETERS,
    RETAIN_GLOBAL_TOOL,
    MemoryArgs,
    ToolInputError,
    ToolResult,
    ToolSpec,
    bounded,
    parse_memory_args,
)

__all__ = ["MEMORY_TOOL", "RETAIN_GLOBAL_TOOL", "MemoryTools", "ToolResult", "ToolSpec"]

Action = Callable[[ToolContext, MemoryArgs], Awaitable[ToolResult]]


async def _mission(context: ToolContext, args: MemoryArgs) -> ToolResult:
    from pi_hindsight.tools import maintenance  # noqa: PLC0415 - rarely used; not at start-up

    rendered = await maintenance.mission(
        context,
        require_scope(context),
        new_mission=args.mission,
        retain_mission=args.retain_mission,
        observations_mission=args.observations_mission,
        apply=args.apply,
    )
    return ToolResult(bounded(rendered.text), rendered.details)


async def _mental_models(context: ToolContext, args: MemoryArgs) -> ToolResult:
    from pi_hindsight.tools import maintenance  # noqa: PLC0415 - rarely used; not at start-up

    rendered = await maintenance.models(
        context,
        require_scope(context),
        action=args.model_action or "list",
        model_id=args.model_id,
        name=args.name,
        source_query=args.source_query,
        apply=args.apply,
    )
    return ToolResult(bounded(rendered.text), rendered.details)


ACTIONS: dict[str, Action] = {
    "status": status_memo.status,
    "recall": search.recall,
    "reflect": search.reflect,
    "refresh_memo": status_memo.refresh_memo,
    "retain": notes.retain,
    "mission": _mission,
    "mental_models": _mental_models,
    "forget": forget_correct.forget,
    "correct": forget_correct.correct,
    "corrections": forget_correct.corrections,
}


class MemoryTools:
    def __init__(self, context: ToolContext) -> None:
        self.context = context

    def specs(self) -> list[ToolSpec]:
        settings = self.context.settings
        if self.context.scope() is None:
            return []
        specs = [
            ToolSpec(
                MEMORY_TOOL,
                MEMORY_LABEL,
                MEMORY_DESCRIPTION,
                MEMORY_PARAMETERS,
                # The longest action bounds the host's wait; each action has its own bound inside.
                settings.reflect_timeout_ms + 5_000,
            )
        ]
        if settings.user_bank_active:
            specs.append(
                ToolSpec(
                    RETAIN_GLOBAL_TOOL,
                    RETAIN_GLOBAL_LABEL,
                    RETAIN_GLOBAL_DESCRIPTION,
                    RETAIN_GLOBAL_PARAMETERS,
                    settings.timeout_ms + 2_000,
                )
            )
        return specs

    async def call(self, name: str, params: dict[str, Any]) -> ToolResult:
        try:
            if name == MEMORY_TOOL:
                args = parse_memory_args(params)
                return await ACTIONS[args.action](self.context, args)
            if name == RETAIN_GLOBAL_TOOL:
                return await notes.retain_global(self.context, params)
            return ToolResult(f"unknown tool {name!r}", is_error=True)
        except ToolInputError as error:
            return ToolResult(f"{name}: {error}", is_error=True)
        except BackendError as error:
            return ToolResult(f"{name}: Hindsight failed: {error.describe()}", is_error=True)
        except PiHindsightError as error:
            return ToolResult(f"{name}: {error.describe()}", is_error=True)
