"""The shape of the package (issues 11 and 19): the core knows no host, nothing imports back up
the layers, nothing outside the engine reaches into it, there are no import cycles, and no
module grows past 600 lines."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "pi_hindsight"
CORE = ("engine", "stores", "backend", "operations", "tools", "legacy")
# What only a Pi host may know: its entry and message shapes, its events and its document names.
PI_NAMES = re.compile(
    r"\bPi\b|pi-session|custom_message|sessionManager|before_agent_start|agent_end|"
    r"Pi coding session|\"source\": \"pi\""
)
# Words only a host adapter may say, in code (names and strings; comments and docstrings may
# mention a host to explain why).
HOST_WORDS = re.compile(
    rf"{PI_NAMES.pattern}|\bClaude\b|claude[-_]code|\bsessionFile\b|\bcustomType\b"
)
BELOW_HOSTS = (
    "engine",
    "stores",
    "backend",
    "operations",
    "tools",
    "maintenance",
    "redaction",
    "legacy",
)
# Documented exceptions, each with its reason.
HOST_WORD_EXCEPTIONS = {
    # Reads the TypeScript Pi extension's evidence files and config keys: Pi's names by nature.
    "legacy/evidence_formats.py",
}
MAX_LINES = 600
# The engine's insides: a host, command, tool or the CLI asks the engine's named methods.
ENGINE_INTERNALS = frozenset({"state", "recorder", "session", "retainer", "connection"})
# Where the store thread is owned: everything else awaits ``stores/handles.py`` or the engine.
STORE_THREAD_OWNERS = ("engine/", "stores/runner.py", "stores/handles.py")


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


def _top_level_imports(tree: ast.Module) -> Iterator[ast.stmt]:
    """Module-level imports, ``TYPE_CHECKING`` ones included (a cycle of types is a cycle)."""
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from node.body
        else:
            yield node


def test_there_are_no_import_cycles() -> None:
    """Module-level and ``TYPE_CHECKING`` imports (a function-level import is how a cycle is
    broken on purpose)."""
    graph: dict[str, set[str]] = {}
    modules = {_name(path): path for path in _modules()}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets: set[str] = set()
        for node in _top_level_imports(tree):
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
    # (``configs`` would not be inside ``config``: compare whole dotted parts.)
    real = [
        cycle
        for cycle in cycles
        if not all(c == cycle[0] or c.startswith(f"{cycle[0]}.") for c in cycle)
    ]
    assert real == []


def test_no_module_grows_past_600_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in _modules()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _reaches_engine(node: ast.expr) -> bool:
    """``engine.x``, ``self.engine.x``, ``state.engine.x``: an expression naming an engine."""
    if isinstance(node, ast.Name):
        return node.id == "engine"
    return isinstance(node, ast.Attribute) and node.attr == "engine"


# Each host adapter has the same parts under the same names (hosts/<host>/host.py, install.py,
# naming.py): the one place two modules may share a name.
HOST_PARALLEL_NAMES = frozenset({"host.py", "install.py", "naming.py"})


def test_no_two_modules_share_a_name() -> None:
    """A module's name says what it holds: two ``render.py`` or ``state.py`` are two things
    under one word (a reader, a traceback and a grep cannot tell them apart)."""
    by_name: dict[str, list[str]] = {}
    for path in _modules():
        if path.name != "__init__.py":
            by_name.setdefault(path.name, []).append(path.relative_to(PACKAGE).as_posix())
    shared = {
        name: sorted(paths)
        for name, paths in by_name.items()
        if len(paths) > 1
        and not (name in HOST_PARALLEL_NAMES and all(p.startswith("hosts/") for p in paths))
    }
    assert shared == {}


def test_nothing_outside_the_engine_reaches_into_it() -> None:
    """Hosts, commands, tools and the CLI use the engine's named methods (``outbox_health()``,
    ``ledger_page()``, ``is_registered()``, …): never its state, recorder, session, retainer or
    connection, nor a private name; and only the engine and the store handles use the store
    thread (``run_store``) — everyone else awaits a method."""
    found: list[str] = []
    for path in _modules():
        relative = _relative(path)
        if relative.startswith("engine/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and _reaches_engine(node.value)
                and (node.attr in ENGINE_INTERNALS or node.attr.startswith("_"))
            ):
                found.append(f"{relative}:{node.lineno}: engine.{node.attr}")
            if not relative.startswith(STORE_THREAD_OWNERS):
                named = (
                    node.id
                    if isinstance(node, ast.Name)
                    else node.name
                    if isinstance(node, ast.alias)
                    else None
                )
                if named is not None and named.rpartition(".")[2] == "run_store":
                    found.append(f"{relative}:{getattr(node, 'lineno', 0)}: run_store")
    assert found == []


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


@pytest.mark.parametrize("layer", BELOW_HOSTS)
def test_no_host_words_below_the_hosts(layer: str) -> None:
    """Code below ``hosts/`` names no host — neither Pi nor Claude Code — in its names or
    strings (comments and docstrings may, to say why); the exceptions are documented above."""
    found: list[str] = []
    for path in (PACKAGE / layer).rglob("*.py"):
        if _relative(path) in HOST_WORD_EXCEPTIONS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = "" if id(node) in skip else node.value
            elif isinstance(node, ast.Name):
                text = node.id
            elif isinstance(node, ast.Attribute):
                text = node.attr
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                text = node.name
            else:
                continue
            if HOST_WORDS.search(text):
                found.append(f"{_relative(path)}:{getattr(node, 'lineno', 0)}: {text[:80]!r}")
    assert found == []


# Adapters call operations (issue 19, item 2): a host, a tool or a command reaches the
# maintenance code through ``operations/``; these reach it for what no other surface offers.
MAINTENANCE_OUTSIDE_OPERATIONS = {
    "cli/templates_cmd.py",  # the template names, for click's choice
}
# What the tool adapter may import: the operations it adapts and the errors it reports.
TOOL_IMPORTS = ("pi_hindsight.operations", "pi_hindsight.errors", "pi_hindsight.tools")


def test_adapters_reach_maintenance_only_through_operations() -> None:
    found = {
        _relative(path): sorted(
            name for name in _imports(path) if name.startswith("pi_hindsight.maintenance")
        )
        for path in _modules()
        if not _relative(path).startswith(("operations/", "maintenance/"))
        and _relative(path) not in MAINTENANCE_OUTSIDE_OPERATIONS
    }
    assert {path: names for path, names in found.items() if names} == {}


def test_the_tools_are_an_adapter_over_the_operations() -> None:
    """``tools/`` turns a call into an operation's arguments and its result into a tool result;
    what an action does lives in ``operations/`` (the CLI and Pi's commands run the same)."""
    found = {
        _relative(path): sorted(
            name for name in _imports(path) if not name.startswith(TOOL_IMPORTS)
        )
        for path in (PACKAGE / "tools").rglob("*.py")
    }
    assert {path: names for path, names in found.items() if names} == {}
