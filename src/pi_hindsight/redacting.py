"""``redact`` for modules loaded when a session starts, without loading the redaction tables.

Importing ``pi_hindsight.redaction`` compiles its detectors (a third of the sidecar's imports,
issue 19). No session's start needs them — the first prompt, turn or tool call does — so the
engine, the tools and the hosts call this ``redact``, which imports the real one at its first
call; the sidecar and the Claude Code daemon import it ahead, off the loop, once the first
request is answered (``rpc/sidecar.py``). The behaviour is the redaction package's, unchanged.

:func:`redact_recalled` remembers its answers: recall returns the same records request after
request (issue 19: redacting them was a third of composing a block), and a record's redaction
depends on its text and the user's rules alone.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING

from pi_hindsight import redaction_rules

if TYPE_CHECKING:
    from collections.abc import Callable

    from pi_hindsight.redaction import Redacted

_redact: Callable[[str], Redacted] | None = None

# Bounds what is remembered: at most this many texts, each at most this long (a record in a
# block is trimmed to 1,200 characters; the memo and longer texts are redacted every time).
_REMEMBERED = 2_048
_REMEMBERED_CHARS = 4_096


def redact(text: str) -> Redacted:
    """``pi_hindsight.redaction.redact(text)``."""
    global _redact  # noqa: PLW0603 - the one-time import, cached
    if _redact is None:
        from pi_hindsight.redaction import redact as loaded  # noqa: PLC0415 - the point

        _redact = loaded
    return _redact(text)


def loaded() -> bool:
    return _redact is not None


async def load() -> None:
    """Import the redaction package off the event loop: a request that needs it first waits
    without blocking the loop, so its own bound still holds while it imports."""
    await asyncio.to_thread(redact, "")


@functools.lru_cache(maxsize=_REMEMBERED)
def _remembered(text: str, generation: int) -> str:
    return redact(text).text


class _Rules:
    """The user's rules seen last (``redaction_rules.current``), and how many were seen: an
    answer is remembered under the generation of the rules it was redacted with."""

    rules: redaction_rules.UserRules | None = None
    generation = 0


_seen = _Rules()


def redact_recalled(text: str) -> str:
    """``redact(text).text`` for recalled text, remembered across requests (bounded; in this
    process's memory only, where the records are anyway). Other rules (each config load
    installs its own; the same rules compare equal) start a new generation: nothing redacted
    with the old ones is reused."""
    if len(text) > _REMEMBERED_CHARS:
        return redact(text).text
    rules = redaction_rules.current()
    if _seen.rules is not rules and _seen.rules != rules:
        _seen.rules, _seen.generation = rules, _seen.generation + 1
        _remembered.cache_clear()  # the old generation's answers are never asked for again
    return _remembered(text, _seen.generation)
