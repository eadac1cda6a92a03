"""What every operation shares: typed arguments in, a typed result out (one text renderer, one
JSON form), and the session context the operations need (``engine.MemoryEngine`` provides it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from pi_hindsight.errors import BackendError, PiHindsightError, validation_problems

if TYPE_CHECKING:
    from pi_hindsight.backend import MemoryBackend
    from pi_hindsight.config import Settings
    from pi_hindsight.engine.scope import Scope
    from pi_hindsight.engine.status import EngineStatus
    from pi_hindsight.engine.types import HostFacts
    from pi_hindsight.stores.handles import AsyncCatalog

OUTPUT_MAX_CHARS = 8_000


class OperationInputError(PiHindsightError):
    """An operation was called with arguments that cannot work; the message says why."""


class OperationArgs(BaseModel):
    """An operation's arguments: camelCase on the wire (``recordId``), snake_case in Python.
    ``defer_build``: validators are built at the first call, not at start-up."""

    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, defer_build=True, alias_generator=to_camel
    )


class OperationResult(BaseModel):
    """An operation's result. ``render`` is its one text form; ``to_json`` its one JSON form."""

    model_config = ConfigDict(populate_by_name=True, defer_build=True, alias_generator=to_camel)

    def render(self) -> str:
        raise NotImplementedError

    def as_text(self) -> str:
        """The rendered text, bounded to stay readable (for a model and a terminal alike)."""
        return bounded(self.render())

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


C = TypeVar("C")
A = TypeVar("A", bound=OperationArgs)
R = TypeVar("R", bound=OperationResult)


@dataclass(frozen=True)
class Operation(Generic[C, A, R]):
    """One user-facing operation: its name (a tool action's name), a one-line summary (the tool's
    action description), its argument and result models, and what it does with a context ``C``
    (what it needs: a session's :class:`OperationContext`, a selected bank, the outbox)."""

    name: str
    summary: str
    args: type[A]
    result: type[R]
    run: Callable[[C, A], Awaitable[R]]

    def parse(self, params: Mapping[str, Any]) -> A:
        """Validate ``params``; a bad value is an :class:`OperationInputError` naming it."""
        try:
            return self.args.model_validate(dict(params))
        except ValidationError as error:
            raise OperationInputError(self._problems(error)) from error

    async def __call__(self, context: C, args: A) -> R:
        return await self.run(context, args)

    def _problems(self, error: ValidationError) -> str:
        needed = [
            str(item["loc"][0])
            for item in error.errors()
            if len(item["loc"]) == 1
            and (
                item["type"] == "missing"
                or (
                    item["type"] == "string_too_short"
                    and item.get("ctx", {}).get("min_length") == 1
                )
            )
        ]
        if needed:
            return f"action {self.name!r} needs a non-empty " + ", ".join(map(repr, needed))
        return f"invalid arguments: {validation_problems(error, 'arguments')}"


def describe_failure(error: PiHindsightError) -> str:
    """What a failed operation says, to a model or a person: a bad argument as itself, Hindsight's
    trouble as such, anything else with its hint."""
    if isinstance(error, OperationInputError):
        return str(error)
    if isinstance(error, BackendError):
        return f"Hindsight failed: {error.describe()}"
    return error.describe()


def bounded(text: str) -> str:
    if len(text) <= OUTPUT_MAX_CHARS:
        return text
    return text[: OUTPUT_MAX_CHARS - 60].rstrip() + "\n… [output trimmed to stay readable]"


class OperationContext(Protocol):
    """What the operations need from the session, and nothing more: the scope and settings, the
    backend (with a bank ready), the catalogue, the outbox for notes, the memo cache, the status."""

    @property
    def settings(self) -> Settings: ...

    @property
    def host(self) -> HostFacts:
        """Who acts (the lifecycle log's actor): the host's name, or "cli"."""
        ...

    def scope(self) -> Scope | None: ...

    def off_reason(self) -> str: ...

    async def backend(self) -> MemoryBackend: ...

    async def backend_with_bank(self, bank: str, mission: str) -> MemoryBackend:
        """The backend, with ``bank`` created (with its mission) if it does not exist yet."""
        ...

    async def open_catalog(self) -> AsyncCatalog:
        """The catalogue's corrections, lifecycle log and operations, as awaitable methods."""
        ...

    async def enqueue_note(
        self,
        *,
        bank_id: str,
        tags: tuple[str, ...],
        content: str,
        context: str | None,
        kind: str,
        force: bool = False,
    ) -> str: ...

    def retain_paused(self) -> str | None:
        """Why automatic retain is paused (the token budget), or None."""
        ...

    def forget_memo(self) -> None: ...

    async def status(self) -> EngineStatus: ...


def require_scope(context: OperationContext) -> Scope:
    scope = context.scope()
    if scope is None:
        raise OperationInputError(f"memory is off here: {context.off_reason()}")
    return scope
