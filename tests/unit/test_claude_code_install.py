"""``setup --host claude-code``: merged into Claude Code's user settings without clobbering what is
there, idempotent, and ``--uninstall`` removes exactly what it added."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.errors import ConfigError
from pi_hindsight.hosts.claude_code.install import (
    HOOK_TIMEOUTS_S,
    PERMISSIONS,
    ClaudePaths,
    install,
    uninstall,
)

SETUP = [sys.executable, "-m", "pi_hindsight", "setup", "--host", "claude-code"]
USER_SETTINGS: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "permissions": {"allow": ["Bash(git status:*)"], "deny": ["Read(./.env)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}],
    },
    "autoMemoryEnabled": True,
}
USER_STATE: dict[str, Any] = {
    "hasCompletedOnboarding": True,
    "projects": {"/src/app": {"hasTrustDialogAccepted": True}},
    "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": []}},
}


def _home(tmp_path: Path) -> ClaudePaths:
    paths = ClaudePaths(tmp_path / "home")
    paths.settings.parent.mkdir(parents=True)
    paths.settings.write_text(json.dumps(USER_SETTINGS))
    paths.state.write_text(json.dumps(USER_STATE))
    return paths


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def test_install_merges_and_uninstall_restores_exactly(tmp_path: Path) -> None:
    paths = _home(tmp_path)
    state = tmp_path / "state"
    changes = install(paths, "/opt/py env/bin/python", state)
    assert any("hooks" in line for line in changes.lines)
    settings = _json(paths.settings)
    assert settings["model"] == "claude-sonnet-4-5" and settings["autoMemoryEnabled"] is True
    assert settings["permissions"]["deny"] == ["Read(./.env)"]
    assert settings["permissions"]["allow"] == ["Bash(git status:*)", *PERMISSIONS]
    assert settings["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    stop = settings["hooks"]["Stop"]
    assert stop[0] == USER_SETTINGS["hooks"]["Stop"][0] and len(stop) == 2
    for event, timeout in HOOK_TIMEOUTS_S.items():
        [ours] = [
            hook
            for group in settings["hooks"][event]
            for hook in group["hooks"]
            if "pi_hindsight.hosts.claude_code.hook" in hook["command"]
        ]
        assert ours["command"] == (
            f"'/opt/py env/bin/python' -m pi_hindsight.hosts.claude_code.hook {event}"
        )
        assert ours["timeout"] == timeout
    claude_state = _json(paths.state)
    assert claude_state["projects"] == USER_STATE["projects"]
    assert claude_state["mcpServers"]["github"] == USER_STATE["mcpServers"]["github"]
    assert claude_state["mcpServers"]["hindsight"]["alwaysLoad"] is True
    assert "scope register" in paths.command.read_text()

    install(paths, "/opt/py env/bin/python", state)  # again: replaced, not doubled
    assert _json(paths.settings) == settings

    removed = uninstall(paths, state)
    assert _json(paths.settings) == USER_SETTINGS
    assert _json(paths.state) == USER_STATE
    assert not paths.command.exists()
    assert len(removed.lines) == 4


def test_a_permission_the_user_had_stays_after_uninstall(tmp_path: Path) -> None:
    paths = _home(tmp_path)
    mine = {**USER_SETTINGS, "permissions": {"allow": [PERMISSIONS[0]]}}
    paths.settings.write_text(json.dumps(mine))
    install(paths, sys.executable, tmp_path / "state")
    uninstall(paths, tmp_path / "state")
    assert _json(paths.settings) == mine


@pytest.mark.parametrize(
    ("target", "content"),
    [
        ("settings", "[1, 2]"),
        ("settings", "{not json"),
        ("settings", '{"hooks": []}'),
        ("state", '{"mcpServers": {"hindsight": {"command": "someone-elses"}}}'),
        ("state", '{"mcpServers": "x"}'),
    ],
)
def test_what_cannot_be_merged_is_refused_and_nothing_is_written(
    tmp_path: Path, target: str, content: str
) -> None:
    paths = _home(tmp_path)
    getattr(paths, target).write_text(content)
    before = (paths.settings.read_bytes(), paths.state.read_bytes())
    with pytest.raises((ConfigError, Exception)) as raised:
        install(paths, sys.executable, tmp_path / "state")
    assert "nothing was changed" in str(raised.value) or "JSON" in str(raised.value)
    assert (paths.settings.read_bytes(), paths.state.read_bytes()) == before
    assert not paths.command.exists()


def test_setup_command_says_what_it_changed_and_mentions_auto_memory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run = subprocess.run(
        [*SETUP, "--claude-home", str(home), "--yes"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert str(home / ".claude" / "settings.json") in run.stdout
    assert "autoMemoryEnabled" in run.stdout and "leaves it as it is" in run.stdout
    assert "autoMemoryEnabled" not in (home / ".claude" / "settings.json").read_text()
    gone = subprocess.run(
        [*SETUP, "--claude-home", str(home), "--uninstall"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert gone.returncode == 0 and "removed" in gone.stdout
    assert json.loads((home / ".claude" / "settings.json").read_text()) == {}
