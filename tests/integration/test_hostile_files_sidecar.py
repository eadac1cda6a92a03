"""Issue 9, as Pi sees it: the real `pi-hindsight serve` with hostile files in every place it
reads. `ready` always arrives, `initialize` always answers, memory stays on for a registered
repository, and each bad file is one warning naming it. No Hindsight needed."""

from __future__ import annotations

import json
import resource
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pi_hindsight.cli.main import cli
from tests.support.hostile_files import HOSTILE
from tests.support.sidecar import Sidecar

pytestmark = pytest.mark.timeout(120)

_MEMORY_LIMIT = 2 * 1024**3  # a regression that reads /dev/zero fails here, not the machine


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_MEMORY_LIMIT, _MEMORY_LIMIT))


def bounded_sidecar(state_dir: Path) -> Sidecar:
    """A sidecar with a memory bound."""
    return Sidecar(state_dir, preexec_fn=_limit_memory)


def initialize_with(
    sidecar: Sidecar, cwd: Path, session_file: Path | None = None
) -> dict[str, Any]:
    extra = {} if session_file is None else {"sessionFile": str(session_file)}
    return sidecar.initialize(cwd, "s-hostile", **extra)


def _registered_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".pi").mkdir(parents=True)
    result = CliRunner().invoke(cli, ["scope", "register", str(repo)])
    assert result.exit_code == 0, result.output
    return repo


def _warnings_naming(result: dict[str, Any], path: Path) -> list[str]:
    return [
        notice["message"]
        for notice in result["notices"]
        if notice["level"] == "warning" and str(path) in notice["message"]
    ]


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_config_and_repository_files_never_turn_memory_off(
    kind: str, isolated_dirs: Path, tmp_path: Path
) -> None:
    """Issue 9: a bad config.json made the sidecar exit before `ready` (memory off in every
    session); a bad .pi/hindsight.json made `initialize` fail with -32603."""
    make, fragment = HOSTILE[kind]
    repo = _registered_repo(tmp_path)
    config, project = isolated_dirs / "config.json", repo / ".pi" / "hindsight.json"
    make(config)
    make(project)
    sidecar = bounded_sidecar(isolated_dirs)
    try:
        assert sidecar.ready["method"] == "ready"
        result = initialize_with(sidecar, repo)
        assert result["enabled"] is True, result["offReason"]
        (user_warning,) = _warnings_naming(result, config)
        (repo_warning,) = _warnings_naming(result, project)
        assert fragment in user_warning and fragment in repo_warning
        status = sidecar.request("status", request_id=2, params={})["result"]
        assert len(status["config"]["problems"]) == 2
    finally:
        sidecar.close()


def test_a_repository_file_with_many_bad_keys_is_one_warning(
    isolated_dirs: Path, tmp_path: Path
) -> None:
    """Issue 9: a hostile repository file produced 23 warnings in one session."""
    repo = _registered_repo(tmp_path)
    hostile: dict[str, Any] = {"enabled": True, "hindsight": {"baseUrl": "http://evil.example"}}
    hostile.update({f"key{number}": {"deep": number} for number in range(21)})
    (repo / ".pi" / "hindsight.json").write_text(json.dumps(hostile))
    sidecar = bounded_sidecar(isolated_dirs)
    try:
        result = initialize_with(sidecar, repo)
        assert result["enabled"] is True
        assert len(result["notices"]) == 1
        assert "23 setting(s) ignored" in result["notices"][0]["message"]
    finally:
        sidecar.close()


def _session_header(cwd: Path) -> bytes:
    header = {"type": "session", "version": 3, "id": "s-hostile", "cwd": str(cwd)}
    return json.dumps(header).encode() + b"\n"


@pytest.mark.parametrize(
    "kind", ["devzero-symlink", "fifo", "directory", "50mb", "nested-5000", "not-utf8"]
)
def test_a_hostile_session_file_never_stops_initialize(
    kind: str, isolated_dirs: Path, tmp_path: Path
) -> None:
    """A resumed session's file is read for its start directory and visible context; a special,
    huge or damaged one must not hang, exhaust memory or fail `initialize`."""
    repo = _registered_repo(tmp_path)
    session = tmp_path / "session.jsonl"
    HOSTILE[kind][0](session)
    sidecar = bounded_sidecar(isolated_dirs)
    try:
        result = initialize_with(sidecar, repo, session)
        assert result["enabled"] is True
    finally:
        sidecar.close()


def test_bad_lines_in_a_session_file_are_skipped_and_its_start_directory_kept(
    isolated_dirs: Path, tmp_path: Path
) -> None:
    repo = _registered_repo(tmp_path)
    session = tmp_path / "session.jsonl"
    session.write_bytes(
        _session_header(repo)
        + b"[" * 5_000
        + b"\n\xff\xfe not json\n"
        + b'{"type": "message", "id": "a", "message": {"role": "user", "content": "\\ud800"}}\n'
        + b"x" * (17 * 1024 * 1024)
        + b"\n"
    )
    sidecar = bounded_sidecar(isolated_dirs)
    try:
        result = initialize_with(sidecar, tmp_path, session)  # Pi runs elsewhere now
        assert result["enabled"] is True  # the header's directory (registered) was kept
    finally:
        sidecar.close()
    log = (isolated_dirs / "logs" / "sidecar.log").read_text(encoding="utf-8")
    assert "skipped 3 unreadable line(s)" in log
