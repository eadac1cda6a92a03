"""pi-hindsight: persistent memory for the Pi coding agent, backed by Hindsight.

Hindsight owns memory knowledge (retain, recall, reflect, mental models); this package owns the
integration: scopes and consent, delivery of recalled memory into Pi, a durable retain outbox and
an evidence ledger of what memory reached the model.
"""

from pi_hindsight.errors import PiHindsightError

__version__ = "0.1.0"

__all__ = ["PiHindsightError", "__version__"]
