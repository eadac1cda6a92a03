"""Explicit notes: ``retain`` (a project-bank note) and ``retain_global`` — the only way to write
the User bank (R-CONF-2). Both go through the durable outbox, redacted first."""

from __future__ import annotations

import contextlib
from typing import Literal

from pydantic import Field

from pi_hindsight.engine.scope import USER_SCOPE_TAGS
from pi_hindsight.errors import BackendError
from pi_hindsight.operations.base import (
    Operation,
    OperationArgs,
    OperationContext,
    OperationInputError,
    OperationResult,
    require_scope,
)

# The agent's tool for the User bank (its name is part of what retain says when it refuses).
RETAIN_GLOBAL_TOOL = "hindsight_retain_global"
_FORCE = "queue it although the daily token budget is reached"


class RetainArgs(OperationArgs):
    content: str = Field(min_length=1, max_length=8_000, description="the note to keep")
    context: str | None = Field(default=None, max_length=500, description="extra context")
    force: bool = Field(default=False, description=_FORCE)


class RetainGlobalArgs(OperationArgs):
    content: str = Field(
        min_length=1,
        max_length=8_000,
        description="A durable personal preference or cross-project workflow to remember",
    )
    context: str | None = Field(default=None, max_length=500)
    force: bool = Field(default=False, description=_FORCE)


class RetainResult(OperationResult):
    target: Literal["project", "user"]
    outbox_item: str
    bank_id: str
    scope: str
    forced: bool

    def render(self) -> str:
        if self.target == "user":
            return f"Queued for the User bank {self.bank_id}; it will be recalled in every project."
        return f"Queued for project memory ({self.scope}); the outbox delivers it to Hindsight" + (
            " although the daily token budget is reached." if self.forced else "."
        )


async def retain(context: OperationContext, args: RetainArgs) -> RetainResult:
    scope = require_scope(context)
    settings = context.settings
    if not settings.project_recall:
        raise OperationInputError(
            f"profile {settings.profile} has no project bank; "
            f"use {RETAIN_GLOBAL_TOOL} for personal preferences"
        )
    forced = _budget(context, args.force)
    queued = await context.enqueue_note(
        bank_id=scope.bank_id,
        tags=scope.tags,
        content=args.content,
        context=args.context,
        kind="project-note",
        force=forced,
    )
    return RetainResult(
        target="project",
        outbox_item=queued,
        bank_id=scope.bank_id,
        scope=scope.scope_id,
        forced=forced,
    )


def _budget(context: OperationContext, force: bool) -> bool:
    """Whether this note goes past a reached token budget; refuses it without ``force``, so an
    explicit retain is never held silently (docs/operations.md, "Cost")."""
    paused = context.retain_paused()
    if paused is None:
        return False
    if not force:
        raise OperationInputError(
            f"the daily token budget is reached, nothing was queued: retain is {paused}. "
            "Ask the user; to keep this note anyway, call again with force: true"
        )
    return True


async def retain_global(context: OperationContext, args: RetainGlobalArgs) -> RetainResult:
    require_scope(context)
    settings = context.settings
    if not settings.user_bank_active:
        raise OperationInputError(
            f"the User bank is not part of profile {settings.profile}; choose project+user "
            "or user-only with `pi-hindsight setup --profile …` to keep memory across projects"
        )
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
    return RetainResult(
        target="user", outbox_item=queued, bank_id=bank, scope="user", forced=forced
    )


RETAIN = Operation("retain", "store a note in project memory", RetainArgs, RetainResult, retain)
RETAIN_GLOBAL = Operation(
    "retain_global",
    "store a durable personal preference in the User bank",
    RetainGlobalArgs,
    RetainResult,
    retain_global,
)
