"""String literals compared with, or passed to, a secret-named variable or setter (issue 18).

- ``if (api_key == "…")``, ``password !== '…'`` and the reverse ``"…" == password``;
- a call of a secret-named function with one string literal: ``setPassword("…")``,
  ``secret('…')``, ``withApiKey("…")``;
- a secret-named string literal and a literal side by side: ``System.setProperty("API_TOKEN",
  "…")``, ``headers.put("X-Api-Key", "…")``, ``os.environ.setdefault("DB_PASSWORD", "…")``.

Both are anchored on a literal that is rare in ordinary text (the comparison operator, or ``("``
/ ``('``); the value is the quoted literal (no quote or line break inside, at most 256
characters), scanned once: a value's scan ends at the next quote, and distinct anchors have
distinct quotes, so the scans are disjoint. The name next to it is read from at most 64
characters and only once the value has passed the judge (values.py), so text made of operators
with empty or plain values costs one regex step each.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from pi_hindsight.redaction.names import Strength, name_strength, names_a_token
from pi_hindsight.redaction.service_names import find_service, service_key_fits
from pi_hindsight.redaction.source import Hit, Source
from pi_hindsight.redaction.values import (
    is_mangled,
    is_name_like,
    is_not_a_secret,
    is_prose,
    looks_random,
)

__all__ = ["TRIGGERS", "find_comparisons"]

TRIGGERS = (
    ("==", False),
    ("!=", False),
    ('("', False),
    ("('", False),
    ('",', False),
    ("',", False),
    ('] = "', False),
    (']= "', False),
    ('] ="', False),
    (']="', False),
    ("return ", False),
)

# Each pattern starts with its operator as a literal (re scans for it in C; a pattern starting
# with a set or an alternation is tried at every position) and matches only where a quoted value
# follows, or a quote precedes and a name follows: text made of operators costs no Python.
_VALUE_AFTER = r"=?+[ \t]{0,16}+([\"'`])([^\"'`\r\n]{4,256}+)\1"
_NAME_AFTER_QUOTE = r"(?:(?<=[\"'`]OP)|(?<=[\"'`] OP))=?+[ \t]{0,16}+([A-Za-z_$][\w$.]{0,63}+)"
_FORWARD = tuple(re.compile(re.escape(op) + _VALUE_AFTER) for op in ("==", "!="))
_REVERSE = tuple(
    re.compile(re.escape(op) + _NAME_AFTER_QUOTE.replace("OP", re.escape(op)))
    for op in ("==", "!=")
)
_LITERAL = re.compile(r"[^\"'`\r\n]{4,256}")
_CALL = re.compile(r"\([ \t]{0,16}+([\"'])([^\"'\r\n]{4,256}+)\1[ \t]{0,16}+\)")
# "NAME", "value": anchored on the quote and comma after the name (a literal: scanned in C),
# which must end in a secret word (the lookbehinds, also in C: text made of other pairs costs
# no Python); then a quoted value. The name is read back from its opening quote.
_NAME_ENDINGS = "token key secret password passwd passphrase pwd pass credentials credential creds"
_PAIR = tuple(
    re.compile(
        re.escape(quote + ",")
        + "(?:"
        + "|".join(f"(?<=(?i:{word}){re.escape(quote)},)" for word in _NAME_ENDINGS.split())
        + r")[ \t]{0,16}+([\"'])([^\"'\r\n]{4,256}+)\1"
    )
    for quote in "\"'"
)
# The name before a position, matched (anchored, in C) in the reversed text: blanks, an optional
# closing quote or bracket, then up to 64 name characters.
_NAME_BEFORE_REVERSED = re.compile(r"[ \t]{0,16}+[\"'\]]?([\w$]{1,64}+)")
_NAME_AFTER = re.compile(r"[A-Za-z_$][\w$.]{0,63}+")
_SETTER = re.compile(r"(?:set|with|use|get)?_?", re.IGNORECASE)
# A C/C++ character array initialised with a string literal (``char secret[25] = "…"``;
# always double quotes: ``$pass[] = '…'`` appends to a PHP array) and C++'s
# ``secret.assign("…", 17)``: the name is the one before the bracket or the dot.
_CHAR_ARRAY = re.compile(r"\[[0-9]{0,6}+\][ \t]{0,16}+=[ \t]{0,16}+\"([^\"\r\n]{4,256}+)\"")
# A secret-named function returning a string literal and nothing else: ``def get_api_key():
# return "…"``, ``func getToken() string { return "…" }``, ``String getPassword() { return
# "…"; }``. The function's name is read back from ``return`` in the reversed text: blanks, the
# ``{`` or ``:`` opening the body, a return type, ``)``, the parameters, ``(``, the name.
_RETURN = re.compile(
    r"return[ \t]{1,8}+([\"'`])([^\"'`\r\n]{4,256}+)\1(?=[ \t]{0,16}+(?:[;}]|\r?\n|\Z))"
)
_FUNCTION_REVERSED = re.compile(
    r"[ \t\r\n]{0,64}+[{:][^(){};\r\n]{0,48}+\)[^()\r\n]{0,128}+\(([\w$]{1,64}+)"
)
_ASSIGN = re.compile(r"\.assign\([ \t]{0,16}+([\"'])([^\"'\r\n]{4,256}+)\1")


# Memoised: the same names and values recur throughout a text (adversarial text repeats one).
@functools.lru_cache(maxsize=4096)
def _secret_value(value: str, strength: Strength) -> bool:
    if is_not_a_secret(value) or is_prose(value):
        return False
    if strength == "weak":
        return looks_random(value)
    return len(value) >= 6 and not is_name_like(value)


@functools.lru_cache(maxsize=4096)
def _strength(name: str) -> Strength | None:
    # setPassword / with_api_key: the setter's verb is no part of the name
    verb = _SETTER.match(name)
    bare = name[verb.end() :] if verb and verb.end() < len(name) else name
    return name_strength(bare) or name_strength(name)


class _Before:
    """The secret strength of the name ending before a position (the text reversed once)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._reversed: str | None = None

    def function(self, at: int) -> str | None:
        """The name of the function whose body starts before ``at``."""
        if self._reversed is None:
            self._reversed = self._text[::-1]
        match = _FUNCTION_REVERSED.match(self._reversed, len(self._text) - at)
        return None if match is None else match.group(1)[::-1]

    def strength(self, at: int) -> Strength | None:
        if self._reversed is None:
            self._reversed = self._text[::-1]
        match = _NAME_BEFORE_REVERSED.match(self._reversed, len(self._text) - at)
        return None if match is None else _strength(match.group(1)[::-1])


_PAIR_NAME = re.compile(r"[\w.-]{1,64}")


# Memoised: adversarial text repeats one pair thousands of times.
@functools.lru_cache(maxsize=4096)
def _pair_secret(name: str, value: str) -> bool:
    """Whether ``value`` passed beside the quoted ``name`` is a secret (and not a generated
    token mangled in it: values.is_mangled)."""
    if _PAIR_NAME.fullmatch(name) is None:
        return False
    strength = name_strength(name)
    if not strength or not _secret_value(value, strength):
        return False
    return not (names_a_token(name) and is_mangled(value))


def find_comparisons(source: Source) -> Iterator[Hit]:
    text = source.text
    before = _Before(text)
    for regex in _FORWARD:
        for match in regex.finditer(text):
            strength = before.strength(match.start())
            if strength and _secret_value(match.group(2), strength):
                yield (match.start(2), match.end(2), "secret_comparison")
    for regex in _REVERSE:
        for match in regex.finditer(text):
            yield from _reverse(text, match)
    for match in _CALL.finditer(text):
        strength = before.strength(match.start())
        if strength and _secret_value(match.group(2), strength):
            yield (match.start(2), match.end(2), "secret_call")
    yield from _c_literals(text, before)
    if "return " in text:
        yield from _returned(text, before)
    for quote, regex in zip("\"'", _PAIR, strict=True):
        for match in regex.finditer(text):
            close = match.start()
            opening = text.rfind(quote, max(0, close - 65), close)
            if opening >= 0 and _pair_secret(text[opening + 1 : close], match.group(2)):
                yield (match.start(2), match.end(2), "secret_call")


def _returned(text: str, before: _Before) -> Iterator[Hit]:
    """A literal returned by a secret-named function; one named for a service too
    (``getBetterStackToken``) returns a key of that service's shape (service_names.py)."""
    for match in _RETURN.finditer(text):
        value = match.group(2)
        # (the value first: memoised, and most returned literals are no secret)
        if not _secret_value(value, "strong"):
            continue
        name = before.function(match.start())
        strength = None if name is None else _strength(name)
        if name is None or strength is None or not _secret_value(value, strength):
            continue
        verb = _SETTER.match(name)
        bare = (name[verb.end() :] if verb else name).lower()
        service = find_service(bare, 0, len(bare))
        if service is None or service_key_fits(service, value):
            yield (*match.span(2), "secret_call")


def _c_literals(text: str, before: _Before) -> Iterator[Hit]:
    """``char secret[25] = "…"`` and ``secret.assign("…", 17)``."""
    for regex, group, kind in ((_CHAR_ARRAY, 1, "secret_assignment"), (_ASSIGN, 2, "secret_call")):
        for match in regex.finditer(text):
            strength = before.strength(match.start())
            if strength and _secret_value(match.group(group), strength):
                yield (match.start(group), match.end(group), kind)


def _reverse(text: str, match: re.Match[str]) -> Iterator[Hit]:
    """``"value" == name``: the closing quote is right before the operator (or one blank)."""
    strength = _strength(match.group(1).rsplit(".", 1)[-1])
    if not strength:
        return
    close = match.start() - 1 if text[match.start() - 1] in "\"'`" else match.start() - 2
    opening = text.rfind(text[close], max(0, close - 257), close)
    value = text[opening + 1 : close]
    if opening >= 0 and _LITERAL.fullmatch(value) and _secret_value(value, strength):
        yield (opening + 1, close, "secret_comparison")
