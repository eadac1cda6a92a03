"""``status()``: everything that decides what memory does for this session, never hiding a
degraded state (backend down, outbox dead letters, evidence not recorded, config problems)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH
from pi_hindsight.errors import StateError
from pi_hindsight.stores.set_aside import SetAsideRecord

if TYPE_CHECKING:
    from pi_hindsight.engine.engine import MemoryEngine


def _outbox_status(engine: MemoryEngine) -> dict[str, Any] | None:
    outbox, _, _ = engine.stores
    if outbox is None:
        return None
    try:
        health = outbox.health()
    except StateError as error:
        return {"error": str(error)}
    aside = outbox.set_aside
    return {
        "pending": health.pending,
        "submitted": health.submitted,
        "dead": health.dead,
        "oldestPendingAgeS": health.oldest_pending_age_s,
        "lastError": health.last_error,
        "setAside": None
        if aside is None
        else {"movedTo": str(aside.moved_to), "reason": aside.reason},
    }


def _evidence_status(engine: MemoryEngine) -> dict[str, Any]:
    _, ledger, error = engine.stores
    settings = engine.settings.evidence
    if not settings.enabled:
        return {"enabled": False}
    data: dict[str, Any] = {"enabled": True, "recording": error is None, "lastError": error}
    if ledger is None:
        return data
    try:
        stats = ledger.stats(counts=False)
    except StateError as failure:
        data.update(recording=False, lastError=str(failure))
        return data
    data.update(
        path=stats.path,
        diskBytes=stats.disk_bytes,
        capBytes=stats.cap_bytes,
        retention=stats.retention_note,
        retentionShortened=stats.retention_shortened,
        problems=list(stats.problems),
    )
    return data


def engine_status(engine: MemoryEngine) -> dict[str, Any]:
    session = engine.session
    scope = engine.scope()
    settings = engine.settings
    resolution = session.resolution if session else None
    outcome, reason = engine.last_outcome
    config = engine.config
    return {
        "enabled": scope is not None,
        "offReason": session.off_reason if session else "no session",
        "profile": settings.profile,
        "projectId": resolution.identity.project_id if resolution else None,
        "identitySource": resolution.identity.source if resolution else None,
        "bankRule": resolution.bank_rule if resolution else None,
        "proposedScope": None
        if resolution is None or scope is not None
        else {
            "scopeId": resolution.proposed.scope_id,
            "bankId": resolution.proposed.bank_id,
            "tags": list(resolution.proposed.tags),
        },
        "scope": None
        if scope is None
        else {
            "scopeId": scope.scope_id,
            "projectId": scope.project_id,
            "bankId": scope.bank_id,
            "tags": list(scope.tags),
            "tagsMatch": SCOPE_TAGS_MATCH,
        },
        "recall": {
            "project": settings.project_recall,
            "userBank": settings.user_bank_active,
            "userBankId": settings.banks.user.bank_id if settings.user_bank_active else None,
            "maxTokens": settings.recall.max_tokens,
            "userMaxTokens": settings.user_max_tokens,
            "memoMaxTokens": settings.memo.max_tokens if settings.memo.enabled else 0,
            "requestMaxTokens": settings.recall.request_max_tokens,
            "timeoutMs": settings.recall.timeout_ms,
        },
        "retain": {"automatic": settings.project_retain},
        "backend": {
            "contacted": engine.connection.created,
            "healthy": engine.connection.healthy,
            "lastError": engine.connection.last_error,
        },
        "config": {
            "path": str(config.path),
            "source": str(config.user_source) if config.user_source else None,
            "projectFile": str(config.project_file) if config.project_file else None,
            "problems": [problem.describe() for problem in config.problems],
        },
        "lastOutcome": outcome,
        "lastReason": reason,
        "outbox": _outbox_status(engine),
        "evidence": _evidence_status(engine),
        # Stores set aside by any process and not yet restored or acknowledged (`state list`).
        "setAside": [event.to_json() for event in SetAsideRecord(engine.state_dir).open_events()],
    }
