"""Host-neutral records that cross the engine's boundary (a host adapter builds and reads them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pi_hindsight.engine.scope import Scope
from pi_hindsight.engine.transcript import TurnMessage

# Every request ends in exactly one of these (R-RECALL-6 / issue 5): visible in status and evidence.
Outcome = Literal[
    "delivered", "nothing_found", "skipped", "backend_unavailable", "not_registered", "error"
]
NoticeLevel = Literal["info", "warning", "error"]


@dataclass(frozen=True)
class Notice:
    level: NoticeLevel
    message: str

    def to_json(self) -> dict[str, str]:
        return {"level": self.level, "message": self.message}


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    cwd: Path  # the directory the session started in (kept for the session's life)
    session_file: str | None
    has_ui: bool
    reason: str


@dataclass(frozen=True)
class ConsentQuestion:
    title: str
    message: str


@dataclass(frozen=True)
class SessionView:
    """What the host shows after a session opened (or consent was answered)."""

    enabled: bool
    status_line: str
    notices: tuple[Notice, ...]
    consent: ConsentQuestion | None
    scope: Scope | None
    off_reason: str | None


@dataclass(frozen=True)
class UserRequest:
    request_id: str
    session_id: str
    prompt: str


@dataclass(frozen=True)
class Delivery:
    outcome: Outcome
    text: str | None
    details: dict[str, Any]  # kept with the host's message, never sent to the model
    notices: tuple[Notice, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class CompletedTurn:
    request_id: str
    session_id: str
    messages: Sequence[TurnMessage]
    memory_entry_id: str | None = None  # the host's record of this request's memory message
    session_file: str | None = None


@dataclass
class DeliveryMemory:
    """What this session's visible context already holds (so nothing is delivered twice)."""

    record_ids: set[str] = field(default_factory=set)
    record_keys: set[str] = field(default_factory=set)  # engine/render.py record_key
    memo_version: str | None = None
    recent: list[tuple[str, str]] = field(default_factory=list)  # (role, text), oldest first
