"""Plain-text renderings of the maintenance results, shared by the CLI and the agent tools."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pi_hindsight.backend.resources import MentalModel
from pi_hindsight.maintenance.common import FieldChange
from pi_hindsight.maintenance.missions import MissionChange, Missions
from pi_hindsight.maintenance.model_changes import ModelChange, is_memo
from pi_hindsight.maintenance.move import MovePlan, MoveResult
from pi_hindsight.maintenance.template_import import TemplateApplied, TemplateInfo, TemplatePlan

_CUT = 160


def _short(value: Any, limit: int = _CUT) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _field(change: FieldChange) -> str:
    if change.before is None:
        return f"  {change.field}: {_short(change.after)}"
    return f"  {change.field}: {_short(change.before)}\n    -> {_short(change.after)}"


def templates_list(infos: Sequence[TemplateInfo]) -> str:
    lines = []
    for info in infos:
        lines.append(f"{info.name}")
        lines.append(f"  {info.description}")
        lines.append(f"  bank settings: {', '.join(info.bank_settings) or 'none'}")
        lines.append(f"  mental models: {', '.join(info.mental_models) or 'none'}")
        lines.append(f"  directives: {', '.join(info.directives) or 'none'}")
    return "\n".join(lines)


def template_plan(plan: TemplatePlan) -> str:
    lines = [
        f"template {plan.template} -> bank {plan.bank}, scope [{', '.join(plan.tags)}]",
        "bank-wide settings (every scope in this bank):",
    ]
    for change in plan.config:
        verb = "change" if change.changed else "unchanged"
        lines.append(f"  {verb:<9} {change.key}: {_short(change.after)}")
        if change.changed:
            lines.append(f"            was: {_short(change.before)}")
    for title, items in (("mental models", plan.mental_models), ("directives", plan.directives)):
        lines.append(f"{title} (this scope only):")
        for item in items:
            detail = f" ({', '.join(item.fields)})" if item.fields else ""
            label = item.key if item.key == item.name else f"{item.key}: {item.name}"
            lines.append(f"  {item.action:<9} {label}{detail}")
    lines.append(
        "Hindsight's dry run: the manifest is valid"
        + ("" if plan.changes_anything else "; nothing would change")
    )
    return "\n".join(lines)


def template_applied(applied: TemplateApplied) -> str:
    result = applied.result
    lines = [template_plan(applied.plan), "applied:"]
    lines.append(f"  bank settings written: {'yes' if result.config_applied else 'no'}")
    for label, keys in (
        ("mental models created", result.mental_models_created),
        ("mental models updated", result.mental_models_updated),
        ("directives created", result.directives_created),
        ("directives updated", result.directives_updated),
    ):
        lines.append(f"  {label}: {', '.join(keys) or 'none'}")
    if result.operation_ids:
        lines.append(f"  refreshes queued: {', '.join(result.operation_ids)}")
    if not applied.matches_plan:
        lines.append("  note: Hindsight did not do exactly what the preview said (state changed)")
    return "\n".join(lines)


def missions(value: Missions) -> str:
    lines = [f"bank {value.bank} (bank-wide: every scope in this bank)"]
    for name in ("mission", "retain_mission", "observations_mission"):
        text = getattr(value, name)
        origin = "set on the bank" if name in value.set_on_bank else "server default"
        lines.append(f"{name} ({origin}):")
        lines.append(f"  {text}" if text else "  (none)")
    return "\n".join(lines)


def mission_change(change: MissionChange) -> str:
    if not change.changes:
        return f"bank {change.bank}: the missions already say that; nothing to change"
    verb = "changed" if change.applied else "would change (dry run; --apply to change)"
    lines = [f"bank {change.bank}: {verb} (bank-wide):"]
    lines.extend(_field(item) for item in change.changes)
    return "\n".join(lines)


def models_list(models: Sequence[MentalModel], *, content: bool = False) -> str:
    if not models:
        return "no mental models"
    lines = []
    for model in models:
        flags = [f for f, on in (("memo", is_memo(model.id)), ("stale", model.is_stale)) if on]
        suffix = f" [{', '.join(flags)}]" if flags else ""
        lines.append(f"{model.id}: {model.name}{suffix}")
        lines.append(f"  tags: {', '.join(model.tags) or 'none'}")
        lines.append(f"  query: {_short(model.source_query or '')}")
        lines.append(f"  refreshed: {model.last_refreshed_at or 'never'}")
        if content and model.content:
            lines.extend(f"  | {line}" for line in model.content.splitlines())
    return "\n".join(lines)


def model_change(change: ModelChange) -> str:
    head = f"{change.action} mental model {change.model_id} in bank {change.bank}"
    if change.action == "update" and not change.changes:
        return f"{head}: already like that; nothing to change"
    state = "done" if change.applied else "dry run; --apply to do it"
    lines = [f"{head} ({state})", f"  scope tags: {', '.join(change.tags)}"]
    if change.action == "delete" and change.before is not None:
        lines.append(f"  name: {change.before.name}")
        lines.append(f"  query: {_short(change.before.source_query or '')}")
    lines.extend(_field(item) for item in change.changes)
    if change.operation_id:
        lines.append(f"  refresh queued: operation {change.operation_id}")
    return "\n".join(lines)


def move_plan(plan: MovePlan) -> str:
    how = "re-tag in place" if plan.method == "retag" else "copy to the target bank, then delete"
    what = (
        "all documents"
        if plan.selection.everything
        else ", ".join(
            [*plan.selection.document_ids]
            + (
                [f"ids starting {plan.selection.document_prefix!r}"]
                if plan.selection.document_prefix is not None
                else []
            )
        )
    )
    lines = [
        f"from   {plan.source.describe()}",
        f"to     {plan.target.describe()}",
        f"how    {how}",
        f"select {what}",
        f"documents: {plan.document_count}, facts: {plan.fact_count}, "
        f"source observations invalidated: {len(plan.observations)}",
    ]
    for doc in plan.documents:
        state = {"move": "move", "finish": "finish (already copied)", "done": "done"}[doc.state]
        lines.append(f"  {state:<24} {doc.document_id} ({len(doc.fact_ids)} facts)")
    if plan.observations:
        lines.append(f"source observations built from moved facts: {', '.join(plan.observations)}")
    if plan.mental_models:
        lines.append(f"source mental models (rebuilt, not moved): {', '.join(plan.mental_models)}")
    lines.extend(f"note: {note}" for note in plan.notes)
    lines.extend(f"BLOCKED: {blocker}" for blocker in plan.blockers)
    return "\n".join(lines)


def move_result(result: MoveResult) -> str:
    lines = [move_plan(result.plan)]
    if not result.applied:
        lines.append("dry run: nothing changed; run again with --apply to move")
        return "\n".join(lines)
    lines.append("applied:")
    lines.append(f"  copied to the target bank: {len(result.copied)}")
    lines.append(f"  re-tagged: {len(result.retagged)}")
    lines.append(f"  deleted at the source: {len(result.deleted)}")
    lines.append(f"  facts now in the target scope: {result.facts_in_target}")
    lines.append(f"  source observations invalidated: {len(result.observations_invalidated)}")
    if result.refreshes:
        lines.append(f"  source mental models rebuilding: {len(result.refreshes)}")
    return "\n".join(lines)
