"""What the maintenance operations share: the bank they act on, a field change, and their
results as JSON data."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pi_hindsight.backend.interface import MemoryBackend
from pi_hindsight.errors import BankNotFound


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: Any
    after: Any


async def require_bank(backend: MemoryBackend, bank: str, *, timeout: float) -> None:
    """Refuse a bank that does not exist (through the listing, which cannot be fooled:
    several endpoints answer for a missing bank, and some would create it)."""
    if not await backend.bank_exists(bank, timeout=timeout):
        raise BankNotFound(
            f"bank {bank!r} does not exist",
            hint="a bank is created by the first agent session in a registered location; "
            "maintenance never creates one",
        )


def as_json(value: Any) -> Any:
    """A result (frozen dataclasses, tuples, mappings) as plain JSON data, properties included
    where they summarise (``changes_anything``, ``can_apply``, counts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in getattr(value, "json_properties", ()):
            data[name] = as_json(getattr(value, name))
        return data
    if isinstance(value, Mapping):
        return {str(key): as_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(item) for item in value]
    return value
