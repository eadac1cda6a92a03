"""Which memory scope a session belongs to, and whether it may use memory at all.

A scope is the isolation boundary (R-SCOPE-1): one bank plus an exact tag set. Recall uses the tag
set with ``tags_match="exact"`` (set equality, untagged excluded), so neither untagged memories nor
another scope's memories can come in (R-SCOPE-8; docs/adr/0003); retain writes exactly the same
tags. The scope is resolved once per session, so changing directory never moves a session.

Bank naming (R-SCOPE-4, R-SCOPE-6), highest priority first: the directory→bank map; a dynamic id
composed from fields joined with ``::``; the ``isolated-bank`` topology (one bank per project); the
domain bank shared by projects (default). The tags are ``project:<id>`` in every case.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pi_hindsight.backend.resources import TagsMatch
from pi_hindsight.config import Settings
from pi_hindsight.identity import ProjectIdentity, git_common_dir, resolve_identity
from pi_hindsight.stores.catalog import Catalog, ScopeRecord

SCOPE_TAGS_MATCH: TagsMatch = "exact"
SESSION_PLACEHOLDER = "{session}"
USER_SCOPE_TAGS = ("scope:user",)
_PLACEHOLDER_VALUES = {"unknown", "anonymous"}


@dataclass(frozen=True)
class Scope:
    scope_id: str
    project_id: str
    bank_id: str  # may contain "{session}" for per-session banks
    tags: tuple[str, ...]

    @classmethod
    def from_record(cls, record: ScopeRecord) -> Scope:
        return cls(
            scope_id=record.scope_id,
            project_id=record.project_id,
            bank_id=record.bank_id,
            tags=record.tags,
        )

    def bank_for(self, session_id: str) -> str:
        return self.bank_id.replace(SESSION_PLACEHOLDER, bank_slug(session_id))


@dataclass(frozen=True)
class BankChoice:
    bank_id: str
    rule: str  # "directory-map", "dynamic", "isolated-bank", "domain"
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScopeResolution:
    identity: ProjectIdentity
    proposed: Scope  # what registering this location would create (or join)
    registered: Scope | None  # the registered scope, when this location is registered
    bank_rule: str
    warnings: tuple[str, ...]
    # The project is registered, but at other locations: registering here joins that scope.
    known_elsewhere: ScopeRecord | None = None


def bank_slug(text: str) -> str:
    """A bank-id-safe form of ``text`` (no ``/``: bank ids are URL path segments)."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.")
    return slug or "unnamed"


def _field_value(
    field: str, identity: ProjectIdentity, settings: Settings
) -> tuple[str, str | None]:
    """A dynamic-id field's value, and a warning when it is a placeholder default."""
    naming = settings.bank_naming
    if field == "agent":
        value = naming.agent_name
    elif field == "project":
        value = bank_slug(identity.project_id)
    elif field == "session":
        return SESSION_PLACEHOLDER, None
    elif field == "channel":
        value = naming.channel or os.environ.get("PI_HINDSIGHT_CHANNEL") or "unknown"
    else:  # user
        value = naming.user_id or os.environ.get("USER") or os.environ.get("LOGNAME") or "anonymous"
    warning = None
    if value in _PLACEHOLDER_VALUES:
        warning = (
            f"bank id field {field!r} resolves to the placeholder {value!r}: distinct "
            f"{field}s would silently share one bank; set bankNaming."
            f"{'channel' if field == 'channel' else 'userId'}"
        )
    return bank_slug(value), warning


def choose_project_bank(
    identity: ProjectIdentity, settings: Settings, start_dir: Path
) -> BankChoice:
    naming = settings.bank_naming
    resolved = start_dir.resolve()
    best: tuple[int, str] | None = None
    for directory, bank in naming.directory_bank_map.items():
        root = Path(directory).expanduser().resolve()
        if resolved == root or root in resolved.parents:
            depth = len(root.parts)
            if best is None or depth > best[0]:
                best = (depth, bank)
    if best is not None:
        return BankChoice(best[1], "directory-map")
    if naming.dynamic_bank_id:
        parts: list[str] = []
        warnings: list[str] = []
        for field in naming.dynamic_bank_granularity:
            value, warning = _field_value(field, identity, settings)
            parts.append(value)
            if warning:
                warnings.append(warning)
        return BankChoice("::".join(parts), "dynamic", tuple(warnings))
    if settings.topology == "isolated-bank":
        return BankChoice(
            f"{settings.banks.project.bank_id}::{bank_slug(identity.project_id)}", "isolated-bank"
        )
    return BankChoice(settings.banks.project.bank_id, "domain")


def proposed_scope(
    identity: ProjectIdentity, settings: Settings, start_dir: Path
) -> tuple[Scope, BankChoice]:
    choice = choose_project_bank(identity, settings, start_dir)
    tag = f"project:{identity.project_id}"
    return Scope(
        scope_id=tag, project_id=identity.project_id, bank_id=choice.bank_id, tags=(tag,)
    ), choice


def _pin_for(start_dir: Path, settings: Settings, catalog: Catalog) -> str | None:
    resolved = start_dir.resolve()
    best: tuple[int, str] | None = None
    for directory, project_id in settings.project_pins.items():
        root = Path(directory).expanduser().resolve()
        if (resolved == root or root in resolved.parents) and (
            best is None or len(root.parts) > best[0]
        ):
            best = (len(root.parts), project_id)
    if best is not None:
        return best[1]
    return catalog.pin_for(start_dir)


def resolve_scope(start_dir: Path, settings: Settings, catalog: Catalog) -> ScopeResolution:
    """Resolve once per session: a session keeps its scope when the agent changes directory."""
    identity = resolve_identity(start_dir, pin=_pin_for(start_dir, settings, catalog))
    # A registered plain directory covers its subdirectories, but never a repository inside it:
    # a repository is its own project.
    plain = identity.source == "directory" or identity.git_common_dir is None
    record = catalog.find_for(identity.project_id, start_dir, by_ancestor=plain)
    known_elsewhere: ScopeRecord | None = None
    if record is not None and not catalog.location_registered(
        record.scope_id,
        identity.root,
        git_common_dir=identity.git_common_dir,
        start_dir=start_dir if plain else None,
        common_dir_of=git_common_dir,
    ):
        # The same project, registered at another location (another clone): consent is per
        # location (R-CONSENT-1), so this one is asked, and would join that scope.
        record, known_elsewhere = None, record
    proposed, choice = proposed_scope(identity, settings, start_dir)
    if known_elsewhere is not None:
        proposed = Scope.from_record(known_elsewhere)
    warnings = list(choice.warnings)
    registered = None if record is None else Scope.from_record(record)
    if registered is not None and registered.bank_id != proposed.bank_id:
        warnings.append(
            f"the configuration now maps this project to bank {proposed.bank_id!r}, but it was "
            f"registered with bank {registered.bank_id!r}, which stays in use; move its memories "
            "with the scope move command, then register again"
        )
    return ScopeResolution(
        identity=identity,
        proposed=proposed,
        registered=registered,
        bank_rule=choice.rule,
        warnings=tuple(warnings),
        known_elsewhere=known_elsewhere,
    )


def register_location(
    location: Path,
    settings: Settings,
    catalog: Catalog,
    *,
    consent: str,
    pin: str | None = None,
) -> Scope:
    """Register ``location`` (its repository root, for a git repository)."""
    identity = resolve_identity(location, pin=pin or _pin_for(location, settings, catalog))
    existing = catalog.find_for(
        identity.project_id,
        location,
        by_ancestor=identity.source == "directory" or identity.git_common_dir is None,
    )
    scope = (
        Scope.from_record(existing) if existing else proposed_scope(identity, settings, location)[0]
    )
    record = catalog.register(
        scope_id=scope.scope_id,
        project_id=scope.project_id,
        identity_source=identity.source,
        bank_id=scope.bank_id,
        tags=scope.tags,
        location=identity.root,
        consent=consent,
        pin=pin,
        git_common_dir=identity.git_common_dir,
    )
    return Scope.from_record(record)
