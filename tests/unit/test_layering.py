"""The shape of the package (issue 11): the core knows no host, nothing imports back up the
layers, there are no import cycles, and no module grows past the soft cap."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "pi_hindsight"
CORE = ("engine", "stores", "backend", "tools", "legacy")
# What only a Pi host may know: its entry and message shapes, its events and its document names.
PI_NAMES = re.compile(
    r"\bPi\b|pi-session|custom_message|sessionManager|before_agent_start|agent_end|"
    r"Pi coding session|\"source\": \"pi\""
)
SOFT_CAP_LINES = 650  # ~600 lines, with room for a docstring or two


def _modules() -> Iterator[Path]:
    yield from (path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts)


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every pi_hindsight module ``path`` imports, at any level (lazy imports included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("pi_hindsight")}


def _layer(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


@pytest.mark.parametrize("layer", CORE)
def test_the_core_imports_nothing_from_hosts_rpc_cli_or_the_composition_root(layer: str) -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            name
            for name in _imports(path)
            if name.startswith(("pi_hindsight.hosts", "pi_hindsight.rpc", "pi_hindsight.cli"))
            or name == "pi_hindsight.app"
        )
        for path in (PACKAGE / layer).rglob("*.py")
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_stores_and_backend_import_no_engine_and_the_backend_no_store() -> None:
    offenders: dict[str, list[str]] = {}
    for layer, forbidden in (
        ("stores", ("pi_hindsight.engine", "pi_hindsight.tools")),
        ("backend", ("pi_hindsight.engine", "pi_hindsight.tools", "pi_hindsight.stores")),
    ):
        for path in (PACKAGE / layer).rglob("*.py"):
            names = sorted(name for name in _imports(path) if name.startswith(forbidden))
            if names:
                offenders[str(path.relative_to(PACKAGE))] = names
    assert offenders == {}


@pytest.mark.parametrize("layer", ("engine", "stores", "backend"))
def test_the_core_names_nothing_of_pi(layer: str) -> None:
    """Everything Pi — its message and entry shapes, its events, its document names and retain
    wording — lives in hosts/pi/; the engine takes host facts as typed input."""
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in (PACKAGE / layer).rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if PI_NAMES.search(line)
    ]
    assert found == []


def test_there_are_no_import_cycles() -> None:
    """Module-level imports only (a function-level import is how a cycle is broken on purpose,
    and ``TYPE_CHECKING`` imports never run)."""
    graph: dict[str, set[str]] = {}
    modules = {_name(path): path for path in _modules()}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                candidates = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            targets.update(candidate for candidate in candidates if candidate in modules)
        graph[name] = targets - {name}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    # A package importing its own submodule (re-exports) is not a cycle worth the name.
    real = [cycle for cycle in cycles if not all(c.startswith(cycle[0]) for c in cycle)]
    assert real == []


def test_no_module_grows_past_the_soft_cap() -> None:
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in _modules()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > SOFT_CAP_LINES
    }
    assert long == {}
