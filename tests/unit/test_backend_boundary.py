"""One Hindsight boundary (issue 11): the official client's exceptions are caught in one place,
only ``backend/`` imports the client, what callers import is cheap, ``HindsightBackend``
implements exactly the ``MemoryBackend`` protocol, and ``ScriptedBackend`` scripts failures over
a real backend (no server needed here: nothing listens on the port it talks to)."""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pi_hindsight
from pi_hindsight.backend import MemoryBackend, open_backend
from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.errors import BackendRejected, BackendUnavailable
from tests.plugins.scripted_backend import PROTOCOL_METHODS, ScriptedBackend

SRC = Path(pi_hindsight.__file__).parent
FOREIGN = ("aiohttp", "hindsight_client_api", "hindsight_client")
FOREIGN_ERRORS = ("aiohttp", "hindsight_client_api.exceptions")
CHEAP = (
    "pi_hindsight.backend",
    "pi_hindsight.backend.interface",
    "pi_hindsight.backend.resources",
    "pi_hindsight.maintenance.common",
    "pi_hindsight.maintenance.model_changes",
    "pi_hindsight.maintenance.missions",
    "pi_hindsight.maintenance.move",
    "pi_hindsight.maintenance.plain_text",
    "pi_hindsight.maintenance.template_import",
)


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(f"{package}.") for package in packages)


def _foreign_imports(tree: ast.AST, packages: tuple[str, ...]) -> dict[str, str]:
    """Names bound by imports from ``packages`` -> the module they come from."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _within(alias.name, packages):
                    bound[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _within(node.module, packages) or _within(full, packages):
                    bound[alias.asname or alias.name] = full
    return bound


def _sources() -> dict[str, ast.AST]:
    return {
        path.relative_to(SRC).as_posix(): ast.parse(path.read_text("utf-8"))
        for path in sorted(SRC.rglob("*.py"))
    }


def test_only_the_backend_imports_the_official_client() -> None:
    importers = {name for name, tree in _sources().items() if _foreign_imports(tree, FOREIGN)}
    assert importers, "the test found no import of the client at all"
    assert {name for name in importers if not name.startswith("backend/")} == set()
    cheap = {"backend/__init__.py", "backend/interface.py", "backend/resources.py"}
    assert importers.isdisjoint(cheap)


def test_one_place_catches_the_clients_exceptions() -> None:
    places = set()
    for name, tree in _sources().items():
        bound = _foreign_imports(tree, FOREIGN_ERRORS)
        if bound:
            places.add(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                named = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                if named & set(bound):
                    places.add(name)
    assert places == {"backend/_client.py"}


def test_what_callers_import_does_not_import_the_client() -> None:
    """The sidecar answers ``ready`` before the ~0.8 s client import; maintenance and the CLI
    get the backend passed in, so importing them must not pay for it either."""
    code = (
        "import importlib, sys\n"
        f"for name in {CHEAP!r}: importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FOREIGN!r}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC.parent)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def _public(cls: type) -> dict[str, str]:
    return {
        name: str(inspect.signature(getattr(cls, name)))
        for name in PROTOCOL_METHODS
        if hasattr(cls, name)
    }


def test_the_hindsight_backend_implements_the_whole_protocol() -> None:
    assert len(PROTOCOL_METHODS) > 20  # engine, tools, maintenance and CLI: one protocol
    assert _public(HindsightBackend) == _public(MemoryBackend)
    assert not hasattr(HindsightBackend, "api_client")
    assert not hasattr(HindsightBackend, "guarded")


def test_scripted_failures_come_in_order_and_the_rest_reaches_the_real_backend() -> None:
    async def scenario() -> list[str]:
        real = open_backend("http://127.0.0.1:1")  # nothing listens there
        scripted = ScriptedBackend(real)
        for name in PROTOCOL_METHODS:
            assert callable(getattr(scripted, name))
        scripted.fail("health", BackendRejected("scripted", status=400), after=1, times=2)
        seen = []
        try:
            for _ in range(4):
                try:
                    await scripted.health(timeout=5)
                except (BackendRejected, BackendUnavailable) as error:
                    seen.append(type(error).__name__)
        finally:
            await scripted.close()
        assert scripted.calls["health"] == 4
        return seen

    assert asyncio.run(scenario()) == [
        "BackendUnavailable",  # the real backend: cannot reach the server
        "BackendRejected",
        "BackendRejected",
        "BackendUnavailable",
    ]


def test_a_script_for_a_method_the_protocol_lacks_is_refused() -> None:
    async def scenario() -> None:
        scripted = ScriptedBackend(open_backend("http://127.0.0.1:1"))
        try:
            with pytest.raises(ValueError, match="not a MemoryBackend method"):
                scripted.fail("delete_documents", BackendUnavailable("x"))
            with pytest.raises(AttributeError):
                _ = scripted.api_client
        finally:
            await scripted.close()

    asyncio.run(scenario())
