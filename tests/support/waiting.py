"""Waiting on events instead of fixed sleeps: poll a condition until it holds, with a bound that
fails the test and says what never happened."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

POLL_S = 0.05


def wait_until(
    probe: Callable[[], T | None],
    what: str,
    *,
    timeout: float = 30.0,
    interval: float = POLL_S,
    details: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` until it returns something truthy, and return that; fail after ``timeout``
    seconds naming ``what`` (and ``details()``, what was seen instead)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            seen = f"; {details()}" if details is not None else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{seen}")
        time.sleep(interval)


def file_text(path: Path) -> str:
    """The file's text, "" while it does not exist yet."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def wait_for_text(path: Path, needle: str, *, timeout: float = 30.0) -> str:
    """Until ``needle`` appears in the file (a log); returns the file's text."""

    def found() -> str | None:
        text = file_text(path)
        return text if needle in text else None

    return wait_until(
        found,
        f"{needle!r} in {path}",
        timeout=timeout,
        details=lambda: f"it holds: {file_text(path)[-2000:]!r}",
    )
