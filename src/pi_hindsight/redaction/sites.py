"""Where a key name can be assigned a value (a site): the operators after it, and which runs of
name characters may be assigned (checked before the run's name is worked out)."""

from __future__ import annotations

import itertools
import operator
import re

from pi_hindsight.redaction.source import Source

__all__ = [
    "EMPTY_QUOTES",
    "OPERATOR",
    "XML_VALUE",
    "may_assign",
    "may_assign_all",
    "may_assign_any",
]

# What follows a key name that is assigned a value: an optional closing quote, the operator,
# blanks (``?=``: a Makefile's conditional assignment; ``\\"``: JSON inside a string). Not
# ``==``, ``::``, ``=~``, ``://``.
# (assignments.py reads the value after it.)
OPERATOR = r"\\{0,3}+[\"'`]?[ \t]{0,16}(?::=|=>|=(?![=~])|\?:|\?=|:(?![:/]))[ \t]{0,16}"
EMPTY_QUOTES = r"(?:\"\"|''|``)"
XML_VALUE = r">[^<\r\n]{1,1024}+</"  # assignments.py's _XML_TEXT after ">"

_SITE_AFTER = re.compile(rf"{OPERATOR}+(?!{EMPTY_QUOTES})|{XML_VALUE}")
_VALUE_REACH = 160
_NAME_KEY_END = re.compile(r"[:=][ \t]{0,4}[\"']?\Z")


def may_assign_any(source: Source) -> bool:
    """Whether may_assign can say yes for any run of the text: a site holds ``=``, ``:`` or
    ``</``; the other ways need a ``-`` or "value"."""
    lowered = source.lowered
    return any(literal in lowered for literal in ("=", ":", "</", "-", "value"))


def may_assign_all(source: Source, starts: list[int], stops: list[int]) -> list[bool]:
    """may_assign for many runs at once, with C-level loops (every run can be a name)."""
    lowered, repeat = source.lowered, itertools.repeat
    dashes = map(lowered.startswith, repeat("-"), starts)
    if "=" in lowered or ":" in lowered or "</" in lowered:  # (see may_assign_any)
        sites = map(operator.truth, map(_SITE_AFTER.match, repeat(lowered), stops))
        assigned = list(map(operator.or_, sites, dashes))
    else:
        assigned = list(dashes)
    if "value" not in source.text:
        return assigned
    ends = map(operator.add, stops, repeat(_VALUE_REACH))
    values = map(operator.ge, map(source.text.find, repeat("value"), stops, ends), repeat(0))
    befores = map(max, map(operator.sub, starts, repeat(6)), repeat(0))
    keys = map(operator.truth, map(_NAME_KEY_END.search, repeat(lowered), befores, starts))
    return list(map(operator.or_, assigned, map(operator.and_, values, keys)))


def may_assign(source: Source, start: int, stop: int) -> bool:
    """Whether the run at [start, stop) may be a name assigned a value (a superset of what the
    simple patterns' sites say, checked before the run's name is worked out)."""
    lowered = source.lowered
    if _SITE_AFTER.match(lowered, stop) is not None:
        return True
    if lowered.startswith("-", start):
        return True  # --token <value> (the run holds the leading dashes)
    # name: DB_PASSWORD … value: … (assignments.py's _name_value looks for "value" this far)
    if source.text.find("value", stop, stop + _VALUE_REACH) < 0:
        return False
    return _NAME_KEY_END.search(lowered, max(0, start - 6), start) is not None
