"""The one way a record becomes JSON and comes back (docs/adr/0010-one-serialisation-mechanism.md).

Every record that crosses a boundary (the wire, a hook, the daemon, status) or reaches disk is
a pydantic model built on one of these bases:

- :class:`Record`: camelCase JSON names (``record_ids`` ↔ ``recordIds``), frozen. ``to_json``
  is ``model_dump(mode="json", by_alias=True)``; reading is ``model_validate``.
- :class:`SnakeRecord`: the same, with the Python names as JSON names (``server.json``, whose
  keys have always been snake_case).

Files outlive versions, so a record read back from a host's file or our own is read
*tolerantly* (:func:`load`): a field that does not validate is left at its default and logged
nowhere (the file is ours or the host's, never an attacker's input that deserves an error),
while a missing or bad required field fails the whole record. Constructing a record in code is
strict, as usual. Schemas are built on first use (``defer_build``), so defining a record costs
the start-up path next to nothing.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

# The validation context that makes a read tolerant (see :func:`load`).
_TOLERANT = "tolerant"


def is_tolerant(info: ValidationInfo) -> bool:
    """Whether this validation is a tolerant read (:meth:`SnakeRecord.load`)."""
    return isinstance(info.context, dict) and bool(info.context.get(_TOLERANT))


class SnakeRecord(BaseModel):
    """A frozen record whose JSON names are its Python names."""

    # A key no field has is a mistake in code ("forbid"); in a file it is a newer version's
    # field, dropped by a tolerant read (:meth:`load`).
    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form (what is written to disk or sent)."""
        return self.model_dump(mode="json", by_alias=True)

    @field_validator("*", mode="wrap")
    @classmethod
    def _default_when_tolerant(
        cls, value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> object:
        try:
            return handler(value)
        except ValidationError:
            field = cls.model_fields.get(info.field_name or "")
            if not is_tolerant(info) or field is None:
                raise
            if field.is_required():
                raise
            return field.get_default(call_default_factory=True, validated_data=None)

    def but(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated as a constructed record is (``model_copy`` is not)."""
        return self.model_validate({**dict(self), **changes})

    @model_validator(mode="before")
    @classmethod
    def _drop_unknown_when_tolerant(cls, data: object, info: ValidationInfo) -> object:
        if not (is_tolerant(info) and isinstance(data, dict)):
            return data
        known = set(cls.model_fields) | {
            field.alias for field in cls.model_fields.values() if field.alias
        }
        return {key: value for key, value in data.items() if key in known}

    @classmethod
    def load(cls, data: object) -> Self:
        """Read a record back tolerantly; ValidationError when it has no usable required field."""
        return cls.model_validate(data, context={_TOLERANT: True})

    @classmethod
    def load_or_none(cls, data: object) -> Self | None:
        """:meth:`load`, or None when ``data`` is no such record."""
        try:
            return cls.load(data)
        except ValidationError:
            return None


class Record(SnakeRecord):
    """A frozen record with camelCase JSON names (``populate_by_name``: code uses either)."""

    model_config = ConfigDict(
        frozen=True,
        defer_build=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
    )
