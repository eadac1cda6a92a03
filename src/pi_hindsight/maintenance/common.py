"""What the maintenance operations share: a field change, and their results as JSON data."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: Any
    after: Any


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
