"""Installing into Claude Code's user settings, and removing exactly that again.

What ``pi-hindsight setup --host claude-code`` adds (docs/hosts/claude-code.md):

- ``~/.claude/settings.json``: one command hook per event we handle (``SessionStart``,
  ``UserPromptSubmit``, ``Stop``, ``SubagentStop``, ``PreCompact``, ``SessionEnd``) running the
  import-light hook client, and ``permissions.allow`` for our two MCP tools (an MCP call in
  ``-p`` needs an allow rule);
- ``~/.claude.json`` ``mcpServers.hindsight`` (where ``claude mcp add --scope user`` writes),
  ``alwaysLoad`` so its tools are in every request instead of behind ToolSearch;
- ``~/.claude/commands/hindsight-register.md``, the ``/hindsight-register`` command.

Never clobbering: a file that is not a JSON object is refused (nothing written); everything else
in it is kept as it was, in its order. Ours is recognised by what it runs (the hook module, the
``claude-code mcp`` arguments, the command's ``scope register`` line); a permission rule is
removed on uninstall only if setup added it (recorded in ``<state dir>/claude-code/install.json``).
Re-running setup replaces our entries (a new interpreter path) instead of adding twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pi_hindsight.errors import ConfigError
from pi_hindsight.hosts.claude_code.naming import (
    MCP_SERVER_NAME,
    REGISTER_COMMAND,
    REGISTER_COMMAND_ARGS,
    REGISTER_COMMAND_DESCRIPTION,
)
from pi_hindsight.safe_files import FileMissing, loads, read_bytes
from pi_hindsight.tools.specs import MEMORY_TOOL, RETAIN_GLOBAL_TOOL

HOOK_MODULE = "pi_hindsight.hosts.claude_code.hook"
MCP_ARGS = ["-m", "pi_hindsight", "claude-code", "mcp"]
# Exactly our tools, not the whole server name: a project's .mcp.json server that reuses the
# name "hindsight" gets no permission from us.
PERMISSIONS = tuple(f"mcp__{MCP_SERVER_NAME}__{tool}" for tool in (MEMORY_TOOL, RETAIN_GLOBAL_TOOL))
# Each hook's timeout in seconds (Claude Code kills a hook past it; the client's own bounds are
# shorter). SessionEnd has its own short default budget in Claude Code: set explicitly.
HOOK_TIMEOUTS_S: Mapping[str, int] = {
    "SessionStart": 20,
    "UserPromptSubmit": 30,
    "Stop": 30,
    "SubagentStop": 30,
    "PreCompact": 30,
    "SessionEnd": 10,
}
_MAX_SETTINGS_BYTES = 64 << 20  # ~/.claude.json grows with every project Claude Code saw
_COMMAND_MARK = "pi_hindsight scope register"


@dataclass(frozen=True)
class ClaudePaths:
    home: Path

    @property
    def settings(self) -> Path:
        return self.home / ".claude" / "settings.json"

    @property
    def state(self) -> Path:
        return self.home / ".claude.json"

    @property
    def command(self) -> Path:
        return self.home / ".claude" / "commands" / f"{REGISTER_COMMAND}.md"


@dataclass
class Changes:
    """What setup changed, file by file, for the user to read."""

    lines: list[str] = field(default_factory=list)

    def add(self, path: Path, what: str) -> None:
        self.lines.append(f"{path}: {what}")


def hook_command(python: str, event: str) -> str:
    return f"{shlex.quote(python)} -m {HOOK_MODULE} {event}"


def register_command_text(python: str) -> str:
    command = f"{shlex.quote(python)} -m pi_hindsight scope register"
    return (
        "---\n"
        f"description: {REGISTER_COMMAND_DESCRIPTION}\n"
        f"allowed-tools: Bash({command}:*)\n"
        f"argument-hint: {REGISTER_COMMAND_ARGS}\n"
        "---\n"
        f"!`{command} $ARGUMENTS`\n\n"
        "Report the result above to the user in one line. Memory is on from the next prompt.\n"
    )


def _read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when the file does not exist. Refuses anything else."""
    try:
        raw = read_bytes(path, max_bytes=_MAX_SETTINGS_BYTES)
    except FileMissing:
        return None
    if not raw.strip():
        return {}
    value = loads(raw, path, max_depth=64)
    if not isinstance(value, dict):
        raise ConfigError(
            f"{path} is not a JSON object; nothing was changed", hint="fix or move the file"
        )
    return value


def _write(path: Path, data: Mapping[str, Any]) -> None:
    """Atomically, keeping the file's mode (0600 for a new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    temporary.replace(path)


def _ours(hook: object) -> bool:
    return isinstance(hook, Mapping) and HOOK_MODULE in str(hook.get("command", ""))


def _without_our_hooks(hooks: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """``hooks`` with every entry running our hook module removed (and groups left empty)."""
    kept: dict[str, Any] = {}
    removed = 0
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept[event] = groups
            continue
        new_groups = []
        for group in groups:
            entries = group.get("hooks") if isinstance(group, Mapping) else None
            if not isinstance(entries, list):
                new_groups.append(group)
                continue
            mine = [entry for entry in entries if _ours(entry)]
            removed += len(mine)
            rest = [entry for entry in entries if not _ours(entry)]
            if rest or not mine:
                new_groups.append({**group, "hooks": rest})
        if new_groups:
            kept[event] = new_groups
    return kept, removed


def _mcp_entry(python: str) -> dict[str, Any]:
    return {"type": "stdio", "command": python, "args": MCP_ARGS, "env": {}, "alwaysLoad": True}


def _is_our_server(entry: object) -> bool:
    return isinstance(entry, Mapping) and entry.get("args") == MCP_ARGS


def _record(state_dir: Path) -> Path:
    return state_dir / "claude-code" / "install.json"


def install(paths: ClaudePaths, python: str, state_dir: Path) -> Changes:
    """Merge our hooks, permission, MCP server and command into Claude Code's user settings."""
    changes = Changes()
    settings = _read_object(paths.settings)
    claude_state = _read_object(paths.state)
    servers = (claude_state or {}).get("mcpServers")
    if isinstance(servers, Mapping):
        existing = servers.get(MCP_SERVER_NAME)
        if existing is not None and not _is_our_server(existing):
            raise ConfigError(
                f"{paths.state} already has an MCP server named {MCP_SERVER_NAME!r} that "
                "pi-hindsight did not add; nothing was changed",
                hint=f"remove it (`claude mcp remove {MCP_SERVER_NAME} --scope user`) first",
            )
    elif servers is not None:
        raise ConfigError(f"{paths.state}: 'mcpServers' is not an object; nothing was changed")
    merged = dict(settings or {})
    hooks = merged.get("hooks", {})
    if not isinstance(hooks, Mapping):
        raise ConfigError(f"{paths.settings}: 'hooks' is not an object; nothing was changed")
    hooks, replaced = _without_our_hooks(hooks)
    for event, timeout in HOOK_TIMEOUTS_S.items():
        group = {
            "hooks": [
                {"type": "command", "command": hook_command(python, event), "timeout": timeout}
            ]
        }
        hooks[event] = [*hooks.get(event, []), group]
    merged["hooks"] = hooks
    permissions = dict(merged.get("permissions") or {})
    allow = list(permissions.get("allow") or [])
    added = [rule for rule in PERMISSIONS if rule not in allow]
    if added:
        permissions["allow"] = [*allow, *added]
        merged["permissions"] = permissions
    _write(paths.settings, merged)
    verb = "replaced" if replaced else "added"
    changes.add(paths.settings, f"{verb} hooks for {', '.join(HOOK_TIMEOUTS_S)}")
    if added:
        changes.add(paths.settings, f"allowed the MCP tools ({', '.join(added)})")
    state = dict(claude_state or {})
    state["mcpServers"] = {
        **dict(state.get("mcpServers") or {}),
        MCP_SERVER_NAME: _mcp_entry(python),
    }
    _write(paths.state, state)
    changes.add(paths.state, f"MCP server {MCP_SERVER_NAME!r} (stdio, alwaysLoad)")
    paths.command.parent.mkdir(parents=True, exist_ok=True)
    paths.command.write_text(register_command_text(python), encoding="utf-8")
    changes.add(paths.command, f"the /{REGISTER_COMMAND} command")
    previous = _read_object(_record(state_dir)) or {}
    before = previous.get("permissionsAdded")
    kept = [rule for rule in before if rule in PERMISSIONS] if isinstance(before, list) else []
    record = {"permissionsAdded": sorted({*kept, *added})}
    _record(state_dir).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _write(_record(state_dir), record)
    return changes


def _uninstall_settings(paths: ClaudePaths, record: Mapping[str, Any], changes: Changes) -> None:
    settings = _read_object(paths.settings)
    if settings is None:
        return
    merged = dict(settings)
    hooks = merged.get("hooks")
    removed = 0
    if isinstance(hooks, Mapping):
        kept, removed = _without_our_hooks(hooks)
        if kept:
            merged["hooks"] = kept
        else:
            merged.pop("hooks")
    permissions = merged.get("permissions")
    allow = permissions.get("allow") if isinstance(permissions, Mapping) else None
    ours = record.get("permissionsAdded")
    added = {rule for rule in ours if rule in PERMISSIONS} if isinstance(ours, list) else set()
    dropped = sorted(added & set(allow)) if isinstance(allow, list) else []
    if dropped and isinstance(permissions, Mapping) and isinstance(allow, list):
        rest = [rule for rule in allow if rule not in added]
        kept_permissions = {k: v for k, v in permissions.items() if k != "allow"}
        if rest:
            kept_permissions["allow"] = rest
        if kept_permissions:  # (containers only we filled are removed with our rules)
            merged["permissions"] = kept_permissions
        else:
            merged.pop("permissions")
    if removed or dropped:
        _write(paths.settings, merged)
    if removed:
        changes.add(paths.settings, f"removed {removed} hook(s)")
    if dropped:
        changes.add(paths.settings, f"removed {', '.join(dropped)} from permissions.allow")


def uninstall(paths: ClaudePaths, state_dir: Path) -> Changes:
    """Remove exactly what ``install`` added; everything else is left as it is."""
    changes = Changes()
    _uninstall_settings(paths, _read_object(_record(state_dir)) or {}, changes)
    claude_state = _read_object(paths.state)
    servers = None if claude_state is None else claude_state.get("mcpServers")
    if isinstance(servers, Mapping) and _is_our_server(servers.get(MCP_SERVER_NAME)):
        state = dict(claude_state or {})
        state["mcpServers"] = {k: v for k, v in servers.items() if k != MCP_SERVER_NAME}
        _write(paths.state, state)
        changes.add(paths.state, f"removed the MCP server {MCP_SERVER_NAME!r}")
    command = paths.command
    with contextlib.suppress(FileNotFoundError):
        if _COMMAND_MARK in command.read_text(encoding="utf-8", errors="replace"):
            command.unlink()
            changes.add(command, f"removed the /{REGISTER_COMMAND} command")
    with contextlib.suppress(FileNotFoundError):
        _record(state_dir).unlink()
    return changes
