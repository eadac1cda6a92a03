"""Which detectors can match at all: one linear pass over the text for every trigger literal.

Each detector names literals of which at least one occurs in every text it can match (a vendor
prefix, ``://``, ``-----BEGIN``, a secret word). Running ~90 regular expressions over every text
costs ~7 µs per pattern per 20 KB with Python's ``re``; RE2's multi-pattern ``Set`` finds which of
all the literals occur in one DFA pass (~40 µs for 20 KB), so ordinary text pays for one scan and
the detectors whose literals are absent never run. See ``docs/adr/0005-secret-redaction.md``.

Only literals (optionally case-insensitive) are added, so the DFA has at most one state per
prefix of a literal: it cannot exhaust RE2's memory budget on any input, which is what would make
``Set.Match`` report no match.
"""

from __future__ import annotations

from collections.abc import Iterable

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

__all__ = ["TriggerSet"]


class TriggerSet:
    """A fixed set of literals; :meth:`present` says which of them occur in a text."""

    def __init__(self, literals: Iterable[tuple[str, bool]]) -> None:
        """``literals``: (literal, case_insensitive) pairs; duplicates share one index."""
        self._index: dict[tuple[str, bool], int] = {}
        options = re2.Options()
        options.max_mem = 64 << 20
        self._set = re2.Set.SearchSet(options)
        for literal, case_insensitive in literals:
            key = (literal, case_insensitive)
            if key in self._index or not literal:
                continue
            escaped = "".join(
                char if char.isalnum() and char.isascii() else f"\\x{{{ord(char):x}}}"
                for char in literal
            )
            pattern = ("(?i)" if case_insensitive else "") + escaped
            self._index[key] = self._set.Add(pattern)
        self._set.Compile()

    def literals(self) -> list[tuple[str, bool]]:
        """The (literal, case_insensitive) pairs, in index order."""
        return sorted(self._index, key=self._index.__getitem__)

    def __len__(self) -> int:
        return len(self._index)

    def index(self, literal: str, case_insensitive: bool) -> int:
        return self._index[(literal, case_insensitive)]

    def present(self, text: str) -> frozenset[int]:
        """Indices of the literals that occur in ``text`` (any str: lone surrogates included)."""
        if not text:
            return frozenset()
        matched = self._set.Match(text.encode("utf-8", "surrogatepass"))
        return frozenset(matched) if matched else frozenset()
