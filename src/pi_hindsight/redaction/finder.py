"""Where the secret names of a text are, found on demand by the detectors that read them.

A detector goes through the names in order and skips ahead: :mod:`.assignments` to the end of
each value, :mod:`.context` past each scanned window. Adversarial text can hold a secret word
every few characters (``"pwd=" * 50_000``), so no step of Python is spent on a name no detector
asks for. For each secret word present (the trigger pass says which), one pattern finds it where
it is a name by itself (``token``, ``--token``, ``token.``: the common case) and another where it
is part of a longer name (``DB_PASSWORD``), both from :mod:`.words`; both start with the word
as a literal, which ``re`` scans for at C speed, and each search starts where the detector asks
from, so the occurrences it skips are never looked at. A longer name is the run of name
characters around the word (without leading or trailing ``.``/``-``); a run longer than 160
characters is not a key name. Where the runs a detector walks turn out dense (every few
characters, none of them a name: ``"pwdid=" * 40_000``), the rest of them come from
:func:`.runs.table`, found by one regex at C speed (see _SWITCH).

Each detector has its own :class:`Names` (their positions advance independently); the runs
found and what they name (:mod:`.runs`) are shared through ``source.cache``.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
import re
from typing import Literal

from pi_hindsight.redaction import runs
from pi_hindsight.redaction.names import (
    SECRET_WORDS,
    NameHit,
    Strength,
    prose_key,
    word_strength,
)
from pi_hindsight.redaction.service_names import SERVICE_NAMES
from pi_hindsight.redaction.sites import OPERATOR, may_assign, may_assign_all, may_assign_any
from pi_hindsight.redaction.source import NAME_CHARS, Source
from pi_hindsight.redaction.words import AUTH_WITH_PW, EMPTY_AT, Word, word_patterns

__all__ = ["HINTS", "Names"]

# Literals whose absence spares work (the trigger pass reports them, see Source.absent): "pw"
# (a weak run can be a password only through a "pw" part) and "value" (name: DB_PASSWORD …
# value: …, assignments.py's _name_value).
HINTS = (("pw", True), ("value", False))


_NAME_SET = frozenset(NAME_CHARS)
_SERVICE_NAMES = frozenset(SERVICE_NAMES)
_ALL_LITERALS = frozenset((*SECRET_WORDS, *(literal for literal, _ in HINTS)))
_ORDER = {word: position for position, word in enumerate(SECRET_WORDS)}
_WEAK_WORDS = frozenset(word for word in SECRET_WORDS if word_strength(word) == "weak")
_ASSIGNABLE = frozenset(("password", "strong", "weak"))
_NONE = 1 << 62  # the start of a search's next match when there is none
_START = re.Match.start

View = Literal["all", "assignable", "openers"]


# A bare "key" assigned a value (``Key=…``, ``key: …``, ``"key": "…"``) is a weak name: only a
# random value counts (the value of a lookup table's "key" is a word or a path, not random), so
# only a value of 16 value characters or more is looked at (``&key=a`` repeated costs no Python).
_BARE_KEY = re.compile(rf"key(?<![a-z0-9_.-]key)(?={OPERATOR}+[\"'`]?[^\s\"'`,;)(\]}}{{&<>]{{16}})")


def _bare_key_ok(source: Source, start: int) -> bool:
    """After a word and a blank, "key" is a name by that word (prose_key: not "cache key")."""
    text, lowered = source.text, source.lowered
    if start >= 2 and text[start - 1] in " \t" and lowered[start - 2].isalpha():
        return prose_key(text, lowered, start) is not None
    return True


class Names:
    """The secret names of a text in order, asked for from increasing positions.

    ``view``: ``all`` of them; the ``assignable`` ones, a superset of those :mod:`.assignments`
    takes; the ``openers`` of a window for :mod:`.context` (not weak, not assigned a value).
    """

    def __init__(
        self, source: Source, view: View = "all", *, lazy: bool = False, tabled: bool | None = None
    ) -> None:
        """``lazy``: search for the names even where each secret word occurs at most _FEW times
        (which lists them all at once, see _listed); ``tabled``: find the longer names with
        runs.table (True) or run by run (False) from the start, not run by run until _SWITCH
        runs in a row are passed over (for tests: every way finds the same)."""
        assigned: set[int] = source.cache.get("assigned", set())  # type: ignore[assignment]
        present, pw, values = _present(source)
        self._listed: list[NameHit] | None = None
        if not lazy and all(_occurring(source, word)[1] is not None for word, _ in present):
            self._listed = _listed(source, view)
            self._starts = [name[0] for name in self._listed]
            self._ends = [name[1] for name in self._listed]
            return
        # A run of weak words only ("_auth") is weak unless it has a "pw" part ("auth_pw").
        weak_runs = view != "openers" or pw
        # (no longer name is assigned a value in a text without a site: ``_secret `` repeated)
        runs_wanted = view != "assignable" or may_assign_any(source)
        self._simple: list[_Search] = []
        inside: list[tuple[re.Pattern[str], str]] = []
        for word, patterns in present:
            strength = patterns.strength
            if runs_wanted and (weak_runs or word not in _WEAK_WORDS):
                inside.append((patterns.inside, word))
            if view == "assignable":
                if strength in _ASSIGNABLE:
                    # name: DB_PASSWORD … value: … needs "value" in the text (_name_value)
                    pattern = patterns.assignable_or_key if values else patterns.assignable
                    self._simple.append(_Search(source, pattern, word, strength))
                elif word == "key":
                    self._simple.append(_Search(source, _BARE_KEY, word, "weak", bare_key=True))
            elif view == "all":
                self._simple.append(
                    _Search(source, patterns.simple, word, strength, strength is None)
                )
            elif strength != "weak":
                skip = None if strength is None else assigned  # (prose keys are never assigned)
                self._simple.append(
                    _Search(source, patterns.unassigned, word, strength, strength is None, skip)
                )
        if tabled:
            self._runs: _Runs | _Tabled = _Tabled(source, inside, view, assigned, 0)
        else:
            self._runs = _Runs(source, inside, view, assigned, switch=tabled is None)

    def first(self, position: int, *, by_end: bool = False) -> NameHit | None:
        """The first name starting at or after ``position`` (``by_end``: ending at or after it)."""
        if self._listed is not None:
            at = bisect.bisect_left(self._ends if by_end else self._starts, position)
            return self._listed[at] if at < len(self._listed) else None
        runs = self._runs
        if not runs.active and len(self._simple) == 1:  # one word, the usual adversarial case
            search = self._simple[0]
            at = max(0, position - search.length if by_end else position)
            if search.searched <= at <= search.start:
                start = search.start
            elif search.plain and at <= search.last:  # _Search.at inline (runs once per name)
                match = search.pattern.search(search.lowered, at, search.endpos)
                start = _NONE if match is None else match.start()
                search.searched, search.start = at, start
            else:
                start = search.at(at)
            if start == _NONE:
                return None
            return (start, start + search.length, search.strength, search.prose)  # type: ignore[return-value]
        best = runs.first(position, by_end) if runs.active else None
        if isinstance(runs, _Runs) and runs.handed_over is not None:
            self._runs = runs.handed_over  # (the table answers from now on)
        best_start = _NONE if best is None else best[0]
        best_search = None
        for search in self._simple:
            at = position - search.length if by_end else position
            # (the cursor's last answer holds while the position does not pass it)
            start = search.start if search.searched <= at <= search.start else search.at(at)
            if start < best_start:
                best_start, best_search = start, search
        if best_search is not None:
            return (
                best_start,
                best_start + best_search.length,
                best_search.strength,
                best_search.prose,
            )  # type: ignore[return-value]
        if self._simple and self._simple[-1].start == _NONE:  # words with no more names
            self._simple = [search for search in self._simple if search.start != _NONE]
        return best


class _Search:
    """The matches of one word's pattern, asked for from increasing positions. A word that
    occurs often is searched for from where it is asked (the occurrences skipped over are never
    looked at); one that occurs a few times is matched at each of its occurrences (found once
    per text for all patterns: a search that finds nothing would scan to the end of the text)."""

    __slots__ = (
        "_bare_key", "_occurrences", "_skip", "_source", "endpos", "last", "length", "lowered",
        "pattern", "plain", "prose", "searched", "start", "strength",
    )  # fmt: skip

    def __init__(
        self,
        source: Source,
        pattern: re.Pattern[str],
        word: str,
        strength: Strength | Literal["vendor"] | None,
        prose: bool = False,
        skip: set[int] | None = None,
        *,
        bare_key: bool = False,
    ) -> None:
        """``prose``: the word is "key", a name only by the word before it; ``skip``: starts of
        matches that are not names for this view; ``bare_key``: a bare "key" assigned a value
        (_bare_key_ok)."""
        self._source, self.pattern, self.strength, self.prose, self._skip = (
            source, pattern, strength, prose, skip,
        )  # fmt: skip
        self._bare_key = bare_key
        self.lowered, self._occurrences, self.last, self.endpos = _occurring(source, word)
        self.length = len(word)
        self.searched = self.start = -1  # the last search began at searched and found start
        self.plain = not (prose or skip or bare_key) and self._occurrences is None  # Names.first

    def at(self, position: int) -> int:
        """The start of the first match at or after ``position`` that is a name (_NONE: none)."""
        if self.searched <= position <= self.start:
            return self.start
        self.searched = max(0, position)
        self.start = _NONE
        occurrences = self._occurrences
        if occurrences is not None:
            for at in occurrences[bisect.bisect_left(occurrences, position) :]:
                match = self.pattern.match(self.lowered, at, self.endpos)
                if match is not None and self._accept(at):
                    self.start = at
                    break
        elif position <= self.last and self._skip and not (self.prose or self._bare_key):
            # Only skipped starts to pass over (context.py's openers pass over the names that
            # are assigned a value, which can be every one): the matches are walked in C.
            matches = self.pattern.finditer(self.lowered, self.searched, self.endpos)
            self.start = next(
                itertools.filterfalse(self._skip.__contains__, map(_START, matches)), _NONE
            )
        elif position <= self.last:
            match = self.pattern.search(self.lowered, self.searched, self.endpos)
            while match is not None and not self._accept(match.start()):
                match = self.pattern.search(self.lowered, match.end(), self.endpos)
            if match is not None:
                self.start = match.start()
        return self.start

    def _accept(self, start: int) -> bool:
        if self.prose:  # "the API key": strong, "the key for …": as after a vendor's name
            source = self._source
            self.strength = prose_key(source.text, source.lowered, start)
            return self.strength is not None
        if self._bare_key:
            return _bare_key_ok(self._source, start)
        return self._skip is None or start not in self._skip


@functools.cache
def _combined(patterns: tuple[tuple[re.Pattern[str], str], ...]) -> re.Pattern[str]:
    """One pattern matching where any of ``patterns`` does (the leftmost of their matches)."""
    return re.compile("|".join(f"(?:{pattern.pattern})" for pattern, _ in patterns))


# Where _Runs has looked at _SWITCH runs within _SWITCH * _SPAN characters (adversarial text:
# ``"pwdid=" * 40_000``, a run every six characters), it takes the rest of the names from
# runs.table: one regex over the rest of the text costs ~30 ns a character, a run walked a few
# µs of Python. Where the detectors skip most runs (the names inside a long value), the walk
# goes on and the rest of the text is never scanned.
_SWITCH = 32
_SPAN = 64


class _Runs:
    """The names longer than their secret word, run by run from increasing positions."""

    def __init__(
        self,
        source: Source,
        patterns: list[tuple[re.Pattern[str], str]],
        view: View,
        assigned: set[int],
        *,
        switch: bool,
    ) -> None:
        """``switch``: whether to go on with runs.table where runs are dense (see _SWITCH)."""
        self._source, self._view, self._assigned = source, view, assigned
        self._patterns = patterns
        # Runs looked at since the checkpoint (a position); whether to switch to runs.table.
        self._walked, self._checkpoint = (0 if switch else -(1 << 62)), 0
        self._dense = False
        self.handed_over: _Tabled | None = None  # the table, once it has answered
        self._tabled: _Tabled | None = None
        source.cache.setdefault("runs", {})
        source.cache.setdefault("run_names", {})
        source.cache.setdefault("runs_at", {})
        self._searches = [_Search(source, pattern, word, None) for pattern, word in patterns]
        if len(patterns) > 1 and all(search.plain for search in self._searches):
            # Words that all occur often: one search for the first of them, not one per word.
            combined = _Search(source, _combined(tuple(patterns)), patterns[0][1], None)
            combined.last = max(search.last for search in self._searches)
            combined.endpos = max(search.endpos for search in self._searches)
            self._searches = [combined]
        self._name: NameHit | None = None  # the last name found
        self._searched = 0 if patterns else _NONE  # the runs before this have been looked at
        self.active = bool(patterns)  # whether a name can still be found or returned again

    def first(self, position: int, by_end: bool) -> NameHit | None:
        name = self._name
        if name is not None and (name[1] if by_end else name[0]) >= position:
            return name  # (positions asked for do not decrease)
        if self._dense and self._tabled is None and self._searched != _NONE:
            # (every run before self._searched has been looked at)
            view, assigned = self._view, self._assigned
            self._tabled = _Tabled(self._source, self._patterns, view, assigned, self._searched)
        if self._tabled is not None:
            name = self._tabled.first(position, by_end)
            self.active, self.handed_over = self._tabled.active, self._tabled
            return name
        if self._searched == _NONE:
            return None
        source = self._source
        start = self._from(position) if by_end else max(self._searched, position)
        while True:
            occurrence = self._next(start)
            if occurrence == _NONE:
                self._name, self._searched, self.active = None, _NONE, False
                return None
            run_start, run_stop, self._searched = runs.find_run(source, occurrence)
            start = self._searched
            if run_start < 0:
                continue  # too long to be a key name
            if self._view != "assignable" or may_assign(source, run_start, run_stop):
                name = runs.run_name(source, run_start, run_stop)
                if (
                    name is not None
                    and _takes(source, self._view, self._assigned, name)
                    and (name[1] if by_end else name[0]) >= position
                ):
                    self._name = name
                    self._count()
                    return name
            if self._count():
                return self.first(position, by_end)

    def _count(self) -> bool:
        """Counts a run looked at; whether the runs are dense enough to switch to runs.table."""
        self._walked += 1
        if self._walked >= _SWITCH:
            self._dense = self._searched - self._checkpoint < _SWITCH * _SPAN
            self._walked, self._checkpoint = 0, self._searched
        return self._dense

    def _from(self, position: int) -> int:
        """Where to look for a run ending at or after ``position``: the run holding the
        character before it may end after it."""
        start = max(self._searched, position)
        text = self._source.text
        if 0 < start <= len(text) and text[start - 1] in _NAME_SET:
            before = runs.run_start(runs.searchable(self._source), start)
            if before >= 0:
                start = max(self._searched, before)
        return start

    def _next(self, start: int) -> int:
        """The first occurrence of a secret word inside a longer name at or after ``start``."""
        occurrence = _NONE
        exhausted = False
        for search in self._searches:
            found = search.start if search.searched <= start <= search.start else search.at(start)
            if found < occurrence:
                occurrence = found
            elif found == _NONE:
                exhausted = True
        if exhausted:  # words with no more occurrences: not searched again
            self._searches = [search for search in self._searches if search.start != _NONE]
        return occurrence


class _Tabled:
    """The names longer than their secret word, from runs.table: where the words are dense."""

    def __init__(
        self,
        source: Source,
        patterns: list[tuple[re.Pattern[str], str]],
        view: View,
        assigned: set[int],
        start: int,
    ) -> None:
        """The names of the runs after ``start`` (where no run is: 0, or after a run's end)."""
        self._assigned = assigned
        inside = tuple(pattern.pattern for pattern, _ in patterns)
        table = runs.table(source, inside, start, *_TABLED_STRENGTHS.get(view, ()))
        # What _takes asks, for every name at once with C-level loops (every run can be a name),
        # but whether a name is assigned a value (known when context.py asks): name by name.
        if view == "assignable":
            sites = may_assign_all(source, table.run_starts, table.run_stops)
            table = table.select(map(operator.and_, map(operator.not_, table.prose), sites))
        elif view == "openers" and any(quotes in source.text for quotes in _QUOTE_PAIRS):
            empty = map(EMPTY_AT.match, itertools.repeat(source.lowered), table.ends)
            table = table.select(map(operator.not_, empty))
        self._table, self._openers, self._size = table, view == "openers", len(table.starts)
        self._at = 0  # the names before this have been passed over
        self.active = bool(table.starts)

    def first(self, position: int, by_end: bool) -> NameHit | None:
        table = self._table
        starts = table.starts
        at = bisect.bisect_left(table.ends if by_end else starts, position, self._at)
        if self._openers:
            assigned = self._assigned
            while at < self._size and starts[at] in assigned:
                at += 1
        self._at = at
        if at == self._size:
            self.active = False
            return None
        return (starts[at], table.ends[at], table.strengths[at], table.prose[at])  # type: ignore[return-value]


_OPENERS = frozenset(("password", "strong", "vendor"))  # (the strengths they may have)
_QUOTE_PAIRS = ('""', "''", "``")  # (EMPTY_AT matches only where one of them is)
_TABLED_STRENGTHS = {"assignable": (_ASSIGNABLE,), "openers": (_OPENERS,)}


def _takes(source: Source, view: View, assigned: set[int], name: NameHit) -> bool:
    """Whether a longer name is one of ``view``'s (the assignable view also asks may_assign;
    _Tabled asks the same of every name at once)."""
    if view == "assignable":
        return name[2] in _ASSIGNABLE and not name[3]
    if view == "openers":  # not assigned a value (assignments.py judged it), nor ""
        return (
            name[2] in _OPENERS
            and name[0] not in assigned
            and EMPTY_AT.match(source.lowered, name[1]) is None
        )
    return True


# Secret words that begin longer ones ("pass" is found in every "password"), and the rest of
# the longer ones.
_PREFIXES = {
    word: tuple(
        other[len(word) :] for other in SECRET_WORDS if other != word and other.startswith(word)
    )
    for word in SECRET_WORDS
    if word not in _SERVICE_NAMES  # (no secret word starts with one)
}


def _present(source: Source) -> tuple[list[tuple[str, Word]], bool, bool]:
    """The secret words in the text with their patterns (the trigger pass says which; not those
    found only as the start of a longer one: "pass" in "password"), whether "pw" occurs, and
    whether "value" does. Computed once per text."""
    cached = source.cache.get("present")
    if cached is None:
        found = set(_ALL_LITERALS if source.present is None else source.present)
        for word, rests in _PREFIXES.items():
            if rests and word in found:
                searchable, occurrences = _occurring(source, word)[:2]
                startswith, length = searchable.startswith, len(word)
                if occurrences is None:  # many: count them (no longer word overlaps another)
                    longer = sum(searchable.count(word + rest) for rest in rests)
                    if searchable.count(word) == longer:
                        found.discard(word)
                elif all(startswith(rests, at + length) for at in occurrences):
                    found.discard(word)
        pw = "pw" in found
        words = [
            (word, AUTH_WITH_PW if word == "auth" and pw else word_patterns(word))
            for word in sorted(found.intersection(_ORDER), key=_ORDER.__getitem__)
        ]
        cached = source.cache["present"] = (words, pw, "value" in found)
    return cached  # type: ignore[return-value]


# The most any pattern reads after the word it starts with (XML_VALUE: 1024 and a little).
_LOOKAHEAD = 1100
_FEW = 64  # a word occurring at most this often is matched at each occurrence (see _Search)
_LITERALS = {word: re.compile(re.escape(word)) for word in SECRET_WORDS}


def _occurring(source: Source, word: str) -> tuple[str, list[int] | None, int, int]:
    """Where ``word`` occurs in the searchable text: the text; its occurrences if there are at
    most _FEW (else None: it is searched for); the last occurrence (-1: none), after which no
    search needs to run; and how far a search needs to read (the patterns' lookaheads after the
    last occurrence). Computed once per text and word."""
    cache: dict[str, tuple[str, list[int] | None, int, int]] = source.cache.setdefault(
        "occurring", {}
    )  # type: ignore[assignment]
    known = cache.get(word)
    if known is None:
        lowered = runs.searchable(source)
        matches = itertools.islice(_LITERALS[word].finditer(lowered), _FEW + 1)
        occurrences: list[int] | None = [match.start() for match in matches]
        if len(occurrences) > _FEW:  # type: ignore[arg-type]
            occurrences = None  # many
            last = lowered.rfind(word)
        else:
            last = occurrences[-1] if occurrences else -1
        endpos = min(len(lowered), last + len(word) + _LOOKAHEAD)
        known = cache[word] = (lowered, occurrences, last, endpos)
    return known


def _listed(source: Source, view: View) -> list[NameHit]:
    """The names of ``view`` in a text where each secret word occurs at most _FEW times: the
    same as searching for them (a test checks), at less cost for a few names."""
    present, _, values = _present(source)
    words = dict(present)
    searchable = runs.searchable(source)
    assigned: set[int] = source.cache.get("assigned", set())  # type: ignore[assignment]
    listed = []
    for name, word, run_start, run_stop in _entries(source):
        start, end, strength, prose = name
        if view == "all":
            listed.append(name)
        elif word:  # the word by itself
            patterns = words[word]
            if view == "assignable":
                pattern = patterns.assignable_or_key if values else patterns.assignable
                if strength in _ASSIGNABLE and not prose and pattern.match(searchable, start):
                    listed.append(name)
            elif (
                strength != "weak"
                and patterns.unassigned.match(searchable, start)
                and (prose or start not in assigned)
            ):
                listed.append(name)
        elif view == "assignable":
            if strength in _ASSIGNABLE and not prose and may_assign(source, run_start, run_stop):
                listed.append(name)
        elif strength != "weak" and start not in assigned and not EMPTY_AT.match(searchable, end):
            listed.append(name)
    if view == "assignable" and "key" in words:
        bare = [
            (at, at + 3, "weak", False)
            for at in _occurring(source, "key")[1] or ()
            if _BARE_KEY.match(searchable, at) and _bare_key_ok(source, at)
        ]
        if bare:
            listed = sorted((*listed, *bare))  # type: ignore[arg-type]
    return listed


def _entries(
    source: Source,
) -> list[tuple[NameHit, str, int, int]]:
    """Every name of a text where each secret word occurs at most _FEW times, in order: the
    name, its word when it is the word by itself (else ""), and the bounds of its run."""
    cached = source.cache.get("entries")
    if cached is not None:
        return cached  # type: ignore[return-value]
    source.cache.setdefault("runs", {})
    source.cache.setdefault("run_names", {})
    source.cache.setdefault("runs_at", {})
    entries: list[tuple[NameHit, str, int, int]] = []
    seen: set[int] = set()  # run starts
    for word, patterns in _present(source)[0]:
        searchable, occurrences, _, endpos = _occurring(source, word)
        for at in occurrences or ():
            end = at + len(word)
            if patterns.simple.match(searchable, at, endpos):
                if patterns.strength is not None:
                    entries.append(((at, end, patterns.strength, False), word, at, end))
                elif (prose := prose_key(source.text, source.lowered, at)) is not None:
                    entries.append(((at, end, prose, True), word, at, end))
            elif patterns.inside.match(searchable, at, endpos):
                run_start, run_stop, _ = runs.find_run(source, at)
                if run_start >= 0 and run_start not in seen:
                    seen.add(run_start)
                    name = runs.run_name(source, run_start, run_stop)
                    if name is not None:
                        entries.append((name, "", run_start, run_stop))
    entries.sort()
    source.cache["entries"] = entries
    return entries
