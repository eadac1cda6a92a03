"""All SQLite setup in one place.

Every store (catalog, outbox, evidence) opens its file through :func:`open_store`, which gives:
owner-only permissions (0600 file in a 0700 directory), WAL, a busy timeout so several Pi processes
can share a file, explicit transactions (autocommit mode; callers use :func:`transaction`), ordered
named migrations recorded in ``PRAGMA user_version``, and a check that the file is really ours.

A file that is damaged or belongs to something else is *set aside* (renamed with a timestamp suffix)
and a fresh store is created; nothing is deleted. ``sqlite3`` exceptions stop here: callers see
:class:`~pi_hindsight.errors.StateError` / :class:`~pi_hindsight.errors.CorruptStateError`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pi_hindsight.errors import CorruptStateError, StateError
from pi_hindsight.paths import ensure_private_dir

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str


@dataclass(frozen=True)
class StoreSchema:
    """What a store file must look like: an application id and ordered migrations."""

    application_id: int  # PRAGMA application_id: tells our files from foreign ones
    migrations: Sequence[Migration]
    # ``PRAGMA auto_vacuum = INCREMENTAL`` for a new file (it can only be chosen before the first
    # table exists). Stores with a size cap use it to give freed pages back to the filesystem.
    incremental_vacuum: bool = False


@dataclass(frozen=True)
class SetAside:
    """A damaged or foreign store file that was moved out of the way."""

    original: Path
    moved_to: Path
    reason: str


def new_id() -> str:
    """A time-sortable unique id (UUIDv7 layout: 48-bit ms timestamp, then random bits)."""
    millis = time.time_ns() // 1_000_000
    raw = bytearray(uuid.uuid4().bytes)
    raw[0:6] = millis.to_bytes(6, "big")
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


def _connect(path: Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    connection = sqlite3.connect(
        path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
    )
    connection.row_factory = sqlite3.Row
    connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    return connection


def _set_aside(path: Path, reason: str) -> SetAside:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}-{os.getpid()}")
    path.rename(target)
    for suffix in ("-wal", "-shm"):
        sidecar = path.with_name(path.name + suffix)
        if sidecar.exists():
            sidecar.rename(target.with_name(target.name + suffix))
    logger.warning("set aside %s as %s: %s", path, target, reason)
    return SetAside(original=path, moved_to=target, reason=reason)


def _check_ours(connection: sqlite3.Connection, schema: StoreSchema) -> None:
    """Raise CorruptStateError if the file is damaged or belongs to another application."""
    result = connection.execute("PRAGMA quick_check").fetchone()
    if result is None or result[0] != "ok":
        raise CorruptStateError(f"integrity check failed: {result[0] if result else 'no answer'}")
    application_id = connection.execute("PRAGMA application_id").fetchone()[0]
    has_tables = connection.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
    ).fetchone()[0]
    if application_id == 0 and has_tables:
        raise CorruptStateError("the file holds tables but is not a pi-hindsight store")
    if application_id not in (0, schema.application_id):
        raise CorruptStateError(f"foreign application id {application_id:#x}")
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version > len(schema.migrations):
        raise StateError(
            f"store schema version {version} is newer than this pi-hindsight knows "
            f"({len(schema.migrations)})",
            hint="upgrade pi-hindsight; the file was written by a newer version",
        )


def _migrate(connection: sqlite3.Connection, schema: StoreSchema) -> None:
    with transaction(connection):
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        for index, migration in enumerate(schema.migrations[version:], start=version + 1):
            logger.debug("applying migration %d %s", index, migration.name)
            for statement in _statements(migration.sql):
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {index}")
        connection.execute(f"PRAGMA application_id = {schema.application_id}")


def _statements(sql: str) -> list[str]:
    return [part.strip() for part in sql.split(";\n") if part.strip()]


def _is_blank(connection: sqlite3.Connection) -> bool:
    return bool(
        connection.execute("PRAGMA user_version").fetchone()[0] == 0
        and connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    )


def open_store(
    path: Path, schema: StoreSchema, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
) -> tuple[sqlite3.Connection, SetAside | None]:
    """Open (creating or migrating) a store; set aside a damaged or foreign file first.

    Returns the connection and, when a file had to be set aside, what happened to it. A file or
    directory that cannot be created, read or written raises :class:`StateError`.
    """
    try:
        return _open_store(path, schema, busy_timeout_ms)
    except OSError as error:
        raise StateError(
            f"cannot open {path}: {error.strerror or error}",
            hint=f"check that {path.parent} is a writable directory owned by you",
        ) from error


def _open_store(
    path: Path, schema: StoreSchema, busy_timeout_ms: int
) -> tuple[sqlite3.Connection, SetAside | None]:
    ensure_private_dir(path.parent)
    set_aside: SetAside | None = None
    for attempt in range(2):
        created = not path.exists()
        if created:
            # Create the file owner-only before SQLite opens it, so it is never world-readable.
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        path.chmod(0o600)
        try:
            connection = _connect(path, busy_timeout_ms)
            try:
                _check_ours(connection, schema)
                if schema.incremental_vacuum and _is_blank(connection):
                    # Must precede WAL and the first table: it is fixed once the file has content.
                    connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
                connection.execute("PRAGMA journal_mode = WAL")
                connection.execute("PRAGMA synchronous = NORMAL")
                connection.execute("PRAGMA foreign_keys = ON")
                _migrate(connection, schema)
            except BaseException:
                connection.close()
                raise
        except CorruptStateError as error:
            if attempt:
                raise
            set_aside = _set_aside(path, str(error))
            continue
        except sqlite3.DatabaseError as error:
            if attempt:
                raise StateError(f"cannot open {path}: {error}") from error
            set_aside = _set_aside(path, f"not a usable SQLite database ({error})")
            continue
        for suffix in ("-wal", "-shm"):
            sidecar = path.with_name(path.name + suffix)
            if sidecar.exists():
                sidecar.chmod(0o600)
        return connection, set_aside
    raise StateError(f"cannot open {path}")  # pragma: no cover - the loop always returns


@contextlib.contextmanager
def transaction(connection: sqlite3.Connection, *, immediate: bool = True) -> Iterator[None]:
    """An explicit transaction; ``BEGIN IMMEDIATE`` takes the write lock up front.

    Taking the lock at BEGIN (not at the first write) is what makes read-then-write sequences such
    as an outbox claim safe across processes, and lets ``busy_timeout`` wait instead of failing.
    """
    connection.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


@contextlib.contextmanager
def translated_errors(store: str, path: Path) -> Iterator[None]:
    """Translate ``sqlite3`` errors raised inside the block into StateError naming the store.

    Every ``sqlite3.Error`` is translated, including ``ProgrammingError`` (a closed connection).
    """
    try:
        yield
    except sqlite3.Error as error:
        raise StateError(f"{store} store {path}: {error}") from error
