"""``ScriptedBackend``: a ``MemoryBackend`` that makes named calls fail or wait, over a real one.

Tests script Hindsight trouble at our own boundary instead of patching our code: every call of
the :class:`~pi_hindsight.backend.MemoryBackend` protocol goes to ``real`` (normally
``HindsightBackend`` against the real test server), except the calls scripted to raise one of
our :class:`~pi_hindsight.errors.BackendError` s or to wait first::

    flaky = ScriptedBackend(backend)
    flaky.fail("delete_document", BackendUnavailable("injected: connection lost"), after=1)
    await move_scope(flaky, ...)  # the second deletion fails, the others reach the server
    assert flaky.calls["delete_document"] == 2

A name that is not a protocol method is refused, so a script cannot silently miss.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pi_hindsight.backend import MemoryBackend
from pi_hindsight.errors import BackendError

PROTOCOL_METHODS = frozenset(
    name
    for name, value in vars(MemoryBackend).items()
    if callable(value) and not name.startswith("_")
)


@dataclass
class _Script:
    first: int  # the first call (counted per method, from 1) it applies to
    times: int | None  # how many calls in a row; None: every call from ``first`` on
    error: BackendError | None = None
    delay_s: float = 0.0

    def applies(self, call: int) -> bool:
        return call >= self.first and (self.times is None or call < self.first + self.times)


class ScriptedBackend:
    """Delegates to ``real``; ``failures`` fail the first call of each named method."""

    def __init__(
        self, real: MemoryBackend, failures: Mapping[str, BackendError] | None = None
    ) -> None:
        self.real = real
        self.calls: Counter[str] = Counter()  # calls received, per method
        self._scripts: dict[str, list[_Script]] = {}
        for method, error in (failures or {}).items():
            self.fail(method, error)

    @property
    def base_url(self) -> str:
        return self.real.base_url

    def fail(self, method: str, error: BackendError, *, after: int = 0, times: int = 1) -> None:
        """Let ``after`` more calls of ``method`` through, then raise ``error`` ``times`` times."""
        self._add(method, _Script(self._next(method) + after, times, error=error))

    def delay(
        self, method: str, seconds: float, *, after: int = 0, times: int | None = None
    ) -> None:
        """Make calls of ``method`` wait ``seconds`` before they go to the server."""
        self._add(method, _Script(self._next(method) + after, times, delay_s=seconds))

    def _next(self, method: str) -> int:
        if method not in PROTOCOL_METHODS:
            raise ValueError(f"{method!r} is not a MemoryBackend method")
        return self.calls[method] + 1

    def _add(self, method: str, script: _Script) -> None:
        self._scripts.setdefault(method, []).append(script)

    def __getattr__(self, name: str) -> Any:
        if name not in PROTOCOL_METHODS:
            raise AttributeError(name)
        target: Callable[..., Any] = getattr(self.real, name)
        if not inspect.iscoroutinefunction(target):
            return target  # pure helpers (normalise_trigger) are not calls to the server

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            number = self.calls[name]
            for script in self._scripts.get(name, ()):
                if script.applies(number):
                    if script.delay_s:
                        await asyncio.sleep(script.delay_s)
                    if script.error is not None:
                        raise script.error
            return await target(*args, **kwargs)

        return call
