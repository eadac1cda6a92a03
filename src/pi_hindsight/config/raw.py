"""Raw-config transformations before validation: unknown keys and the repository file.

Everything here works on plain dicts and reports what it did (``Change``), so ``config
validate``/``migrate`` show the same report that loading applies visibly (as notices) on every
start. A repository file (``<repo>/.pi/hindsight.json``) may only set an allowlist of harmless
keys; it can never turn memory on, register anything, or change the server, credentials, banks
or tags. Legacy keys are ``migration.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pi_hindsight.config.display import NOT_ALLOWED_IN_REPOSITORY, shown_value

Level = Literal["info", "warning"]


@dataclass(frozen=True)
class Change:
    key: str
    message: str
    level: Level = "info"


# What a repository's `.pi/hindsight.json` may set. Lowering-only keys can only make memory use
# smaller; `retain.enabled` can only switch retain off.
PROJECT_ALLOWED: Mapping[str, str] = {
    "recall.maxTokens": "lower-only",
    "recall.userMaxTokens": "lower-only",
    "recall.budget": "any",
    "recall.contextTurns": "lower-only",
    "retain.enabled": "false-only",
}


def get_dotted(raw: Mapping[str, Any], dotted: str) -> Any:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def pop_dotted(raw: dict[str, Any], dotted: str) -> Any:
    parts = dotted.split(".")
    node: Any = raw
    for part in parts[:-1]:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if not isinstance(node, dict):
        return None
    return node.pop(parts[-1], None)


def set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = raw
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def drop_dotted(target: dict[str, Any], location: tuple[str | int, ...]) -> None:
    """Remove the value at ``location`` (keys, or list indices that are ignored) if present."""
    node: Any = target
    for part in location[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict):
        node.pop(location[-1], None)


def has_dotted(raw: Mapping[str, Any], dotted: str) -> bool:
    parts = dotted.split(".")
    node: Any = raw
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def is_free_map(dotted: str) -> bool:
    """Maps whose keys are data (paths, names), not config keys."""
    return dotted in {
        "bankNaming.directoryBankMap",
        "projectPins",
        "hindsight.apiKey",
        "recall.relevance.banks",
        "redaction.patterns",
    }


def leaf_keys(raw: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and not is_free_map(dotted):
            yield from leaf_keys(value, f"{dotted}.")
        else:
            yield dotted


def filter_project_file(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[Change]]:
    """Keep only allowlisted keys from a repository file; report every other key as ignored."""
    kept: dict[str, Any] = {}
    changes: list[Change] = []
    for dotted in leaf_keys(raw):
        if dotted in PROJECT_ALLOWED:
            set_dotted(kept, dotted, get_dotted(raw, dotted))
        elif not _is_empty_object(raw, dotted):
            changes.append(
                Change(
                    dotted,
                    f"{NOT_ALLOWED_IN_REPOSITORY} (only {', '.join(sorted(PROJECT_ALLOWED))})",
                    "warning",
                )
            )
    return kept, changes


def _is_empty_object(raw: Mapping[str, Any], dotted: str) -> bool:
    value = get_dotted(raw, dotted)
    return isinstance(value, Mapping) and not value


def apply_project_limits(
    merged: dict[str, Any], project: Mapping[str, Any], defaults: Mapping[str, Any]
) -> list[Change]:
    """Apply allowlisted project keys onto ``merged`` by their rule (lower-only, false-only)."""
    changes: list[Change] = []
    for dotted, rule in PROJECT_ALLOWED.items():
        if not has_dotted(project, dotted):
            continue
        value = get_dotted(project, dotted)
        current = get_dotted(merged, dotted)
        if current is None:
            current = get_dotted(defaults, dotted)
        if rule == "lower-only":
            if not isinstance(value, int) or isinstance(value, bool):
                changes.append(
                    Change(
                        dotted, f"ignored: {shown_value(value)} is not a whole number", "warning"
                    )
                )
                continue
            if isinstance(current, int) and value > current:
                changes.append(
                    Change(dotted, f"ignored: a repository may only lower it ({current})")
                )
                continue
        elif rule == "false-only" and value is not False:
            changes.append(
                Change(dotted, "ignored: a repository may only switch it off", "warning")
            )
            continue
        set_dotted(merged, dotted, value)
        changes.append(Change(dotted, f"set to {shown_value(value)} by the repository file"))
    return changes
