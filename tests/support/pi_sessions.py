"""A writer of Pi session files, in the shapes the real Pi writes them: Pi 0.73.1's (checked
against files the real 0.73.1 wrote in the e2e tests) and Pi 1.x's (checked against files Pi
1.6.0 wrote, /work/notes/pi1.md: a ``system`` message with the prompt sections on the first run,
a failed attempt kept with ``stopReason: "error"`` and hidden by a ``context_edit`` with
``replacement: null``, ``usage`` entries). Used by the seeding tests and bench/seed_bench.py.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

PiFormat = Literal["0.73", "1.x"]


@dataclass(frozen=True)
class Exchange:
    """One user request and what followed it."""

    user: str
    reply: str
    tool: tuple[str, dict[str, Any], str] | None = None  # (name, arguments, result text)
    memory: str | None = None  # a hidden memory message delivered with it
    failed_attempt: bool = False  # 1.x: a failed attempt first, hidden by a context_edit


def session_dir(agent_dir: Path, cwd: Path) -> Path:
    """Pi's folder for sessions started in ``cwd``: ``--<path with / as ->--``."""
    name = "--" + str(cwd).strip("/").replace("/", "-") + "--"
    return agent_dir / "sessions" / name


class _Writer:
    def __init__(self, started: datetime) -> None:
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.clock = started
        self.ids: list[str] = []

    def _stamp(self) -> tuple[str, int]:
        self.clock += timedelta(milliseconds=137)
        iso = self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"
        return iso, int(self.clock.timestamp() * 1000)

    def entry(self, entry_type: str, **fields: Any) -> str:
        entry_id = uuid.uuid4().hex[:8]
        iso, _ = self._stamp()
        self.lines.append(
            {"type": entry_type, "id": entry_id, "parentId": self.parent, "timestamp": iso} | fields
        )
        self.parent = entry_id
        self.ids.append(entry_id)
        return entry_id

    def message(self, role: str, content: Any, **fields: Any) -> str:
        _, millis = self._stamp()
        return self.entry(
            "message", message={"role": role, "content": content, "timestamp": millis, **fields}
        )


def _assistant(text_or_blocks: Any, stop: str = "stop") -> dict[str, Any]:
    content = (
        [{"type": "text", "text": text_or_blocks}]
        if isinstance(text_or_blocks, str)
        else text_or_blocks
    )
    return {
        "content": content,
        "api": "openai-completions",
        "provider": "local",
        "model": "local-model",
        "usage": {"input": 600, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 610},
        "stopReason": stop,
    }


def write_session(
    agent_dir: Path,
    cwd: Path,
    exchanges: Sequence[Exchange],
    *,
    version: PiFormat = "0.73",
    session_id: str | None = None,
    started: datetime | None = None,
    compaction_after: int | None = None,
) -> Path:
    """Write one session file; returns its path. ``compaction_after`` puts a compaction entry
    (with its summary) after that many exchanges."""
    session_id = session_id or str(uuid.uuid4())
    started = started or datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    writer = _Writer(started)
    iso, _ = writer._stamp()
    header = {"type": "session", "version": 3, "id": session_id, "timestamp": iso, "cwd": str(cwd)}
    writer.entry("model_change", provider="local", modelId="local-model")
    writer.entry("thinking_level_change", thinkingLevel="off")
    if version == "1.x":
        writer.message("system", "", sections={"preamble": "You are a coding assistant."})
    for index, exchange in enumerate(exchanges):
        if compaction_after is not None and index == compaction_after:
            first_kept = writer.ids[-1]
            writer.entry(
                "compaction",
                summary="The user and the assistant discussed earlier work.",
                firstKeptEntryId=first_kept,
                tokensBefore=5000,
            )
        writer.message("user", [{"type": "text", "text": exchange.user}])
        if exchange.memory is not None:
            writer.entry(
                "custom_message",
                customType="hindsight-memory",
                content=f'<hindsight-memory scope="x">\n{exchange.memory}\n</hindsight-memory>',
                display=False,
                details={"requestId": f"req-{index}"},
            )
        if exchange.failed_attempt and version == "1.x":
            failed = writer.message(
                "assistant", **{**_assistant([], "error"), "errorMessage": "503 unavailable"}
            )
            writer.entry("context_edit", targetId=failed, replacement=None)
        if exchange.tool is not None:
            name, arguments, result = exchange.tool
            call_id = f"call_{uuid.uuid4().hex[:12]}"
            writer.message(
                "assistant",
                **_assistant(
                    [{"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}],
                    "toolUse",
                ),
            )
            writer.message(
                "toolResult",
                [{"type": "text", "text": result}],
                toolCallId=call_id,
                toolName=name,
                isError=False,
            )
        writer.message("assistant", **_assistant(exchange.reply))
        if version == "1.x":
            writer.entry("usage", kind="cache_warm", provider="local", model="local-model")
    directory = session_dir(agent_dir, cwd)
    directory.mkdir(parents=True, exist_ok=True)
    stamp = started.strftime("%Y-%m-%dT%H-%M-%S-000Z")
    path = directory / f"{stamp}_{session_id}.jsonl"
    lines = [header, *writer.lines]
    path.write_text(
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8"
    )
    return path
