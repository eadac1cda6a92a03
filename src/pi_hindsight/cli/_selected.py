"""The bank a maintenance command acts on: the one selected for ``--cwd``, resolved as a Pi
session started there would resolve it (registered scope, or the User bank with ``--user``)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pi_hindsight.backend import MemoryBackend, open_backend
from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.config import Settings
from pi_hindsight.engine.scope import SESSION_PLACEHOLDER, USER_SCOPE_TAGS, Scope, resolve_scope
from pi_hindsight.errors import BackendError, ConfigError, ScopeError
from pi_hindsight.stores.catalog import Catalog

if TYPE_CHECKING:
    from pi_hindsight.operations.bank_move import MoveContext
    from pi_hindsight.operations.bank_upkeep import BankContext
    from pi_hindsight.operations.base import Operation, OperationResult

T = TypeVar("T")
R = TypeVar("R", bound="OperationResult")
F = TypeVar("F", bound=Callable[..., Any])


def cwd_option(function: F) -> F:
    return click.option(
        "--cwd",
        type=click.Path(path_type=Path, exists=True, file_okay=False),
        default=".",
        help="Act on the bank selected for this directory (default: here).",
    )(function)


def user_option(function: F) -> F:
    return click.option(
        "--user",
        "user_bank",
        is_flag=True,
        help="Act on the User bank (scope:user) instead of the project scope.",
    )(function)


def apply_option(function: F) -> F:
    return click.option(
        "--apply", "apply", is_flag=True, help="Make the change (default: a dry run)."
    )(function)


@dataclass(frozen=True)
class Selected:
    state_dir: Path
    settings: Settings
    scope_id: str
    bank: str
    tags: tuple[str, ...]
    base_url: str

    @property
    def timeout(self) -> float:
        return self.settings.timeout_ms / 1000


def scope_for(state_dir: Path, cwd: Path, settings: Settings) -> tuple[str, str, tuple[str, ...]]:
    """(scope id, bank, tags) of the registered scope for ``cwd``; refuses an unregistered one."""
    catalog = Catalog(state_dir)
    try:
        resolution = resolve_scope(cwd, settings, catalog)
    finally:
        catalog.close()
    scope = resolution.registered
    if scope is None:
        raise ScopeError(
            f"{cwd} is not registered for memory, so it has no selected bank",
            hint=f"register it first: `pi-hindsight scope register {cwd}`",
        )
    if SESSION_PLACEHOLDER in scope.bank_id:
        raise ConfigError(
            f"scope {scope.scope_id} uses one bank per session ({scope.bank_id})",
            hint="maintenance acts on one bank; this scope has none to select",
        )
    return scope.scope_id, scope.bank_id, scope.tags


def select(state_dir: Path | None, cwd: Path, *, user_bank: bool) -> Selected:
    from pi_hindsight.app import base_url_resolver, load_settings  # noqa: PLC0415 - fast --help

    directory = resolve_state_dir(state_dir)
    cwd = cwd.resolve()
    settings = load_settings(directory, cwd).settings
    scope_id, bank, tags = scope_for(directory, cwd, settings)
    if user_bank:
        if not settings.user_bank_active:
            raise ConfigError(
                f"the User bank is off in profile {settings.profile!r}",
                hint="choose a profile with the User bank: `pi-hindsight setup --profile "
                "project+user`",
            )
        scope_id, bank, tags = "user", settings.banks.user.bank_id, USER_SCOPE_TAGS
    base_url = base_url_resolver(directory)(settings)
    if base_url is None:
        raise BackendError(
            "no Hindsight server is configured", hint="run `pi-hindsight server start`"
        )
    return Selected(directory, settings, scope_id, bank, tuple(tags), base_url)


def run(selected: Selected, call: Callable[[MemoryBackend], Awaitable[T]]) -> T:
    """Run ``call`` with a backend for the selected server, and close it."""

    async def main() -> T:
        hindsight = selected.settings.hindsight
        backend = open_backend(
            selected.base_url, api_key=hindsight.api_key, ca_file=hindsight.ca_file
        )
        try:
            return await call(backend)
        finally:
            await backend.close()

    return asyncio.run(main())


class SelectedContext:
    """The selected bank as the maintenance operations' context (``operations.bank_upkeep``,
    ``operations.bank_move``): its backend is returned as is — maintenance never creates a bank,
    it refuses a missing one."""

    def __init__(self, selected: Selected, backend: MemoryBackend) -> None:
        self._selected = selected
        self._backend = backend

    @property
    def settings(self) -> Settings:
        return self._selected.settings

    def scope(self) -> Scope:
        selected = self._selected
        return Scope(selected.scope_id, selected.scope_id, selected.bank, selected.tags)

    def off_reason(self) -> str:
        return ""

    async def backend_with_bank(self, bank: str, mission: str) -> MemoryBackend:
        return self._backend

    async def unfinished_retains(self, bank: str, tags: tuple[str, ...]) -> int:
        """Outbox items of the scope ``(bank, tags)`` not yet confirmed by Hindsight."""
        return await asyncio.to_thread(_unfinished_retains, self._selected.state_dir, bank, tags)


def _unfinished_retains(state_dir: Path, bank: str, tags: tuple[str, ...]) -> int:
    from pi_hindsight.stores.outbox import UNFINISHED, Outbox  # noqa: PLC0415 - rarely used

    store = Outbox(state_dir)
    try:
        items = store.items(states=UNFINISHED, limit=100_000)
    finally:
        store.close()
    return sum(1 for item in items if item.bank_id == bank and set(item.retain.tags) == set(tags))


def run_operation(
    selected: Selected,
    operation: Operation[MoveContext, Any, R] | Operation[BankContext, Any, R],
    params: dict[str, Any],
    as_json: bool,
) -> R:
    """Run a maintenance operation on the selected bank; print its text or its JSON."""
    args = operation.parse(params)

    async def call(backend: MemoryBackend) -> R:
        return await operation(SelectedContext(selected, backend), args)

    result = run(selected, call)
    if as_json:
        echo_json(result.to_json())
    else:
        click.echo(result.render())  # a terminal: nothing trimmed
    return result


def on_selected_bank(*, user: bool = True) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command ``--cwd``, ``--user`` (unless ``user=False``), ``--state-dir`` and
    ``--json``; it is called with the bank those select (``selected``) and ``as_json``."""

    def decorate(function: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(function)
        def command(
            *, cwd: Path, state_dir: Path | None, user_bank: bool = False, **options: Any
        ) -> None:
            function(select(state_dir, cwd, user_bank=user_bank), **options)

        decorated = json_option(state_dir_option(command))
        return cwd_option(user_option(decorated) if user else decorated)

    return decorate
