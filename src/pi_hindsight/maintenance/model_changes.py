"""The selected scope's mental models (R-CONF-8): list, create, update, delete — dry run first.

A mental model is a living document Hindsight keeps current by running its source query (a
reflect) over memories. In a bank shared by several projects, the scope is the boundary: a model
created here carries the scope's exact tags and refreshes over exactly those tags
(``trigger.tags_match="exact"``), and only models carrying exactly the scope's tags can be
changed or deleted from it. The startup memo (``pi-memo-…``) is managed by pi-hindsight and is
listed but never changed here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pi_hindsight.backend.interface import MemoryBackend
from pi_hindsight.backend.resources import MentalModel
from pi_hindsight.errors import BackendRejected, ConfigError, ScopeError
from pi_hindsight.maintenance.common import FieldChange, require_bank
from pi_hindsight.maintenance.template_import import scope_suffix

MEMO_PREFIX = "pi-memo-"  # engine/startup_memo.py: the startup memo's ids
MODEL_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,99}$")  # Hindsight's id rule, bounded
DEFAULT_MAX_TOKENS = 1024
MIN_TOKENS, MAX_TOKENS = 256, 8192  # Hindsight's bounds
# Refresh after consolidation in delta mode over exactly the scope's tags, at most every 10 min.
DEFAULT_TRIGGER: Mapping[str, Any] = {
    "refresh_after_consolidation": True,
    "mode": "delta",
    "min_refresh_interval_seconds": 600,
    "tags_match": "exact",
}

ModelAction = Literal["create", "update", "delete"]


@dataclass(frozen=True)
class ModelChange:
    action: ModelAction
    bank: str
    model_id: str
    tags: tuple[str, ...]
    changes: tuple[FieldChange, ...]  # create: every field; update: those that differ
    before: MentalModel | None  # the model before (None for a create)
    applied: bool
    operation_id: str | None = None  # the refresh Hindsight queued (create, or a query change)


def is_memo(model_id: str) -> bool:
    return model_id.startswith(MEMO_PREFIX)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "model"


def _check_tokens(max_tokens: int) -> None:
    if not MIN_TOKENS <= max_tokens <= MAX_TOKENS:
        raise ConfigError(f"max tokens must be between {MIN_TOKENS} and {MAX_TOKENS}")


def _check_text(field: str, text: str, limit: int) -> None:
    if not text.strip() or len(text) > limit:
        raise ConfigError(f"{field}: must be non-empty text of at most {limit} characters")


async def list_models(
    backend: MemoryBackend, bank: str, *, tags: Sequence[str] | None, timeout: float
) -> tuple[MentalModel, ...]:
    """The bank's mental models; with ``tags``, only those whose tag set is exactly ``tags``."""
    await require_bank(backend, bank, timeout=timeout)
    models = await backend.list_mental_models(bank, tags=tags, tags_match="exact", timeout=timeout)
    if tags is not None:  # the server matched already; keep the scope rule explicit
        models = [model for model in models if set(model.tags) == set(tags)]
    return tuple(sorted(models, key=lambda model: model.id))


async def _scoped_model(
    backend: MemoryBackend, bank: str, tags: Sequence[str], model_id: str, timeout: float
) -> MentalModel:
    if is_memo(model_id):
        raise ConfigError(
            f"{model_id} is the startup memo, which pi-hindsight manages",
            hint="refresh it with the memory tool's refresh action; its content follows memory",
        )
    model = await backend.get_mental_model(bank, model_id, timeout=timeout)
    if model is None:
        raise BackendRejected(
            f"no mental model {model_id!r} in bank {bank}",
            status=404,
            hint="list this scope's models with `pi-hindsight bank models list`",
        )
    if set(model.tags) != set(tags):
        raise ScopeError(
            f"mental model {model_id!r} belongs to another scope, not to this one "
            f"({', '.join(tags)})",
            hint="maintain it from a session in its own scope",
        )
    return model


async def create_model(
    backend: MemoryBackend,
    bank: str,
    tags: Sequence[str],
    *,
    name: str,
    source_query: str,
    model_id: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    apply: bool,
    timeout: float,
) -> ModelChange:
    """Create a model for the scope ``tags`` (its exact tags). ``apply=False``: only report."""
    if not tags:
        raise ConfigError("a mental model is created for a scope, and this scope has no tags")
    _check_text("name", name, 200)
    _check_text("source query", source_query, 2_000)
    _check_tokens(max_tokens)
    chosen = model_id or f"{_slug(name)}-{scope_suffix(bank, tags)}"
    if not MODEL_ID.match(chosen):
        raise ConfigError(
            f"model id {chosen!r} is not valid",
            hint="use lowercase letters, digits and hyphens, starting with a letter or digit",
        )
    if is_memo(chosen):
        raise ConfigError(f"ids starting with {MEMO_PREFIX!r} are reserved for the startup memo")
    await require_bank(backend, bank, timeout=timeout)
    existing = await backend.get_mental_model(bank, chosen, timeout=timeout)
    if existing is not None:
        raise ConfigError(
            f"a mental model {chosen!r} already exists in bank {bank}",
            hint="update it instead, or choose another id",
        )
    trigger = dict(DEFAULT_TRIGGER)
    fields = (
        FieldChange("name", None, name),
        FieldChange("source_query", None, source_query),
        FieldChange("max_tokens", None, max_tokens),
        FieldChange("tags", None, sorted(tags)),
        FieldChange("trigger", None, trigger),
    )
    operation_id = None
    if apply:
        operation_id = await backend.create_mental_model(
            bank,
            model_id=chosen,
            name=name,
            source_query=source_query,
            tags=sorted(tags),
            max_tokens=max_tokens,
            trigger=trigger,
            timeout=timeout,
        )
    return ModelChange(
        action="create",
        bank=bank,
        model_id=chosen,
        tags=tuple(sorted(tags)),
        changes=fields,
        before=None,
        applied=apply,
        operation_id=operation_id,
    )


async def update_model(
    backend: MemoryBackend,
    bank: str,
    tags: Sequence[str],
    model_id: str,
    *,
    name: str | None = None,
    source_query: str | None = None,
    max_tokens: int | None = None,
    apply: bool,
    timeout: float,
) -> ModelChange:
    """Change a model of this scope; a new query or size refreshes it. ``apply=False``: report."""
    if name is None and source_query is None and max_tokens is None:
        raise ConfigError("nothing to change", hint="give a new name, query or max tokens")
    if name is not None:
        _check_text("name", name, 200)
    if source_query is not None:
        _check_text("source query", source_query, 2_000)
    if max_tokens is not None:
        _check_tokens(max_tokens)
    await require_bank(backend, bank, timeout=timeout)
    model = await _scoped_model(backend, bank, tags, model_id, timeout)
    wanted = {"name": name, "source_query": source_query, "max_tokens": max_tokens}
    changes = tuple(
        FieldChange(field, getattr(model, field), value)
        for field, value in wanted.items()
        if value is not None and getattr(model, field) != value
    )
    operation_id = None
    if apply and changes:
        changed = {c.field for c in changes}
        await backend.update_mental_model(
            bank,
            model_id,
            name=name if "name" in changed else None,
            source_query=source_query if "source_query" in changed else None,
            max_tokens=max_tokens if "max_tokens" in changed else None,
            timeout=timeout,
        )
        if changed & {"source_query", "max_tokens"}:
            operation_id = await backend.refresh_mental_model(bank, model_id, timeout=timeout)
    return ModelChange(
        action="update",
        bank=bank,
        model_id=model_id,
        tags=tuple(sorted(tags)),
        changes=changes,
        before=model,
        applied=apply and bool(changes),
        operation_id=operation_id,
    )


async def delete_model(
    backend: MemoryBackend,
    bank: str,
    tags: Sequence[str],
    model_id: str,
    *,
    apply: bool,
    timeout: float,
) -> ModelChange:
    """Delete a model of this scope (memories stay). ``apply=False``: only report.

    Its queued refreshes are cancelled first: Hindsight keeps retrying a refresh whose model was
    deleted (``Mental model … not found``) instead of dropping it.
    """
    await require_bank(backend, bank, timeout=timeout)
    model = await _scoped_model(backend, bank, tags, model_id, timeout)
    if apply:
        for operation_id in await _queued_refreshes(backend, bank, model_id, timeout):
            await backend.cancel_operation(bank, operation_id, timeout=timeout)
        await backend.delete_mental_model(bank, model_id, timeout=timeout)
    return ModelChange(
        action="delete",
        bank=bank,
        model_id=model_id,
        tags=tuple(sorted(tags)),
        changes=(),
        before=model,
        applied=apply,
    )


async def _queued_refreshes(
    backend: MemoryBackend, bank: str, model_id: str, timeout: float
) -> list[str]:
    """Refresh operations of this model that have not finished (pending or running)."""
    found: list[str] = []
    for state in ("pending", "processing"):
        operations = await backend.list_operations(
            bank, state=state, operation_type="refresh_mental_model", timeout=timeout
        )
        found.extend(op.operation_id for op in operations if op.mental_model_id == model_id)
    return found
