"""The text under scan and what several detectors need from it, each computed once.

Linear time is a property of every detector here (docs/adr/0005-secret-redaction.md): a detector
looks at each position a bounded number of times. The helpers below keep that true for the
questions detectors ask about positions: which line a position is on (:class:`Lines` answers
increasing positions by scanning forward, never back to the start of a long line) and where the
secret words are (found once by ``str.find`` and shared).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from pi_hindsight.redaction.values import ascii_lower

__all__ = ["NAME_CHARS", "NAME_MASK", "Finding", "Hit", "Lines", "Source", "name_parts"]


@dataclass(frozen=True)
class Finding:
    """One redacted secret: its kind and its span in the original text (never its value)."""

    kind: str
    start: int
    end: int


# What detectors produce: (start, end, kind); redact() turns the merged ones into Findings.
Hit = tuple[int, int, str]


@dataclass
class Source:
    """A text being redacted; ``found`` collects the findings of the detectors run so far."""

    text: str
    found: list[Hit] = field(default_factory=list)
    cache: dict[str, object] = field(default_factory=dict)  # results shared between detectors
    # The secret words (and finder.HINTS) the trigger pass found (None: it did not run, any may
    # occur); the others need no search.
    present: frozenset[str] | None = None

    @cached_property
    def lowered(self) -> str:
        """The text with ASCII letters lowered; same length, so indices line up."""
        return ascii_lower(self.text)


class Lines:
    """Line bounds of positions queried in increasing order, in linear total time.

    A query behind the previous one is still answered correctly (by a plain backward search).
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._start = 0
        self._end = text.find("\n")
        if self._end < 0:
            self._end = len(text)

    def bounds(self, position: int) -> tuple[int, int]:
        """(start, end) of the line holding ``position``; ``end`` is the index of its newline
        (or the length of the text)."""
        if self._start <= position <= self._end:
            return self._start, self._end
        text = self._text
        if position > self._end:
            self._start = text.rfind("\n", self._end, position) + 1
        else:
            self._start = text.rfind("\n", 0, position) + 1
        end = text.find("\n", position)
        self._end = len(text) if end < 0 else end
        return self._start, self._end


# Characters of a key name: ``DB_PASSWORD``, ``spring.datasource.password``, ``x-api-key``.
NAME_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[_.\-]+")
# Name characters stay, any other byte becomes NUL: one byte per character of
# ``text.encode("latin-1", "replace")`` (which keeps one byte per code point, lone surrogates
# included), so the bounds of a run of name characters are one C-level find away.
NAME_MASK = bytes(byte if chr(byte) in NAME_CHARS else 0 for byte in range(256))


def name_parts(name: str) -> list[str]:
    """``dbPassword`` → ``["db", "password"]``; ``X-API-Key`` → ``["x", "api", "key"]``."""
    return [part for part in _SPLIT.split(_CAMEL.sub("_", name).lower()) if part]
