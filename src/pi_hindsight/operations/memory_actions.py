"""The memory tool's actions, in the order the tool lists them, and the User-bank note (its own
tool). The CLI's ``memory`` commands and the agent's tools both run these definitions."""

from __future__ import annotations

from typing import Any

from pi_hindsight.operations.bank_upkeep import MENTAL_MODELS, MISSION
from pi_hindsight.operations.base import Operation
from pi_hindsight.operations.memory_fixes import CORRECT, CORRECTIONS, FORGET, LIFT_CORRECTION
from pi_hindsight.operations.memory_notes import RETAIN, RETAIN_GLOBAL
from pi_hindsight.operations.memory_search import RECALL, REFLECT
from pi_hindsight.operations.memory_status import REFRESH_MEMO, STATUS

AnyOperation = Operation[Any, Any, Any]

MEMORY_ACTIONS: dict[str, AnyOperation] = {
    operation.name: operation
    for operation in (
        STATUS,
        RECALL,
        REFLECT,
        REFRESH_MEMO,
        RETAIN,
        MISSION,
        MENTAL_MODELS,
        FORGET,
        CORRECT,
        CORRECTIONS,
    )
}

__all__ = ["LIFT_CORRECTION", "MEMORY_ACTIONS", "RETAIN_GLOBAL", "AnyOperation"]
