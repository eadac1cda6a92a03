"""Vendor-shaped strings that are not secrets: placeholders, documented examples, masks.

A vendor prefix is strong evidence, but documentation and tests are full of ``ghp_xxxx…``,
``AKIAIOSFODNN7EXAMPLE``, ``sk_live_AAAA…`` or ``xoxb-your-token``. Redacting those costs the
reader the example and protects nothing; what the body after the prefix looks like decides:

- a run of one repeated character covering much of the body (``xxxx``, ``0000``, ``****``);
- a placeholder word (``example``, ``your``, ``dummy``, ``sample``), or a template
  marker (``<…>``, ``${…}``, ``{{…}}``);
- a long body of at most 4 distinct characters (``a1B2a1B2…``);
- a run of 8 characters in alphabet or digit order, in any case (``abcdefgh``, ``12345678``,
  ``aBcDeFgH``): hand-typed, and all but impossible in a random body (under one in 10^9 per
  position).

A token whose format carries a checksum is judged by the checksum first (see checksums.py).
"""

from __future__ import annotations

import re

__all__ = ["is_flat", "is_placeholder"]

# Words in one case (lower, UPPER or Title): "lFaKe" inside a random body is chance.
_WORD_LIST = ("example", "xxxx", "placeholder", "changeme", "dummy", "sample", "redacted")
_WORDS = re.compile(
    "|".join(re.escape(form) for word in _WORD_LIST for form in (word, word.upper(), word.title()))
    + r"|(?i:your[-_])|(?i:[-_]here\b)|<[^<>]*>|\$\{|\{\{|\.\.\.|…|\*\*\*"
)
_REPEAT = re.compile(r"(.)\1{5,}")
_RUN = 8
_SEQUENCE_SPAN = 256  # an ordered run is looked for at the start (a hand-typed body shows it there)
_SEQUENCE = re.compile(
    "|".join(
        alphabet[start : start + _RUN]
        for alphabet in ("abcdefghijklmnopqrstuvwxyz", "0123456789")
        for start in range(len(alphabet) - _RUN + 1)
    )
)


def is_placeholder(body: str) -> bool:
    """Whether ``body`` (a token's text after its vendor prefix) is a stand-in, not a secret."""
    if not body:
        return True
    return (
        _WORDS.search(body) is not None
        or is_flat(body)
        or _SEQUENCE.search(body[:_SEQUENCE_SPAN].lower()) is not None
    )


def is_flat(body: str) -> bool:
    """A run of one character over a third of ``body``, or 16+ characters of at most 4 kinds."""
    longest = max((len(match.group()) for match in _REPEAT.finditer(body)), default=0)
    if longest >= 6 and longest * 3 >= len(body):
        return True
    return len(body) >= 16 and len(set(body)) <= 4
