"""The runs of name characters around a secret word (``DB_PASSWORD``, ``my.api-token``) and
the text they are searched in: split from :mod:`.finder`, which asks for them.

A run is the stretch of name characters (letters, digits, ``_``, ``.``, ``-``) holding an
occurrence of a secret word; what it names is judged once per text and characters
(:func:`verdict`) and shared by the detectors (``source.cache``). The searchable text is the
lowered text with the spans the token and block detectors found blanked out, so a word inside a
vendor token or a key block is no name.

Where the runs turn out dense (adversarial text: ``"pwdid=" * 40_000``, a run every six
characters), :mod:`.finder` stops walking them one by one in Python: :func:`table` finds the rest
with one regex at C speed (strings only, no match objects), judges each distinct run text once,
and works out positions, with C-level loops, only for the runs naming a strength the detector
asking takes: text made of runs that name nothing costs no Python per run.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from pi_hindsight.redaction.names import VENDOR_WORDS, NameHit, name_strength, prose_key
from pi_hindsight.redaction.service_names import SERVICE_NAMES, find_service
from pi_hindsight.redaction.source import Source

__all__ = [
    "RUN_LIMIT",
    "NameTable",
    "find_run",
    "run_name",
    "run_start",
    "searchable",
    "table",
    "verdict",
]

_NAME_LOWER = "abcdefghijklmnopqrstuvwxyz0123456789_.-"  # name characters of the lowered text
_NAME_RUN = re.compile(r"[a-z0-9_.-]++")
_SERVICES = frozenset(SERVICE_NAMES)
_VENDOR = re.compile("|".join(word for word in VENDOR_WORDS if word not in _SERVICES))
_MARKER_LOWERED = "[redacted:"
# A marker of an earlier redaction (in the lowered text), cut short too: its kind is no name.
_MARKERS = re.compile(r"\[redacted:[a-z0-9_]{0,64}\]?")
RUN_LIMIT = 160  # longer runs of name characters are not key names
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")


def find_run(source: Source, occurrence: int) -> tuple[int, int, int]:
    """The run of name characters holding the secret word at ``occurrence``: its start and end,
    and where to look for the next run (start -1: longer than 160 characters, no key name).
    Memoised per text and occurrence: the detectors share the runs."""
    by_occurrence: dict[int, tuple[int, int, int]] = source.cache["runs_at"]  # type: ignore[assignment]
    known = by_occurrence.get(occurrence)
    if known is not None:
        return known  # (each detector asks for the same occurrences)
    runs: dict[int, tuple[int, int, int]] = source.cache["runs"]  # type: ignore[assignment]
    lowered = searchable(source)
    start = run_start(lowered, occurrence)
    known = runs.get(start) if start >= 0 else None  # (-1: a run too long, not one run)
    if known is not None and known[2] > occurrence:
        return known
    right = lowered[occurrence : occurrence + RUN_LIMIT + 1]
    stop = occurrence + len(right) - len(right.lstrip(_NAME_LOWER))
    if start < 0 or stop - start > RUN_LIMIT:
        end = _NAME_RUN.match(lowered, occurrence)  # skip all of a run too long to be a name
        resolved = (-1, -1, occurrence + 1 if end is None else end.end())
    else:
        resolved = by_occurrence[occurrence] = (start, stop, stop)
    if start >= 0:
        runs[start] = resolved
    return resolved


def run_start(lowered: str, position: int) -> int:
    """Where the run of name characters ending at ``position`` starts (-1: more than 160
    characters before it)."""
    low = max(0, position - RUN_LIMIT - 1)
    left = lowered[low:position]
    start = position - (len(left) - len(left.rstrip(_NAME_LOWER)))
    return -1 if start == low and low > 0 else start


def run_name(source: Source, start: int, stop: int) -> NameHit | None:
    """The name the run at [start, stop) is (None: no secret name). Memoised per text."""
    names: dict[int, NameHit | None] = source.cache["run_names"]  # type: ignore[assignment]
    if start in names:
        return names[start]
    # The same run recurs throughout a text (adversarial text: tens of thousands of times): a
    # name is judged by the run alone (verdict), except a run right after a letter blanked out
    # of the searchable text (a service name starts a name part).
    known: _Verdict = _POSITIONAL
    if not (start and source.lowered[start - 1] in _LETTERS):
        known = verdict(source, source.text[start:stop])
    name = names[start] = _located(source, start, stop, known)
    return name


# What a run's characters say (verdict): None (no name), or the name's bounds as offsets from
# the run's and its strength; _POSITIONAL: it depends on the text before the run.
_Verdict = tuple[int, int, str] | None
_POSITIONAL = (0, 0, "")
_UNKNOWN = (-1, -1, "")


def verdict(source: Source, run: str) -> _Verdict:
    """What the run of name characters ``run`` names wherever it stands (memoised per text):
    not a bare "key", which is a name by the word before it ("the API key")."""
    by_text: dict[str, _Verdict] = source.cache.setdefault("run_texts", {})  # type: ignore[assignment]
    known = by_text.get(run, _UNKNOWN)
    if known is _UNKNOWN:
        known = by_text[run] = _judge(run, _services_occur(source))
    return known


def _judge(run: str, services: bool) -> _Verdict:
    if run.strip(".-").lower() == "key" and run[0] not in ".-":
        return _POSITIONAL
    name = _name(run, run.lower(), 0, len(run), services)  # (a run is ASCII)
    return None if name is None else (name[0], len(run) - name[1], name[2])


def _located(source: Source, start: int, stop: int, known: _Verdict) -> NameHit | None:
    """The name of the run at [start, stop), given its verdict."""
    if known is _POSITIONAL:
        return _run_name(source, start, stop)
    if known is None:
        return None
    return (start + known[0], stop - known[1], known[2], False)  # type: ignore[return-value]


def _run_name(source: Source, start: int, stop: int) -> NameHit | None:
    return _name(source.text, source.lowered, start, stop, _services_occur(source))


def _name(text: str, lowered: str, start: int, stop: int, services: bool) -> NameHit | None:
    """The name the run at [start, stop) of ``text`` is; ``services``: whether a service's name
    can occur in it."""
    if text[start] in ".-":
        start = stop - len(text[start:stop].lstrip(".-"))
    if text[stop - 1] in ".-":
        stop = start + len(text[start:stop].rstrip(".-"))
    strength = name_strength(text[start:stop])
    if strength is not None:
        return (start, stop, strength, False)
    # A service's name starts a name part (``metabase_url``), never inside a word (``gambeer``).
    if _VENDOR.search(lowered, start, stop) is not None or (
        services and find_service(lowered, start, stop)
    ):
        return (start, stop, "vendor", False)  # mailgun.client(…): a token may follow
    if stop - start == 3 and lowered.startswith("key", start):
        prose = prose_key(text, lowered, start)
        if prose is not None:
            return (start, stop, prose, True)
    return None


def _services_occur(source: Source) -> bool:
    """Whether the trigger pass found a service's name in the text (memoised per text)."""
    occur = source.cache.get("services")
    if occur is None:
        occur = source.cache["services"] = source.present is None or not _SERVICES.isdisjoint(
            source.present
        )
    return bool(occur)


def searchable(source: Source) -> str:
    """The lowered text with the spans the token and block detectors found (a word inside a
    private key or a vendor token is not a name: "PRIVATE KEY", "…key…" in a token) and the
    markers of an earlier redaction blanked out with NUL. Fixed when first asked, before the
    detectors that read names add their findings (those must not hide names)."""
    cached = source.cache.get("searchable")
    if cached is None:
        cached = source.cache["searchable"] = _blank(source.lowered, _blanked_spans(source))
    return cached  # type: ignore[return-value]


def _blanked_spans(source: Source) -> list[tuple[int, int]]:
    """The spans searchable() blanks out, in order (fixed when first asked, as it is)."""
    cached = source.cache.get("blanked")
    if cached is None:
        lowered = source.lowered
        spans = sorted((start, end) for start, end, _ in source.found)
        if _MARKER_LOWERED in lowered:
            spans = sorted((*spans, *(match.span() for match in _MARKERS.finditer(lowered))))
        cached = source.cache["blanked"] = spans
    return cached  # type: ignore[return-value]


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    parts: list[str] = []
    cursor = 0
    for span_start, end in spans:
        if end > cursor:
            start = max(span_start, cursor)
            parts += (text[cursor:start], "\0" * (end - start))
            cursor = end
    parts.append(text[cursor:])
    return "".join(parts)


_T = TypeVar("_T")


@dataclass
class NameTable:
    """The names of the runs holding a secret word, in order: each name's bounds, strength and
    whether it is a name by the word before it (see NameHit), and its run's bounds. Columns,
    not tuples: tens of thousands of objects would cost more in garbage collection than in
    making them."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    strengths: list[str] = field(default_factory=list)
    prose: list[bool] = field(default_factory=list)
    run_starts: list[int] = field(default_factory=list)
    run_stops: list[int] = field(default_factory=list)
    origin: int = 0  # the names of the runs after this

    def select(self, keep: Iterable[object]) -> NameTable:
        """The names where ``keep`` is true."""
        kept = list(keep)

        def pick(column: list[_T]) -> list[_T]:
            return list(itertools.compress(column, kept))

        return NameTable(
            pick(self.starts),
            pick(self.ends),
            pick(self.strengths),
            pick(self.prose),
            pick(self.run_starts),
            pick(self.run_stops),
            self.origin,
        )


_NAME_CLASS = "[a-z0-9_.-]"


@functools.cache
def _run_pattern(inside: tuple[str, ...], cased: bool) -> re.Pattern[str]:
    """A whole run of at most RUN_LIMIT name characters holding a match of one of ``inside``
    (patterns for the lowered text; ``cased``: for the text in its own case), as group 1."""
    words = "|".join(f"(?:{pattern})" for pattern in inside)
    name = _NAME_CLASS
    return re.compile(
        rf"(?<!{name})(?={name}{{1,{RUN_LIMIT}}}+(?!{name}))({name}*?(?:{words}){name}*+)",
        re.IGNORECASE | re.ASCII if cased else 0,
    )


_FIRST, _SECOND, _THIRD = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)


_STRENGTHS = frozenset(("password", "strong", "weak", "vendor"))


def table(
    source: Source, inside: tuple[str, ...], start: int = 0, strengths: frozenset[str] = _STRENGTHS
) -> NameTable:
    """The names of ``strengths`` of every run after ``start`` (0, or a position where no run
    is: a run's end) holding a match of one of ``inside`` (the words' patterns for the lowered
    text, see finder.py); shared by the detectors (the runs are found once per text and
    patterns, from the earliest start asked for)."""
    if not inside:
        return NameTable()
    split = _split(source, inside, start)
    found = split.tables.get(strengths)
    if found is None:
        found = split.tables[strengths] = _names(source, split, strengths)
    return found


@dataclass
class _Split:
    """The runs after ``origin`` and the text between them, alternately (``parts``): strings
    only, no match objects; what each distinct run names; the tables made from them."""

    origin: int
    parts: list[str]
    verdicts: dict[str, _Verdict]
    tables: dict[frozenset[str], NameTable] = field(default_factory=dict)

    @functools.cached_property
    def offsets(self) -> list[int]:
        """Where each part ends."""
        return list(itertools.accumulate(map(len, self.parts), initial=self.origin))[1:]


def _split(source: Source, inside: tuple[str, ...], start: int) -> _Split:
    splits: dict[tuple[str, ...], _Split] = source.cache.setdefault("splits", {})  # type: ignore[assignment]
    known = splits.get(inside)
    if known is not None and known.origin <= start:
        return known
    # In its own case (a name's words are told by it: tokenX), blanked out as searchable() is;
    # when the text has no capital letter, the searchable text is the same.
    cased = source.text != source.lowered
    target = _blank(source.text, _blanked_spans(source)) if cased else searchable(source)
    # (The character at ``start`` is no name character: the lookbehinds read it in the slice.)
    parts = _run_pattern(inside, cased).split(target[start:])
    verdicts = {run: verdict(source, run) for run in set(parts[1::2])}
    known = splits[inside] = _Split(start, parts, verdicts)
    return known


def _names(source: Source, split: _Split, strengths: frozenset[str]) -> NameTable:
    found = NameTable(origin=split.origin)
    chosen = {
        run: known
        for run, known in split.verdicts.items()
        if known is not None and (known is _POSITIONAL or known[2] in strengths)
    }
    if not chosen:
        return found  # the usual adversarial case: the runs name nothing (of these strengths)
    # The runs that are names, with C-level loops: every run can be one ("_auth" repeated).
    offsets = split.offsets
    judged = list(map(chosen.get, split.parts[1::2]))
    kept: list[tuple[int, int, str]] = list(filter(None, judged))
    found.run_starts = list(itertools.compress(offsets[0::2], judged))
    found.run_stops = list(itertools.compress(offsets[1::2], judged))
    found.starts = list(map(operator.add, found.run_starts, map(_FIRST, kept)))
    found.ends = list(map(operator.sub, found.run_stops, map(_SECOND, kept)))
    found.strengths = list(map(_THIRD, kept))
    found.prose = [False] * len(kept)
    # Judged in place: a bare "key" (by the word before it), a run right after a blanked letter.
    starts = found.run_starts
    redo = {
        index
        for start in _after_blanked_letters(source)
        if (index := bisect.bisect_left(starts, start)) < len(starts) and starts[index] == start
    }
    if _POSITIONAL in chosen.values():
        redo.update(index for index, known in enumerate(kept) if known is _POSITIONAL)
    text, stops = source.text, found.run_stops
    around: dict[str, NameHit | None] = {}  # by the run and what _name reads before it
    for index in sorted(redo):
        start, stop = starts[index], stops[index]
        if start < _BEFORE:
            name = _run_name(source, start, stop)
        else:  # ("PRIVATE KEY-----" repeated: the same name, judged once)
            key = text[start - _BEFORE : stop]
            if key not in around:
                around[key] = _moved(_run_name(source, start, stop), -start)
            name = _moved(around[key], start)
        named = name or (0, 0, "", False)
        found.starts[index], found.ends[index], found.strengths[index], found.prose[index] = named
    if redo:  # (no name, or one of another strength)
        found = found.select(map(strengths.__contains__, found.strengths))
    return found


# How far before a run _name reads (prose_key: the word before a bare "key"; a letter before).
_BEFORE = 25


def _moved(name: NameHit | None, offset: int) -> NameHit | None:
    return None if name is None else (name[0] + offset, name[1] + offset, name[2], name[3])


def _after_blanked_letters(source: Source) -> set[int]:
    """Where a run can start right after a letter blanked out (run_name judges it in place)."""
    lowered = source.lowered
    return {end for _, end in _blanked_spans(source) if end and lowered[end - 1] in _LETTERS}
