"""Values assigned to secret-named keys: ``API_KEY=…``, ``export DB_PASSWORD="…"``, ``password:
…`` (YAML), ``"client_secret": "…"``, ``--token=…``, ``--token …``, ``<password>…</password>``.

The key names come from :class:`~.finder.Names` (only those an operator or the like can follow;
the names inside a value are skipped without being looked at); a name counts when
:func:`~.names.name_strength` says so and an assignment operator follows. The value rules, by the
name's strength and where the value stands:

========================  ======================  ==============================  ==============
                          line of its own (.env,  quoted inline (code, JSON)      bare inline
                          YAML, shell)                                            (code, CLI)
========================  ======================  ==============================  ==============
``password``              any real value, words   ≥ 4 characters, not a label     ≥ 6, not an
                          and spaces included     with spaces                     identifier
``strong``                ≥ 4, not a word or      ≥ 6, not a word, identifier or  ≥ 8, likewise
                          identifier              label
``weak``                  random (:func:`~.values.looks_random`) wherever it stands
========================  ======================  ==============================  ==============

and nowhere a reference, template, placeholder, URL without credentials, path or short number
(:func:`~.values.is_not_a_secret`). A name that also names a service (``cloudinary_apiSecret``,
or a bare ``KEY`` right after the service's name) takes a value of that service's exact key
shape whatever the table says (:mod:`.service_names`). The key name stays: it tells the reader
what was there.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Literal

from pi_hindsight.redaction.finder import Names
from pi_hindsight.redaction.names import Strength, names_a_token
from pi_hindsight.redaction.placeholders import is_filler
from pi_hindsight.redaction.service_names import find_service, service_key_exact
from pi_hindsight.redaction.sites import OPERATOR
from pi_hindsight.redaction.source import Hit, Lines, Source
from pi_hindsight.redaction.values import (
    is_code,
    is_mangled,
    is_name_like,
    is_not_a_secret,
    is_prose,
    looks_random,
)

__all__ = ["find_assignments"]

_BLANKS = re.compile(r"[ \t]{1,16}")
_BARE_VALUE = r"[^\s\"'`,;)(\]}{&<>]{1,4096}+"
_BARE = re.compile(_BARE_VALUE)
_VALUE_REACH = 4098  # a quoted value of up to 4096 characters and its closing quote
# OPERATOR with the operator proper as group 1, an empty group 2 where the value starts, and
# what the value starts with: a quote (group 3) or a bare value (group 4): one match per name.
_OPENING = re.compile(
    OPERATOR.replace("(?:", "(", 1) + rf"()(?:(\\{{0,3}}+[\"'`])|({_BARE_VALUE}))?"
)
_SHELL_VALUE = re.compile(r"[^\s\"'`]{1,4096}+")
_ESCAPED_QUOTE = re.compile(r"\\{1,3}+[\"']")
# A call wrapping a string literal: String::from("…"), SecretStr("…"), Secret.new('…')
_CALL_LITERAL = re.compile(r"\([ \t]{0,16}([\"'])([^\"'\r\n]{1,1024})\1")
# Kubernetes/ECS environment lists: name: DB_PASSWORD / value: …, {"name": …, "value": …}
_NAME_KEY = re.compile(r"(?:name|key)[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?\Z")
# A type annotation between the name and the value: token: str = "…", apiKey: string = '…'
_ANNOTATION = re.compile(r"[A-Za-z_][\w.\[\], |]{0,64}?[ \t]*=(?![=>])[ \t]*")
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")  # _ANNOTATION's
_VALUE_KEY = re.compile(r"value[\"']?[ \t]{0,4}[:=][ \t]{0,4}")
_XML_TEXT = re.compile(r"[^<\r\n]{1,1024}+</")
# What may precede the name on a line for the line to be a .env/YAML/shell/Dockerfile assignment.
_LINE_HEAD = re.compile(
    r"[ \t]{0,4096}+(?:(?:export|set|setx|ENV|ARG|declare|local|readonly)[ \t]+|-[ \t]+|\$env:|\$)?"
    r"[\"']?"
)
_COMMENT = re.compile(r"[ \t]#|[ \t]//")
# A value that is code: a call or subscript (getpass.getpass(…), os.environ[…]), or a reference to
# an attribute or variable (var.db_password, self.token, Config::TOKEN).
_CALL_LIKE = re.compile(r"[A-Za-z_$][\w.$:]*[(\[]")
_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)+")


class _Quotes:
    """The next occurrence of each quote character at or after a position, in linear total time
    for increasing positions (an unterminated quote is not searched for again on every name)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._next: dict[str, tuple[int, int]] = {}  # quote -> (searched from, found at or -1)

    def find(self, quote: str, start: int, end: int) -> int:
        cached = self._next.get(quote)
        if cached is not None and cached[0] <= start and (cached[1] < 0 or cached[1] >= start):
            found = cached[1]
        else:
            found = self._text.find(quote, start)
            self._next[quote] = (start, found)
        return found if 0 <= found < end else -1


class _Scan:
    """One text being scanned for assignments, with its line and quote lookups."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.quotes = _Quotes(text)
        self._lines = Lines(text)
        # The line of the last query: its start, end, and where a name first on it would begin.
        self._start, self._end, self._head = 0, -1, -1
        # Where a short bare value ends, from its name's end, by what _assignment read (see
        # _SHORT_READ); or a password's quoted value (its bounds and kind: found): adversarial
        # text repeats ``PASSWORD=x `` or ``password="`` tens of thousands of times.
        self.short: dict[tuple[str, bool, str], int | tuple[int, int, str]] = {}

    def line(self, name_start: int) -> tuple[bool, int]:
        """Whether the name stands first on its line (.env, YAML, shell), and the line's end."""
        if (
            not self._start <= name_start <= self._end
        ):  # (names come in order: rarely)  # not on the line of the last query
            self._start, self._end = self._lines.bounds(name_start)
            match = _LINE_HEAD.match(self.text, self._start, self._end)
            self._head = self._start if match is None else match.end()
        return self._head == name_start, self._end


# Where a value stands: on a line of its own, quoted inline, bare inline (see the table above).
Place = Literal["line", "quoted", "bare"]
_Value = tuple[int, int, Place]


def find_assignments(source: Source) -> Iterator[Hit]:
    text = source.text
    names = Names(source, "assignable")
    assigned: set[int] = set()  # names followed by an assignment: context.py skips them
    source.cache["assigned"] = assigned
    scan = _Scan(text)
    resume = 0
    # The names inside a value are never looked at: the next one is asked for after it.
    while (name := names.first(resume)) is not None:
        name_start, name_end, strength, _ = name
        finding, value_end = _assignment(scan, name_start, name_end, strength)  # type: ignore[arg-type]
        if value_end:
            assigned.add(name_start)
        # name: DB_PASSWORD … value: … (the cheap test first: _name_value needs "value")
        if (
            not value_end
            and text.find("value", name_end, name_end + 160) >= 0
            and _after_name_key(source.lowered, name_start)
        ):
            finding, value_end = _name_value(scan, name_end, strength)  # type: ignore[arg-type]
        resume = max(value_end, name_end)
        if finding is not None:
            yield finding


def _after_name_key(lowered: str, name_start: int) -> bool:
    """Whether the name is the value of a ``name:``/``key=`` entry (cheap test first)."""
    before = max(0, name_start - 16)
    if lowered.find("name", before, name_start) < 0 and lowered.find("key", before, name_start) < 0:
        return False
    return _NAME_KEY.search(lowered, before, name_start) is not None


def _assignment(
    scan: _Scan, name_start: int, name_end: int, strength: Strength
) -> tuple[Hit | None, int]:
    """The finding for the name at [name_start, name_end), and where its value ends (0: none)."""
    text = scan.text
    first_on_line, line_end = scan.line(name_start)
    key = (strength, first_on_line, text[name_start - 2 : name_end + _SHORT_READ])
    known = scan.short.get(key) if name_start >= 2 else None
    if known is not None:
        return _recalled(known, name_end)
    opening = _opening(text, name_start, name_end)
    if opening is None:
        return None, 0
    value_start, form, bare_end = opening
    own_line = first_on_line and form in ("=", ":")
    if (
        0 <= bare_end < value_start + _SHORTEST[strength]
        and not own_line
        and not text.startswith("(", bare_end)
    ):
        # (remembered where all that was read lies in the key: not after a type annotation
        # was looked for, which may read further)
        if (
            name_start >= 2
            and bare_end + 2 <= name_end + _SHORT_READ
            and (form == "=" or text[value_start] not in _NAME_START)
            and len(scan.short) < _SHORT_MEMO
        ):
            scan.short[key] = bare_end - name_end
        return None, bare_end  # too short to be a secret inline (see _MINIMUM)
    quoted_password = False
    if form == "xml":
        match = _XML_TEXT.match(text, value_start, line_end)
        value: _Value | None = None if match is None else (value_start, match.end() - 2, "bare")
        resume = 0 if value is None else value[1]
    elif (escaped := _ESCAPED_QUOTE.match(text, value_start)) is not None:
        # JSON inside a string ({\"auth\":\"…\"}): the value ends at the escaped quote.
        close = text.find(escaped.group(), escaped.end(), line_end)
        value = None if close < 0 else (escaped.end(), close, "quoted")
        resume = max(close, escaped.end())
    elif value_start < len(text) and text[value_start] in "\"'`":
        # A quoted name is a JSON or dict key: its value follows the inline rules even on a
        # line of its own (``"forgotPassword": "Forgot password?"`` is a label).
        quoted_name = name_start > 0 and text[name_start - 1] in "\"'`"
        value, resume = _quoted(scan, value_start, line_end, own_line and not quoted_name)
        # (a password's quoted value, ``password="`` repeated: judged by the value alone)
        quoted_password = strength == "password" and form == "="
    elif own_line:
        value, resume = _rest_of_line(text, value_start, line_end, shell=form == "=")
    else:
        value, resume = _bare(text, value_start, bare_end)
    if value is None:
        return None, resume
    start, end, place = value
    # (the name is passed only where it can name a token: adversarial text repeats "password=")
    name = "" if strength == "password" else text[name_start:name_end]
    secret = _is_secret(text[start:end], strength, place, name) or bool(
        name and _service_key(text, name_start, name, text[start:end])
    )
    kind = "env_assignment" if own_line else "secret_assignment"
    found: Hit | None = (start, end, kind) if secret else None
    remember = quoted_password and end + 2 <= name_end + _SHORT_READ and name_start >= 2
    if remember and len(scan.short) < _SHORT_MEMO:  # (its closing quote lies in the key)
        scan.short[key] = (
            end - name_end if found is None else (start - name_end, end - name_end, found[2])
        )
    return found, end


def _recalled(known: int | tuple[int, int, str], name_end: int) -> tuple[Hit | None, int]:
    """What _assignment remembered (see _Scan.short) for a name ending at ``name_end``."""
    if isinstance(known, int):
        return None, name_end + known
    return (name_end + known[0], name_end + known[1], known[2]), name_end + known[1]


def _opening(text: str, name_start: int, name_end: int) -> tuple[int, str, int] | None:
    """Where the value after the name starts; how it is introduced: "=" (exactly, as in shell),
    ":" (any other operator), "xml" (<password>…</) or "flag" (--token …); and where a bare value
    starting there ends, when already matched (else -1)."""
    opening = _OPENING.match(text, name_end)
    if opening is not None:
        operator, value_start = opening[1], opening.start(2)
        if operator == ":" and text[value_start : value_start + 1] in _NAME_START:
            annotation = _ANNOTATION.match(text, value_start)
            if annotation is not None:
                value_start = annotation.end()
        bare_end = opening.end(4) if value_start == opening.start(2) and opening[4] else -1
        return (
            value_start,
            "=" if value_start == name_end + 1 and operator == "=" else ":",
            bare_end,
        )
    if name_start > 0 and text[name_start - 1] == "<" and text.startswith(">", name_end):
        return name_end + 1, "xml", -1
    if name_start >= 2 and text.startswith("--", name_start - 2):
        blanks = _BLANKS.match(text, name_end)
        if blanks is not None and not text.startswith("-", blanks.end()):
            return blanks.end(), "flag", -1
    return None


def _quoted(
    scan: _Scan, value_start: int, line_end: int, own_line: bool
) -> tuple[_Value | None, int]:
    close = scan.quotes.find(scan.text[value_start], value_start + 1, line_end)
    if close < 0:
        return None, value_start + 1
    return (value_start + 1, close, "line" if own_line else "quoted"), close


def _rest_of_line(
    text: str, value_start: int, line_end: int, *, shell: bool
) -> tuple[_Value | None, int]:
    """The value of a name standing first on its line: the rest of the line (a trailing comment
    dropped), or for ``VAR=value`` up to the first blank (``VAR=value command``)."""
    rest = text[value_start:line_end]
    comment = _COMMENT.search(rest)
    if comment is not None:
        rest = rest[: comment.start()]
    rest = rest.rstrip(" \t\r,;")
    end = value_start + len(rest)
    if shell:
        match = _SHELL_VALUE.match(text, value_start, end)
        end = value_start if match is None else match.end()
    # Judged on the whole rest: ``KEY=<your key>`` is a placeholder although it has a blank.
    if not rest or rest[0] in "{[" or is_not_a_secret(rest):
        return None, end
    call = _CALL_LIKE.match(rest)
    if call is not None:  # password = getpass.getpass("Password: "), String::from("…")
        literal = _CALL_LITERAL.match(text, value_start + call.end() - 1)
        if literal is None:
            return None, end
        return (literal.start(2), literal.end(2), "quoted"), literal.end(2)
    return (value_start, end, "line"), end


def _bare(text: str, value_start: int, end: int = -1) -> tuple[_Value | None, int]:
    """A value up to the next blank, quote or bracket (``end``: where it ends, when known)."""
    if end < 0:
        match = _BARE.match(text, value_start)
        if match is None:
            return None, 0
        end = match.end()
    if not text.startswith("(", end):
        return (value_start, end, "bare"), end
    literal = _CALL_LITERAL.match(text, end)  # let secret = String::from("…")
    if literal is None:
        return None, end  # a call: token = get_token()
    return (literal.start(2), literal.end(2), "quoted"), literal.end(2)


def _name_value(scan: _Scan, name_end: int, strength: Strength) -> tuple[Hit | None, int]:
    """The value of ``value:`` after ``name: <secret name>`` (within the same few lines)."""
    text = scan.text
    key = _VALUE_KEY.search(text, name_end, min(len(text), name_end + 160))
    if key is None:
        return None, 0
    start = key.end()
    # The line's end, looked for no further than a value can reach: a search to the end of a
    # long line for every such name would be quadratic ("name: password value: x " * 40_000).
    line_end = text.find("\n", start, start + _VALUE_REACH)
    line_end = min(len(text), start + _VALUE_REACH) if line_end < 0 else line_end
    if start < len(text) and text[start] in "\"'":
        value, resume = _quoted(scan, start, line_end, own_line=False)
    else:
        match = _BARE.match(text, start, line_end)
        value, resume = (
            (None, start) if match is None else ((start, match.end(), "line"), match.end())
        )
    if value is None or not _is_secret(text[value[0] : value[1]], strength, value[2]):
        return None, resume
    return (value[0], value[1], "secret_assignment"), resume


_MINIMUM: dict[tuple[str, str], int] = {
    ("password", "line"): 3,
    ("password", "quoted"): 4,
    ("password", "bare"): 6,
    ("strong", "line"): 4,
    ("strong", "quoted"): 6,
    ("strong", "bare"): 8,
}


# The shortest bare inline value that can be a secret, by strength (random ones: 16).
_SHORTEST = {"password": 6, "strong": 8, "weak": 16}
# How far after a name the key of a short bare value reaches (an operator with its blanks and a
# value shorter than _SHORTEST; a password's short quoted value), and how many such values are
# remembered per text.
_SHORT_READ = 48
_SHORT_MEMO = 4096


def _is_secret(value: str, strength: Strength, place: Place, name: str = "") -> bool:
    # Memoised for short values: adversarial text repeats the same assignment thousands of times.
    return (
        _judge(value, strength, place, name)
        if len(value) <= 128
        else _judge.__wrapped__(value, strength, place, name)
    )


@functools.lru_cache(maxsize=4096)
def _judge(value: str, strength: Strength, place: Place, name: str) -> bool:
    """Whether ``value`` assigned to a name of ``strength`` at ``place`` is a secret; a key's or
    token's ``name`` (when given) also rules out a generated token mangled (values.is_mangled)."""
    value = value.strip()
    if not value or is_not_a_secret(value) or (place == "line" and _is_line_reference(value)):
        return False
    if name and names_a_token(name) and is_mangled(value):
        return False
    if strength == "weak":
        return looks_random(value)
    return len(value) >= _MINIMUM[strength, place] and not _is_text(value, strength, place)


# A bare secret word as a name, after a service's name and a blank: ``aeroworkflow KEY=…``.
_BARE_NAMES = frozenset(("key", "token", "secret", "apikey", "api_key"))
_WORD_REACH = 33  # a service's name and the blank after it


def _service_key(text: str, name_start: int, name: str, value: str) -> bool:
    """A secret name that also names a service (``cloudinary_apiSecret``, ``cashboard_key``), or
    a bare one right after a service's name (``aeroworkflow KEY=…``), holds a value of that
    service's exact key shape even when the rules above would take it for an identifier, find
    it too short or mangled (``ndiawudh1_wdajwoidjajawdeps``, ``F1A-NEI-HY4-PZK``,
    ``VmFY…:c*X``): a digit and a letter in it, not a placeholder."""
    if not _key_like(value):  # (first: memoised on the value alone)
        return False
    lowered = name.lower()
    if lowered not in _BARE_NAMES:
        return _fits_service(lowered, value)
    return _after_service(text[max(0, name_start - _WORD_REACH) : name_start], value)


@functools.lru_cache(maxsize=1024)
def _after_service(before: str, value: str) -> bool:
    """Whether ``before`` ends with a service's name and a blank, and ``value`` has its shape."""
    if len(before) < 2 or before[-1] not in " \t" or before[-2].isspace():
        return False
    word = before.rsplit(maxsplit=1)[-1]
    if len(word) >= _WORD_REACH - 1:
        return False  # (cut off: part of a longer run)
    return _fits_service(word.lower(), value)


@functools.lru_cache(maxsize=1024)
def _key_like(value: str) -> bool:
    return (
        any(char.isdigit() for char in value)
        and any(char.isalpha() for char in value)
        and not is_not_a_secret(value)
        and not is_filler(value)
    )


@functools.lru_cache(maxsize=1024)
def _fits_service(name: str, value: str) -> bool:
    service = find_service(name, 0, len(name))
    return service is not None and service_key_exact(service, value)


def _is_line_reference(value: str) -> bool:
    """``${TOKEN} # …``, ``$(cat …) …``; ``var.db_password``, ``self.token``."""
    first = value.split(maxsplit=1)[0]
    if first != value and is_not_a_secret(first) and not _PASSPHRASE.fullmatch(value):
        return True
    return _DOTTED.fullmatch(value) is not None and is_name_like(value)


# A passphrase: four or more lowercase words and nothing else (``correct horse battery
# staple``). A label or a sentence starts with a capital or has punctuation in it.
_PASSPHRASE = re.compile(r"[a-z]{2,24}(?: [a-z]{1,24}){3,11}")


def _is_text(value: str, strength: Strength, place: Place) -> bool:
    """An identifier, a label or code rather than a secret (a password may be a plain word;
    a password's quoted value, or any secret name's value on a line of its own, may be a
    passphrase)."""
    if place == "bare":
        return is_code(value) or is_name_like(value)
    if (place == "line" or strength == "password") and _PASSPHRASE.fullmatch(value):
        return False
    if strength == "password":
        return place == "quoted" and is_prose(value)
    # A value of its own (quoted, or a line's): a bracket inside it is a character of the
    # literal; a call or subscript (getToken(), config["x"]) or an operator is still code.
    return is_name_like(value) or is_prose(value) or _code_value(value)


# (``==`` ending the value, or between token characters, is base64 padding, not a comparison:
# ``…oqeA==``, ``…-e==n1k…``)
_OPERATORS = re.compile(r"->|::|=>|\|\||&&|==(?!\Z)(?<![A-Za-z0-9_-]==)|==(?![A-Za-z0-9_-])(?!\Z)")


def _code_value(value: str) -> bool:
    return _CALL_LIKE.match(value) is not None or _OPERATORS.search(value) is not None
