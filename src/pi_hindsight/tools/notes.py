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
    queued = await context.enqueue_note(
        bank_id=scope.bank_id,
        tags=scope.tags,
        content=args.content or "",
        context=args.context,
        kind="project-note",
    )
    return ToolResult(
        f"Queued for project memory ({scope.scope_id}); the outbox delivers it to Hindsight.",
        {"outboxItem": queued, "bankId": scope.bank_id},
    )


async def retain_global(context: ToolContext, params: dict[str, Any]) -> ToolResult:
    require_scope(context)
    settings = context.settings
    if not settings.user_bank_active:
        raise ToolInputError(
            f"the User bank is not part of profile {settings.profile}; choose project+user "
            "or user-only with `pi-hindsight setup --profile …` to keep memory across projects"
        )
    args = parse_retain_global_args(params)
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
    )
    return ToolResult(
        f"Queued for the User bank {bank}; it will be recalled in every project.",
        {"outboxItem": queued, "bankId": bank},
    )
