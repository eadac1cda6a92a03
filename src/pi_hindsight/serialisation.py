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

import functools
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.alias_generators import to_camel

# The validation context that makes a read tolerant (see :func:`load`).
_TOLERANT = "tolerant"


def is_tolerant(info: ValidationInfo) -> bool:
    """Whether this validation is a tolerant read (:meth:`SnakeRecord.load`)."""
    return isinstance(info.context, dict) and bool(info.context.get(_TOLERANT))


@functools.cache
def _fields_by_key(model: type[BaseModel]) -> dict[str, str]:
    """Each field's name by every key that may carry it (its name, its alias)."""
    found = {name: name for name in model.model_fields}
    found.update({field.alias: name for name, field in model.model_fields.items() if field.alias})
    return found


class SnakeRecord(BaseModel):
    """A frozen record whose JSON names are its Python names."""

    # A key no field has is a mistake in code ("forbid"); in a file it is a newer version's
    # field, dropped by a tolerant read (:meth:`load`).
    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """The record's JSON form (what is written to disk or sent)."""
        return self.model_dump(mode="json", by_alias=True)

    @model_validator(mode="wrap")
    @classmethod
    def _tolerant_read(
        cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo
    ) -> Self:
        """A tolerant read (:meth:`load`) drops keys no field has and leaves a field that does
        not validate at its default; a bad required field still fails the record. One check per
        record, not per field: constructing a record in code pays nothing for it (issue 19)."""
        if not (isinstance(data, dict) and is_tolerant(info)):  # a record passes as it is
            return handler(data)
        fields = _fields_by_key(cls)
        data = {key: value for key, value in data.items() if key in fields}
        for _ in range(len(fields) + 1):  # each retry drops at least one key
            try:
                return handler(data)
            except ValidationError as error:
                bad = {problem["loc"][0] for problem in error.errors() if problem["loc"]}
                named = {fields.get(key) for key in bad if isinstance(key, str)}
                if not bad or not bad.issubset(data) or None in named:
                    raise
                if any(cls.model_fields[name].is_required() for name in named if name):
                    raise
                data = {key: value for key, value in data.items() if key not in bad}
        return handler(data)  # pragma: no cover - the loop returns or raises first

    def but(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated as a constructed record is (``model_copy`` is not).
        The fields are read from ``__dict__`` (the record's fields, ``extra="forbid"``):
        ``dict(self)`` walks them through a generator, a third of the copy (issue 19)."""
        return self.model_validate({**self.__dict__, **changes})

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
