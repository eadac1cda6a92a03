"""Pytest plugin: what one test run shares across its processes (pytest-xdist workers).

The process that runs pytest (the xdist controller, or the only process without xdist) makes a
run directory and names it to the workers in ``$PI_HINDSIGHT_TEST_RUN_DIR`` (they inherit it when
xdist spawns them). Servers the tests share live there: the first worker that needs one starts
it through the launcher, whose lock and record make every later start in the same state dir
reuse it (``start_server`` returns the running one). When the run ends — also after failures,
Ctrl-C and SIGTERM — the controller stops every server recorded there and removes the
directory, so no worker has to know whether it is the last one.

- ``run_dir(config)``: the run directory; ``system_dir(config)``: where PostgreSQL goes when the
  tests run as root (traversable by any user: pytest's own temporary dirs are 0700).
- ``start_early(session, fixture, argv)`` / ``wait_early(config, fixture)``: a shared server
  starts in a background process as soon as a worker has collected a test that uses its fixture,
  so it boots while the fast tests (ordered first, ``markers.py``) run; the fixture waits for it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from pi_hindsight.launcher import stop_server

RUN_DIR_ENV = "PI_HINDSIGHT_TEST_RUN_DIR"
SERVERS = "servers"  # every state dir under it is stopped when the run ends


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def run_dir(config: pytest.Config) -> Path:
    return Path(os.environ[RUN_DIR_ENV]) if _is_worker(config) else config.stash[_RUN_DIR]


def system_dir(config: pytest.Config) -> Path:
    return run_dir(config) / "system"


def server_state_dir(config: pytest.Config, name: str) -> Path:
    """The state dir of the shared server ``name`` (stopped by the controller at the end)."""
    path = run_dir(config) / SERVERS / name
    path.mkdir(parents=True, exist_ok=True)
    return path


_RUN_DIR = pytest.StashKey[Path]()
_PREVIOUS_SIGTERM = pytest.StashKey[object]()
_STARTING = pytest.StashKey[dict[str, "subprocess.Popen[bytes]"]]()

ROOT = Path(__file__).resolve().parents[2]
EARLY_WAIT_S = 360  # the launcher's own start timeout is 240 s


def start_early(
    session: pytest.Session, fixture: str, argv: list[str], env: dict[str, str] | None = None
) -> None:
    """Run ``argv`` (a command that starts a shared server) in the background if a collected
    test uses ``fixture`` (after ``-m``/``-k`` deselection: ``make test-fast`` starts nothing).

    A process, not a thread: the start imports and parses while the tests run, and CPython 3.11
    shares the ``ast`` module's recursion counter between threads (a concurrent ``ast.parse``,
    as pytest's failure reports do, then fails with SystemError). Every worker may do so: the
    launcher's lock makes the later starts wait for, and reuse, the first one's server."""
    if not any(fixture in getattr(item, "fixturenames", ()) for item in session.items):
        return
    process = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    session.config.stash.setdefault(_STARTING, {})[fixture] = process


def wait_early(config: pytest.Config, fixture: str) -> None:
    """Wait for ``start_early``'s start of ``fixture``'s server, if there was one. The fixture
    then starts the server as before, which reuses that one (or, had it failed, fails with the
    launcher's own message)."""
    process = config.stash.get(_STARTING, {}).pop(fixture, None)
    if process is None:
        return
    try:
        process.wait(timeout=EARLY_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    if _is_worker(config):
        return
    path = Path(tempfile.mkdtemp(prefix="pi-hindsight-tests-"))
    path.chmod(0o755)  # the postgres user traverses it to reach system/
    (path / "system").mkdir(mode=0o755)
    config.stash[_RUN_DIR] = path
    os.environ[RUN_DIR_ENV] = str(path)  # xdist's workers are started after this, with it
    # A CI timeout sends SIGTERM: as KeyboardInterrupt, pytest still runs pytest_unconfigure.
    previous = signal.getsignal(signal.SIGTERM)
    config.stash[_PREVIOUS_SIGTERM] = previous
    if previous is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)


def _stop_servers(path: Path) -> list[str]:
    survivors: list[str] = []
    servers = path / SERVERS
    for state in sorted(servers.iterdir()) if servers.is_dir() else []:
        try:
            report = stop_server(state)
        except Exception as error:  # stop the others all the same, and say which one failed
            survivors.append(f"{state.name}: could not be stopped: {error!r}")
            continue
        survivors += [
            f"{state.name}: {p.name}" for p in report.processes if p.outcome == "survived"
        ]
    return survivors


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """After every worker has finished: stop the shared servers; one that survives fails the run."""
    config = session.config
    for fixture in list(config.stash.get(_STARTING, {})):
        wait_early(config, fixture)  # a start no test waited for ends before the servers stop
    if _is_worker(config) or _RUN_DIR not in config.stash:
        return
    survivors = _stop_servers(config.stash[_RUN_DIR])
    if survivors:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        message = f"shared servers outlived the run: {survivors}"
        if reporter is not None:
            reporter.write_line(message, red=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _is_worker(config) or _RUN_DIR not in config.stash:
        return
    path = config.stash[_RUN_DIR]
    _stop_servers(path)  # a no-op after pytest_sessionfinish; a run that never got there
    shutil.rmtree(path, ignore_errors=True)
    os.environ.pop(RUN_DIR_ENV, None)
    if config.stash[_PREVIOUS_SIGTERM] is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
