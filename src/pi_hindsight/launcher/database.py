"""A team's own PostgreSQL: ``server start --database-url-env VAR`` or ``--database-url-file
PATH`` runs Hindsight against an existing PostgreSQL (with pgvector) instead of the embedded
one. The launcher then starts no database, stops none, and keeps no data of its own.

The URL holds the database password, so it is handled like the API key: read from the
environment variable or the file the user names, never from a command line; handed to Hindsight
in its environment only (``HINDSIGHT_API_DATABASE_URL``); recorded and shown as where it came
from and without its password (``postgresql://hindsight:***@db.internal:5432/hindsight``).

Before Hindsight starts, :func:`check` connects once (asyncpg, which Hindsight itself uses) and
refuses a database Hindsight could not use, saying how to fix it:

- it cannot be reached, or refuses the user (the server's words, without the password);
- the server has no pgvector at all (``vector`` is not among ``pg_available_extensions``);
- pgvector is there but not enabled in this database, and the URL's role may not enable it (not
  a superuser; pgvector is not a trusted extension): a superuser must run
  ``CREATE EXTENSION vector;`` in that database first.

A role that may enable it (a superuser) is let through: Hindsight's migrations create it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pi_hindsight.config.display import display_url, scrub, url_secrets
from pi_hindsight.errors import InputFileError, LauncherError
from pi_hindsight.launcher.access import check_env_name
from pi_hindsight.safe_files import decode_utf8, printable, read_bytes

SCHEMES = ("postgresql", "postgres")
URL_FILE_MAX_BYTES = 4_096
URL_HINT = (
    "give a URL like postgresql://USER:PASSWORD@HOST:5432/DATABASE (in the variable or the file, "
    "never on the command line)"
)
CHECK_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class ExternalDatabase:
    """The URL (a secret: never shown, recorded or logged) and where it came from."""

    url: str
    source: str  # "$VAR" or "file PATH": what is recorded and shown

    @property
    def shown(self) -> str:
        return display_url(self.url)

    @property
    def database(self) -> str:
        return unquote(urlsplit(self.url).path.lstrip("/"))


def _validated(url: str, source: str) -> ExternalDatabase:
    url = url.strip()
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in SCHEMES
        or not parts.hostname
        or not parts.path.lstrip("/")
        or any(char.isspace() or not char.isprintable() for char in url)
    ):
        # The value itself is never quoted: it may hold the password.
        raise LauncherError(
            f"the database URL in {source} is not a postgresql:// URL with a host and a database",
            hint=URL_HINT,
        )
    return ExternalDatabase(url, source)


def from_env(environ: dict[str, str], name: str) -> ExternalDatabase:
    check_env_name(name, option="--database-url-env")
    value = environ.get(name)
    if not value:
        raise LauncherError(
            f"the environment variable {name} is not set or is empty", hint=URL_HINT
        )
    return _validated(value, f"${name}")


def from_file(path: Path) -> ExternalDatabase:
    shown = printable(str(path), 300)
    try:
        text = decode_utf8(read_bytes(path, max_bytes=URL_FILE_MAX_BYTES), path)
    except (InputFileError, OSError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise LauncherError(
            f"the database URL file {shown} cannot be read: {printable(str(reason), 300)}",
            hint=URL_HINT,
        ) from error
    return _validated(text, f"file {shown}")


@dataclass(frozen=True)
class VectorState:
    """What the database says about pgvector for the URL's role."""

    installed: str | None  # the version enabled in this database
    available: str | None  # the version the server could enable
    superuser: bool
    role: str
    server_version: int  # e.g. 180001


async def _inspect(url: str, timeout: float) -> VectorState:
    import asyncpg  # noqa: PLC0415 - a Hindsight dependency (the server extra)

    connection = await asyncpg.connect(dsn=url, timeout=timeout)
    try:
        row: Any = await connection.fetchrow(
            "SELECT "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector') AS installed, "
            "(SELECT default_version FROM pg_available_extensions WHERE name = 'vector') "
            "AS available, "
            "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser, "
            "current_user AS role, current_setting('server_version_num')::int AS version"
        )
    finally:
        await connection.close()
    return VectorState(
        installed=row["installed"],
        available=row["available"],
        superuser=bool(row["superuser"]),
        role=str(row["role"]),
        server_version=int(row["version"]),
    )


def check(database: ExternalDatabase, *, timeout: float = CHECK_TIMEOUT_S) -> VectorState:
    """Connect once and make sure Hindsight can use the database (module docstring)."""
    where = f"{database.shown} (from {database.source})"
    try:
        state = asyncio.run(asyncio.wait_for(_inspect(database.url, timeout), timeout + 5))
    except Exception as error:  # asyncpg's, OSError, TimeoutError: all say "cannot use it"
        said = scrub(str(error) or type(error).__name__, url_secrets(database.url))
        raise LauncherError(
            f"cannot connect to the database {where}: {printable(said, 300)}",
            hint="check that PostgreSQL runs, that the URL's host, port, user, password and "
            "database are right, and that it accepts this user from this machine (pg_hba.conf)",
        ) from None  # the chained error may quote the URL
    name = database.database
    if state.installed is not None:
        return state
    if state.available is None:
        major = state.server_version // 10_000
        raise LauncherError(
            f"the PostgreSQL server of {where} has no pgvector (the `vector` extension is not "
            "installed on it); Hindsight stores embeddings with it",
            hint=f"install pgvector on the database server (e.g. the package "
            f"postgresql-{major}-pgvector, or from https://github.com/pgvector/pgvector), then, "
            f"as a superuser in database {name}: CREATE EXTENSION vector;",
        )
    if not state.superuser:
        raise LauncherError(
            f"pgvector is installed on the server of {where} but not enabled in database "
            f"{name}, and role {state.role} may not enable it (only a superuser can)",
            hint=f"as a superuser, in database {name}: CREATE EXTENSION vector; then start again",
        )
    return state  # a superuser: Hindsight's migrations create it
