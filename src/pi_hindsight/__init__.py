"""pi-hindsight: persistent memory for the Pi coding agent, backed by Hindsight.

Hindsight owns memory knowledge (retain, recall, reflect, mental models); this package owns the
integration: scopes and consent, delivery of recalled memory into Pi, a durable retain outbox and
an evidence ledger of what memory reached the model.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["PiHindsightError", "__version__"]

TYPE_CHECKING = False  # not ``typing``'s: importing it costs the hook more than all else
if TYPE_CHECKING:
    from typing import Any

    from pi_hindsight.errors import PiHindsightError


def __getattr__(name: str) -> Any:
    """``PiHindsightError`` on first use: the Claude Code hook imports this package on every
    event and needs nothing of it (PEP 562)."""
    if name == "PiHindsightError":
        from pi_hindsight.errors import PiHindsightError  # noqa: PLC0415

        return PiHindsightError
    raise AttributeError(f"module 'pi_hindsight' has no attribute {name!r}")
