"""What the launcher reports: a started server (``ServerInfo``), a server's status
(``ServerStatus``) and what stopping did (``StopReport``), each with its one JSON form
(``pi-hindsight server … --json``). ``lifecycle.py`` does the starting and stopping."""

from __future__ import annotations

from pathlib import Path

from pydantic import (
    Field,
    computed_field,
    field_serializer,
)

from pi_hindsight.launcher import access, procs
from pi_hindsight.launcher.reranker import Reranker
from pi_hindsight.launcher.server_record import DatabaseRecord, LlmMode
from pi_hindsight.serialisation import SnakeRecord


class ServerInfo(SnakeRecord):
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
    # A team's server: the variable its key was read from (shown as ``auth``).
    api_key_env: str | None = Field(default=None, serialization_alias="auth")
    database: DatabaseRecord | None = None  # a team's own PostgreSQL: its URL's source, shown
    reranker: Reranker | None = None  # the reranker it runs, and why (reranker.py)

    @field_serializer("api_key_env")
    def _auth(self, variable: str | None) -> dict[str, str] | None:
        return None if variable is None else {"api_key_env": variable}


class ServerStatus(SnakeRecord):
    """What ``server_status`` found (fields in the order its JSON shows them)."""

    state_dir: Path
    recorded: bool
    running: bool  # every recorded process is alive
    healthy: bool  # ...and GET /health says so
    base_url: str | None = None
    host: str | None = None  # the address it listens on
    # A team's server: the variable holding its key (shown as ``auth``, with ``key_check``).
    api_key_env: str | None = Field(default=None, serialization_alias="auth")
    llm: LlmMode | None = None
    phase: str | None = None
    started_at: str | None = None
    pids: dict[str, int] = Field(default_factory=dict)
    alive: dict[str, bool] = Field(default_factory=dict)
    rss_bytes: dict[str, int] = Field(default_factory=dict)
    data_dir: Path | None = None
    log_dir: Path | None = None
    problem: str | None = None
    database: DatabaseRecord | None = None  # a team's own PostgreSQL
    reranker: Reranker | None = None
    # What the server makes of the key in this environment.
    key_check: access.KeyCheck | None = Field(default=None, exclude=True)

    @field_serializer("api_key_env")
    def _auth(self, variable: str | None) -> dict[str, str | None] | None:
        if variable is None:
            return None
        return {"api_key_env": variable, "key_in_this_environment": self.key_check}


class StoppedProcess(SnakeRecord):
    name: str
    pid: int
    outcome: procs.StopOutcome


class StopReport(SnakeRecord):
    """What ``stop_server`` did."""

    state_dir: Path
    recorded: bool  # there was a record to act on
    processes: tuple[StoppedProcess, ...] = ()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def was_running(self) -> bool:
        return any(p.outcome != "not_running" for p in self.processes)
