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

A pattern per name finds them (bounded: a name, a few blanks, a quoted literal of at most 80
characters), so text made of these names costs one scan and a memoised judgement per match.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from pi_hindsight.redaction.placeholders import is_filler
from pi_hindsight.redaction.source import Hit, Source
from pi_hindsight.redaction.values import is_not_a_secret

__all__ = ["TRIGGERS", "find_service_literals"]

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
# The literals the trigger pass looks for: a name's first word and a character that can follow
# the name in a match (not "limited", "tmux.conf" or "github.com": the detector runs rarely).
_FIRST_WORDS = (*(name.split()[0] for name in _SHAPES), "github")
TRIGGERS = tuple((word + follower, True) for word in _FIRST_WORDS for follower in " \t:=-'\"([_")
_BETWEEN = r"[ \t]{0,4}(?::=|[:=-])?[ \t]{0,4}"
# After the name: GitHub's client id, then the client secret (group 4); any other service's
# literal (group 6), blanks allowed inside its quotes (`` mux ' <secret> ' ``).
_AFTER = (
    r"(?![a-z0-9_])"
    + _BETWEEN
    + r"(?:[(\[]?[ \t]{0,4}(['\"])[a-z0-9.]{20}\2[ \t]{0,4},[ \t]{0,4}(['\"])([0-9a-f]{40})\3"
    + r"|(['\"])[ \t]?([a-z0-9+/-]{12,80})[ \t]?\5)"
)
# One pattern per name, for the lowered text, starting with the name's literal: the engine finds
# it at C speed (one pattern of all names would try every position: ~5 ns a character, as much
# as the rest of redaction on ordinary text), and only the names present are looked for. The
# left boundary and the value's case are checked on each match, in the original text.
_FORMS = {
    "railway": re.compile(r"(railway)" + _AFTER),
    "mite": re.compile(r"(mite)" + _AFTER),
    "kanban": re.compile(r"(kanban(?:tool)?)" + _AFTER),
    "mux": re.compile(r"(mux)" + _AFTER),
    "pusher": re.compile(r"(pusher)" + _AFTER),
    "scraping": re.compile(r"(scraping[ _-]bee)" + _AFTER),
    "github": re.compile(r"(github)" + _AFTER),
}
_SEPARATOR = re.compile(r"[_-]")
_HAS_DIGIT = re.compile(r"[0-9]")
_HAS_LETTER = re.compile(r"[A-Za-z]")
_HEX40 = re.compile(r"[0-9a-f]{40}")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def find_service_literals(source: Source) -> Iterator[Hit]:
    text, lowered = source.text, source.lowered
    for word, form in _FORMS.items():
        if word not in lowered:
            continue
        for match in form.finditer(lowered):
            start = match.start()
            if start and text[start - 1] in _NAME_CHARS:
                continue  # inside a longer name (``my_railway``)
            name = _SEPARATOR.sub(" ", match.group(1))
            if match.group(4) is not None:
                secret = text[match.start(4) : match.end(4)]
                if name == "github" and _HEX40.fullmatch(secret) and _is_key(secret):
                    yield (*match.span(4), "secret_near_keyword")
            elif name != "github" and _fits(name, text[match.start(6) : match.end(6)]):
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
