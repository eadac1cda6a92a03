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
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, computed_field

from pi_hindsight.errors import CorruptStateError, LauncherError
from pi_hindsight.launcher.access import check_env_name, connect_host, url_host
from pi_hindsight.launcher.procs import ProcessIdentity
from pi_hindsight.launcher.reranker import Reranker
from pi_hindsight.paths import ensure_private_dir
from pi_hindsight.serialisation import SnakeRecord

logger = logging.getLogger(__name__)

RECORD_VERSION: Literal[1] = 1

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


class PostgresRecord(SnakeRecord):
    """Where the cluster lives and how to reach it."""

    port: int
    data_dir: Path
    install_dir: Path
    os_user: str | None  # None: runs as the launching user
    database: str


class DatabaseRecord(SnakeRecord):
    """A team's own PostgreSQL (``--database-url-env`` / ``--database-url-file``): where its URL
    came from, and the URL without its password. The URL itself is never recorded."""

    source: str  # "$VAR" or "file PATH"
    shown: str = Field(alias="url")

    model_config = ConfigDict(populate_by_name=True)


class ServerAuth(SnakeRecord):
    """A team's server: the variable holding its API key (never the key)."""

    api_key_env: Annotated[str, AfterValidator(check_env_name)]


class ServerRecord(SnakeRecord):
    """The content of ``server.json``."""

    version: Literal[1] = RECORD_VERSION
    state_dir: Path
    llm: LlmMode
    started_at: str
    phase: Literal["starting", "running"]
    host: str  # the address Hindsight listens on
    port: int
    processes: dict[ProcessName, ProcessIdentity] = Field(default_factory=dict)
    postgres: PostgresRecord | None = None
    standin_url: str | None = None
    auth: ServerAuth | None = None  # absent in records of releases before team servers
    database: DatabaseRecord | None = None  # an external PostgreSQL (then ``postgres`` is None)
    reranker: Reranker | None = None  # None: a record from before the choice was recorded

    @computed_field  # type: ignore[prop-decorator]
    @property
    def base_url(self) -> str:
        """Where this machine reaches it (a wildcard address through loopback)."""
        return f"http://{url_host(connect_host(self.host))}:{self.port}"

    @property
    def api_key_env(self) -> str | None:
        return None if self.auth is None else self.auth.api_key_env


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
        return ServerRecord.load(data)
    except (ValueError, LauncherError) as error:  # pydantic's ValidationError is a ValueError
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
