"""Legacy and foreign config keys (R-CONF-4): ``banks.global``→``banks.user``,
``globalRetain``→``userRetain``, ``globalQueryPreamble``→``userQueryPreamble``, ``mode:
"router"``→``"explicit-only"``; a config written for the TypeScript pi-hindsight extension is read
and mapped, and what we do not support is listed (never silently dropped)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from pi_hindsight.config.display import shown_value
from pi_hindsight.config.raw import (
    Change,
    get_dotted,
    has_dotted,
    is_free_map,
    leaf_keys,
    pop_dotted,
    set_dotted,
)

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


def _move(raw: dict[str, Any], old: str, new: str, changes: list[Change]) -> None:
    if not has_dotted(raw, old):
        return
    value = pop_dotted(raw, old)
    if has_dotted(raw, new):
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
    mode = get_dotted(data, "userRetain.mode")
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
    if get_dotted(data, "banks.project.derive") == "manual" and has_dotted(
        data, "banks.project.bankId"
    ):
        changes.append(
            Change("banks.project.derive", "manual bank id kept as banks.project.bankId")
        )
    return data, changes


def _infer_profile(data: Mapping[str, Any]) -> str | None:
    user = get_dotted(data, "banks.user.enabled") is True
    project = get_dotted(data, "banks.project.enabled") is not False
    if not has_dotted(data, "banks"):
        return None
    if user and project:
        return "project+user"
    if user and not project:
        return "user-only"
    return "project-only" if project else None


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
    for dotted in leaf_keys(raw):
        if dotted in known or any(
            dotted.startswith(f"{key}.") for key in known if is_free_map(key)
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
