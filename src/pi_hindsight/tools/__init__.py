"""The agent's tools, registered by the host (R-TOOLS-1..2): a thin adapter over the operations
layer (``pi_hindsight.operations``).

``hindsight_memory`` — one tool whose ``action`` selects an operation: status (with a
startup-memo operation lookup), recall (more, inside the current scope only), reflect (its own
long timeout; a cancel ends it), refresh_memo (returns the operation id at once), retain (an
explicit project-bank note), selected-bank maintenance (``mission``, ``mental_models``: dry run
first), and fixing a wrong memory (``forget``: dry run first; ``correct``; ``corrections``).
``hindsight_retain_global`` — the only way to write the User bank (R-CONF-2).

``specs`` generates the parameter schemas from the operations' argument models. A result's text is
what the model reads; its JSON form is the tool result's details.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pi_hindsight.errors import PiHindsightError
from pi_hindsight.operations.base import describe_failure
from pi_hindsight.tools.specs import (
    MEMORY_DESCRIPTION,
    MEMORY_LABEL,
    MEMORY_TOOL,
    RETAIN_GLOBAL_DESCRIPTION,
    RETAIN_GLOBAL_LABEL,
    RETAIN_GLOBAL_TOOL,
    ToolResult,
    ToolSpec,
    memory_parameters,
    parse_action,
    retain_global_parameters,
)

if TYPE_CHECKING:
    from pi_hindsight.operations.base import OperationContext

__all__ = ["MEMORY_TOOL", "RETAIN_GLOBAL_TOOL", "MemoryTools", "ToolResult", "ToolSpec"]


class MemoryTools:
    def __init__(self, context: OperationContext) -> None:
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
                memory_parameters(),
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
                    retain_global_parameters(),
                    settings.timeout_ms + 2_000,
                )
            )
        return specs

    async def call(self, name: str, params: dict[str, Any]) -> ToolResult:
        from pi_hindsight.operations import memory_actions  # noqa: PLC0415 - at the first call

        try:
            if name == MEMORY_TOOL:
                action = parse_action(params, memory_actions.MEMORY_ACTIONS)
                operation = memory_actions.MEMORY_ACTIONS[action]
                args = {key: value for key, value in params.items() if key != "action"}
            elif name == RETAIN_GLOBAL_TOOL:
                operation, args = memory_actions.RETAIN_GLOBAL, params
            else:
                return ToolResult(f"unknown tool {name!r}", is_error=True)
            result = await operation(self.context, operation.parse(args))
            return ToolResult(result.as_text(), result.to_json())
        except PiHindsightError as error:
            return ToolResult(f"{name}: {describe_failure(error)}", is_error=True)
