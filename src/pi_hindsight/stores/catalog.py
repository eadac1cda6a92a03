"""The catalogue of registered scopes (``catalog.sqlite``, user-owned, 0600).

A location is used for memory only once it is registered here (R-CONSENT-1/2). Registering records
the project id, the bank and the exact tags the scope uses, so they survive config changes and
replacing the extension (R-LEGACY-2: ``export``/``import``). A declined consent is recorded too, so
the agent does not ask again. Nothing inside a repository can write this file.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pi_hindsight.errors import StateError
from pi_hindsight.stores.corrections import MIGRATION as LIFECYCLE_MIGRATION
from pi_hindsight.stores.corrections import LifecycleRecords
from pi_hindsight.stores.sqlite import (
    Migration,
    SetAside,
    StoreConnection,
    StoreSchema,
    open_store,
    transaction,
    translated_errors,
)

CATALOG_FILE_NAME = "catalog.sqlite"
EXPORT_FORMAT = "pi-hindsight-catalog/1"

SCHEMA = StoreSchema(
    name="catalog",
    journal="delete",  # registrations are rare and precious: in the main file at commit (ADR 0006)
    application_id=0x50484331,  # "PHC1"
    migrations=(
        Migration(
            "create scopes and locations",
            """
            CREATE TABLE scopes (
                scope_id TEXT PRIMARY KEY,
                project_id TEXT NOT NULL,
                identity_source TEXT NOT NULL,
                bank_id TEXT NOT NULL,
                tags TEXT NOT NULL,
                registered_at REAL NOT NULL,
                consent TEXT NOT NULL
            );
            CREATE INDEX scopes_by_project ON scopes(project_id);
            CREATE TABLE locations (
                path TEXT PRIMARY KEY,
                scope_id TEXT NOT NULL REFERENCES scopes(scope_id) ON DELETE CASCADE,
                registered_at REAL NOT NULL
            )
            """,
        ),
        Migration(
            "pins and declines",
            """
            ALTER TABLE locations ADD COLUMN pin TEXT;
            CREATE TABLE declines (
                project_id TEXT PRIMARY KEY,
                path TEXT NOT NULL,
                declined_at REAL NOT NULL
            )
            """,
        ),
        Migration(
            "memo operations",
            """
            CREATE TABLE operations (
                operation_id TEXT PRIMARY KEY,
                scope_id TEXT NOT NULL,
                bank_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                subject TEXT NOT NULL,
                requested_at REAL NOT NULL
            );
            CREATE INDEX operations_by_scope ON operations(scope_id, requested_at)
            """,
        ),
        Migration(
            "consent per location",
            # R-CONSENT-1 is about locations: a clone elsewhere of a registered project is asked
            # again. A location's repository (its common git dir) tells a worktree of a
            # registered clone (the same location) from another clone; declines are per location.
            """
            ALTER TABLE locations ADD COLUMN git_common_dir TEXT;
            CREATE INDEX locations_by_common_dir ON locations(git_common_dir);
            CREATE TABLE location_declines (
                path TEXT PRIMARY KEY,
                project_id TEXT NOT NULL,
                declined_at REAL NOT NULL
            );
            INSERT OR IGNORE INTO location_declines (path, project_id, declined_at)
                SELECT path, project_id, declined_at FROM declines;
            DROP TABLE declines
            """,
        ),
        LIFECYCLE_MIGRATION,
    ),
)


@dataclass(frozen=True)
class OperationRecord:
    """An operation this layer requested (a memo refresh), kept so its id can be looked up after
    a restart — and only from the scope that requested it."""

    operation_id: str
    scope_id: str
    bank_id: str
    kind: str  # "memo-refresh"
    subject: str  # the mental model id
    requested_at: float


@dataclass(frozen=True)
class ScopeRecord:
    scope_id: str
    project_id: str
    identity_source: str
    bank_id: str  # may hold "{session}" when the bank is per session (dynamic naming)
    tags: tuple[str, ...]
    registered_at: float
    consent: str  # how consent was given: "cli", "ui", "import"
    locations: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImportReport:
    added_scopes: int
    added_locations: int
    unchanged: int
    conflicts: tuple[str, ...]


class Catalog(LifecycleRecords):
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / CATALOG_FILE_NAME
        self._connection: StoreConnection
        self.set_aside: SetAside | None
        self._connection, self.set_aside = open_store(self.path, SCHEMA)

    def close(self) -> None:
        self._connection.close()

    def _follow_live_file(self) -> None:
        """Reopen before a write if another process set this file aside, so a registration
        goes to the live catalogue, not the set-aside file."""
        mark = self._connection.commit_mark
        if mark is not None and mark.replaced():
            self._connection.close()
            self._connection, aside = open_store(self.path, SCHEMA)
            self.set_aside = aside or self.set_aside

    def _record(self, row: sqlite3.Row) -> ScopeRecord:
        locations = tuple(
            location["path"]
            for location in self._connection.execute(
                "SELECT path FROM locations WHERE scope_id = ? ORDER BY path", (row["scope_id"],)
            )
        )
        return ScopeRecord(
            scope_id=row["scope_id"],
            project_id=row["project_id"],
            identity_source=row["identity_source"],
            bank_id=row["bank_id"],
            tags=tuple(json.loads(row["tags"])),
            registered_at=row["registered_at"],
            consent=row["consent"],
            locations=locations,
        )

    def register(
        self,
        *,
        scope_id: str,
        project_id: str,
        identity_source: str,
        bank_id: str,
        tags: tuple[str, ...],
        location: Path,
        consent: str,
        pin: str | None = None,
        git_common_dir: Path | None = None,
    ) -> ScopeRecord:
        """Register ``location`` for the scope; the scope is created on first registration.

        An existing scope keeps its bank and tags (they are the scope's identity); only the new
        location is added. A consent declined earlier at this location is forgotten.
        """
        self._follow_live_file()
        now = time.time()
        with translated_errors("catalog", self.path), transaction(self._connection):
            self._connection.execute(
                "INSERT OR IGNORE INTO scopes VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    scope_id,
                    project_id,
                    identity_source,
                    bank_id,
                    json.dumps(list(tags)),
                    now,
                    consent,
                ),
            )
            self._connection.execute(
                "INSERT OR REPLACE INTO locations (path, scope_id, registered_at, pin, "
                "git_common_dir) VALUES (?, ?, ?, ?, ?)",
                (
                    str(location.resolve()),
                    scope_id,
                    now,
                    pin,
                    None if git_common_dir is None else str(git_common_dir),
                ),
            )
            self._connection.execute(
                "DELETE FROM location_declines WHERE path = ?", (str(location.resolve()),)
            )
        found = self.get(scope_id)
        if found is None:  # pragma: no cover - inserted above
            raise StateError(f"catalog {self.path}: registration of {scope_id} did not persist")
        return found

    def unregister(self, scope_id: str) -> bool:
        with translated_errors("catalog", self.path), transaction(self._connection):
            cursor = self._connection.execute("DELETE FROM scopes WHERE scope_id = ?", (scope_id,))
        return cursor.rowcount > 0

    def get(self, scope_id: str) -> ScopeRecord | None:
        with translated_errors("catalog", self.path):
            row = self._connection.execute(
                "SELECT * FROM scopes WHERE scope_id = ?", (scope_id,)
            ).fetchone()
            return None if row is None else self._record(row)

    def _ancestor_location(self, directory: Path, *, pinned: bool) -> sqlite3.Row | None:
        resolved = directory.resolve()
        candidates = [str(resolved), *(str(parent) for parent in resolved.parents)]
        placeholders = ",".join("?" for _ in candidates)
        condition = "pin IS NOT NULL" if pinned else "1"
        row: sqlite3.Row | None = self._connection.execute(
            f"SELECT scope_id, path, pin FROM locations WHERE path IN ({placeholders}) "  # noqa: S608 - placeholders only
            f"AND {condition} ORDER BY length(path) DESC LIMIT 1",
            candidates,
        ).fetchone()
        return row

    def pin_for(self, directory: Path) -> str | None:
        """A project id pinned at registration for ``directory`` or an ancestor of it."""
        with translated_errors("catalog", self.path):
            row = self._ancestor_location(directory, pinned=True)
        return None if row is None else str(row["pin"])

    def find_for(
        self, project_id: str, directory: Path, *, by_ancestor: bool = True
    ) -> ScopeRecord | None:
        """The registered scope for a session: by project id, else (``by_ancestor``, for plain
        directories) by a registered ancestor directory, which covers its subdirectories."""
        with translated_errors("catalog", self.path):
            row = self._connection.execute(
                "SELECT * FROM scopes WHERE project_id = ? ORDER BY registered_at LIMIT 1",
                (project_id,),
            ).fetchone()
            if row is not None:
                return self._record(row)
            if not by_ancestor:
                return None
            location = self._ancestor_location(directory, pinned=False)
            return None if location is None else self.get(location["scope_id"])

    def location_registered(
        self,
        scope_id: str,
        root: Path,
        *,
        git_common_dir: Path | None,
        start_dir: Path | None = None,
        common_dir_of: Callable[[Path], Path | None] | None = None,
    ) -> bool:
        """Whether this location is registered for ``scope_id`` (R-CONSENT-1 is per location).

        The same location: the registered directory itself, a worktree of a registered clone
        (the same common git dir), or — for plain directories (``start_dir``) — a subdirectory of
        a registered one. Rows registered before common dirs were recorded are checked with
        ``common_dir_of`` (git) once and filled in.
        """
        with translated_errors("catalog", self.path):
            rows = self._connection.execute(
                "SELECT path, git_common_dir FROM locations WHERE scope_id = ?", (scope_id,)
            ).fetchall()
        resolved = str(root.resolve())
        common = None if git_common_dir is None else str(git_common_dir)
        for row in rows:
            if row["path"] == resolved or (common is not None and row["git_common_dir"] == common):
                return True
            if start_dir is not None:
                path = Path(row["path"])
                if path == start_dir.resolve() or path in start_dir.resolve().parents:
                    return True
        if common is None or common_dir_of is None:
            return False
        for row in rows:
            if row["git_common_dir"] is not None or not Path(row["path"]).is_dir():
                continue
            found = common_dir_of(Path(row["path"]))
            if found is None:
                continue
            self._follow_live_file()
            with translated_errors("catalog", self.path), transaction(self._connection):
                self._connection.execute(
                    "UPDATE locations SET git_common_dir = ? WHERE path = ?",
                    (str(found), row["path"]),
                )
            if str(found) == common:
                return True
        return False

    def scopes(self) -> list[ScopeRecord]:
        with translated_errors("catalog", self.path):
            rows = self._connection.execute(
                "SELECT * FROM scopes ORDER BY registered_at"
            ).fetchall()
            return [self._record(row) for row in rows]

    # -- consent ---------------------------------------------------------------------------

    def record_decline(self, location: Path, project_id: str) -> None:
        """The user declined memory at ``location`` (a repository root or a directory)."""
        self._follow_live_file()
        with translated_errors("catalog", self.path), transaction(self._connection):
            self._connection.execute(
                "INSERT OR REPLACE INTO location_declines VALUES (?, ?, ?)",
                (str(location.resolve()), project_id, time.time()),
            )

    def declined(self, location: Path) -> float | None:
        """When memory was declined at ``location``, if it was."""
        with translated_errors("catalog", self.path):
            row = self._connection.execute(
                "SELECT declined_at FROM location_declines WHERE path = ?",
                (str(location.resolve()),),
            ).fetchone()
        return None if row is None else float(row["declined_at"])

    # -- operations this layer requested -----------------------------------------------------

    def record_operation(
        self, *, operation_id: str, scope_id: str, bank_id: str, kind: str, subject: str
    ) -> None:
        self._follow_live_file()
        with translated_errors("catalog", self.path), transaction(self._connection):
            self._connection.execute(
                "INSERT OR IGNORE INTO operations VALUES (?, ?, ?, ?, ?, ?)",
                (operation_id, scope_id, bank_id, kind, subject, time.time()),
            )

    def operation(self, operation_id: str) -> OperationRecord | None:
        with translated_errors("catalog", self.path):
            row = self._connection.execute(
                "SELECT * FROM operations WHERE operation_id = ?", (operation_id,)
            ).fetchone()
        if row is None:
            return None
        return OperationRecord(
            operation_id=row["operation_id"],
            scope_id=row["scope_id"],
            bank_id=row["bank_id"],
            kind=row["kind"],
            subject=row["subject"],
            requested_at=row["requested_at"],
        )

    # -- export / import (R-LEGACY-2) --------------------------------------------------------

    def export(self) -> dict[str, Any]:
        with translated_errors("catalog", self.path):
            scopes = self._connection.execute(
                "SELECT * FROM scopes ORDER BY registered_at"
            ).fetchall()
            locations = self._connection.execute("SELECT * FROM locations ORDER BY path").fetchall()
            declines = self._connection.execute("SELECT * FROM location_declines").fetchall()
        return {
            "format": EXPORT_FORMAT,
            "exportedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "scopes": [
                {
                    "scopeId": row["scope_id"],
                    "projectId": row["project_id"],
                    "identitySource": row["identity_source"],
                    "bankId": row["bank_id"],
                    "tags": json.loads(row["tags"]),
                    "registeredAt": row["registered_at"],
                    "consent": row["consent"],
                }
                for row in scopes
            ],
            "locations": [
                {
                    "path": row["path"],
                    "scopeId": row["scope_id"],
                    "registeredAt": row["registered_at"],
                    "pin": row["pin"],
                    "gitCommonDir": row["git_common_dir"],
                }
                for row in locations
            ],
            "declines": [
                {
                    "projectId": row["project_id"],
                    "path": row["path"],
                    "declinedAt": row["declined_at"],
                }
                for row in declines
            ],
        }

    def restore(
        self,
        scopes: Sequence[Mapping[str, Any]],
        locations: Sequence[Mapping[str, Any]],
        declines: Sequence[Mapping[str, Any]],
    ) -> ImportReport:
        """Merge rows salvaged from a set-aside catalogue (``stores/salvage.py``) as an import:
        nothing existing is rewritten. Rows missing a required value are left out."""
        data: dict[str, Any] = {
            "format": EXPORT_FORMAT,
            "scopes": [
                {
                    "scopeId": row.get("scope_id"),
                    "projectId": row.get("project_id"),
                    "identitySource": row.get("identity_source"),
                    "bankId": row.get("bank_id"),
                    "tags": _tags(row.get("tags")),
                    "registeredAt": row.get("registered_at"),
                }
                for row in scopes
            ],
            "locations": [
                {
                    "path": row.get("path"),
                    "scopeId": row.get("scope_id"),
                    "registeredAt": row.get("registered_at"),
                    "pin": row.get("pin"),
                    "gitCommonDir": row.get("git_common_dir"),
                }
                for row in locations
            ],
            "declines": [
                {
                    "projectId": row.get("project_id"),
                    "path": row.get("path"),
                    "declinedAt": row.get("declined_at"),
                }
                for row in declines
            ],
        }
        for key in ("scopes", "locations", "declines"):
            data[key] = [entry for entry in data[key] if _whole(entry)]
        return self.import_(data)

    def import_(self, data: Mapping[str, Any]) -> ImportReport:
        """Merge an export: new scopes and locations are added; an existing scope id with a
        different bank or tags is a conflict and is left as it is (never silently rewritten)."""
        if data.get("format") != EXPORT_FORMAT:
            raise StateError(
                f"not a pi-hindsight catalogue export (format {data.get('format')!r})",
                hint=f"expected format {EXPORT_FORMAT!r} from `pi-hindsight scope export`",
            )
        added_scopes = added_locations = unchanged = 0
        conflicts: list[str] = []
        try:
            with translated_errors("catalog", self.path), transaction(self._connection):
                for scope in data.get("scopes", []):
                    existing = self._connection.execute(
                        "SELECT bank_id, tags FROM scopes WHERE scope_id = ?", (scope["scopeId"],)
                    ).fetchone()
                    if existing is None:
                        self._connection.execute(
                            "INSERT INTO scopes VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (
                                scope["scopeId"],
                                scope["projectId"],
                                scope["identitySource"],
                                scope["bankId"],
                                json.dumps(list(scope["tags"])),
                                float(scope["registeredAt"]),
                                "import",
                            ),
                        )
                        added_scopes += 1
                        continue
                    kept_tags = json.loads(existing["tags"])
                    if existing["bank_id"] != scope["bankId"] or kept_tags != list(scope["tags"]):
                        conflicts.append(
                            f"{scope['scopeId']}: kept bank {existing['bank_id']} / tags "
                            f"{kept_tags}, not {scope['bankId']} / {scope['tags']}"
                        )
                    else:
                        unchanged += 1
                for location in data.get("locations", []):
                    cursor = self._connection.execute(
                        "INSERT OR IGNORE INTO locations (path, scope_id, registered_at, pin, "
                        "git_common_dir) SELECT ?, ?, ?, ?, ? "
                        "WHERE EXISTS (SELECT 1 FROM scopes WHERE scope_id = ?)",
                        (
                            location["path"],
                            location["scopeId"],
                            float(location["registeredAt"]),
                            location.get("pin"),
                            location.get("gitCommonDir"),
                            location["scopeId"],
                        ),
                    )
                    added_locations += cursor.rowcount
                for decline in data.get("declines", []):
                    self._connection.execute(
                        "INSERT OR IGNORE INTO location_declines VALUES (?, ?, ?)",
                        (decline["path"], decline["projectId"], float(decline["declinedAt"])),
                    )
        except (KeyError, TypeError, ValueError) as error:
            raise StateError(
                f"the catalogue export is malformed: {error!r}; nothing was imported",
                hint="export again with `pi-hindsight scope export`",
            ) from error
        return ImportReport(added_scopes, added_locations, unchanged, tuple(conflicts))


def _tags(raw: object) -> list[str] | None:
    try:
        tags = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return tags if isinstance(tags, list) and all(isinstance(t, str) for t in tags) else None


def _whole(entry: Mapping[str, Any]) -> bool:
    """A salvaged row with every value an import needs (a pin and a common dir may be absent)."""
    return all(
        value is not None for key, value in entry.items() if key not in ("pin", "gitCommonDir")
    )
