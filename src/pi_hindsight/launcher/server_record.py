"""What the launcher records about the server it started, and where.

Everything lives under ``<state_dir>/server/`` (directories 0700, files 0600)::

    server.json     the running server: processes (pid + start time), ports, URLs, data location,
                    the address it listens on and, for a team's server, the *name* of the
                    environment variable holding its API key (never the key) and, with its own
                    PostgreSQL, where the database URL came from (never the password)
    cluster.json    the PostgreSQL cluster: where its data is and the superuser password
    lock            serialises start/stop between processes (flock)
    logs/           hindsight.log, postgres.log, standin.log
    run/            Hindsight's working directory: empty except an empty ``.env``
    pgdata/         the database, when not running as root (see postgres.py)

``server.json`` is written as soon as the first process is up and rewritten after each one, so a
crash half-way through a start still leaves a record that ``stop`` can clean up.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pi_hindsight.errors import CorruptStateError, LauncherError
from pi_hindsight.launcher.access import check_env_name, connect_host, url_host
from pi_hindsight.launcher.procs import ProcessIdentity
from pi_hindsight.launcher.reranker import Reranker
from pi_hindsight.paths import ensure_private_dir

logger = logging.getLogger(__name__)

RECORD_VERSION = 1

LlmMode = Literal["env", "offline", "mock"]
ProcessName = Literal["postgres", "standin", "hindsight"]
# The order processes start in; they stop in reverse.
START_ORDER: tuple[ProcessName, ...] = ("postgres", "standin", "hindsight")


@dataclass(frozen=True)
class ServerPaths:
    """The files of one state directory's server."""

    state_dir: Path

    @property
    def root(self) -> Path:
        return self.state_dir / "server"

    @property
    def record(self) -> Path:
        return self.root / "server.json"

    @property
    def cluster(self) -> Path:
        return self.root / "cluster.json"

    @property
    def lock(self) -> Path:
        return self.root / "lock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def local_pgdata(self) -> Path:
        return self.root / "pgdata"

    @property
    def standin_ready(self) -> Path:
        return self.root / "standin.ready.json"

    def log(self, name: ProcessName) -> Path:
        return self.logs / f"{name}.log"

    def ensure(self) -> None:
        for directory in (self.root, self.logs, self.run):
            ensure_private_dir(directory)
        # Hindsight loads the first .env it finds walking up from its working directory; an
        # empty one here stops that walk before it reaches a stranger's file.
        dotenv = self.run / ".env"
        if not dotenv.exists():
            write_private(dotenv, "")


@dataclass(frozen=True)
class PostgresRecord:
    """Where the cluster lives and how to reach it."""

    port: int
    data_dir: Path
    install_dir: Path
    os_user: str | None  # None: runs as the launching user
    database: str

    def to_json(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "data_dir": str(self.data_dir),
            "install_dir": str(self.install_dir),
            "os_user": self.os_user,
            "database": self.database,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PostgresRecord:
        return cls(
            port=int(data["port"]),
            data_dir=Path(data["data_dir"]),
            install_dir=Path(data["install_dir"]),
            os_user=data.get("os_user"),
            database=str(data["database"]),
        )


@dataclass(frozen=True)
class DatabaseRecord:
    """A team's own PostgreSQL (``--database-url-env`` / ``--database-url-file``): where its URL
    came from, and the URL without its password. The URL itself is never recorded."""

    source: str  # "$VAR" or "file PATH"
    shown: str

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "url": self.shown}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DatabaseRecord:
        return cls(source=str(data["source"]), shown=str(data["url"]))


@dataclass(frozen=True)
class ServerRecord:
    """The content of ``server.json``."""

    state_dir: Path
    llm: LlmMode
    started_at: str
    phase: Literal["starting", "running"]
    host: str  # the address Hindsight listens on
    port: int
    processes: dict[ProcessName, ProcessIdentity] = field(default_factory=dict)
    postgres: PostgresRecord | None = None
    standin_url: str | None = None
    api_key_env: str | None = None  # a team's server: the variable holding its key
    database: DatabaseRecord | None = None  # an external PostgreSQL (then ``postgres`` is None)
    reranker: Reranker | None = None  # None: a record from before the choice was recorded

    @property
    def base_url(self) -> str:
        """Where this machine reaches it (a wildcard address through loopback)."""
        return f"http://{url_host(connect_host(self.host))}:{self.port}"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": RECORD_VERSION,
            "state_dir": str(self.state_dir),
            "llm": self.llm,
            "started_at": self.started_at,
            "phase": self.phase,
            "host": self.host,
            "port": self.port,
            "base_url": self.base_url,
            "processes": {name: ident.to_json() for name, ident in self.processes.items()},
            "postgres": self.postgres.to_json() if self.postgres else None,
            "standin_url": self.standin_url,
            "auth": None if self.api_key_env is None else {"api_key_env": self.api_key_env},
            "database": None if self.database is None else self.database.to_json(),
            "reranker": None if self.reranker is None else self.reranker.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerRecord:
        if data.get("version") != RECORD_VERSION:
            raise ValueError(f"unknown record version {data.get('version')!r}")
        processes: dict[ProcessName, ProcessIdentity] = {}
        for name in START_ORDER:
            if name in data["processes"]:
                processes[name] = ProcessIdentity.from_json(data["processes"][name])
        postgres, database = data.get("postgres"), data.get("database")
        auth = data.get("auth")  # absent in records of releases before team servers
        api_key_env = None
        if auth is not None:
            api_key_env = check_env_name(str(auth["api_key_env"]))
        return cls(
            state_dir=Path(data["state_dir"]),
            llm=data["llm"],
            started_at=str(data["started_at"]),
            phase=data["phase"],
            host=str(data["host"]),
            port=int(data["port"]),
            processes=processes,
            postgres=PostgresRecord.from_json(postgres) if postgres else None,
            standin_url=data.get("standin_url"),
            api_key_env=api_key_env,
            database=DatabaseRecord.from_json(database) if database else None,
            reranker=Reranker.from_json(data.get("reranker")),
        )


def write_private(path: Path, text: str) -> None:
    """Write ``text`` atomically to ``path`` with mode 0600."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``; None if missing; CorruptStateError if unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise CorruptStateError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise CorruptStateError(f"{path} does not hold a JSON object")
    return data


def load_record(paths: ServerPaths) -> ServerRecord | None:
    data = read_json(paths.record)
    if data is None:
        return None
    try:
        return ServerRecord.from_json(data)
    except (KeyError, TypeError, ValueError, LauncherError) as error:
        raise CorruptStateError(
            f"{paths.record} is not a server record this version understands: {error}",
            hint=f"stop any server it describes by hand, then delete {paths.record}",
        ) from error


def save_record(paths: ServerPaths, record: ServerRecord) -> None:
    write_private(paths.record, json.dumps(record.to_json(), indent=2) + "\n")


def remove_record(paths: ServerPaths) -> None:
    with contextlib.suppress(FileNotFoundError):
        paths.record.unlink()


@contextlib.contextmanager
def locked(paths: ServerPaths, *, timeout: float) -> Iterator[None]:
    """Hold the state dir's launcher lock (one start/stop at a time)."""
    paths.ensure()
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise LauncherError(
                        f"another pi-hindsight process holds {paths.lock}",
                        hint="wait for the other `server start`/`stop` to finish",
                    ) from error
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)
