"""Read what can still be read from a set-aside (damaged) store file, never changing it.

The file is copied with its journal and write-ahead log into a private temporary directory and
the copy is opened (so SQLite may replay or roll back the copy, not the original). When the copy
cannot be opened, the original's main file is read as it stands (``immutable=1``, read-only,
ignoring its log). Each table is read in rowid order; a damaged page is stepped over one rowid at
a time, and every rowid that could not be looked up is counted as unreadable (an upper bound:
some of those rowids may never have held a row).
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pi_hindsight.stores.sqlite import SIDECAR_SUFFIXES, StoreConnection, connect

MAX_PROBES = 200_000  # rowids looked up one by one past damaged pages, per table
_FIRST = -(2**63)


@dataclass(frozen=True)
class SalvagedTable:
    name: str
    rows: tuple[dict[str, Any], ...]
    unreadable: int  # rowids that could not be read (at most this many rows)
    error: str | None  # the first read error, if any


@dataclass(frozen=True)
class Salvage:
    path: Path
    opened: bool
    error: str | None  # why the file (or a table) could not be read
    tables: dict[str, SalvagedTable] = field(default_factory=dict)

    def rows(self, table: str) -> tuple[dict[str, Any], ...]:
        found = self.tables.get(table)
        return () if found is None else found.rows

    @property
    def recovered(self) -> int:
        return sum(len(table.rows) for table in self.tables.values())

    @property
    def problems(self) -> tuple[str, ...]:
        """Why something could not be read: the file, then each table."""
        table_errors = (f"{t.name}: {t.error}" for t in self.tables.values() if t.error)
        return tuple(e for e in (self.error, *table_errors) if e)

    @property
    def unreadable(self) -> int:
        return sum(table.unreadable for table in self.tables.values())


def salvage(path: Path, tables: Sequence[str], *, optional: Sequence[str] = ()) -> Salvage:
    """The rows of ``tables`` that can be read from ``path`` (a set-aside store file); a table
    in ``optional`` (one that only some schema versions have) may be missing without a problem."""
    if not path.exists():
        return Salvage(path, opened=False, error=f"{path} no longer exists")
    if path.stat().st_size == 0:
        return Salvage(path, opened=False, error="the file is empty (0 bytes): nothing to read")
    with tempfile.TemporaryDirectory(prefix="pi-hindsight-salvage-") as work:
        copy = Path(work) / path.name
        for suffix in ("", *SIDECAR_SUFFIXES):
            source = path.with_name(path.name + suffix)
            if source.exists() and not suffix.endswith("shm"):
                shutil.copyfile(source, copy.with_name(copy.name + suffix))
        connection, error = _open(copy)
        if connection is None:
            quoted = urllib.parse.quote(str(path))
            connection, error = _open(f"file:{quoted}?mode=ro&immutable=1", uri=True)
        if connection is None:
            return Salvage(path, opened=False, error=error)
        try:
            return Salvage(
                path,
                opened=True,
                error=error,
                tables={
                    name: table
                    for name in (*tables, *optional)
                    if (table := _read(connection, name)).rows
                    or name not in optional
                    or table.error is None
                    or not table.error.startswith("no table")
                },
            )
        finally:
            connection.close()


def _open(database: str | Path, *, uri: bool = False) -> tuple[StoreConnection | None, str | None]:
    try:
        connection = connect(database, busy_timeout_ms=1_000, uri=uri)
    except sqlite3.Error as error:
        return None, str(error)
    try:
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as error:
        connection.close()
        return None, f"not readable as SQLite ({error})"
    return connection, None


def _read(connection: sqlite3.Connection, table: str) -> SalvagedTable:
    try:
        known = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
    except sqlite3.Error as error:
        return SalvagedTable(table, (), 0, str(error))
    if known is None:
        return SalvagedTable(table, (), 0, f"no table {table} could be found")
    rows: list[dict[str, Any]] = []
    unreadable = probes = 0
    first_error: str | None = None
    last = _FIRST
    try:
        highest = connection.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]  # noqa: S608 - our table names
    except sqlite3.Error:
        highest = None
    while True:
        try:
            for row in connection.execute(
                f'SELECT rowid AS "_rowid_", * FROM "{table}" WHERE rowid > ? ORDER BY rowid',  # noqa: S608 - our table names
                (last,),
            ):
                record = dict(row)
                last = int(record.pop("_rowid_"))
                rows.append(record)
            break
        except sqlite3.Error as error:
            first_error = first_error or str(error)
        # Step over the damaged page: look rowids up one at a time until one can be read.
        if highest is None:
            unreadable += 1
            break
        resumed = False
        while last < highest and probes < MAX_PROBES:
            probes += 1
            last = last + 1 if last >= 1 else 1
            try:
                row = connection.execute(
                    f'SELECT * FROM "{table}" WHERE rowid = ?',  # noqa: S608 - our table names
                    (last,),
                ).fetchone()
            except sqlite3.Error:
                unreadable += 1
                continue
            if row is not None:
                rows.append(dict(row))
            resumed = True
            break
        if not resumed:
            break
    return SalvagedTable(table, tuple(rows), unreadable, first_error)
