"""Which recalled records the startup memo already states, so no fact is delivered twice.

The comparison (docs/delivery.md, "No fact twice"): both texts are normalised — Unicode NFKC,
casefolded, every run of characters that are not letters or digits one word break, so case,
punctuation, markdown and whitespace do not matter — and the memo is split into statements (its
lines, and the sentences of a line). A record is stated by the memo when its words

  (a) appear contiguously in the memo: the record is a part of it, whatever the memo adds around
      it ("Decision: we dropped Python 3.9" in "- **Decision:** we dropped Python 3.9 support"); or
  (b) appear in order within one statement at most twice as long as the record: a few words
      inserted ("deploys go to Zephyr" in "Production deploys go to the Zephyr cluster").

Nothing looser: a paraphrase in other words or another order is kept, since a repeated fact costs
a few tokens while a wrong drop loses one. A record of fewer than three words counts by (a) only.
Numbers are words, so "Python 3.9" is not stated by "Python 3.10".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence

_WORD = re.compile(r"[^\W_]+")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_MIN_WORDS_IN_ORDER = 3
_MAX_STRETCH = 2  # (b): a statement at most this many times as long as the record


def words(text: str) -> list[str]:
    """The normalised words of ``text`` (letters and digits; everything else is a break)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def _in_order(needle: Sequence[str], haystack: Sequence[str]) -> bool:
    remaining: Iterator[str] = iter(haystack)
    return all(word in remaining for word in needle)


class MemoStatements:
    """The memo's text, ready for :meth:`states` (built once per memo and block)."""

    def __init__(self, memo: str) -> None:
        self._joined = f" {' '.join(words(memo))} "
        self._statements: list[list[str]] = []
        for line in memo.splitlines():
            for sentence in _SENTENCE_END.split(line):
                found = words(sentence)
                if found:
                    self._statements.append(found)

    def states(self, record_text: str) -> bool:
        """Whether the memo states this record (the rules in the module docstring)."""
        needle = words(record_text)
        if not needle:
            return False
        if f" {' '.join(needle)} " in self._joined:
            return True
        if len(needle) < _MIN_WORDS_IN_ORDER:
            return False
        longest = len(needle) * _MAX_STRETCH
        return any(
            len(statement) <= longest and _in_order(needle, statement)
            for statement in self._statements
        )
