"""What the launcher reports: a started server (``ServerInfo``), a server's status
(``ServerStatus``) and what stopping did (``StopReport``), each with its one JSON form
(``pi-hindsight server … --json``). ``lifecycle.py`` does the starting and stopping."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pi_hindsight.launcher import access, procs
from pi_hindsight.launcher.reranker import Reranker
from pi_hindsight.launcher.server_record import DatabaseRecord, LlmMode


@dataclass(frozen=True)
class ServerInfo:
    """A running local Hindsight, as ``start_server`` returns it."""

    base_url: str
    host: str
    port: int
    llm: LlmMode
    started_at: str
    pids: dict[str, int]
    state_dir: Path
    log_dir: Path
    data_dir: Path | None  # None: a team's own PostgreSQL (``database``)
    postgres_port: int | None
    postgres_install: Path | None
    postgres_user: str | None
    standin_url: str | None
    reused: bool  # True when start found our server already running
    startup_seconds: float | None
    # Problems Hindsight survived at start-up (e.g. an unreachable LLM provider), and a
    # listening address other machines can reach.
    warnings: tuple[str, ...] = ()
    api_key_env: str | None = None  # a team's server: the variable its key was read from
    database: DatabaseRecord | None = None  # a team's own PostgreSQL: its URL's source, shown
    reranker: Reranker | None = None  # the reranker it runs, and why (reranker.py)

    def to_json(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "host": self.host,
            "port": self.port,
            "llm": self.llm,
            "started_at": self.started_at,
            "pids": dict(self.pids),
            "state_dir": str(self.state_dir),
            "log_dir": str(self.log_dir),
            "data_dir": None if self.data_dir is None else str(self.data_dir),
            "postgres_port": self.postgres_port,
            "postgres_install": None
            if self.postgres_install is None
            else str(self.postgres_install),
            "postgres_user": self.postgres_user,
            "standin_url": self.standin_url,
            "reused": self.reused,
            "startup_seconds": self.startup_seconds,
            "warnings": list(self.warnings),
            "auth": None if self.api_key_env is None else {"api_key_env": self.api_key_env},
            "database": None if self.database is None else self.database.to_json(),
            "reranker": None if self.reranker is None else self.reranker.to_json(),
        }


@dataclass(frozen=True)
class ServerStatus:
    """What ``server_status`` found."""

    state_dir: Path
    recorded: bool
    running: bool  # every recorded process is alive
    healthy: bool  # ...and GET /health says so
    base_url: str | None = None
    llm: LlmMode | None = None
    phase: str | None = None
    started_at: str | None = None
    pids: dict[str, int] = field(default_factory=dict)
    alive: dict[str, bool] = field(default_factory=dict)
    rss_bytes: dict[str, int] = field(default_factory=dict)
    data_dir: Path | None = None
    log_dir: Path | None = None
    problem: str | None = None
    host: str | None = None  # the address it listens on
    api_key_env: str | None = None  # a team's server: the variable holding its key
    key_check: access.KeyCheck | None = None  # what it makes of the key in this environment
    database: DatabaseRecord | None = None  # a team's own PostgreSQL
    reranker: Reranker | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "state_dir": str(self.state_dir),
            "recorded": self.recorded,
            "running": self.running,
            "healthy": self.healthy,
            "base_url": self.base_url,
            "host": self.host,
            "auth": None
            if self.api_key_env is None
            else {"api_key_env": self.api_key_env, "key_in_this_environment": self.key_check},
            "llm": self.llm,
            "phase": self.phase,
            "started_at": self.started_at,
            "pids": dict(self.pids),
            "alive": dict(self.alive),
            "rss_bytes": dict(self.rss_bytes),
            "data_dir": str(self.data_dir) if self.data_dir else None,
            "log_dir": str(self.log_dir) if self.log_dir else None,
            "problem": self.problem,
            "database": None if self.database is None else self.database.to_json(),
            "reranker": None if self.reranker is None else self.reranker.to_json(),
        }


@dataclass(frozen=True)
class StoppedProcess:
    name: str
    pid: int
    outcome: procs.StopOutcome

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "outcome": self.outcome}


@dataclass(frozen=True)
class StopReport:
    """What ``stop_server`` did."""

    state_dir: Path
    recorded: bool  # there was a record to act on
    processes: tuple[StoppedProcess, ...] = ()

    @property
    def was_running(self) -> bool:
        return any(p.outcome != "not_running" for p in self.processes)

    def to_json(self) -> dict[str, Any]:
        return {
            "state_dir": str(self.state_dir),
            "recorded": self.recorded,
            "was_running": self.was_running,
            "processes": [p.to_json() for p in self.processes],
        }
