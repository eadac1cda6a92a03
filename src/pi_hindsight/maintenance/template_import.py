"""The two bundled starter bank templates (R-CONF-7): list, preview (dry run), apply.

A template is applied to the already-selected bank through Hindsight's bank-template import
endpoint, bound to the selected scope first (:func:`bind_manifest`): its mental models and
directives get the scope's exact tags (models also refresh over exactly those tags), and their ids
and names get a per-scope suffix, so applying it for one project never touches another project's
models in a shared bank. The bank section (missions) is bank-wide by nature; the preview says so.

Hindsight's own dry run only validates (it calls every model "created", and answers for a bank
that does not exist), so the preview also compares the template with the bank's current state
the way the import endpoint will: models by id, directives by name, unchanged ones skipped.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, ClassVar, Literal

from pi_hindsight.backend.interface import MemoryBackend
from pi_hindsight.backend.resources import (
    BankConfig,
    DirectiveInfo,
    MentalModel,
    TemplateImportResult,
)
from pi_hindsight.errors import ConfigError
from pi_hindsight.maintenance.common import require_bank

TEMPLATE_NAMES = ("coding-project", "personal-preferences")
_OUR_KEYS = ("description",)  # ours, stripped before the manifest is sent
_DEFAULT_MAX_TOKENS = 2048  # BankTemplateMentalModel.max_tokens default on the server

Action = Literal["create", "update", "unchanged"]


@dataclass(frozen=True)
class TemplateInfo:
    name: str
    description: str
    bank_settings: tuple[str, ...]  # bank-wide config keys it sets
    mental_models: tuple[str, ...]  # names
    directives: tuple[str, ...]  # names


@dataclass(frozen=True)
class ConfigChange:
    """One bank-wide config key the template sets."""

    key: str
    before: Any
    after: Any

    @property
    def changed(self) -> bool:
        return bool(self.before != self.after)


@dataclass(frozen=True)
class ResourceChange:
    """A mental model (by id) or directive (by name) the import creates, updates or skips."""

    kind: Literal["mental_model", "directive"]
    key: str  # model id or directive name, as bound to the scope
    name: str
    action: Action
    fields: tuple[str, ...] = ()  # for an update: the fields that differ


@dataclass(frozen=True)
class TemplatePlan:
    """What applying ``template`` to ``bank`` for the scope ``tags`` would change."""

    json_properties: ClassVar[tuple[str, ...]] = ("changes_anything",)

    template: str
    bank: str
    tags: tuple[str, ...]
    config: tuple[ConfigChange, ...]
    mental_models: tuple[ResourceChange, ...]
    directives: tuple[ResourceChange, ...]
    server: TemplateImportResult  # Hindsight's own dry-run answer (validation passed)
    manifest: Mapping[str, Any]  # exactly what apply sends

    @property
    def changes_anything(self) -> bool:
        return any(change.changed for change in self.config) or any(
            item.action != "unchanged" for item in (*self.mental_models, *self.directives)
        )

    def keys(self, kind: str, action: Action) -> tuple[str, ...]:
        items = self.mental_models if kind == "mental_model" else self.directives
        return tuple(item.key for item in items if item.action == action)


@dataclass(frozen=True)
class TemplateApplied:
    json_properties: ClassVar[tuple[str, ...]] = ("matches_plan",)

    plan: TemplatePlan  # computed right before the import
    result: TemplateImportResult  # what Hindsight reports it did

    @property
    def matches_plan(self) -> bool:
        """Whether Hindsight created and updated exactly what the plan said."""
        plan, result = self.plan, self.result
        return (
            set(result.mental_models_created) == set(plan.keys("mental_model", "create"))
            and set(result.mental_models_updated) == set(plan.keys("mental_model", "update"))
            and set(result.directives_created) == set(plan.keys("directive", "create"))
            and set(result.directives_updated) == set(plan.keys("directive", "update"))
        )


def _read(name: str) -> dict[str, Any]:
    if name not in TEMPLATE_NAMES:
        raise ConfigError(
            f"no bundled template {name!r}",
            hint=f"the bundled templates are: {', '.join(TEMPLATE_NAMES)}",
        )
    text = resources.files("pi_hindsight").joinpath("templates", f"{name}.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def list_templates() -> tuple[TemplateInfo, ...]:
    infos = []
    for name in TEMPLATE_NAMES:
        data = _read(name)
        infos.append(
            TemplateInfo(
                name=name,
                description=str(data.get("description", "")),
                bank_settings=tuple(sorted((data.get("bank") or {}).keys())),
                mental_models=tuple(m["name"] for m in data.get("mental_models") or ()),
                directives=tuple(d["name"] for d in data.get("directives") or ()),
            )
        )
    return tuple(infos)


def load_manifest(name: str) -> dict[str, Any]:
    """The template as a Hindsight v1 manifest (our own keys removed)."""
    data = _read(name)
    return {key: value for key, value in data.items() if key not in _OUR_KEYS}


def scope_suffix(bank: str, tags: Sequence[str]) -> str:
    """A short, stable suffix per bank and scope (valid in mental model ids)."""
    digest = hashlib.sha256(f"{bank}\0{chr(31).join(sorted(tags))}".encode()).hexdigest()
    return digest[:10]


def bind_manifest(manifest: Mapping[str, Any], *, bank: str, tags: Sequence[str]) -> dict[str, Any]:
    """Bind a template to one scope: exact tags, per-scope ids and directive names."""
    if not tags:
        raise ConfigError(
            "a template is applied for a scope, and this scope has no tags",
            hint="select a registered scope (its tags isolate it in the bank)",
        )
    bound = copy.deepcopy(dict(manifest))
    suffix = scope_suffix(bank, tags)
    label = ", ".join(sorted(tags))
    for model in bound.get("mental_models") or ():
        model["id"] = f"{model['id']}-{suffix}"
        model["tags"] = sorted(tags)
        model["trigger"] = {**(model.get("trigger") or {}), "tags_match": "exact"}
    for directive in bound.get("directives") or ():
        directive["name"] = f"{directive['name']} [{label}]"
        directive["tags"] = sorted(tags)
    return bound


def _model_action(
    stored: MentalModel | None, wanted: Mapping[str, Any], trigger: Mapping[str, Any]
) -> ResourceChange:
    """``trigger``: the wanted trigger as the server stores it (``normalise_trigger``)."""
    key, name = str(wanted["id"]), str(wanted["name"])
    if stored is None:
        return ResourceChange("mental_model", key, name, "create")
    differ = []
    if stored.name != wanted["name"]:
        differ.append("name")
    if stored.source_query != wanted["source_query"]:
        differ.append("source_query")
    if stored.max_tokens != wanted.get("max_tokens", _DEFAULT_MAX_TOKENS):
        differ.append("max_tokens")
    if wanted.get("tags") and set(stored.tags) != set(wanted["tags"]):
        differ.append("tags")
    if dict(stored.trigger) != dict(trigger):
        differ.append("trigger")
    return ResourceChange(
        "mental_model", key, name, "update" if differ else "unchanged", tuple(differ)
    )


def _directive_action(stored: DirectiveInfo | None, wanted: Mapping[str, Any]) -> ResourceChange:
    name = str(wanted["name"])
    if stored is None:
        return ResourceChange("directive", name, name, "create")
    differ = []
    if stored.content != wanted["content"]:
        differ.append("content")
    if stored.priority != wanted.get("priority", 0):
        differ.append("priority")
    if stored.is_active != wanted.get("is_active", True):
        differ.append("is_active")
    if wanted.get("tags") and set(stored.tags) != set(wanted["tags"]):
        differ.append("tags")
    return ResourceChange(
        "directive", name, name, "update" if differ else "unchanged", tuple(differ)
    )


def _config_changes(current: BankConfig, wanted: Mapping[str, Any]) -> tuple[ConfigChange, ...]:
    return tuple(
        ConfigChange(key=key, before=current.config.get(key), after=value)
        for key, value in sorted(wanted.items())
        if value is not None
    )


async def preview_template(
    backend: MemoryBackend, bank: str, name: str, *, tags: Sequence[str], timeout: float
) -> TemplatePlan:
    """Dry run: what applying template ``name`` to ``bank`` for scope ``tags`` would change.

    Changes nothing: reads the bank's config, mental models and directives, and asks Hindsight
    to validate the manifest (``dry_run=true``).
    """
    manifest = bind_manifest(load_manifest(name), bank=bank, tags=tags)
    await require_bank(backend, bank, timeout=timeout)
    server = await backend.import_template(bank, manifest, dry_run=True, timeout=timeout)
    current = await backend.bank_config(bank, timeout=timeout)
    models = {
        str(m["id"]): await backend.get_mental_model(bank, str(m["id"]), timeout=timeout)
        for m in manifest.get("mental_models") or ()
    }
    directives = {item.name: item for item in await backend.list_directives(bank, timeout=timeout)}
    return TemplatePlan(
        template=name,
        bank=bank,
        tags=tuple(sorted(tags)),
        config=_config_changes(current, manifest.get("bank") or {}),
        mental_models=tuple(
            _model_action(models.get(str(m["id"])), m, backend.normalise_trigger(m.get("trigger")))
            for m in manifest.get("mental_models") or ()
        ),
        directives=tuple(
            _directive_action(directives.get(str(d["name"])), d)
            for d in manifest.get("directives") or ()
        ),
        server=server,
        manifest=manifest,
    )


async def apply_template(
    backend: MemoryBackend, bank: str, name: str, *, tags: Sequence[str], timeout: float
) -> TemplateApplied:
    """Apply template ``name`` to the existing ``bank`` for scope ``tags`` (import endpoint).

    The plan is computed right before the import and returned with Hindsight's answer; new and
    changed mental models are refreshed by Hindsight asynchronously (``result.operation_ids``).
    """
    plan = await preview_template(backend, bank, name, tags=tags, timeout=timeout)
    result = await backend.import_template(bank, plan.manifest, dry_run=False, timeout=timeout)
    return TemplateApplied(plan=plan, result=result)
