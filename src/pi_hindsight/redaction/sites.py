"""Where a key name can be assigned a value (a site): the operators after it, and which runs of
name characters may be assigned (checked before the run's name is worked out)."""

from __future__ import annotations

import itertools
import operator
import re

from pi_hindsight.redaction.source import Source

__all__ = ["EMPTY_QUOTES", "OPERATOR", "XML_VALUE", "may_assign", "may_assign_all"]

# What follows a key name that is assigned a value: an optional closing quote, the operator,
# blanks (``?=``: a Makefile's conditional assignment; ``\\"``: JSON inside a string). Not
# ``==``, ``::``, ``=~``, ``://``.
# (assignments.py reads the value after it.)
OPERATOR = r"\\{0,3}+[\"'`]?[ \t]{0,16}(?::=|=>|=(?![=~])|\?:|\?=|:(?![:/]))[ \t]{0,16}"
EMPTY_QUOTES = r"(?:\"\"|''|``)"
XML_VALUE = r">[^<\r\n]{1,1024}+</"  # assignments.py's _XML_TEXT after ">"

_SITE_AFTER = re.compile(rf"{OPERATOR}+(?!{EMPTY_QUOTES})|{XML_VALUE}")
_NAME_KEY_END = re.compile(r"[:=][ \t]{0,4}[\"']?\Z")


def may_assign_all(source: Source, starts: list[int], stops: list[int]) -> list[bool] | None:
    """may_assign for many runs at once, with C-level loops; None where the text holds "value"
    (then ask may_assign run by run)."""
    if "value" in source.text:
        return None
    lowered = source.lowered
    sites = map(operator.truth, map(_SITE_AFTER.match, itertools.repeat(lowered), stops))
    dashes = map(lowered.startswith, itertools.repeat("-"), starts)
    return list(map(operator.or_, sites, dashes))


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
