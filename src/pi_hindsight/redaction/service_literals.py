"""Keys of services whose names are everyday words: ``railway = '<uuid>'``, ``mite '…'``,
``kanban '11XQ98FVS8WI'``, ``mux '<id>' mux ' <secret> '``, ``pusher - '…'``, a name of two
words written apart (``scraping_bee = '…'``), and GitHub's OAuth app pair ``github = '<client
id>', '<client secret>'``.

The service-name rule (:mod:`.context`, :mod:`.service_names`) leaves these names out: after
"railway", "kanban", "mux" or "github" a token is as often an id, a board, a digest or a commit.
Here a key counts only as a quoted literal right after the name (blanks, ``=``, ``:``, ``:=``
or ``-`` between) and only in the exact shape the service issues (facts from trufflehog's public
detectors: Railway API tokens are lowercase UUIDs, mite keys 16 lowercase letters and digits,
Kanban Tool keys 12 capitals and digits, Mux token secrets 75 base64 characters, Pusher Channels
secrets 20 lowercase letters and digits, ScrapingBee keys 80 capitals and digits, a GitHub
OAuth app's client secret 40 hex after its 20-character client id). An id the service pairs
with its key (Mux's token id, a UUID; Pusher's app id, digits) has another shape and stays; a
key of letters or digits alone stays too (a word, an acronym, a number).

One pattern finds all of them (bounded: a name, a few blanks, a quoted literal of at most 80
characters), so text made of these names costs one scan and a memoised judgement per match.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from pi_hindsight.redaction.placeholders import is_filler
from pi_hindsight.redaction.source import Hit, Source
from pi_hindsight.redaction.values import is_not_a_secret

__all__ = ["NAMES", "find_service_literals"]

# The shape of each service's key (a literal's whole content).
_SHAPES = {
    "railway": re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}"),
    "mite": re.compile(r"[0-9a-z]{16}"),
    "kanban": re.compile(r"[0-9A-Z]{12}"),
    "kanbantool": re.compile(r"[0-9A-Z]{12}"),
    "mux": re.compile(r"[0-9A-Za-z/+]{75}"),
    "pusher": re.compile(r"[0-9a-z]{20}"),
    # a service's name of two words, written apart (together it is in service_names.py)
    "scraping bee": re.compile(r"[0-9A-Z]{80}"),
}
# The literals the trigger pass looks for (a name's first word).
NAMES = (*(name.split()[0] for name in _SHAPES), "github")
_NAME = r"(?<![A-Za-z0-9_])(?i:({names}))(?![A-Za-z0-9_])".format(
    names="|".join(name.replace(" ", "[ _-]") for name in (*_SHAPES, "github"))
)
_BETWEEN = r"[ \t]{0,4}(?::=|[:=-])?[ \t]{0,4}"
# A literal, blanks allowed inside its quotes (`` mux ' <secret> ' ``).
_LITERAL = r"(['\"])[ \t]?([A-Za-z0-9+/-]{{{low},{high}}})[ \t]?\{quote}"
_FORM = re.compile(
    _NAME
    + _BETWEEN
    # GitHub: the client id, then the client secret (group 4); any other service: group 6
    + r"(?:[(\[]?[ \t]{0,4}(['\"])[A-Za-z0-9.]{20}\2[ \t]{0,4},[ \t]{0,4}(['\"])([0-9a-f]{40})\3"
    + "|"
    + _LITERAL.format(low=12, high=80, quote=5)
    + r")"
)
_SEPARATOR = re.compile(r"[_-]")
_HAS_DIGIT = re.compile(r"[0-9]")
_HAS_LETTER = re.compile(r"[A-Za-z]")


def find_service_literals(source: Source) -> Iterator[Hit]:
    for match in _FORM.finditer(source.text):
        name = _SEPARATOR.sub(" ", match.group(1).lower())
        if match.group(4) is not None:
            if name == "github" and _is_key(match.group(4)):
                yield (*match.span(4), "secret_near_keyword")
        elif name != "github" and _fits(name, match.group(6)):
            yield (*match.span(6), "secret_near_keyword")


@functools.lru_cache(maxsize=1024)
def _fits(name: str, value: str) -> bool:
    return _SHAPES[name].fullmatch(value) is not None and _is_key(value)


@functools.lru_cache(maxsize=1024)
def _is_key(value: str) -> bool:
    """A digit and a letter in it (letters alone read as a word, digits as a number), and no
    placeholder or stand-in (``00000000-0000-…``, ``xxxx…``)."""
    return (
        _HAS_DIGIT.search(value) is not None
        and _HAS_LETTER.search(value) is not None
        and not is_not_a_secret(value)
        and not is_filler(value)
    )
