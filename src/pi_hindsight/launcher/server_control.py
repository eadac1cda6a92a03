"""Start, stop and inspect the local Hindsight: PostgreSQL, the optional LLM stand-in, Hindsight.

The launcher only ever signals processes it recorded in ``server.json``, and only while their pid
still carries the recorded start time and command line (see procs.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pi_hindsight.errors import CorruptStateError, LauncherError
from pi_hindsight.launcher import access, api_process, postgres, procs
from pi_hindsight.launcher.database import ExternalDatabase
from pi_hindsight.launcher.database import check as check_database
from pi_hindsight.launcher.reports import ServerInfo, ServerStatus, StoppedProcess, StopReport
from pi_hindsight.launcher.reranker import Requested, Reranker
from pi_hindsight.launcher.reranker import select as select_reranker
from pi_hindsight.launcher.server_record import (
    START_ORDER,
    DatabaseRecord,
    LlmMode,
    PostgresRecord,
    ProcessName,
    ServerAuth,
    ServerPaths,
    ServerRecord,
    load_record,
    locked,
    remove_record,
    save_record,
)

logger = logging.getLogger(__name__)

POSTGRES_START_TIMEOUT = 60.0
STANDIN_START_TIMEOUT = 30.0
# A live but unhealthy recorded server gets this long to answer before it is restarted.
HEALTH_GRACE = 10.0


# How each recorded process is recognised on top of its start time.
_MARKERS: dict[ProcessName, Callable[[list[str]], bool]] = {
    "postgres": lambda argv: bool(argv) and Path(argv[0]).name == "postgres",
    # `python -m pi_hindsight_standin …`; also `-m pi_hindsight standin`, how releases before the
    # stand-in became its own package started it, so a server they started still stops cleanly.
    "standin": lambda argv: (
        api_process.STANDIN_MODULE in argv or ("pi_hindsight" in argv and "standin" in argv)
    ),
    "hindsight": lambda argv: any(Path(arg).name == "hindsight-api" for arg in argv),
}


def _alive(name: ProcessName, identity: procs.ProcessIdentity) -> bool:
    return procs.is_running(identity) and _MARKERS[name](procs.cmdline(identity.pid))


def _expected(record: ServerRecord) -> tuple[ProcessName, ...]:
    return tuple(
        n
        for n in START_ORDER
        if (n != "standin" or record.llm == "offline")
        and (n != "postgres" or record.database is None)
    )


def _paths(state_dir: Path) -> ServerPaths:
    # Absolute: the path is handed to child processes that run in another working directory.
    return ServerPaths(state_dir.expanduser().absolute())


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def start_server(
    state_dir: Path,
    *,
    port: int | None = None,
    llm: LlmMode = "env",
    timeout: float = 240.0,
    system_dir: Path | None = None,
    host: str | None = None,
    api_key_env: str | None = None,
    database: ExternalDatabase | None = None,
    reranker: Requested = "auto",
) -> ServerInfo:
    """Start the local Hindsight for ``state_dir``, or return the one already running.

    ``llm="env"`` uses the provider configured in ``HINDSIGHT_API_LLM_*``; ``"offline"`` starts the
    deterministic stand-in; ``"mock"`` (tests only) uses Hindsight's built-in mock. ``system_dir``
    overrides where root keeps PostgreSQL (default ``$PI_HINDSIGHT_SYSTEM_DIR`` or
    ``/var/lib/pi-hindsight``).

    ``api_key_env`` names the environment variable holding a team's API key: the server then
    refuses every request without it. ``host`` is the address to listen on (default 127.0.0.1;
    another one needs a key, and gets a warning in ``ServerInfo.warnings``). See access.py.

    ``database``: a team's own PostgreSQL (with pgvector) instead of the embedded one; checked
    before Hindsight starts (database.py), and neither started nor stopped here.
    ``reranker``: ``auto`` runs Hindsight's cross-encoder when its model is cached or
    downloadable, else ``rrf`` (reranker.py); the choice and why are in ``ServerInfo.reranker``.
    """
    paths = _paths(state_dir)
    bind = access.bind_host(host)
    access.check_exposure(bind, api_key_env)
    # Read once, here; from now on only the variable's name is recorded or shown.
    credentials = (
        None if api_key_env is None else (api_key_env, access.team_key(os.environ, api_key_env))
    )
    with locked(paths, timeout=timeout):
        existing = load_record(paths)
        if existing is not None:
            reused = _reuse(paths, existing, port=port, llm=llm, host=bind, api_key_env=api_key_env)
            if reused is not None:
                _check_reused_database(existing, database)
                return reused
            logger.info("cleaning up the stale record of a server that is not running")
            _stop_recorded(paths, existing, timeout=30.0)
            remove_record(paths)
        try:
            return _start(
                paths,
                port=port,
                llm=llm,
                timeout=timeout,
                system_dir=system_dir,
                host=bind,
                api_key=credentials,
                database=database,
                reranker=reranker,
            )
        except OSError as error:  # a file we cannot create, a program we cannot run, ...
            raise LauncherError(
                f"could not start the local Hindsight: {error}",
                hint=f"logs are in {paths.logs}",
            ) from error


def _reuse(
    paths: ServerPaths,
    record: ServerRecord,
    *,
    port: int | None,
    llm: LlmMode,
    host: str,
    api_key_env: str | None,
) -> ServerInfo | None:
    alive = all(
        name in record.processes and _alive(name, record.processes[name])
        for name in _expected(record)
    )
    if not alive or record.phase != "running":
        return None
    deadline = time.monotonic() + HEALTH_GRACE
    while not api_process.health(record.base_url):
        if time.monotonic() >= deadline:
            logger.warning("the recorded server at %s is alive but unhealthy", record.base_url)
            return None
        time.sleep(0.5)
    if port is not None and port != record.port:
        raise LauncherError(
            f"the server is already running on port {record.port}, not {port}",
            hint="stop it first (`pi-hindsight server stop`) to restart it on another port",
        )
    if llm != record.llm:
        raise LauncherError(
            f"the server is already running with --llm {record.llm}, not {llm}",
            hint="stop it first (`pi-hindsight server stop`) to change the LLM",
        )
    if host != record.host:
        raise LauncherError(
            f"the server is already running on {record.host}, not {host}",
            hint="stop it first (`pi-hindsight server stop`) to listen on another address",
        )
    _check_reused_auth(record, api_key_env)
    return _info(paths, record, reused=True, startup_seconds=None)


def _check_reused_auth(record: ServerRecord, api_key_env: str | None) -> None:
    """A running server is reused only with the access it was asked for."""
    stop_hint = "stop it first (`pi-hindsight server stop`) to change its API key"
    if api_key_env is None:
        if record.api_key_env is not None:
            raise LauncherError(
                f"the server is already running with an API key (from {record.api_key_env})",
                hint=f"pass `--api-key-env {record.api_key_env}` to use it, or {stop_hint}",
            )
        return
    if record.api_key_env is None:
        raise LauncherError("the server is already running without an API key", hint=stop_hint)
    if access.check_key(record.base_url, os.environ, api_key_env) != "accepted":
        raise LauncherError(
            f"the running server does not accept the key in {api_key_env} "
            f"(it was started with the key in {record.api_key_env})",
            hint=stop_hint,
        )


def _check_reused_database(record: ServerRecord, database: ExternalDatabase | None) -> None:
    """A running server is reused only with the database it was asked for."""
    running = "the embedded PostgreSQL" if record.database is None else record.database.source
    asked = "the embedded PostgreSQL" if database is None else database.source
    if running != asked:
        raise LauncherError(
            f"the server is already running with {running}, not {asked}",
            hint="stop it first (`pi-hindsight server stop`) to change its database",
        )


def _choose_ports(port: int | None, host: str) -> tuple[int, int]:
    try:
        free = procs.free_port(host)
    except OSError as error:  # not an address of this machine
        raise LauncherError(
            f"cannot listen on {host}: {error.strerror or error}",
            hint="give an address of one of this machine's network interfaces, or 0.0.0.0",
        ) from error
    if port is not None:
        if not procs.port_is_free(port, host):
            raise LauncherError(
                f"port {port} on {host} is already in use",
                hint="choose another --port, or leave it out to pick a free one",
            )
        api_port = port
    else:
        api_port = free
    pg_port = procs.free_port()
    while pg_port == api_port:
        pg_port = procs.free_port()
    return api_port, pg_port


def _start(
    paths: ServerPaths,
    *,
    port: int | None,
    llm: LlmMode,
    timeout: float,
    system_dir: Path | None,
    host: str,
    api_key: tuple[str, str] | None,  # (the variable's name, the key)
    database: ExternalDatabase | None,
    reranker: Requested = "auto",
) -> ServerInfo:
    began = time.monotonic()
    environ = dict(os.environ)
    if llm == "env":
        api_process.llm_env("env", environ, None)  # fail before starting anything
    if llm == "offline":
        api_process.require_standin()  # a package of its own: say how to install it, up front
    api_port, pg_port = _choose_ports(port, host)
    placement = None
    if database is None:
        placement = postgres.plan(paths, system=system_dir)
        postgres.prepare(placement, paths)
    api_process.executable()  # missing pieces fail here, before anything runs
    api_process.model_dir()
    if database is not None:
        check_database(database)  # reachable, and pgvector there or creatable: else the fix
    record = ServerRecord(
        state_dir=paths.state_dir,
        llm=llm,
        started_at=_now(),
        phase="starting",
        host=host,
        port=api_port,
        auth=None if api_key is None else ServerAuth(api_key_env=api_key[0]),
        database=None
        if database is None
        else DatabaseRecord(source=database.source, shown=database.shown),
    )
    try:
        if placement is not None:
            record, database_url = _start_postgres(paths, placement, record, pg_port)
        else:
            database_url = database.url if database is not None else ""

        if llm == "offline":
            standin, standin_url = api_process.start_standin(
                paths, environ, timeout=STANDIN_START_TIMEOUT
            )
            record = record.model_copy(
                update={
                    "processes": {**record.processes, "standin": standin},
                    "standin_url": standin_url,
                }
            )
            save_record(paths, record)

        chosen = select_reranker(reranker, environ)
        logger.info("reranker: %s", chosen.label)

        def start(choice: Reranker) -> procs.ProcessIdentity:
            env = api_process.server_env(
                environ=environ,
                mode=llm,
                port=api_port,
                database_url=database_url,
                standin_url=record.standin_url,
                host=host,
                api_key=None if api_key is None else api_key[1],
                reranker=choice,
            )
            return api_process.start_server(paths, env)

        log_offset = api_process.log_size(paths.log("hindsight"))
        record = record.model_copy(update={"reranker": chosen})
        record, fell_back = api_process.start_with_fallback(
            paths,
            record,
            start,
            save=lambda updated: save_record(paths, updated),
            timeout=max(5.0, timeout - (time.monotonic() - began)),
        )
        if api_key is not None:
            _check_enforced(record.base_url, api_key[1])
        record = record.model_copy(update={"phase": "running"})
        save_record(paths, record)
    except BaseException:
        # Also on KeyboardInterrupt: never leave half a server running.
        logger.info("start failed; stopping what was started")
        # The last record saved names every process started (start_with_fallback saves its own).
        with contextlib.suppress(LauncherError, CorruptStateError):
            record = load_record(paths) or record
        _stop_recorded(paths, record, timeout=15.0)
        remove_record(paths)
        raise
    elapsed = round(time.monotonic() - began, 2)
    logger.info("Hindsight healthy at %s after %.1fs", record.base_url, elapsed)
    info = _info(paths, record, reused=False, startup_seconds=elapsed)
    warnings = fell_back + api_process.startup_warnings(paths.log("hindsight"), log_offset)
    for warning in warnings:
        logger.info("Hindsight: %s", warning)
    return info.but(warnings=info.warnings + warnings)


def _start_postgres(
    paths: ServerPaths, placement: postgres.Placement, record: ServerRecord, pg_port: int
) -> tuple[ServerRecord, str]:
    """The embedded PostgreSQL: its cluster and database, started and recorded."""
    pg_log = paths.log("postgres")
    password = postgres.ensure_cluster(placement, paths, pg_log)
    postgres.clear_orphan(placement, pg_log, timeout=30.0)
    pg_identity = postgres.start(
        placement, port=pg_port, log=pg_log, timeout=POSTGRES_START_TIMEOUT
    )
    pg_record = PostgresRecord(
        port=pg_port,
        data_dir=placement.data_dir,
        install_dir=placement.install_dir,
        os_user=placement.os_user.name if placement.os_user else None,
        database=postgres.DATABASE,
    )
    record = record.model_copy(
        update={"processes": {"postgres": pg_identity}, "postgres": pg_record}
    )
    save_record(paths, record)
    postgres.ensure_database(placement, paths, pg_record, password, pg_log)
    return record, postgres.database_url(pg_record, password)


def _check_enforced(base_url: str, key: str) -> None:
    """A team's server must accept its key and refuse a request without one — checked, not
    assumed (an extension that did not load would leave every bank open)."""
    if access.key_accepted(base_url, key) is not True:
        raise LauncherError(
            "Hindsight started but does not accept its own API key",
            hint="it was stopped; see the Hindsight log in the logs directory",
        )
    if access.key_accepted(base_url, None) is not False:
        raise LauncherError(
            "Hindsight started but answers requests without the API key",
            hint="it was stopped; see the Hindsight log in the logs directory",
        )


def _info(
    paths: ServerPaths, record: ServerRecord, *, reused: bool, startup_seconds: float | None
) -> ServerInfo:
    pg = record.postgres
    if pg is None and record.database is None:  # reached only after the database was there
        raise LauncherError(f"{paths.record} has no PostgreSQL entry")
    exposure = access.exposure_warning(record.host, record.port)
    return ServerInfo(
        base_url=record.base_url,
        host=record.host,
        port=record.port,
        llm=record.llm,
        started_at=record.started_at,
        pids={name: ident.pid for name, ident in record.processes.items()},
        state_dir=paths.state_dir,
        log_dir=paths.logs,
        data_dir=None if pg is None else pg.data_dir,
        postgres_port=None if pg is None else pg.port,
        postgres_install=None if pg is None else pg.install_dir,
        postgres_user=None if pg is None else pg.os_user,
        standin_url=record.standin_url,
        reused=reused,
        startup_seconds=startup_seconds,
        warnings=() if exposure is None else (exposure,),
        api_key_env=record.api_key_env,
        database=record.database,
        reranker=record.reranker,
    )


def _stop_recorded(
    paths: ServerPaths, record: ServerRecord, *, timeout: float
) -> tuple[StoppedProcess, ...]:
    """Stop the recorded processes in reverse start order: Hindsight, stand-in, PostgreSQL."""
    results: list[StoppedProcess] = []
    for name in reversed(START_ORDER):
        identity = record.processes.get(name)
        if identity is None:
            continue
        outcome: procs.StopOutcome
        if not _alive(name, identity):
            outcome = "not_running"
        elif name == "postgres" and record.postgres is not None:
            placement = postgres.placement_from_record(record.postgres)
            outcome = postgres.stop(placement, identity, log=paths.log("postgres"), timeout=timeout)
        else:
            outcome = procs.terminate(identity, timeout=timeout, first=signal.SIGTERM)
        logger.info("%s (pid %d): %s", name, identity.pid, outcome)
        results.append(StoppedProcess(name=name, pid=identity.pid, outcome=outcome))
    return tuple(results)


def stop_server(state_dir: Path, *, timeout: float = 30.0) -> StopReport:
    """Stop the server ``start_server`` recorded for ``state_dir``.

    Each process gets ``timeout`` seconds to exit gracefully (SIGTERM; PostgreSQL a fast
    shutdown) before SIGKILL.
    """
    paths = _paths(state_dir)
    with locked(paths, timeout=timeout + 60):
        record = load_record(paths)
        if record is None:
            return StopReport(state_dir=paths.state_dir, recorded=False)
        stopped = _stop_recorded(paths, record, timeout=timeout)
        survivors = [p for p in stopped if p.outcome == "survived"]
        if survivors:
            names = ", ".join(f"{p.name} (pid {p.pid})" for p in survivors)
            raise LauncherError(
                f"could not stop {names}", hint=f"the record is kept in {paths.record}"
            )
        remove_record(paths)
        return StopReport(state_dir=paths.state_dir, recorded=True, processes=stopped)


def server_status(state_dir: Path) -> ServerStatus:
    """Whether the recorded server's processes are alive and Hindsight answers /health."""
    paths = _paths(state_dir)
    record = load_record(paths)
    if record is None:
        return ServerStatus(state_dir=paths.state_dir, recorded=False, running=False, healthy=False)
    alive = {name: _alive(name, ident) for name, ident in record.processes.items()}
    missing = [n for n in _expected(record) if not alive.get(n)]
    running = not missing and record.phase == "running"
    healthy = running and api_process.health(record.base_url)
    problem = None
    if record.phase != "running":
        problem = "a start is in progress or was interrupted"
    elif missing:
        problem = "not running: " + ", ".join(missing)
    elif not healthy:
        problem = f"{record.base_url}/health does not report healthy"
    rss = {n: r for n, i in record.processes.items() if (r := procs.rss_bytes(i.pid)) and alive[n]}
    key_check = None
    if record.api_key_env is not None and healthy:
        key_check = access.check_key(record.base_url, os.environ, record.api_key_env)
    return ServerStatus(
        state_dir=paths.state_dir,
        recorded=True,
        running=running,
        healthy=healthy,
        base_url=record.base_url,
        llm=record.llm,
        phase=record.phase,
        started_at=record.started_at,
        pids={name: ident.pid for name, ident in record.processes.items()},
        alive={str(k): v for k, v in alive.items()},
        rss_bytes={str(k): v for k, v in rss.items()},
        data_dir=record.postgres.data_dir if record.postgres else None,
        log_dir=paths.logs,
        problem=problem,
        host=record.host,
        api_key_env=record.api_key_env,
        key_check=key_check,
        database=record.database,
        reranker=record.reranker,
    )


def recorded_base_url(state_dir: Path) -> str | None:
    """The base URL of the server ``start_server`` recorded, if its Hindsight process is alive.

    Cheap (reads ``server.json`` and ``/proc``; no HTTP). Raises CorruptStateError when
    ``server.json`` is damaged.
    """
    record = load_record(_paths(state_dir))
    if record is None or record.phase != "running":
        return None
    identity = record.processes.get("hindsight")
    if identity is None or not _alive("hindsight", identity):
        return None
    return record.base_url
