"""Where a key name can be assigned a value (a site), and how the assignments detector skips the
runs of name characters that cannot be (:mod:`.finder`'s ``_Runs``).

Adversarial text can hold a secret word inside a longer name every few characters with no
operator anywhere (``token_url `` repeated): only a run followed by a site or starting with "-"
may be assigned, so the runs before the next of those are passed over in one regex search.
"""

from __future__ import annotations

import re

from pi_hindsight.redaction import runs
from pi_hindsight.redaction.source import Source

__all__ = ["EMPTY_QUOTES", "OPERATOR", "XML_VALUE", "SiteSkip", "may_assign"]

# What follows a key name that is assigned a value: an optional closing quote, the operator,
# blanks (``?=``: a Makefile's conditional assignment; ``\\"``: JSON inside a string). Not
# ``==``, ``::``, ``=~``, ``://``.
# (assignments.py reads the value after it.)
OPERATOR = r"\\{0,3}+[\"'`]?[ \t]{0,16}(?::=|=>|=(?![=~])|\?:|\?=|:(?![:/]))[ \t]{0,16}"
EMPTY_QUOTES = r"(?:\"\"|''|``)"
XML_VALUE = r">[^<\r\n]{1,1024}+</"  # assignments.py's _XML_TEXT after ">"

_SITE_AFTER = re.compile(rf"{OPERATOR}+(?!{EMPTY_QUOTES})|{XML_VALUE}")
# Where _SITE_AFTER can match at the end of a run (after a name character; a superset: the
# lowered text, not the searchable one), and where a run starting with "-" starts.
_SITE_AT = re.compile(rf"(?<=[a-z0-9_.-])(?:{_SITE_AFTER.pattern})")
_DASH_RUN = re.compile(r"(?<![a-z0-9_.-])-")
_NAME_KEY_END = re.compile(r"[:=][ \t]{0,4}[\"']?\Z")
_SKIP_GAIN = 64
_NONE = 1 << 62  # no more sites or dash runs


def may_assign(source: Source, start: int, stop: int) -> bool:
    """Whether the run at [start, stop) may be a name assigned a value (a superset of what the
    simple patterns' sites say, checked before the run's name is worked out)."""
    lowered = source.lowered
    if _SITE_AFTER.match(lowered, stop) is not None:
        return True
    if lowered.startswith("-", start):
        return True  # --token <value> (the run holds the leading dashes)
    # name: DB_PASSWORD … value: … (assignments.py's _name_value looks for "value" this far)
    if source.text.find("value", stop, stop + 160) < 0:
        return False
    return _NAME_KEY_END.search(lowered, max(0, start - 6), start) is not None


class SiteSkip:
    """Where the next run that may be assigned can start, for a text without "value"."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self._site = self._dash = -1  # the next site and dash run start found (_NONE: none)
        # Where sites are as frequent as runs (``name: DB_PASSWORD``) skipping gains nothing:
        # after a skip of less than _SKIP_GAIN, the next ones are tried ever more rarely.
        self._wait, self._backoff = 0, 1

    def after(self, start: int) -> int:
        """Where to go on from ``start``, after a run that may not be assigned."""
        if self._wait:
            self._wait -= 1
            return start
        target = self._skip(start)
        if target - start >= _SKIP_GAIN:
            self._backoff = 1
        else:
            self._backoff = min(2 * self._backoff, 64)
            self._wait = self._backoff
        return target

    def _skip(self, start: int) -> int:
        """Where the first run starting at or after ``start`` that may be assigned can start:
        the start of the run before the next site, or the next run starting with "-"."""
        source = self._source
        searchable = runs.searchable(source)
        if self._site < start and self._site != _NONE:
            site = _SITE_AT.search(source.lowered, start)
            self._site = _NONE if site is None else site.start()
        # (a run holding ``start`` can start with "-" before it, and be taken trimmed of it)
        base = runs.run_start(searchable, start) if 0 < start <= len(searchable) else start
        base = max(0, start - runs.RUN_LIMIT - 1) if base < 0 else base
        if self._dash < base and self._dash != _NONE:
            dash = _DASH_RUN.search(searchable, base)
            self._dash = _NONE if dash is None else dash.start()
        target = self._dash
        if self._site < target:
            before = runs.run_start(searchable, self._site)
            target = self._site - runs.RUN_LIMIT - 1 if before < 0 else before
        return max(start, target)
