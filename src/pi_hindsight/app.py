"""The composition root: one config resolution, then the stores, the backend and the engine — for
the sidecar (``pi-hindsight serve``) and every CLI command alike. Nothing else wires these.

Config for a directory is always resolved the same way: the user file, plus the allowlisted keys
of the repository file at the directory's project root (``identity.resolve_identity``), plus the
environment (``config.load_config``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pi_hindsight.backend import MemoryBackend, open_backend
from pi_hindsight.config import LoadedConfig, Settings, load_config
from pi_hindsight.credentials import RotatingKey
from pi_hindsight.engine.connection import BackendFactory, HindsightConnection, ServerAccess
from pi_hindsight.engine.engine import ContextReader, MemoryEngine
from pi_hindsight.engine.local_stores import LocalState
from pi_hindsight.engine.retaining import Retainer
from pi_hindsight.engine.shared import SharedParts
from pi_hindsight.engine.types import HostFacts
from pi_hindsight.identity import resolve_identity
from pi_hindsight.paths import state_dir as default_state_dir

if TYPE_CHECKING:
    from pi_hindsight.hosts.pi.host import PiHost

# Notes written from a terminal (`pi-hindsight memory retain …`) are the CLI's own documents.
CLI_HOST = HostFacts(name="cli", label="pi-hindsight command-line")


def project_root(cwd: Path) -> Path:
    """The directory whose repository file applies to a session started in ``cwd``."""
    return resolve_identity(cwd).root


def load_settings(state_dir: Path, cwd: Path | None = None) -> LoadedConfig:
    """The effective config for a session started in ``cwd`` (or without a project)."""
    return load_config(state_dir, project_root=None if cwd is None else project_root(cwd))


def base_url_resolver(state_dir: Path) -> Callable[[Settings], str | None]:
    """The server to use: ``hindsight.baseUrl``, else the one ``pi-hindsight server start``
    recorded in this state directory (and still running)."""

    def resolve(settings: Settings) -> str | None:
        if settings.hindsight.base_url:
            return settings.hindsight.base_url
        from pi_hindsight.launcher import recorded_base_url  # noqa: PLC0415 - only when needed

        return recorded_base_url(state_dir)

    return resolve


def make_backend_factory(state_dir: Path) -> BackendFactory:
    """The official client for a session's server, imported off the event loop (~0.8 s). Its
    API key is asked for before every call: a key rotated in the user config or its key file
    is used from the next request on (``credentials.RotatingKey``)."""

    async def create(access: ServerAccess) -> MemoryBackend:
        key = RotatingKey(state_dir, await asyncio.to_thread(load_config, state_dir))
        return await asyncio.to_thread(
            open_backend, access.base_url, api_key=key, ca_file=access.ca_file
        )

    return create


def build_shared(
    host: HostFacts, state_dir: Path, *, backend_factory: BackendFactory | None = None
) -> SharedParts:
    """Stores, connection and retainer for a process serving many sessions of ``host`` (the
    Claude Code daemon): pass them to every ``build_engine`` there; ``close_shared`` ends them."""
    state = LocalState(state_dir)
    factory = backend_factory or make_backend_factory(state_dir)
    connection = HindsightConnection(factory, base_url_resolver(state_dir))
    return SharedParts(state, connection, Retainer(state, host))


def build_engine(
    host: HostFacts,
    state_dir: Path | None = None,
    *,
    context_reader: ContextReader | None = None,
    passive: bool = False,
    shared: SharedParts | None = None,
) -> MemoryEngine:
    """The engine for one host session. ``passive`` for a command that only looks (``status``):
    nothing is retained or recorded from it. ``shared``: the process's stores, connection and
    retainer (``build_shared``) instead of the engine's own."""
    directory = default_state_dir() if state_dir is None else state_dir
    return MemoryEngine(
        host=host,
        state_dir=directory,
        config_loader=lambda root: load_config(directory, project_root=root),
        backend_factory=make_backend_factory(directory),
        base_url_resolver=base_url_resolver(directory),
        context_reader=context_reader,
        passive=passive,
        shared=shared,
    )


def pi_host(state_dir: Path) -> PiHost:
    """The sidecar's dispatcher: the Pi host over one engine."""
    from pi_hindsight.hosts.pi.host import PiHost  # noqa: PLC0415 - the sidecar's own wiring
    from pi_hindsight.hosts.pi.naming import PI_HOST  # noqa: PLC0415
    from pi_hindsight.hosts.pi.session_file import read_visible_context  # noqa: PLC0415

    return PiHost(build_engine(PI_HOST, state_dir, context_reader=read_visible_context))
