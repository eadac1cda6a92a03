"""Secret redaction: a pure, linear-time function applied to everything before it is retained.

Public API::

    redact(text) -> Redacted(text, findings)
    Finding(kind, start, end)      # where in the *original* text, and what kind of secret
    KINDS                          # every kind this package can report

``redact`` replaces each secret with ``[REDACTED:<kind>]`` and reports what it replaced (never the
secret itself). It is deterministic and pure (no I/O; its only configuration is the user's rules,
installed once when the config loads), so the same function can
run on every retain and on every recall, and it never raises on any ``str`` (lone surrogates,
NUL, megabyte lines). Detection is best effort (R-EVID-6): what is and is not caught is listed
in ``docs/security.md``; how it works and what it measures in ``docs/adr/0005-secret-redaction.md``.

The detectors, one module each:

- :mod:`.tokens`: vendor tokens, JWTs, URL credentials and query secrets, ``Authorization``;
  :mod:`.vendors`: more vendor formats (issue 18); both drop placeholders (:mod:`.placeholders`)
  and check checksums where the format has one (:mod:`.checksums`);
- :mod:`.blocks`: private key blocks, PuTTY keys, Kubernetes ``Secret`` data;
- :mod:`.assignments`: values assigned to secret-named keys, gated by :mod:`.values`;
- :mod:`.command_lines`: ``curl -u``, ``auth=(…)``, ``mysql -p…``, ``Cookie:``;
- :mod:`.context`: random tokens near secret words, passwords in prose;
- :mod:`.comparisons`: literals compared with or passed to secret-named variables and setters;
- :mod:`.service_literals`: keys quoted right after the name of a service that is an everyday
  word (``railway = '<uuid>'``), in that service's exact shape.

The user's own rules (:mod:`pi_hindsight.redaction_rules`: ``redaction.patterns`` and
``redaction.allow`` from the user's config, RE2-compiled) are applied last: their matches are
added, allowed values removed.
A value found once is redacted wherever else it occurs in the same text.

The detectors that read key names (:mod:`.assignments`, :mod:`.context`) get them from
:mod:`.finder` (with :mod:`.runs`), which finds them on demand, so a name no detector asks for
costs no step of Python (adversarial text can hold a secret word every few characters).

One pass of :mod:`.triggers` says which detectors can match at all; only those run. All matches
are merged as spans before replacement, so overlapping detectors never corrupt each other.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pi_hindsight import redaction_rules as user_rules
from pi_hindsight.redaction import (
    assignments,
    blocks,
    command_lines,
    comparisons,
    context,
    finder,
    names,
    service_literals,
    tokens,
    vendors,
)
from pi_hindsight.redaction.source import Finding, Hit, Source
from pi_hindsight.redaction.triggers import TriggerSet

__all__ = ["CAP", "KINDS", "Finding", "Redacted", "redact"]


@dataclass(frozen=True)
class Redacted:
    """The text with every detected secret replaced, and what was replaced: ``spans`` holds
    (start, end, kind) in the original text, ``findings`` the same as :class:`Finding` objects
    (made when first asked for: adversarial text can hold tens of thousands, and most callers
    only want the text)."""

    text: str
    spans: tuple[Hit, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.spans)

    @functools.cached_property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(Finding(kind, start, end) for start, end, kind in self.spans)


@dataclass(frozen=True)
class _Detector:
    find: Callable[[Source], Iterable[Hit]]
    triggers: tuple[tuple[str, bool], ...]
    kinds: tuple[str, ...]


def _words(words: Iterable[str]) -> tuple[tuple[str, bool], ...]:
    return tuple((word, True) for word in words)


_DETECTORS = (
    _Detector(
        blocks.find_private_keys,
        (("-----BEGIN", False), ("PuTTY-User-Key-File-", False), ("LS0tLS1CRUdJTi", False)),
        ("private_key",),
    ),
    _Detector(blocks.find_kubernetes_secrets, (("Secret", False),), ("kubernetes_secret",)),
    _Detector(blocks.find_jenkins_secrets, (("{AQAAABAAA", False),), ("jenkins_secret",)),
    _Detector(
        assignments.find_assignments,
        _words(names.SECRET_WORDS),
        ("env_assignment", "secret_assignment"),
    ),
    _Detector(command_lines.find_curl_users, (("-u", False), ("--user", False)), ("basic_auth",)),
    _Detector(command_lines.find_auth_pairs, (("auth", True),), ("basic_auth",)),
    _Detector(
        command_lines.find_cli_passwords, _words(command_lines.CLI_TRIGGERS), ("cli_password",)
    ),
    _Detector(command_lines.find_cookies, (("cookie", True),), ("cookie",)),
    _Detector(
        command_lines.find_sql_passwords, _words(command_lines.SQL_TRIGGERS), ("sql_password",)
    ),
    _Detector(
        comparisons.find_comparisons,
        comparisons.TRIGGERS,
        ("secret_comparison", "secret_call", "secret_assignment"),
    ),
    _Detector(
        service_literals.find_service_literals,
        service_literals.TRIGGERS,
        ("secret_near_keyword",),
    ),
)
# Runs last: it reads the findings of the others (an AWS key id, a Twilio SID).
_CONTEXT = _Detector(
    context.find_by_context,
    (*_words(names.SECRET_WORDS), *(("AKIA", False), ("ASIA", False), ("AC", False))),
    (
        "secret_near_keyword",
        "password_in_prose",
        "aws_secret_access_key",
        "aws_session_token",
        "twilio_auth_token",
        "datadog_key",
        "heroku_api_key",
        "mailgun_key",
        "secret_assignment",
    ),
)

_PATTERNS = (*tokens.PATTERNS, *vendors.PATTERNS)
_MARKER = re.compile(r"\[REDACTED:[a-z0-9_]{1,64}\]")
_TRIGGERS = TriggerSet(
    (
        ("[REDACTED:", False),
        *(trigger for pattern in _PATTERNS for trigger in pattern.triggers),
        *(trigger for detector in (*_DETECTORS, _CONTEXT) for trigger in detector.triggers),
        *finder.HINTS,
    )
)


def _indices(triggers: tuple[tuple[str, bool], ...]) -> frozenset[int]:
    return frozenset(_TRIGGERS.index(literal, folded) for literal, folded in triggers)


# trigger index -> the token patterns it enables (by position in _PATTERNS)
_PATTERNS_BY_TRIGGER: dict[int, list[int]] = {}
for _position, _pattern in enumerate(_PATTERNS):
    for _index in _indices(_pattern.triggers):
        _PATTERNS_BY_TRIGGER.setdefault(_index, []).append(_position)
_ALWAYS = [position for position, pattern in enumerate(_PATTERNS) if not pattern.triggers]
_DETECTOR_TRIGGERS = tuple((detector, _indices(detector.triggers)) for detector in _DETECTORS)
_CONTEXT_TRIGGERS = _indices(_CONTEXT.triggers)
_MARKER_TRIGGER = _TRIGGERS.index("[REDACTED:", False)
# The secret words, and the literals finder.py asks about: absent ones are left out of the search.
_WORD_TRIGGERS = (
    *((word, _TRIGGERS.index(word, True)) for word in names.SECRET_WORDS),
    *((literal, _TRIGGERS.index(literal, folded)) for literal, folded in finder.HINTS),
)

_WORDS_BY_TRIGGER: dict[int, list[str]] = {}
for _word, _index in _WORD_TRIGGERS:
    _WORDS_BY_TRIGGER.setdefault(_index, []).append(_word)

KINDS: frozenset[str] = frozenset(
    (
        *(pattern.kind for pattern in _PATTERNS),
        *(kind for detector in (*_DETECTORS, _CONTEXT) for kind in detector.kinds),
    )
)


def _hits(text: str, *, prefilter: bool = True) -> list[Hit]:
    """Every detection in ``text``; ``prefilter=False`` runs every detector (for tests: the
    result must not depend on the trigger pass)."""
    source = Source(text)
    if prefilter:
        present = _TRIGGERS.present(text)
        # (from the literals found: ~700 words, most of them service names that never occur)
        source.present = frozenset(
            word for index in present for word in _WORDS_BY_TRIGGER.get(index, ())
        )
        enabled = set(_ALWAYS)
        for index in present:
            enabled.update(_PATTERNS_BY_TRIGGER.get(index, ()))
        patterns = [_PATTERNS[position] for position in sorted(enabled)]
    else:
        present = frozenset(range(len(_TRIGGERS)))
        patterns = list(_PATTERNS)
    source.found.extend(tokens.find_tokens(source, patterns))
    for detector, indices in _DETECTOR_TRIGGERS:
        if not indices.isdisjoint(present):
            source.found.extend(detector.find(source))
    if not _CONTEXT_TRIGGERS.isdisjoint(present):
        source.found.extend(_CONTEXT.find(source))
    found = _repeats(text, source.found)
    if _MARKER_TRIGGER in present:
        return _outside_markers(text, found)
    return found


# A secret found once is a secret wherever else it occurs in the same text (echoed in a log line,
# repeated in a table) even where no detector's context holds. Values shorter than _REPEAT_MIN
# could be ordinary words; at most _REPEAT_VALUES distinct values are searched (each search is
# one C-speed scan), and a text with more than _REPEAT_HITS findings is not searched at all (a
# dump or adversarial input, where the detectors that found a value find its repeats too).
_REPEAT_MIN = 8
_REPEAT_VALUES = 16
_REPEAT_HITS = 256


def _repeats(text: str, hits: list[Hit]) -> list[Hit]:
    if len(hits) > _REPEAT_HITS:
        return hits
    values: dict[str, str] = {}
    for start, end, kind in hits:
        if end - start >= _REPEAT_MIN and len(values) < _REPEAT_VALUES:
            values.setdefault(text[start:end], kind)
    if not values:
        return hits
    extra: list[Hit] = []
    for value, kind in values.items():
        at = text.find(value)
        if text.find(value, at + 1) < 0:
            continue  # the usual case: the value occurs once
        while at >= 0:
            extra.append((at, at + len(value), kind))
            at = text.find(value, at + len(value))
    return [*hits, *extra] if extra else hits


# A text longer than CAP is redacted one segment of about _SEGMENT characters at a time, each
# with _MARGIN characters of the text around it: every detector is linear, and the segments also
# bound the memory and the sorts of one pass, so an enormous text (a log pasted whole) costs the
# same per character as a small one. A secret starting in a segment is found whole as long as it
# ends within the margin after it (64 KB: far more than any key block or value).
CAP = 4 << 20
_SEGMENT = 1 << 20
_MARGIN = 64 << 10


def _segmented_hits(text: str) -> list[Hit]:
    """The detections of a text longer than CAP, segment by segment: each segment ends after a
    line break near its nominal end when there is one, and is scanned with the margin before
    (from a line start, when there is one near) and after it; a detection belongs to the segment
    it starts in."""
    size = len(text)
    hits: list[Hit] = []
    start = 0
    while start < size:
        end = min(size, start + _SEGMENT)
        if end < size:
            newline = text.rfind("\n", end - _MARGIN, end)
            end = end if newline < 0 else newline + 1
        window_start = max(0, start - _MARGIN)
        if window_start:
            newline = text.rfind("\n", window_start - _MARGIN, window_start)
            window_start = window_start if newline < 0 else newline + 1
        window_end = min(size, end + _MARGIN)
        for hit_start, hit_end, kind in _hits(text[window_start:window_end]):
            if start <= hit_start + window_start < end:
                hits.append((hit_start + window_start, hit_end + window_start, kind))
        start = end
    return hits


def _outside_markers(text: str, hits: list[Hit]) -> list[Hit]:
    """``hits`` without those overlapping or touching an earlier ``[REDACTED:kind]``, so that a
    second pass never cuts into a marker (``curl -u [REDACTED:stripe_key]:`` is not a user and a
    password)."""
    markers = [match.span() for match in _MARKER.finditer(text)]
    if not markers:
        return hits
    starts = [start for start, _ in markers]
    kept = []
    for hit in hits:
        at = bisect.bisect_right(starts, hit[1]) - 1  # the last marker starting before the hit ends
        if at >= 0 and markers[at][1] > hit[0] - 1:
            continue
        kept.append(hit)
    return kept


def redact(text: str) -> Redacted:
    """Replace every detected secret in ``text`` with ``[REDACTED:<kind>]``.

    Overlapping detections are merged (the earliest-starting detector names the span), so the
    result never contains a fragment of a secret that one detector cut and another missed.
    """
    if not text:
        return Redacted(text)
    hits = _hits(text) if len(text) <= CAP else _segmented_hits(text)
    rules = user_rules.current()
    if rules:
        hits = [*hits, *rules.hits(text)]
        hits = [hit for hit in hits if not rules.allowed(text[hit[0] : hit[1]])]
    if not hits:
        return Redacted(text)
    merged, starts, ends = _merge(hits)
    # The text between findings and the markers, interleaved; C-level loops, as adversarial text
    # can hold a finding every few characters.
    gaps = map(text.__getitem__, map(slice, [0, *ends], starts))
    markers = map(_marker, map(_KIND, merged))
    parts = list(itertools.chain.from_iterable(zip(gaps, markers, strict=True)))
    parts.append(text[ends[-1] :])
    return Redacted("".join(parts), tuple(merged))


@functools.cache
def _marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


_START, _END, _KIND = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)


def _merge(hits: list[Hit]) -> tuple[list[Hit], list[int], list[int]]:
    """``hits`` by start, overlapping ones merged into the earliest-starting, longest one (ties:
    the first detector's kind); and their starts and ends."""
    # By start, longest first, then in detector order: two stable sorts, keys looked up in C.
    hits.sort(key=_END, reverse=True)
    hits.sort(key=_START)
    starts = list(map(_START, hits))
    ends = list(map(_END, hits))
    if all(map(operator.le, ends, itertools.islice(starts, 1, None))):
        return hits, starts, ends  # nothing overlaps (the usual case): no loop in Python
    merged: list[Hit] = []
    last_end = -1
    for start, end, kind in hits:
        if start < last_end:
            if end > last_end:
                merged[-1] = (merged[-1][0], end, merged[-1][2])
                last_end = end
            continue
        merged.append((start, end, kind))
        last_end = end
    return merged, list(map(_START, merged)), list(map(_END, merged))
