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

__all__ = ["NAME_CHARS", "Finding", "Hit", "Lines", "Source", "name_around", "name_parts"]


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
    # Words the trigger pass found absent (case-insensitively): no need to search for them.
    absent: frozenset[str] = frozenset()
    _occurrences: dict[str, list[int]] = field(default_factory=dict)

    @cached_property
    def lowered(self) -> str:
        """The text with ASCII letters lowered; same length, so indices line up."""
        return ascii_lower(self.text)

    def occurrences(self, word: str) -> list[int]:
        """Start positions of ``word`` (lowercase) in the lowered text, non-overlapping."""
        found = self._occurrences.get(word)
        if found is None:
            found = []
            if word in self.absent:
                return found
            find, step = self.lowered.find, len(word)
            position = find(word)
            while position >= 0:
                found.append(position)
                position = find(word, position + step)
            self._occurrences[word] = found
        return found


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
_NAME_LIMIT = 64  # characters either side of the secret word; longer runs are not key names
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[_.\-]+")


_NAME_SET = frozenset(NAME_CHARS)


def name_around(text: str, position: int, length: int) -> tuple[int, int] | None:
    """The span of the key name holding the word at ``position`` (``length`` characters), with
    leading and trailing ``.``/``-`` dropped, or None when the run of name characters is too long
    to be a name."""
    start = position
    if position > 0 and text[position - 1] in _NAME_SET:
        left = text[max(0, position - _NAME_LIMIT) : position]
        run = left[len(left.rstrip(NAME_CHARS)) :]
        if (
            len(run) == _NAME_LIMIT
            and position > _NAME_LIMIT
            and text[start - _NAME_LIMIT - 1] in _NAME_SET
        ):
            return None
        start = position - len(run.lstrip(".-"))
    end = word_end = position + length
    if word_end < len(text) and text[word_end] in _NAME_SET:
        right = text[word_end : word_end + _NAME_LIMIT]
        run = right[: len(right) - len(right.lstrip(NAME_CHARS))]
        if (
            len(run) == _NAME_LIMIT
            and word_end + _NAME_LIMIT < len(text)
            and text[word_end + _NAME_LIMIT] in _NAME_SET
        ):
            return None
        end = word_end + len(run.rstrip(".-"))
    return start, end


def name_parts(name: str) -> list[str]:
    """``dbPassword`` → ``["db", "password"]``; ``X-API-Key`` → ``["x", "api", "key"]``."""
    return [part for part in _SPLIT.split(_CAMEL.sub("_", name).lower()) if part]
