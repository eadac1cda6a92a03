"""The patterns that find a secret word where it is a key name (split from :mod:`.finder`,
which searches with them): by itself, where it may be assigned a value, not assigned ``""``,
or inside a longer name. All start with the word as a literal (``re`` scans for it at C speed)
and are written for the lowered text.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

from pi_hindsight.redaction.names import SECRET_WORDS, VENDOR_WORDS, Strength, word_strength
from pi_hindsight.redaction.sites import EMPTY_QUOTES, OPERATOR, XML_VALUE

__all__ = ["AUTH_WITH_PW", "EMPTY_AT", "Word", "word_patterns"]

_VENDORS = frozenset(VENDOR_WORDS)


# After a name: an operator and an empty quoted value (""). Such a name is assigned nothing
# that could be a secret: assignments.py need not look at it, and context.py leaves it alone.
_EMPTY = OPERATOR + EMPTY_QUOTES
_FLAG_VALUE = r"[ \t]{1,16}+[^\s-]"  # --token <value>
EMPTY_AT = re.compile(_EMPTY)


@dataclass(frozen=True)
class Word:
    """A secret word's patterns (see _patterns) and what it names when it stands alone."""

    simple: re.Pattern[str]
    assignable: re.Pattern[str]
    assignable_or_key: re.Pattern[str]
    unassigned: re.Pattern[str]
    inside: re.Pattern[str]
    strength: Strength | Literal["vendor"] | None


def _patterns(word: str, *, pw: bool = False) -> Word:
    """Patterns for the lowered text, each starting with ``word`` with its lookbehinds after it:

    - *simple* occurrences, where the name is the word itself (nothing but up to two ``.``/``-``
      between it and other text);
    - of those, the ones that may be assigned a value (all :mod:`.assignments` needs: a
      superset, it checks each): an operator and no ``""`` after it, ``<token>text</``,
      ``--token <value>``; in a text with "value" in it, also those with ``:`` / ``=`` before
      them, up to four blanks and a quote between (the end of its ``_NAME_KEY``);
    - of the simple ones, those not assigned ``""``, for :mod:`.context`;
    - all other occurrences, inside a longer name.

    Where a longer secret word starts (``password`` for ``pass``), only the longer one counts.
    ``pw``: for a text with "pw" in it (see not_english).
    """
    literal = re.escape(word)
    longer = [rest[len(word) :] for rest in SECRET_WORDS if rest != word and rest.startswith(word)]
    not_longer = f"(?!{'|'.join(map(re.escape, longer))})" if longer else ""
    other = r"[^a-z0-9_.-]"
    left = rf"(?:(?<![a-z0-9_.-]{literal})|(?<={other}[.-]{literal})|(?<={other}[.-][.-]{literal}))"
    right = rf"[.-]{{0,2}}(?:{other}|\Z)"
    # "auth" in "authorization", "authentication" is part of a longer word, not a secret part:
    # such a run is a name only through another secret word or a "pw" part (for a text with
    # "pw" in it, Names takes the patterns without this).
    not_english = "(?!oriz|entic)" if word == "auth" and not pw else ""
    inside_pattern = (
        rf"{literal}{not_longer}{not_english}(?:(?<=[a-z0-9_.-]{literal})"
        rf"(?<!{other}[.-]{literal})(?<!{other}[.-][.-]{literal})|(?!{right}))"
    )
    inside = re.compile(inside_pattern)
    strength = word_strength(word) or ("vendor" if word in _VENDORS else None)
    if word == "key":
        # A bare "key" is a name only in prose, after a word and a blank ("the API key").
        prose = re.compile(rf"key(?<=[a-z][ \t]key)(?={right})")
        return Word(prose, prose, prose, prose, inside, strength)
    simple = rf"{literal}{not_longer}{left}(?={right})"
    # First on its line (assignments.py's _LINE_HEAD: blanks, export/set/…/readonly and blanks,
    # "- ", "$env:", "$", a quote), a name takes the rest of the line as its value; elsewhere
    # only a quote or a bare value. These four lookbehinds hold where it may be first: no other
    # character, or blanks after one that cannot end a _LINE_HEAD keyword, stands before it.
    keyword_end = r"[^ \t\ntxvgely-]"
    first_on_line = (
        rf"(?<![^ \t\n\"'$:]{literal})(?<![^ \t\n$:][\"']{literal})"
        rf"(?<!{keyword_end}[ \t]{literal})(?<!{keyword_end}[ \t][\"']{literal})"
    )
    site = (
        rf"{first_on_line}(?={OPERATOR}+(?!{EMPTY_QUOTES}))",  # (blanks possessive)
        rf"(?={OPERATOR}+(?!{EMPTY_QUOTES})(?:[\"'`]|[^\s\"'`,;)(\]}}{{&<>]))",
        rf"(?<=<{literal})(?={XML_VALUE})",
        rf"(?<=--{literal})(?={_FLAG_VALUE})",
    )
    name_key = tuple(
        rf"(?<=[:=][ \t]{{{count}}}{quote}{literal})"
        for count in range(5)
        for quote in ("", "[\"']")
    )
    simple_pattern = re.compile(simple)
    if strength == "vendor":  # never assigned a value (assignments.py): no pattern for it
        unassigned = re.compile(rf"{simple}(?!{_EMPTY})")
        return Word(simple_pattern, simple_pattern, simple_pattern, unassigned, inside, strength)
    return Word(
        simple_pattern,
        re.compile(rf"{simple}(?:{'|'.join(site)})"),
        re.compile(rf"{simple}(?:{'|'.join((*site, *name_key))})"),
        re.compile(rf"{simple}(?!{_EMPTY})"),
        inside,
        strength,
    )


# Compiled when a text first holds the word: most of the ~450 service names never occur; for a
# text with "pw" in it, "auth" in "authorization" is a secret part too (see _patterns).
word_patterns = functools.cache(_patterns)
AUTH_WITH_PW = _patterns("auth", pw=True)
