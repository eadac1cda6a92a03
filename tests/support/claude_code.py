"""Helpers for the Claude Code host's tests: the real hook client as a process, the daemon it
starts (stopped at teardown), synthetic transcripts in Claude Code's own row format, and the
outbox as the daemon left it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pi_hindsight.hosts.claude_code import runtime
from pi_hindsight.stores.outbox_items import decode_item

HOOK = [sys.executable, "-m", "pi_hindsight.hosts.claude_code.hook"]


@dataclass
class HookRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> dict[str, Any] | None:
        text = self.stdout.strip()
        return None if not text else json.loads(text)


def run_hook(
    event: str,
    payload: bytes | str | Mapping[str, Any],
    env: Mapping[str, str],
    *,
    cwd: Path | None = None,
    timeout: float = 60,
) -> HookRun:
    data = (
        payload
        if isinstance(payload, bytes)
        else (payload if isinstance(payload, str) else json.dumps(payload)).encode()
    )
    completed = subprocess.run(
        [*HOOK, event],
        input=data,
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    return HookRun(
        completed.returncode,
        completed.stdout.decode("utf-8", "replace"),
        completed.stderr.decode("utf-8", "replace"),
    )


def daemon_pid(env: Mapping[str, str]) -> int | None:
    try:
        return int(runtime.address(env).pid_file.read_text())
    except (OSError, ValueError):
        return None


def stop_daemon(env: Mapping[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "claude-code", "daemon", "--stop"],
        env=dict(env),
        capture_output=True,
        timeout=60,
        check=False,
    )


def wait_gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


def payload(event: str, session_id: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "cwd": str(cwd),
        "hook_event_name": event,
        **fields,
    }


class Transcript:
    """Rows in Claude Code's transcript format (the fields the adapter reads, as 2.1.332 writes
    them), appended to a file like Claude Code does."""

    def __init__(self, path: Path, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self._parent: str | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def row(self, kind: str, **fields: Any) -> dict[str, Any]:
        row = {
            "parentUuid": self._parent,
            "isSidechain": False,
            "type": kind,
            "uuid": str(uuid.uuid4()),
            "timestamp": "2026-12-01T10:00:00.000Z",
            "sessionId": self.session_id,
            **fields,
        }
        self._parent = row["uuid"]
        return row

    def append(self, *rows: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")

    def request(self, prompt: str, answer: str) -> list[dict[str, Any]]:
        prompt_id = str(uuid.uuid4())
        return [
            self.row("user", promptId=prompt_id, message={"role": "user", "content": prompt}),
            self.row(
                "assistant",
                message={"role": "assistant", "content": [{"type": "text", "text": answer}]},
            ),
        ]


def outbox_turns(state_dir: Path, session_id: str) -> list[tuple[str, list[dict[str, str]]]]:
    """(request id, turns) of every outbox item of the session, in the order committed."""
    connection = sqlite3.connect(f"file:{state_dir / 'outbox.sqlite'}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT request_id, payload FROM items WHERE session_id = ? ORDER BY rowid",
            (session_id,),
        ).fetchall()
    finally:
        connection.close()
    return [(str(request_id), json.loads(decode_item(p).content)) for request_id, p in rows]


def outbox_count(state_dir: Path, session_id: str) -> int:
    path = state_dir / "outbox.sqlite"
    if not path.exists():
        return 0
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        row = connection.execute(
            "SELECT count(*) FROM items WHERE session_id = ?", (session_id,)
        ).fetchone()
    except sqlite3.OperationalError:
        return 0
    finally:
        connection.close()
    return int(row[0])
