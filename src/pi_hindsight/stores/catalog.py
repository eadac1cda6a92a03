"""The catalogue of registered scopes (``catalog.sqlite``, user-owned, 0600).

A location is used for memory only once it is registered here (R-CONSENT-1/2). Registering records
the project id, the bank and the exact tags the scope uses, so they survive config changes and
replacing the extension (R-LEGACY-2). Nothing inside a repository can write this file.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from pi_hindsight.stores.sqlite import (
    Migration,
    SetAside,
    StoreSchema,
    open_store,
    transaction,
    translated_errors,
)

CATALOG_FILE_NAME = "catalog.sqlite"

SCHEMA = StoreSchema(
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
    ),
)


@dataclass(frozen=True)
class ScopeRecord:
    scope_id: str
    project_id: str
    identity_source: str
    bank_id: str
    tags: tuple[str, ...]
    registered_at: float
    consent: str  # how consent was given: "cli", "ui"
    locations: tuple[str, ...] = ()


class Catalog:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / CATALOG_FILE_NAME
        self._connection: sqlite3.Connection
        self.set_aside: SetAside | None
        self._connection, self.set_aside = open_store(self.path, SCHEMA)

    def close(self) -> None:
        self._connection.close()

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
    ) -> ScopeRecord:
        """Register ``location`` for the scope; the scope is created on first registration.

        An existing scope keeps its bank and tags (they are the scope's identity); only the new
        location is added.
        """
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
                "INSERT OR REPLACE INTO locations VALUES (?, ?, ?)",
                (str(location.resolve()), scope_id, now),
            )
        found = self.get(scope_id)
        if found is None:  # pragma: no cover - inserted above
            raise LookupError(scope_id)
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

    def find_for(self, project_id: str, directory: Path) -> ScopeRecord | None:
        """The registered scope for a session: by project id, else by a registered ancestor dir."""
        with translated_errors("catalog", self.path):
            row = self._connection.execute(
                "SELECT * FROM scopes WHERE project_id = ? ORDER BY registered_at LIMIT 1",
                (project_id,),
            ).fetchone()
            if row is not None:
                return self._record(row)
            resolved = directory.resolve()
            candidates = [str(resolved), *(str(parent) for parent in resolved.parents)]
            placeholders = ",".join("?" for _ in candidates)
            location = self._connection.execute(
                f"SELECT scope_id, path FROM locations WHERE path IN ({placeholders}) "  # noqa: S608 - placeholders only
                "ORDER BY length(path) DESC LIMIT 1",
                candidates,
            ).fetchone()
            return None if location is None else self.get(location["scope_id"])

    def scopes(self) -> list[ScopeRecord]:
        with translated_errors("catalog", self.path):
            rows = self._connection.execute(
                "SELECT * FROM scopes ORDER BY registered_at"
            ).fetchall()
            return [self._record(row) for row in rows]
