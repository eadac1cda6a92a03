"""The engine's status: everything that decides what memory does for this session, never hiding a
degraded state (backend down, outbox dead letters, evidence not recorded, config problems, a store
set aside). One typed shape (``EngineStatus``, a :class:`~pi_hindsight.serialisation.Record`); its
``to_json`` is the one wire form (the ``status`` RPC method, ``--json``, the status tool)."""

from __future__ import annotations

import time
from typing import Any

from pydantic import (
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
)

from pi_hindsight.config import LoadedConfig, Settings
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH, Scope, ScopeResolution
from pi_hindsight.engine.spend import LastDay
from pi_hindsight.engine.types import Outcome
from pi_hindsight.errors import StateError
from pi_hindsight.relevance import describe as describe_relevance
from pi_hindsight.serialisation import Record
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.corrections import LifecycleCounts
from pi_hindsight.stores.evidence import EvidenceLedger
from pi_hindsight.stores.outbox import Outbox, counts_line
from pi_hindsight.stores.set_aside import SetAsideEvent, describe
from pi_hindsight.transport import ProxyRoute
from pi_hindsight.user_bank import UserBankChoice

HELD_BACK_WINDOW_S = 86_400.0  # status shows the held-back share over the last day


class ScopeStatus(Record):
    scope_id: str
    project_id: str
    bank_id: str
    tags: tuple[str, ...]
    tags_match: str = SCOPE_TAGS_MATCH

    @classmethod
    def of(cls, scope: Scope) -> ScopeStatus:
        return cls(
            scope_id=scope.scope_id,
            project_id=scope.project_id,
            bank_id=scope.bank_id,
            tags=scope.tags,
        )


class RecallStatus(Record):
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


class RetainStatus(Record):
    automatic: bool
    paused: str | None = None  # why automatic retain is paused (engine/budget.py)


class BackendStatus(Record):
    contacted: bool
    healthy: bool | None  # None: not contacted yet
    last_error: str | None
    proxy: ProxyRoute | None = None  # the proxy to the server, and why (None: no server known)

    @property
    def proxy_line(self) -> str | None:
        return None if self.proxy is None else self.proxy.describe()


class ConfigStatus(Record):
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


class MovedStore(Record):
    """A store file set aside here: where it went, and why."""

    moved_to: str
    reason: str


def _only(
    data: dict[str, Any], info: SerializationInfo, model: type[Record], *names: str
) -> dict[str, Any]:
    """``data`` (a record's JSON form) keeping only the fields ``names``, in JSON names or not."""
    fields = model.model_fields
    keys = {(fields[name].alias or name) if info.by_alias else name for name in names}
    return {key: value for key, value in data.items() if key in keys}


class OutboxStatus(Record):
    pending: int = 0
    submitted: int = 0
    dead: int = 0
    oldest_pending_age_s: float | None = None
    last_error: str | None = None
    set_aside: MovedStore | None = None  # a file set aside here
    error: str | None = None  # the outbox could not be read: the JSON says only this

    def counts_line(self) -> str:
        return counts_line(self.pending, self.submitted, self.dead)

    @model_serializer(mode="wrap")
    def _shown(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if self.error is not None:
            return _only(data, info, OutboxStatus, "error")
        return _only(data, info, OutboxStatus, *(set(OutboxStatus.model_fields) - {"error"}))


class HeldBack(Record):
    """Records held back as below relevance, of those recalled, over the last day."""

    held_back: int
    recalled: int


class EvidenceStatus(Record):
    enabled: bool
    recording: bool = False
    last_error: str | None = None
    path: str | None = None
    disk_bytes: int | None = None
    cap_bytes: int | None = None
    retention: str | None = None
    retention_shortened: bool | None = None
    problems: tuple[str, ...] = ()
    opened: bool = False  # the ledger was read: the fields above ``opened`` are known
    held_back: HeldBack | None = Field(default=None, alias="heldBackLastDay")

    @property
    def held_back_line(self) -> str | None:
        if self.held_back is None:
            return None
        held, recalled = self.held_back.held_back, self.held_back.recalled
        if not recalled:
            return "no records recalled over the last day"
        return (
            f"{held} of {recalled} recalled records ({held / recalled:.0%}) over the last day, "
            "as below relevance"
        )

    @model_serializer(mode="wrap")
    def _shown(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        """Off: only ``enabled``; not opened: whether it records; opened: the ledger's figures."""
        data = handler(self)
        if not self.enabled:
            return _only(data, info, EvidenceStatus, "enabled")
        if not self.opened:
            return _only(data, info, EvidenceStatus, "enabled", "recording", "last_error")
        return _only(data, info, EvidenceStatus, *(set(EvidenceStatus.model_fields) - {"opened"}))


class EngineStatus(Record):
    enabled: bool
    off_reason: str | None
    profile: str
    project_id: str | None
    identity_source: str | None
    bank_rule: str | None
    proposed_scope: Scope | None  # what registering would create (memory off only)
    scope: ScopeStatus | None
    recall: RecallStatus
    retain: RetainStatus
    spend: LastDay | None = None  # the bank's model spend, last 24 h (engine/spend.py)
    backend: BackendStatus
    config: ConfigStatus
    last_outcome: Outcome | None
    last_reason: str | None
    outbox: OutboxStatus | None
    evidence: EvidenceStatus
    set_aside: tuple[SetAsideEvent, ...]  # stores set aside by any process, not yet dealt with
    lifecycle: LifecycleCounts | None = None  # corrections in force, documents forgotten

    @field_serializer("proposed_scope")
    def _proposed(self, proposed: Scope | None) -> dict[str, Any] | None:
        if proposed is None:
            return None
        return {
            "scopeId": proposed.scope_id,
            "bankId": proposed.bank_id,
            "tags": list(proposed.tags),
        }

    @field_serializer("set_aside")
    def _set_aside(self, events: tuple[SetAsideEvent, ...]) -> list[dict[str, Any]]:
        return [event.to_json() for event in events]  # as ``state list --json`` shows them


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
        set_aside=None
        if aside is None
        else MovedStore(moved_to=str(aside.moved_to), reason=aside.reason),
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
        held_back=None
        if held_back is None
        else HeldBack(held_back=held_back[0], recalled=held_back[1]),
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
    lines = [f"  retain:  {'automatic' if status.retain.automatic else 'off'}"]
    if status.retain.paused:
        lines.append(f"  retain:  PAUSED: {status.retain.paused}")
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
