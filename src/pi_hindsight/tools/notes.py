"""Explicit notes: ``retain`` (a project-bank note) and ``hindsight_retain_global`` — the only
way to write the User bank (R-CONF-2). Both go through the durable outbox, redacted first."""

from __future__ import annotations

import contextlib
from typing import Any

from pi_hindsight.engine.scope import USER_SCOPE_TAGS
from pi_hindsight.errors import BackendError
from pi_hindsight.tools.context import ToolContext, require_scope
from pi_hindsight.tools.specs import (
    RETAIN_GLOBAL_TOOL,
    MemoryArgs,
    ToolInputError,
    ToolResult,
    parse_retain_global_args,
)


async def retain(context: ToolContext, args: MemoryArgs) -> ToolResult:
    scope = require_scope(context)
    settings = context.settings
    if not settings.project_recall:
        raise ToolInputError(
            f"profile {settings.profile} has no project bank; "
            f"use {RETAIN_GLOBAL_TOOL} for personal preferences"
        )
    forced = _budget(context, args.force)
    queued = await context.enqueue_note(
        bank_id=scope.bank_id,
        tags=scope.tags,
        content=args.content or "",
        context=args.context,
        kind="project-note",
        force=forced,
    )
    return ToolResult(
        f"Queued for project memory ({scope.scope_id}); the outbox delivers it to Hindsight"
        + (" although the daily token budget is reached." if forced else "."),
        {"outboxItem": queued, "bankId": scope.bank_id, "forced": forced},
    )


def _budget(context: ToolContext, force: bool) -> bool:
    """Whether this note goes past a reached token budget; refuses it without ``force``, so an
    explicit retain is never held silently (docs/operations.md, "Cost")."""
    paused = context.retain_paused()
    if paused is None:
        return False
    if not force:
        raise ToolInputError(
            f"the daily token budget is reached, nothing was queued: retain is {paused}. "
            "Ask the user; to keep this note anyway, call again with force: true"
        )
    return True


async def retain_global(context: ToolContext, params: dict[str, Any]) -> ToolResult:
    require_scope(context)
    settings = context.settings
    if not settings.user_bank_active:
        raise ToolInputError(
            f"the User bank is not part of profile {settings.profile}; choose project+user "
            "or user-only with `pi-hindsight setup --profile …` to keep memory across projects"
        )
    args = parse_retain_global_args(params)
    forced = _budget(context, args.force)
    bank = settings.banks.user.bank_id
    # Create the User bank with its mission now; if Hindsight is unreachable, the outbox waits.
    with contextlib.suppress(BackendError):
        await context.backend_with_bank(bank, settings.banks.user.mission)
    queued = await context.enqueue_note(
        bank_id=bank,
        tags=USER_SCOPE_TAGS,
        content=args.content,
        context=args.context,
        kind="user-note",
        force=forced,
    )
    return ToolResult(
        f"Queued for the User bank {bank}; it will be recalled in every project.",
        {"outboxItem": queued, "bankId": bank, "forced": forced},
    )
