"""Which memory scope a session belongs to, and whether it may use memory at all.

A scope is the isolation boundary (R-SCOPE-1): one bank plus an exact tag set. Recall uses the tag
set with ``tags_match="exact"`` (set equality, untagged excluded), so neither untagged memories nor
another scope's memories can come in (R-SCOPE-8); retain writes exactly the same tags.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pi_hindsight.backend.records import TagsMatch
from pi_hindsight.config import Settings
from pi_hindsight.identity import ProjectIdentity, resolve_identity
from pi_hindsight.stores.catalog import Catalog, ScopeRecord

SCOPE_TAGS_MATCH: TagsMatch = "exact"


@dataclass(frozen=True)
class Scope:
    scope_id: str
    project_id: str
    bank_id: str
    tags: tuple[str, ...]

    @classmethod
    def from_record(cls, record: ScopeRecord) -> Scope:
        return cls(
            scope_id=record.scope_id,
            project_id=record.project_id,
            bank_id=record.bank_id,
            tags=record.tags,
        )


@dataclass(frozen=True)
class ScopeResolution:
    identity: ProjectIdentity
    proposed: Scope  # what registering this location would create
    registered: Scope | None  # the registered scope, if any

    @property
    def scope(self) -> Scope | None:
        return self.registered


def proposed_scope(identity: ProjectIdentity, settings: Settings) -> Scope:
    tag = f"project:{identity.project_id}"
    return Scope(
        scope_id=tag,
        project_id=identity.project_id,
        bank_id=settings.project_bank.bank_id,
        tags=(tag,),
    )


def resolve_scope(start_dir: Path, settings: Settings, catalog: Catalog) -> ScopeResolution:
    """Resolve once per session: a session keeps its scope when the agent changes directory."""
    identity = resolve_identity(start_dir)
    record = catalog.find_for(identity.project_id, start_dir)
    return ScopeResolution(
        identity=identity,
        proposed=proposed_scope(identity, settings),
        registered=None if record is None else Scope.from_record(record),
    )


def register_location(
    location: Path, settings: Settings, catalog: Catalog, *, consent: str
) -> Scope:
    identity = resolve_identity(location)
    existing = catalog.find_for(identity.project_id, location)
    scope = Scope.from_record(existing) if existing else proposed_scope(identity, settings)
    record = catalog.register(
        scope_id=scope.scope_id,
        project_id=scope.project_id,
        identity_source=identity.source,
        bank_id=scope.bank_id,
        tags=scope.tags,
        location=identity.root,
        consent=consent,
    )
    return Scope.from_record(record)
