"""Raw-config transformations before validation: legacy keys, unknown keys, repository files.

Everything here works on plain dicts and reports what it did, so ``config migrate`` can show the
same report that loading applies silently-but-visibly (as info notices) on every start.

- Legacy keys migrate (R-CONF-4): ``banks.global``→``banks.user``, ``globalRetain``→``userRetain``,
  ``globalQueryPreamble``→``userQueryPreamble``, ``mode: "router"``→``"explicit-only"``; a config
  written for the TypeScript pi-hindsight extension is read and mapped, and what we do not support
  is listed.
- A repository file (``<repo>/.pi/hindsight.json``) may only set an allowlist of harmless keys; it
  can never turn memory on, register anything, or change the server, credentials, banks or tags.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from pi_hindsight.config_display import NOT_ALLOWED_IN_REPOSITORY, shown_value

Level = Literal["info", "warning"]


@dataclass(frozen=True)
class Change:
    key: str
    message: str
    level: Level = "info"


# Keys of the TypeScript pi-hindsight extension we read but do not support, and why.
UNSUPPORTED: Mapping[str, str] = {
    "setupComplete": "setup state is not a config key here; registration is per directory",
    "agentUse": "there is one coding use",
    "mentalModels": "the startup memo is configured under memo (enabled, maxTokens)",
    "observations": "observation scopes are Hindsight bank settings",
    "import": "session import is not part of pi-hindsight",
    "status": "the status line is fixed",
    "notifications": "warnings are always shown; nothing is silent",
    "recall.enabled": "use profile (recall-only) or unregister the directory",
    "recall.types": "recall returns every fact type",
    "recall.includeSourceFacts": "not supported",
    "recall.maxSourceFactsTokens": "not supported",
    "recall.roles": "not supported",
    "recall.queryPreamble": "not supported",
    "recall.projectQueryPreamble": "not supported",
    "recall.includeDateInQuery": "not supported",
    "recall.includeRepoHintsInQuery": "not supported",
    "recall.storeLastRecall": "replaced by the evidence ledger (evidence.sqlite)",
    "recall.storeLastRecallFailures": "replaced by the evidence ledger (evidence.sqlite)",
    "recall.lastRecallPath": "replaced by the evidence ledger (evidence.sqlite)",
    "recall.topK": "the token budget bounds recall",
    "recall.cacheTtlMs": "recall is never cached across requests (a cache keyed without the "
    "scope's tags leaked across projects elsewhere)",
    "recall.injectionMode": "memory is always a hidden message right after the user message",
    "recall.injectionPosition": "memory is always a hidden message right after the user message",
    "recall.includeFactsInDebug": "see `pi-hindsight evidence show`",
    "recall.preferObservations": "a Hindsight bank setting",
    "banks.project.derive": "project identity is pin → git remote → git common dir → directory",
    "banks.project.enabled": "use profile (user-only)",
    "retain.async": "retain is always asynchronous and confirmed through the outbox",
    "retain.updateMode": "each session is one document, appended per request",
    "retain.content": "see retain.toolCalls / retain.toolResults",
    "retain.toolFilter": "see retain.toolCalls / retain.toolResults",
    "retain.strip": "only conversation text is retained",
    "retain.redactSecrets": "secret redaction is always on",
    "retain.entities": "not supported",
    "retain.queuePath": "the outbox is <state dir>/outbox.sqlite; drain the old queue with the old "
    "extension before removing it",
    "retain.flushIntervalMs": "the outbox worker drains continuously",
    "retain.periodicFlushMaxJobs": "the outbox worker drains continuously",
    "retain.periodicFlushTimeoutMs": "the outbox worker drains continuously",
    "retain.shutdownFlushMaxJobs": "shutdown flushes within a fixed bound",
    "retain.shutdownFlushTimeoutMs": "shutdown flushes within a fixed bound",
}

# Legacy profile names of the TypeScript extension.
_PROFILE_NAMES: Mapping[str, str] = {
    "project+global": "project+user",
    "global-only": "user-only",
    "project": "project-only",
    "user": "user-only",
}

# What a repository's `.pi/hindsight.json` may set. Lowering-only keys can only make memory use
# smaller; `retain.enabled` can only switch retain off.
PROJECT_ALLOWED: Mapping[str, str] = {
    "recall.maxTokens": "lower-only",
    "recall.userMaxTokens": "lower-only",
    "recall.budget": "any",
    "recall.contextTurns": "lower-only",
    "retain.enabled": "false-only",
}


def _get(raw: Mapping[str, Any], dotted: str) -> Any:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _pop(raw: dict[str, Any], dotted: str) -> Any:
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


def _has(raw: Mapping[str, Any], dotted: str) -> bool:
    parts = dotted.split(".")
    node: Any = raw
    for part in parts:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _move(raw: dict[str, Any], old: str, new: str, changes: list[Change]) -> None:
    if not _has(raw, old):
        return
    value = _pop(raw, old)
    if _has(raw, new):
        changes.append(Change(old, f"legacy key dropped: {new} is also set and wins", "warning"))
        return
    set_dotted(raw, new, value)
    changes.append(Change(old, f"migrated to {new}"))


def migrate_legacy(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[Change]]:
    """Rename legacy keys and normalise legacy values; returns a new dict and what changed."""
    data = copy.deepcopy(dict(raw))
    changes: list[Change] = []
    _move(data, "banks.global", "banks.user", changes)
    _move(data, "globalRetain", "userRetain", changes)
    _move(data, "globalQueryPreamble", "userQueryPreamble", changes)
    _move(data, "recall.globalQueryPreamble", "userQueryPreamble", changes)
    _move(data, "recall.userQueryPreamble", "userQueryPreamble", changes)
    _move(data, "hindsight.timeoutMs", "timeoutMs", changes)
    _move(data, "retain.postRetainReflect", "postRetainReflect", changes)
    mode = _get(data, "userRetain.mode")
    if mode is not None and mode != "explicit-only":
        set_dotted(data, "userRetain.mode", "explicit-only")
        reason = (
            "the heuristic router was removed; user-bank writes are explicit only"
            if mode == "router"
            else f"invalid value {shown_value(mode)}; using the default"
        )
        changes.append(
            Change(
                "userRetain.mode",
                f"{shown_value(mode)} → 'explicit-only' ({reason})",
                "info" if mode == "router" else "warning",
            )
        )
    profile = data.get("profile")
    if isinstance(profile, str) and profile in _PROFILE_NAMES:
        data["profile"] = _PROFILE_NAMES[profile]
        changes.append(Change("profile", f"{profile!r} → {data['profile']!r}"))
    if "profile" not in data:
        inferred = _infer_profile(data)
        if inferred is not None:
            data["profile"] = inferred
            changes.append(
                Change("profile", f"inferred {inferred!r} from the legacy bank settings")
            )
    if _get(data, "banks.project.derive") == "manual" and _has(data, "banks.project.bankId"):
        changes.append(
            Change("banks.project.derive", "manual bank id kept as banks.project.bankId")
        )
    return data, changes


def _infer_profile(data: Mapping[str, Any]) -> str | None:
    user = _get(data, "banks.user.enabled") is True
    project = _get(data, "banks.project.enabled") is not False
    if not _has(data, "banks"):
        return None
    if user and project:
        return "project+user"
    if user and not project:
        return "user-only"
    return "project-only" if project else None


def _leaf_keys(raw: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in raw.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and not _is_free_map(dotted):
            yield from _leaf_keys(value, f"{dotted}.")
        else:
            yield dotted


def _is_free_map(dotted: str) -> bool:
    """Maps whose keys are data (paths, names), not config keys."""
    return dotted in {"bankNaming.directoryBankMap", "projectPins", "hindsight.apiKey"}


def _model_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        alias = field.alias or name
        dotted = f"{prefix}{alias}"
        keys.add(dotted)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys |= _model_keys(annotation, f"{dotted}.")
    return keys


def unknown_keys(raw: Mapping[str, Any], model: type[BaseModel]) -> list[Change]:
    """Keys the schema does not know: legacy-unsupported ones say why, others are typos."""
    known = _model_keys(model)
    changes: list[Change] = []
    reported: set[str] = set()
    for dotted in _leaf_keys(raw):
        if dotted in known or any(
            dotted.startswith(f"{key}.") for key in known if _is_free_map(key)
        ):
            continue
        reason = next(
            (
                text
                for key, text in UNSUPPORTED.items()
                if dotted == key or dotted.startswith(f"{key}.")
            ),
            None,
        )
        top = next(
            (key for key in UNSUPPORTED if dotted == key or dotted.startswith(f"{key}.")), dotted
        )
        if top in reported:
            continue
        reported.add(top)
        if reason is not None:
            changes.append(Change(top, f"not supported, ignored: {reason}"))
        else:
            changes.append(Change(dotted, "unknown key, ignored (check the spelling)", "warning"))
    return changes


def filter_project_file(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[Change]]:
    """Keep only allowlisted keys from a repository file; report every other key as ignored."""
    kept: dict[str, Any] = {}
    changes: list[Change] = []
    for dotted in _leaf_keys(raw):
        if dotted in PROJECT_ALLOWED:
            set_dotted(kept, dotted, _get(raw, dotted))
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
    value = _get(raw, dotted)
    return isinstance(value, Mapping) and not value


def apply_project_limits(
    merged: dict[str, Any], project: Mapping[str, Any], defaults: Mapping[str, Any]
) -> list[Change]:
    """Apply allowlisted project keys onto ``merged`` by their rule (lower-only, false-only)."""
    changes: list[Change] = []
    for dotted, rule in PROJECT_ALLOWED.items():
        if not _has(project, dotted):
            continue
        value = _get(project, dotted)
        current = _get(merged, dotted)
        if current is None:
            current = _get(defaults, dotted)
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
