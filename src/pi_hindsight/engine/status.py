"""The engine's status: everything that decides what memory does for this session, never hiding a
degraded state (backend down, outbox dead letters, evidence not recorded, config problems, a store
set aside). One typed shape (``EngineStatus``); ``to_json`` is its one wire form (the ``status``
RPC method, ``--json``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pi_hindsight.config import LoadedConfig, Settings
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH, Scope, ScopeResolution
from pi_hindsight.engine.types import Outcome
from pi_hindsight.engine.usage import LastDay
from pi_hindsight.errors import StateError
from pi_hindsight.relevance import describe as describe_relevance
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.corrections import LifecycleCounts
from pi_hindsight.stores.evidence import EvidenceLedger
from pi_hindsight.stores.outbox import Outbox, counts_line
from pi_hindsight.stores.set_aside import SetAsideEvent, describe
from pi_hindsight.transport import ProxyRoute
from pi_hindsight.user_bank import UserBankChoice

HELD_BACK_WINDOW_S = 86_400.0  # status shows the held-back share over the last day


@dataclass(frozen=True)
class ScopeStatus:
    scope_id: str
    project_id: str
    bank_id: str
    tags: tuple[str, ...]
    tags_match: str = SCOPE_TAGS_MATCH

    def to_json(self) -> dict[str, Any]:
        return {
            "scopeId": self.scope_id,
            "projectId": self.project_id,
            "bankId": self.bank_id,
            "tags": list(self.tags),
            "tagsMatch": self.tags_match,
        }


@dataclass(frozen=True)
class RecallStatus:
    project: bool
    user_bank: bool
    user_bank_id: str | None
    max_tokens: int
    user_max_tokens: int
    memo_max_tokens: int
    request_max_tokens: int
    timeout_ms: int
    relevance: str = "off"  # relevance.describe: what the relevance policy does

    @classmethod
    def of(cls, settings: Settings) -> RecallStatus:
        return cls(
            project=settings.project_recall,
            user_bank=settings.user_bank_active,
            user_bank_id=settings.banks.user.bank_id if settings.user_bank_active else None,
            max_tokens=settings.recall.max_tokens,
            user_max_tokens=settings.user_max_tokens,
            memo_max_tokens=settings.memo.max_tokens if settings.memo.enabled else 0,
            request_max_tokens=settings.recall.request_max_tokens,
            timeout_ms=settings.recall.timeout_ms,
            relevance=describe_relevance(settings.recall.relevance),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "userBank": self.user_bank,
            "userBankId": self.user_bank_id,
            "maxTokens": self.max_tokens,
            "userMaxTokens": self.user_max_tokens,
            "memoMaxTokens": self.memo_max_tokens,
            "requestMaxTokens": self.request_max_tokens,
            "timeoutMs": self.timeout_ms,
            "relevance": self.relevance,
        }


@dataclass(frozen=True)
class BackendStatus:
    contacted: bool
    healthy: bool | None  # None: not contacted yet
    last_error: str | None
    proxy: ProxyRoute | None = None  # the proxy to the server, and why (None: no server known)

    @property
    def proxy_line(self) -> str | None:
        return None if self.proxy is None else self.proxy.describe()


@dataclass(frozen=True)
class ConfigStatus:
    path: str
    source: str | None
    project_file: str | None
    problems: tuple[str, ...]
    user_bank: UserBankChoice | None = None  # the User bank id in effect, and why

    @classmethod
    def of(cls, config: LoadedConfig) -> ConfigStatus:
        return cls(
            path=str(config.path),
            source=str(config.user_source) if config.user_source else None,
            project_file=str(config.project_file) if config.project_file else None,
            problems=tuple(problem.describe() for problem in config.problems),
            user_bank=config.user_bank,
        )


@dataclass(frozen=True)
class OutboxStatus:
    pending: int = 0
    submitted: int = 0
    dead: int = 0
    oldest_pending_age_s: float | None = None
    last_error: str | None = None
    set_aside: tuple[str, str] | None = None  # (moved to, reason) of a file set aside here
    error: str | None = None  # the outbox could not be read

    def counts_line(self) -> str:
        return counts_line(self.pending, self.submitted, self.dead)

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": self.error}
        return {
            "pending": self.pending,
            "submitted": self.submitted,
            "dead": self.dead,
            "oldestPendingAgeS": self.oldest_pending_age_s,
            "lastError": self.last_error,
            "setAside": None
            if self.set_aside is None
            else {"movedTo": self.set_aside[0], "reason": self.set_aside[1]},
        }


@dataclass(frozen=True)
class EvidenceStatus:
    enabled: bool
    recording: bool = False
    last_error: str | None = None
    path: str | None = None
    disk_bytes: int | None = None
    cap_bytes: int | None = None
    retention: str | None = None
    retention_shortened: bool | None = None
    problems: tuple[str, ...] = ()
    opened: bool = False
    # (records held back as below relevance, records recalled) over the last day
    held_back: tuple[int, int] | None = None

    @property
    def held_back_line(self) -> str | None:
        if self.held_back is None:
            return None
        held, recalled = self.held_back
        if not recalled:
            return "no records recalled over the last day"
        return (
            f"{held} of {recalled} recalled records ({held / recalled:.0%}) over the last day, "
            "as below relevance"
        )

    def to_json(self) -> dict[str, Any]:
        if not self.enabled:
            return {"enabled": False}
        data: dict[str, Any] = {
            "enabled": True,
            "recording": self.recording,
            "lastError": self.last_error,
        }
        if self.opened:
            data.update(
                path=self.path,
                diskBytes=self.disk_bytes,
                capBytes=self.cap_bytes,
                retention=self.retention,
                retentionShortened=self.retention_shortened,
                problems=list(self.problems),
                heldBackLastDay=None
                if self.held_back is None
                else {"heldBack": self.held_back[0], "recalled": self.held_back[1]},
            )
        return data


@dataclass(frozen=True)
class EngineStatus:
    enabled: bool
    off_reason: str | None
    profile: str
    project_id: str | None
    identity_source: str | None
    bank_rule: str | None
    proposed_scope: Scope | None  # what registering would create (memory off only)
    scope: ScopeStatus | None
    recall: RecallStatus
    retain_automatic: bool
    backend: BackendStatus
    config: ConfigStatus
    last_outcome: Outcome | None
    last_reason: str | None
    outbox: OutboxStatus | None
    evidence: EvidenceStatus
    set_aside: tuple[SetAsideEvent, ...]  # stores set aside by any process, not yet dealt with
    lifecycle: LifecycleCounts | None = None  # corrections in force, documents forgotten
    spend: LastDay | None = None  # the bank's model spend, last 24 h (engine/usage.py)
    retain_paused: str | None = None  # why automatic retain is paused (engine/budget.py)

    def to_json(self) -> dict[str, Any]:
        proposed = self.proposed_scope
        return {
            "enabled": self.enabled,
            "offReason": self.off_reason,
            "profile": self.profile,
            "projectId": self.project_id,
            "identitySource": self.identity_source,
            "bankRule": self.bank_rule,
            "proposedScope": None
            if proposed is None
            else {
                "scopeId": proposed.scope_id,
                "bankId": proposed.bank_id,
                "tags": list(proposed.tags),
            },
            "scope": None if self.scope is None else self.scope.to_json(),
            "recall": self.recall.to_json(),
            "retain": {"automatic": self.retain_automatic, "paused": self.retain_paused},
            "spend": None if self.spend is None else self.spend.to_json(),
            "backend": {
                "contacted": self.backend.contacted,
                "healthy": self.backend.healthy,
                "lastError": self.backend.last_error,
                "proxy": None if self.backend.proxy is None else self.backend.proxy.to_json(),
            },
            "config": {
                "path": self.config.path,
                "source": self.config.source,
                "projectFile": self.config.project_file,
                "problems": list(self.config.problems),
                "userBank": None
                if self.config.user_bank is None
                else self.config.user_bank.to_json(),
            },
            "lastOutcome": self.last_outcome,
            "lastReason": self.last_reason,
            "outbox": None if self.outbox is None else self.outbox.to_json(),
            "evidence": self.evidence.to_json(),
            "setAside": [event.to_json() for event in self.set_aside],
            "lifecycle": None
            if self.lifecycle is None
            else {
                "corrections": self.lifecycle.corrections,
                "forgottenDocuments": self.lifecycle.forgotten_documents,
            },
        }


def outbox_status(outbox: Outbox | None) -> OutboxStatus | None:
    """Read on the store thread (``run_store``)."""
    if outbox is None:
        return None
    try:
        health = outbox.health()
    except StateError as error:
        return OutboxStatus(error=str(error))
    aside = outbox.set_aside
    return OutboxStatus(
        pending=health.pending,
        submitted=health.submitted,
        dead=health.dead,
        oldest_pending_age_s=health.oldest_pending_age_s,
        last_error=health.last_error,
        set_aside=None if aside is None else (str(aside.moved_to), aside.reason),
    )


def evidence_status(
    enabled: bool, ledger: EvidenceLedger | None, last_error: str | None
) -> EvidenceStatus:
    """Read on the store thread (``run_store``)."""
    if not enabled:
        return EvidenceStatus(enabled=False)
    if ledger is None:
        return EvidenceStatus(enabled=True, recording=last_error is None, last_error=last_error)
    try:
        stats = ledger.stats(counts=False)
        held_back = ledger.held_share(time.time() - HELD_BACK_WINDOW_S)
    except StateError as failure:
        return EvidenceStatus(enabled=True, recording=False, last_error=str(failure))
    return EvidenceStatus(
        enabled=True,
        recording=last_error is None,
        last_error=last_error,
        path=stats.path,
        disk_bytes=stats.disk_bytes,
        cap_bytes=stats.cap_bytes,
        retention=stats.retention_note,
        retention_shortened=stats.retention_shortened,
        problems=tuple(stats.problems),
        opened=True,
        held_back=held_back,
    )


def identity_fields(
    resolution: ScopeResolution | None, scope: Scope | None
) -> tuple[str | None, str | None, str | None, Scope | None]:
    """(project id, identity source, bank rule, proposed scope when memory is off)."""
    if resolution is None:
        return None, None, None, None
    proposed = resolution.proposed if scope is None else None
    return (
        resolution.identity.project_id,
        resolution.identity.source,
        resolution.bank_rule,
        proposed,
    )


def describe_status(status: EngineStatus) -> str:
    """Status at a glance: what memory does here, and exactly why when it does nothing."""
    lines: list[str] = []
    project = f"{status.project_id} (from {status.identity_source})"
    scope = status.scope
    if scope is None:
        lines.append(f"Hindsight memory is OFF: {status.off_reason}")
        lines.append(f"  project: {project}")
        proposed = status.proposed_scope
        if proposed:
            lines.append(f"  would use: bank {proposed.bank_id}, tags {', '.join(proposed.tags)}")
    else:
        lines.append(f"Hindsight memory is on — profile {status.profile}")
        lines.append(f"  project: {project}")
        lines.append(f"  bank:    {scope.bank_id} ({status.bank_rule})")
        lines.append(f"  tags:    {', '.join(scope.tags)} (match {scope.tags_match})")
        recall = status.recall
        user = f", user bank {recall.user_max_tokens}" if recall.user_bank else ""
        lines.append(
            f"  recall:  project {recall.max_tokens} tokens{user}, memo "
            f"{recall.memo_max_tokens}, at most {recall.request_max_tokens} per request"
        )
        if recall.user_bank and status.config.user_bank is not None:
            lines.append(f"  user bank: {status.config.user_bank.describe()}")
        lines.append(f"  relevance: {recall.relevance}")
        last: str = status.last_outcome or "no request yet"
        if status.last_reason:
            last = f"{last} ({status.last_reason})"
        lines.append(f"  last:    {last}")
        lines.extend(cost_lines(status))
        backend = status.backend
        health = {
            True: "healthy",
            False: f"unavailable ({backend.last_error})",
            None: "not contacted yet",
        }
        lines.append(f"  backend: {health[backend.healthy]}")
        if backend.proxy_line is not None:
            lines.append(f"  proxy:   {backend.proxy_line}")
    outbox = status.outbox
    if outbox is not None and outbox.error is None:
        lines.append(f"  outbox:  {outbox.counts_line()}")
    if status.lifecycle is not None:
        lines.append(f"  lifecycle: {lifecycle_line(status.lifecycle)}")
    evidence = status.evidence
    if evidence.enabled:
        state = "recording" if evidence.recording else f"NOT recording ({evidence.last_error})"
        note = f"; {evidence.retention}" if evidence.retention else ""
        lines.append(f"  evidence: {state}{note}")
        if evidence.held_back_line and scope is not None:
            lines.append(f"  held back: {evidence.held_back_line}")
    for problem in status.config.problems:
        lines.append(f"  config:  {problem}")
    for event in status.set_aside:
        lines.append(f"  set aside: [{event.event_id}] {describe(event)}")
    return "\n".join(lines)


def cost_lines(status: EngineStatus) -> list[str]:
    """Automatic retain (paused by the token budget?) and the last 24 hours' model spend."""
    lines = [f"  retain:  {'automatic' if status.retain_automatic else 'off'}"]
    if status.retain_paused:
        lines.append(f"  retain:  PAUSED: {status.retain_paused}")
    if status.spend is not None:
        lines.append(f"  spend:   {status.spend.describe()}")
    return lines


def lifecycle_line(counts: LifecycleCounts) -> str:
    """ "N corrections in force, M forgotten documents" (``pi-hindsight memory corrections``)."""
    corrections = "1 correction" if counts.corrections == 1 else f"{counts.corrections} corrections"
    documents = (
        "1 forgotten document"
        if counts.forgotten_documents == 1
        else f"{counts.forgotten_documents} forgotten documents"
    )
    return f"{corrections} in force, {documents}"


def lifecycle_counts(catalog: Catalog | None, scope: Scope | None) -> LifecycleCounts | None:
    """Read on the store thread (``run_store``); None when memory is off or unreadable."""
    if scope is None or catalog is None:
        return None
    try:
        return catalog.lifecycle_counts(scope.scope_id)
    except StateError:
        return None
