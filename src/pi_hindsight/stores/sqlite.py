"""All SQLite setup in one place.

Every store (catalog, outbox, evidence) opens its file through :func:`open_store`, which gives:
owner-only permissions (0600 file in a 0700 directory), the store's journal mode (ADR 0006), a
busy timeout so several agent processes can share a file, explicit transactions (autocommit mode;
callers use :func:`transaction`), ordered named migrations recorded in ``PRAGMA user_version``,
and a check that the file is really ours and whole.

Opening is serialised between processes by a lock file (``<store>.lock``), so two processes never
both set the same file aside. A store that does not exist is built under a temporary name and
linked into place complete, so no opener ever sees a half-created file. A file that exists but
is damaged, empty (0 bytes), foreign, without our schema marker, or missing committed writes
(``stores/commit_mark.py``) is *set aside* (renamed with a timestamp suffix, never deleted),
recorded in ``set-aside.json`` (``stores/set_aside.py``) so every process reports it, and a fresh
store is created. ``sqlite3`` exceptions stop here: callers see
:class:`~pi_hindsight.errors.StateError` / :class:`~pi_hindsight.errors.CorruptStateError`.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pi_hindsight.errors import CorruptStateError, StateError
from pi_hindsight.paths import ensure_private_dir
from pi_hindsight.stores.commit_mark import CommitMark, MarkReading, mark_path, read_mark
from pi_hindsight.stores.set_aside import SetAsideRecord

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal")  # SQLite's own files beside a database
ZERO_LENGTH_GRACE_S = 0.5  # an older version's opener may be about to write its new file

# Kept by this module in every store (not part of a store's migrations): the count of committed
# write transactions, checked against the commit mark outside the file.
_COMMITS_TABLE = (
    "CREATE TABLE IF NOT EXISTS store_commits ("
    "id INTEGER PRIMARY KEY CHECK (id = 0), file_id TEXT NOT NULL, count INTEGER NOT NULL)"
)

JournalMode = Literal["wal", "delete"]


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str


@dataclass(frozen=True)
class StoreSchema:
    """What a store file must look like: an application id and ordered migrations."""

    name: str  # "outbox", "catalog", "evidence": in messages and the set-aside record
    application_id: int  # PRAGMA application_id: tells our files from foreign ones
    migrations: Sequence[Migration]
    # ``PRAGMA auto_vacuum = INCREMENTAL`` for a new file (it can only be chosen before the first
    # table exists). Stores with a size cap use it to give freed pages back to the filesystem.
    incremental_vacuum: bool = False
    # "wal": WAL + synchronous=NORMAL (fast, readers never block the writer; a damaged log is
    # detected by the commit mark). "delete": rollback journal + synchronous=FULL (every commit
    # is in the main file before it returns: nothing to lose in a log). ADR 0006.
    journal: JournalMode = "wal"


@dataclass(frozen=True)
class SetAside:
    """A damaged or foreign store file that was moved out of the way."""

    original: Path
    moved_to: Path
    reason: str
    event_id: str | None = None  # its entry in the set-aside record


class StoreConnection(sqlite3.Connection):
    """A connection that knows its store's commit mark (None: commits are not counted)."""

    commit_mark: CommitMark | None = None

    def close(self) -> None:
        if self.commit_mark is not None:
            self.commit_mark.close()
            self.commit_mark = None
        super().close()


def new_id() -> str:
    """A time-sortable unique id (UUIDv7 layout: 48-bit ms timestamp, then random bits)."""
    millis = time.time_ns() // 1_000_000
    raw = bytearray(uuid.uuid4().bytes)
    raw[0:6] = millis.to_bytes(6, "big")
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


def connect(
    database: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS, uri: bool = False
) -> StoreConnection:
    """A connection with our settings (autocommit, row factory, busy timeout), nothing else."""
    connection = sqlite3.connect(
        database,
        timeout=busy_timeout_ms / 1000,
        isolation_level=None,
        check_same_thread=False,
        factory=StoreConnection,
        uri=uri,
    )
    connection.row_factory = sqlite3.Row
    connection.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    return connection


# -- opening -------------------------------------------------------------------------------


def open_store(
    path: Path, schema: StoreSchema, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
) -> tuple[StoreConnection, SetAside | None]:
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
    except sqlite3.Error as error:  # a fresh file that cannot be used: the disk, not the file
        raise StateError(f"cannot open {path}: {error}") from error


def _open_store(
    path: Path, schema: StoreSchema, busy_timeout_ms: int
) -> tuple[StoreConnection, SetAside | None]:
    ensure_private_dir(path.parent)
    with _opening_lock(path):
        set_aside: SetAside | None = None
        if not path.exists():
            set_aside = _move_orphans(path, schema.name)
            _create(path, schema)
        try:
            connection = _open_checked(path, schema, busy_timeout_ms)
        except CorruptStateError as error:
            set_aside = _set_aside(path, schema.name, str(error))
            _create(path, schema)
            connection = _open_checked(path, schema, busy_timeout_ms)
        for suffix in SIDECAR_SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                path.with_name(path.name + suffix).chmod(0o600)
        return connection, set_aside


@contextlib.contextmanager
def _opening_lock(path: Path) -> Iterator[None]:
    """One opener at a time per store (held only while opening, never while in use)."""
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _create(path: Path, schema: StoreSchema) -> None:
    """Build a new store under a temporary name and link it into place complete.

    ``link`` never replaces an existing file, so a concurrent creator (an older version that
    does not take the opening lock) keeps its file and we use it.
    """
    temp = path.with_name(f".{path.name}.new-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.close(os.open(temp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    try:
        connection = connect(temp)
        try:
            if schema.incremental_vacuum:
                # Must precede the first table: it is fixed once the file has content.
                connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
            _configure(connection, schema)
            _migrate(connection, schema)
        finally:
            connection.close()  # the last close checkpoints and removes the temporary log
        try:
            os.link(temp, path)
        except FileExistsError:
            logger.debug("%s was created concurrently; using that one", path)
        except OSError:  # a filesystem without hard links
            if not path.exists():
                temp.rename(path)
    finally:
        for suffix in ("", *SIDECAR_SUFFIXES):
            with contextlib.suppress(FileNotFoundError):
                temp.with_name(temp.name + suffix).unlink()


def _open_checked(path: Path, schema: StoreSchema, busy_timeout_ms: int) -> StoreConnection:
    """Open an existing file; CorruptStateError when it is not a whole store of ours."""
    if path.stat().st_size == 0 and not _grows(path):
        raise CorruptStateError("the file is empty (0 bytes)")
    path.chmod(0o600)
    # The mark is read before the file's own count: see stores/commit_mark.py.
    reading = read_mark(path)
    connection = connect(path, busy_timeout_ms=busy_timeout_ms)
    try:
        _check_ours(connection, schema)
        counted = _commit_count(connection)
        if counted is not None:
            _check_mark(counted, reading, mark_path(path))
        _configure(connection, schema)
        _migrate(connection, schema)
        file_id, count = _commit_count(connection) or ("", 0)
        connection.commit_mark = CommitMark(path, file_id)
        connection.commit_mark.advance(count)
    except sqlite3.DatabaseError as error:
        connection.close()
        if not _is_damage(error):
            raise StateError(
                f"cannot open {path}: {error}",
                hint="another process may hold it locked, or the disk may be full or read-only; "
                "try again",
            ) from error
        raise CorruptStateError(f"not a usable SQLite database ({error})") from error
    except BaseException:
        connection.close()
        raise
    return connection


# Errors that say nothing about the file's contents: never a reason to set a file aside.
_NOT_DAMAGE = {
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_NOMEM,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_INTERRUPT,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PROTOCOL,
    sqlite3.SQLITE_PERM,
    sqlite3.SQLITE_AUTH,
}


def _is_damage(error: sqlite3.DatabaseError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is None or (code & 0xFF) not in _NOT_DAMAGE


def _grows(path: Path) -> bool:
    """Whether a zero-length file gets content within the grace period (someone creating it)."""
    deadline = time.monotonic() + ZERO_LENGTH_GRACE_S
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if path.stat().st_size > 0:
            return True
    return False


def _check_ours(connection: sqlite3.Connection, schema: StoreSchema) -> None:
    """Raise CorruptStateError if the file is damaged or belongs to another application.

    Some damage shows only when pages are read, so this reads every page (``quick_check``)."""
    result = connection.execute("PRAGMA quick_check").fetchone()
    if result is None or result[0] != "ok":
        found = " ".join(str(result[0]).split()) if result else "no answer"
        raise CorruptStateError(f"integrity check failed: {found[:300]}")
    application_id = connection.execute("PRAGMA application_id").fetchone()[0]
    if application_id == 0:
        tables = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        what = "holds tables but" if tables else "is an empty SQLite database,"
        raise CorruptStateError(
            f"the file {what} is not a pi-hindsight store (no {schema.name} application id)"
        )
    if application_id != schema.application_id:
        raise CorruptStateError(f"foreign application id {application_id:#x}")
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version == 0:
        raise CorruptStateError("the file has no schema version")
    if version > len(schema.migrations):
        raise StateError(
            f"store schema version {version} is newer than this pi-hindsight knows "
            f"({len(schema.migrations)})",
            hint="upgrade pi-hindsight; the file was written by a newer version",
        )


def _commit_count(connection: sqlite3.Connection) -> tuple[str, int] | None:
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store_commits'"
    ).fetchone()
    if exists is None:
        return None  # a file from before commit counting: nothing to compare yet
    row = connection.execute("SELECT file_id, count FROM store_commits WHERE id = 0").fetchone()
    if row is None:
        raise CorruptStateError("the file's commit count is missing")
    return str(row[0]), int(row[1])


def _check_mark(counted: tuple[str, int], reading: MarkReading | None, where: Path) -> None:
    file_id, count = counted
    if reading is None or reading.file_id != file_id or reading.count <= count:
        return
    missing = reading.count - count
    raise CorruptStateError(
        f"{missing} committed write(s) are missing: the file holds {count} of the "
        f"{reading.count} recorded in {where.name} (its write-ahead log was damaged or cut, "
        "or an older copy of the file was put in its place)"
    )


def _configure(connection: sqlite3.Connection, schema: StoreSchema) -> None:
    # Switching the journal mode needs the other connections out of the way (leaving WAL: all
    # closed); when another process holds the file (an older version, mid-upgrade), keep the
    # mode it has for now instead of waiting: the commit mark guards either mode.
    timeout = connection.execute("PRAGMA busy_timeout").fetchone()[0]
    connection.execute("PRAGMA busy_timeout = 0")
    try:
        connection.execute(
            f"PRAGMA journal_mode = {'WAL' if schema.journal == 'wal' else 'DELETE'}"
        ).fetchall()
    except sqlite3.OperationalError as error:
        logger.info("journal mode of %s left as it is for now: %s", schema.name, error)
    finally:
        connection.execute(f"PRAGMA busy_timeout = {int(timeout)}")
    synchronous = "NORMAL" if schema.journal == "wal" else "FULL"
    connection.execute(f"PRAGMA synchronous = {synchronous}")
    connection.execute("PRAGMA foreign_keys = ON")


def _migrate(connection: sqlite3.Connection, schema: StoreSchema) -> None:
    """Apply what is missing, in one transaction (nothing is written when nothing is missing)."""
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    application_id = connection.execute("PRAGMA application_id").fetchone()[0]
    if (
        version == len(schema.migrations)
        and application_id == schema.application_id
        and _commit_count(connection) is not None
    ):
        return
    with transaction(connection):
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        for index, migration in enumerate(schema.migrations[version:], start=version + 1):
            logger.debug("applying migration %d %s", index, migration.name)
            for statement in _statements(migration.sql):
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {index}")
        connection.execute(f"PRAGMA application_id = {schema.application_id}")
        connection.execute(_COMMITS_TABLE)
        connection.execute(
            "INSERT OR IGNORE INTO store_commits (id, file_id, count) VALUES (0, ?, 0)",
            (str(uuid.uuid4()),),
        )


def _statements(sql: str) -> list[str]:
    return [part.strip() for part in sql.split(";\n") if part.strip()]


# -- setting aside -------------------------------------------------------------------------


def _stamp() -> str:
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"


def _set_aside(path: Path, store: str, reason: str) -> SetAside:
    target = path.with_name(f"{path.name}.corrupt-{_stamp()}")
    path.rename(target)
    for suffix in SIDECAR_SUFFIXES:
        sidecar = path.with_name(path.name + suffix)
        if sidecar.exists():
            sidecar.rename(target.with_name(target.name + suffix))
    logger.warning("set aside %s as %s: %s", path, target, reason)
    event = SetAsideRecord(path.parent).add(
        store=store, original=path, moved_to=target, reason=reason
    )
    return SetAside(original=path, moved_to=target, reason=reason, event_id=event.event_id)


def _move_orphans(path: Path, store: str) -> SetAside | None:
    """SQLite's files left without their database (someone deleted it) are moved aside: a new
    file must not adopt a stale log. A non-empty log may hold writes, so it is recorded."""
    leftovers = [
        path.with_name(path.name + suffix)
        for suffix in SIDECAR_SUFFIXES
        if path.with_name(path.name + suffix).exists()
    ]
    if not leftovers:
        return None
    base = path.with_name(f"{path.name}.orphan-{_stamp()}")
    held = False
    for leftover in leftovers:
        held = held or (leftover.stat().st_size > 0 and not leftover.name.endswith("-shm"))
        leftover.rename(base.with_name(base.name + leftover.name[len(path.name) :]))
    if not held:
        return None
    reason = "the database file was missing; only its journal was left"
    logger.warning("moved %s's leftover journal aside as %s*: %s", path, base, reason)
    event = SetAsideRecord(path.parent).add(
        store=store, original=path, moved_to=base, reason=reason
    )
    return SetAside(original=path, moved_to=base, reason=reason, event_id=event.event_id)


# -- transactions --------------------------------------------------------------------------


@contextlib.contextmanager
def transaction(connection: sqlite3.Connection, *, immediate: bool = True) -> Iterator[None]:
    """An explicit transaction; ``BEGIN IMMEDIATE`` takes the write lock up front.

    Taking the lock at BEGIN (not at the first write) is what makes read-then-write sequences such
    as an outbox claim safe across processes, and lets ``busy_timeout`` wait instead of failing.
    A write transaction of a store counts itself (``store_commits``) and, once committed, moves
    the commit mark.
    """
    mark = getattr(connection, "commit_mark", None) if immediate else None
    count: int | None = None
    connection.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield
        if mark is not None:
            count = _count_commit(connection)
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    if mark is not None and count is not None:
        mark.advance(count)


def _count_commit(connection: sqlite3.Connection) -> int:
    if _HAS_RETURNING:  # one statement instead of two: this runs in every write transaction
        row = connection.execute(
            "UPDATE store_commits SET count = count + 1 WHERE id = 0 RETURNING count"
        ).fetchone()
    else:
        connection.execute("UPDATE store_commits SET count = count + 1 WHERE id = 0")
        row = connection.execute("SELECT count FROM store_commits WHERE id = 0").fetchone()
    return int(row[0])


_HAS_RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)


@contextlib.contextmanager
def translated_errors(store: str, path: Path) -> Iterator[None]:
    """Translate ``sqlite3`` errors raised inside the block into StateError naming the store.

    Every ``sqlite3.Error`` is translated, including ``ProgrammingError`` (a closed connection).
    """
    try:
        yield
    except sqlite3.Error as error:
        raise StateError(f"{store} store {path}: {error}") from error
