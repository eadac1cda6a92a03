"""Vendor-shaped strings that are not secrets: placeholders, documented examples, masks.

A vendor prefix is strong evidence, but documentation and tests are full of ``ghp_xxxx…``,
``AKIAIOSFODNN7EXAMPLE``, ``sk_live_AAAA…`` or ``xoxb-your-token``. Redacting those costs the
reader the example and protects nothing; what the body after the prefix looks like decides.

A *filler* is a stand-in whatever its shape (:func:`is_filler`):

- a run of one repeated character covering much of the body (``xxxx``, ``0000``, ``****``), or a
  long body of at most 4 distinct characters (``a1B2a1B2…``, ``FakeFakeFake…``);
- a slot marker: ``xxxx``, ``your_…``, ``…_here``, ``placeholder``, ``changeme``, ``redacted``, a
  template (``<…>``, ``${…}``, ``{{…}}``) or an ellipsis.

A documented example key (the AWS documentation's ``AKIAIOSFODNN7EXAMPLE`` pair) is no secret
either: the token patterns check the whole value against ``DOCUMENTED_EXAMPLES``.

A *placeholder* (:func:`is_placeholder`, for formats a prefix alone identifies loosely: an
open-ended length, a short prefix) is a filler, or a body that reads as made up:

- a descriptive word (``example``, ``sample``, ``dummy``);
- a run of 8 characters in alphabet or digit order, in any case (``abcdefgh``, ``12345678``,
  ``aBcDeFgH``): hand-typed, and all but impossible in a random body (under one in 10^9 per
  position).

A body of the vendor's exact structure (prefix, length, alphabet: ``tokens.token(…, shaped=…)``)
is a token unless it is a filler: a person may type ``gsk_0123…WXYZ`` into a test, but a value of
that exact shape is what the vendor issues, and redacting one that was typed costs nothing.

A token whose format carries a checksum is judged by the checksum first (see checksums.py).
"""

from __future__ import annotations

import re

__all__ = ["DOCUMENTED_EXAMPLES", "is_filler", "is_flat", "is_placeholder"]

# Published in the vendors' own documentation as the example to copy: never anyone's key.
DOCUMENTED_EXAMPLES = frozenset(
    (
        "AKIAIOSFODNN7EXAMPLE",  # AWS access key id
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",  # its secret access key
    )
)


def _in_cases(words: tuple[str, ...]) -> str:
    # Words in one case (lower, UPPER or Title): "lFaKe" inside a random body is chance.
    return "|".join(
        re.escape(form) for word in words for form in (word, word.upper(), word.title())
    )


_MARKERS = re.compile(
    _in_cases(("xxxx", "placeholder", "changeme", "redacted"))
    + r"|(?i:your[-_])|(?i:[-_]here\b)|<[^<>]*>|\$\{|\{\{|\.\.\.|…|\*\*\*"
)
_WORDS = re.compile(_in_cases(("example", "sample", "dummy")))
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


def is_filler(body: str) -> bool:
    """Whether ``body`` (a token's text after its vendor prefix) is a stand-in whatever its
    shape: empty, flat or a slot marker."""
    return not body or _MARKERS.search(body) is not None or is_flat(body)


def is_placeholder(body: str) -> bool:
    """Whether ``body`` (a token's text after its vendor prefix) is a stand-in, not a secret."""
    return (
        is_filler(body)
        or _WORDS.search(body) is not None
        or _SEQUENCE.search(body[:_SEQUENCE_SPAN].lower()) is not None
    )


def is_flat(body: str) -> bool:
    """A run of one character over a third of ``body``, or 16+ characters of at most 4 kinds."""
    longest = max((len(match.group()) for match in _REPEAT.finditer(body)), default=0)
    if longest >= 6 and longest * 3 >= len(body):
        return True
    return len(body) >= 16 and len(set(body)) <= 4
