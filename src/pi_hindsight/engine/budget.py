"""``retain.dailyTokenBudget``: a ceiling on the model tokens a bank spends in 24 hours.

When the bank's tokens over the last 24 hours (the server's own count, ``engine/spend.py``) reach
the budget, the retain worker stops delivering: every request is still committed to the outbox,
nothing is lost. It resumes by itself once the window falls under the budget (checked every
``CHECK_EVERY_S``), when the budget is raised (a new session reads the config), or when the user
runs ``pi-hindsight outbox resume`` (the budget is then set aside for that bank for 24 hours).

The pause is written to ``retain-budget.json`` in the state directory so that every process (the
CLI's ``status``, another session) shows it: per bank, since when, at what count.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path

from pydantic import Field, StrictInt

from pi_hindsight.backend import MemoryBackend
from pi_hindsight.engine.spend import Spend
from pi_hindsight.errors import (
    BackendServerError,
    BackendUnavailable,
    BankNotFound,
    PiHindsightError,
)
from pi_hindsight.serialisation import Record

logger = logging.getLogger(__name__)

PAUSE_FILE = "retain-budget.json"
CHECK_EVERY_S = 5.0  # a stats query, asked only while there is work to deliver
RESUME_FOR_S = 86_400.0  # `outbox resume` sets the budget aside this long
RESUME_HINT = "`pi-hindsight outbox resume`, or raise retain.dailyTokenBudget"


class BudgetPause(Record):
    """A bank's pause, as status shows it (``to_json``)."""

    bank_id: str
    since: float
    tokens: StrictInt
    budget: StrictInt

    def describe(self) -> str:
        when = datetime.fromtimestamp(self.since).astimezone().isoformat(timespec="seconds")
        return (
            f"paused by budget since {when}: {self.tokens:,} model tokens in the last 24 h "
            f"reached retain.dailyTokenBudget {self.budget:,}; requests wait in the outbox, "
            f"nothing is lost. Resume: {RESUME_HINT}; it resumes by itself when the last "
            "24 h fall under the budget"
        )


class PauseEntry(Record):
    since: float
    tokens: StrictInt
    budget: StrictInt


class PauseFile(Record):
    """``retain-budget.json``: the paused banks, and when each was resumed by hand. Read
    tolerantly: a part that does not read is empty (the next check rewrites the file whole)."""

    paused: dict[str, PauseEntry] = Field(default_factory=dict)
    resumed: dict[str, float] = Field(default_factory=dict)


def _path(state_dir: Path) -> Path:
    return state_dir / PAUSE_FILE


def _load(state_dir: Path) -> PauseFile:
    """The pause file, or empty; a damaged one (bad bytes, deep nesting, wrong shapes) is read as
    no pause, with a warning naming it: the next check rewrites it whole."""
    path = _path(state_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return PauseFile()
    except (OSError, ValueError, RecursionError) as error:
        logger.warning("ignoring damaged %s (%s); the next budget check rewrites it", path, error)
        return PauseFile()
    loaded = PauseFile.load_or_none(data)
    if loaded is None:
        logger.warning("ignoring damaged %s (not an object)", path)
        return PauseFile()
    return loaded


def _save(state_dir: Path, data: PauseFile) -> None:
    path = _path(state_dir)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data.to_json(), indent=2), encoding="utf-8")
    temporary.replace(path)


def read_pause(state_dir: Path, bank: str) -> BudgetPause | None:
    """The bank's pause as the last check recorded it (any process), or None."""
    entry = _load(state_dir).paused.get(bank)
    if entry is None:
        return None
    return BudgetPause(bank_id=bank, since=entry.since, tokens=entry.tokens, budget=entry.budget)


def resume(state_dir: Path, now: float | None = None) -> list[str]:
    """``outbox resume``: set the budget aside for every paused bank for 24 hours; the banks."""
    data = _load(state_dir)
    paused = sorted(data.paused)
    at = time.time() if now is None else now
    _save(state_dir, data.but(resumed={**data.resumed, **dict.fromkeys(paused, at)}, paused={}))
    return paused


def _record(state_dir: Path, bank: str, pause: BudgetPause | None) -> None:
    data = _load(state_dir)
    paused = dict(data.paused)
    if pause is None:
        if bank not in paused:
            return
        del paused[bank]
    else:
        paused[bank] = PauseEntry(since=pause.since, tokens=pause.tokens, budget=pause.budget)
    try:
        _save(state_dir, data.but(paused=paused))
    except OSError as error:  # status then shows the in-process state only
        logger.warning("could not record the retain budget pause: %s", error)


class BudgetGate:
    """Asked by the retain worker before it claims work: the reason to wait, or None."""

    def __init__(
        self,
        state_dir: Path,
        *,
        bank: str,
        budget: int,
        backend: Callable[[], Awaitable[MemoryBackend]],
        timeout_s: float,
        check_every_s: float = CHECK_EVERY_S,
    ) -> None:
        self.state_dir = state_dir
        self.bank = bank
        self.budget = budget
        self._backend = backend
        self.timeout_s = timeout_s
        self.check_every_s = check_every_s
        self._checked_at = -float("inf")
        self.pause: BudgetPause | None = None
        self._decided = False  # a first answer came from the server

    def _resumed(self, now: float) -> bool:
        at = _load(self.state_dir).resumed.get(self.bank)
        return at is not None and now - at < RESUME_FOR_S

    async def __call__(self) -> str | None:
        if time.monotonic() - self._checked_at >= self.check_every_s:
            self._checked_at = time.monotonic()
            unknown = await self._check(time.time())
            if unknown is not None:
                return unknown
        return None if self.pause is None else self.pause.describe()

    async def _check(self, now: float) -> str | None:
        """Decide anew (sets ``pause``); returns a reason to hold when the count is unknown."""
        if self._resumed(now):
            self._set(None)
            return None
        try:
            backend = await self._backend()
            tokens = await self._tokens(backend)
        except (BackendUnavailable, BackendServerError) as error:
            # Not known now: the server would hardly take the retain either. Until a first
            # answer, hold (asked again in CHECK_EVERY_S); after one, the last decision stands.
            logger.warning("retain budget not checked: %s", error)
            return None if self._decided else f"retain budget not checked yet ({error})"
        except PiHindsightError as error:  # e.g. a server without the records: cannot measure
            logger.warning("retain budget cannot be checked, not applied: %s", error)
            self._decided = True
            self._set(None)
            return None
        self._decided = True
        if tokens < self.budget:
            if self.pause is not None:
                logger.info("retain resumes: %d tokens in the last 24 h, under the budget", tokens)
            self._set(None)
            return None
        since = self.pause.since if self.pause is not None else now
        self._set(BudgetPause(bank_id=self.bank, since=since, tokens=tokens, budget=self.budget))
        return None

    async def _tokens(self, backend: MemoryBackend) -> int:
        try:
            buckets = await backend.usage_stats(self.bank, period="1d", timeout=self.timeout_s)
        except BankNotFound:  # not created yet: nothing spent
            return 0
        return Spend.of(buckets).total_tokens

    def _set(self, pause: BudgetPause | None) -> None:
        if pause is not None and self.pause is None:
            logger.warning("retain paused by budget (nothing lost): %s", pause.describe())
        self.pause = pause
        _record(self.state_dir, self.bank, pause)
