"""Secrets without a shape of their own, told by the words around them: "the Datadog API key is
1f2e…", "AWS secret access key: wJal…", ``Client("AC…", "9b1c…")``, "my password is Tr0ub4dor&3".

- A random-looking token (:func:`~.values.looks_random`: 16+ characters, a digit and a letter,
  3+ bits of entropy per character, not an identifier or path) within 96 characters after a
  secret-named word (``token``, ``secret``, ``password``, "API key", …), a vendor whose keys
  have no shape of their own (Datadog, Twilio, Mailgun, Heroku, SendGrid, Algolia, Cloudflare),
  ``login`` or a bare "key" in prose; with at most six words between them, none of them a word
  that says the token is something else (commit, sha, hash, id, request, fingerprint, …), no
  sentence end and no closing parenthesis. A 40- or 64-hex token looks like a git or SHA-256
  hash and needs a tighter link: at most four words, all of them connectors ("the new one is").
- After only the name of a service whose keys have no prefix (service_names.py: ``instamojo
  'ZrGO…'``), a token with that service's shape, a word of its own; one of another shape is
  left to a secret word after the name. A word before another quoted value labels that value
  (``netsuite id - '…' consumer - '<key>'``): the gap to the key starts after it.
- The 40-character AWS secret key after an access key id, and the 32-hex Twilio auth token after
  an account SID (``AC…``), within 120 characters; the session token (a base64 run of 100+)
  within 400 characters after a temporary key id (``ASIA…``).
- After "password"/"passphrase" in prose: the next word when it mixes letters with digits or
  symbols ("the password is hunter2"), not a plain word ("the password is required").

Each keyword's window starts where the previous one's scan ended, so every character is scanned
a bounded number of times (a service's name whose token does not fit leaves the token to the
next keyword: windows are 96 characters, so that stays bounded). A window that finds nothing,
or a password in prose, is remembered per text by what its judgement reads (see _READ_BEFORE):
adversarial text repeats one window tens of thousands of times.
"""

from __future__ import annotations

import functools
import operator
import re
import string
from collections.abc import Iterator
from typing import NamedTuple

from pi_hindsight.redaction.finder import Names
from pi_hindsight.redaction.names import NOT_SECRET_KEYS, VENDOR_WORDS, NameHit
from pi_hindsight.redaction.service_names import SERVICE_NAMES, find_service, service_key_fits
from pi_hindsight.redaction.source import Hit, Source
from pi_hindsight.redaction.values import is_name_like, is_not_a_secret, looks_random, word_set

__all__ = ["find_by_context"]

_WINDOW = 96
# A token: starts after a character that is not part of a path, URL or assignment.
_CANDIDATE = re.compile(r"[A-Za-z0-9+/_-](?<![A-Za-z0-9+/_.@:\\=-].)[A-Za-z0-9+/_-]{15}")
# Token characters as 1, all others 0 (latin-1 with "replace" keeps one byte per character).
_TOKEN_MASK = bytes(
    1 if chr(byte) in string.ascii_letters + string.digits + "+/_-" else 0 for byte in range(256)
)
_SIXTEEN = b"\x01" * 16
_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,1024}+(?:={1,2}(?![A-Za-z0-9_]))?")
_WORD = re.compile(r"[a-z0-9]+")
# Characters that join a run of token characters into a longer non-token string.
_GLUE = frozenset("?^%$#*")
_CLOSE = frozenset(")]}")
_SENTENCE_END = re.compile(r"[.!?;][ \t\r\n]|\n[ \t]*\n")
_BLOCKERS = word_set(
    """commit commits sha sha1 sha256 sha512 md5 hash hashes hashed digest checksum fingerprint
    id ids uuid guid request trace span build run job revision rev version tag ref public pubkey
    nonce etag integrity cache counter length count number limit expires expiry expired name
    type format prefix header endpoint url file path hint ticket order invoice transaction
    fixed fixes merged reverted thumbprint snapshot deployment"""
)
# Words before the secret word that say it is not one: "sha256 of the token", "cache key".
_BLOCKERS_BEFORE = (
    word_set("sha sha1 sha256 sha512 md5 hash hashed digest checksum fingerprint thumbprint")
    | NOT_SECRET_KEYS
)
# A 40- or 64-hex token looks like a git or SHA-256 hash: only these may stand between.
_CONNECTORS = word_set(
    """is was are the my our your new here it its s a an one this that now be for of staging
    prod production dev test live"""
)
_VENDORS = (
    ("datadog", "datadog_key"),
    ("dd_api", "datadog_key"),
    ("dd-api", "datadog_key"),
    ("dd_app", "datadog_key"),
    ("dd-app", "datadog_key"),
    ("twilio", "twilio_auth_token"),
    ("heroku", "heroku_api_key"),
    ("mailgun", "mailgun_key"),
    ("aws", "aws_secret_access_key"),
    ("amazon", "aws_secret_access_key"),
)
_HEX = frozenset("0123456789abcdef")
_QUOTED = re.compile(r"([\"'])[^\"'\r\n]{1,64}\1")
# The vendor words before the service names (names.py): their keys are looked for as before.
_CLASSIC_VENDOR = re.compile("|".join(sorted(set(VENDOR_WORDS) - set(SERVICE_NAMES))))
_KEY_EDGE = frozenset(" \t\r\n\"'`,;:=()[]{}<>|")
_HEX32 = re.compile(r"[0-9a-f]{32}(?![A-Za-z0-9_])")
_AWS_SECRET = re.compile(r"[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=_])")
_B64_START = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{100}")
_B64_LONG = re.compile(r"[A-Za-z0-9+/]{100,8192}+={0,2}(?![A-Za-z0-9+/=])")
_PAIRED = (("aws_access_key_id", _AWS_SECRET, "aws_secret_access_key"),)
# The word after "password is" / "password:" / "password to" in prose.
_PROSE_PASSWORD = re.compile(
    r"(?:(?:[ \t]{1,8}[A-Za-z]{1,20}){0,5}?(?:[ \t]{0,8}[:=]|[ \t]{1,8}(?:is|was)(?=[ \t])))?"
    r"(?:[ \t]{0,8}[:=]|[ \t]{1,8}(?:is|was|are|to|be|reads|of|now|set|reset|changed|updated|"
    r"still|just)(?=[ \t])){0,3}[ \t]{1,8}([`\"']?)([^\s`\"']{6,64}+)\1"
)
# How far _PROSE_PASSWORD can reach: 5 words of 8 + 20, 8 + 3, 3 connectors of 8 + 7, 8 + 66.
_PROSE_REACH = 5 * 28 + 11 + 3 * 15 + 74
_NOT_PROSE = re.compile(r"[^A-Za-z \t\r\n`\"']")
_TECH_WORDS = word_set("base64 base32 utf8 sha1 sha256 sha512 md5 argon2 argon2id pbkdf2")


def find_by_context(source: Source) -> Iterator[Hit]:
    yield from _paired(source)
    text, lowered = source.text, source.lowered
    size = len(text)
    # The names a window starts after: not weak, not assigned a value (assignments.py judges it).
    openers = Names(source, "openers")
    everyone: Names | None = None  # all names, for the nearest one before a token
    scanned = 0  # everything before this has been scanned for tokens
    after = 0  # the names ending before this have been seen
    # What a window came to when it found nothing, by what it read (see _READ_BEFORE): the
    # same window recurs throughout adversarial text ("algolia-password " repeated), and is
    # then judged once. The new ``scanned`` from ``low``, or _UNMOVED; or the bounds of a
    # password in prose, from ``low``.
    outcomes: dict[tuple[str, int, int, int, int, str], int | tuple[int, int]] = {}
    # Each name asked for ends after the last one seen and after what was scanned: the names
    # inside a scanned window are never looked at.
    # (conditionals, not max(): this loop runs once per name in adversarial text)
    while (name := openers.first(after if after > scanned else scanned, by_end=True)) is not None:
        name_start, name_end, strength, _ = name
        after = name_end + 1
        if strength == "vendor":
            window_end = _window_end(openers, name, size)
        else:
            window_end = name_end + _WINDOW if name_end + _WINDOW < size else size
        start = scanned if scanned > name_end else name_end
        low = name_start - _READ_BEFORE if name_start > _READ_BEFORE else 0
        high = name_end + _READ_AFTER
        key = (
            strength,
            name_start - low,
            name_end - low,
            start - low,
            window_end - low,
            text[low:high],
        )
        known = outcomes.get(key)
        if isinstance(known, int):
            scanned = scanned if known == _UNMOVED else low + known
            continue
        finding: Hit | None = None
        if known is not None:  # a password in prose, from low
            finding = (low + known[0], low + known[1], "password_in_prose")
        elif strength == "password":
            finding = _prose_password(text, name_end)
            if finding is not None and len(outcomes) < _MEMO_SIZE:
                outcomes[key] = (finding[0] - low, finding[1] - low)
        if finding is not None:
            scanned = max(scanned, finding[1])
            yield finding
            continue
        outcome = _look(source, name, start, window_end, high)
        if outcome.remembered and len(outcomes) < _MEMO_SIZE:
            moved = outcome.scanned != _UNMOVED
            outcomes[key] = outcome.scanned - low if moved else _UNMOVED
        scanned = scanned if outcome.scanned == _UNMOVED else outcome.scanned
        if outcome.literal is not None:
            yield outcome.literal
        if outcome.token is None:
            continue
        token_start, token_end = outcome.token
        everyone = everyone or Names(source)
        nearest, after = _nearest(
            everyone, (name_start, name_end, strength, False), after, token_start
        )
        if _linked(source, nearest, token_start, token_end):
            yield (token_start, token_end, _vendor_kind(lowered, nearest[0], token_start))


def _nearest(everyone: Names, name: NameHit, after: int, token_start: int) -> tuple[NameHit, int]:
    """The nearest secret name before the token (any, weak ones too: the one the gap is
    measured from), ``name`` or one after it, and where the names not yet seen start (the
    names ending before ``after`` have been)."""
    while (following := everyone.first(after, by_end=True)) is not None:
        if following[1] > token_start:
            break
        name = (following[0], following[1], following[2], False)
        after = following[1] + 1
    return name, after


class _Outcome(NamedTuple):
    """What the window after a name came to (_look)."""

    scanned: int  # everything before this has been scanned (_UNMOVED: as before)
    literal: Hit | None = None  # a quoted literal after the name: found
    token: tuple[int, int] | None = None  # a random token: found if it belongs to the name
    remembered: bool = False  # found nothing, judged by what it read alone: may be remembered


def _look(source: Source, name: NameHit, start: int, window_end: int, high: int) -> _Outcome:
    """What the window [start, window_end) after ``name`` holds. ``high``: where what the
    window's judgement may read ends (a token running past it is not remembered)."""
    name_start, name_end, strength, _ = name
    text = source.text
    if start >= window_end:
        return _Outcome(_UNMOVED, remembered=True)
    if strength != "vendor" and (literal := _literal(source, name_start, name_end)):
        return _Outcome(literal[1], literal=literal)
    candidate = _candidate(source, start, window_end)
    if candidate is None:
        return _Outcome(window_end, remembered=True)
    token_start = candidate.start()
    token = _RUN.match(text, token_start)
    token_end = token.end() if token is not None else candidate.end()
    # (what decides below reads up to two characters after the token)
    remembered = token_end + 3 <= high or high >= len(text)
    if strength == "vendor" and not _service_key(
        source, name_start, name_end, token_start, token_end
    ):
        # not this service's key; a secret word after the name may still take it
        return _Outcome(_UNMOVED, remembered=remembered)
    value = text[token_start:token_end]
    if (
        _fragment(text, token_start, token_end)
        or not looks_random(value, 16)  # (memoised, and most candidates fail it)
        or is_not_a_secret(value)
    ):
        return _Outcome(token_end, remembered=remembered)
    return _Outcome(token_end, token=(token_start, token_end))


# What a window's judgement reads around its name: from _READ_BEFORE characters before it
# (_gap_ok's words before the name, _service_key's service before a "key") to _READ_AFTER after
# it (_prose_password's reach; _literal's, 268; the window and a candidate's first 16); a token
# running past that is judged afresh.
_READ_BEFORE = 32
_READ_AFTER = _PROSE_REACH + 2
_UNMOVED = -1
_MEMO_SIZE = 4096  # windows remembered per text (ordinary text rarely repeats one)


def _window_end(openers: Names, name: NameHit, size: int) -> int:
    """Where the window after ``name`` ends: _WINDOW characters on; a service's name leaves
    what follows a secret word after it to that word (``onepagecrm token - '…'``)."""
    name_end = name[1]
    window_end = min(size, name_end + _WINDOW)
    if name[2] != "vendor":
        return window_end
    following = openers.first(name_end + 1, by_end=True)
    if following is not None and following[0] < window_end and following[2] != "vendor":
        return max(name_end, following[0])  # (not at another service's name: text made of
    return window_end  # names would be looked at name by name, not window by window)


def _linked(source: Source, name: NameHit, token_start: int, token_end: int) -> bool:
    """Whether the token at [token_start, token_end) belongs to the nearest name before it."""
    name_start, name_end, strength, _ = name
    lowered = source.lowered
    gap_start = name_end
    if strength == "vendor":
        # After a service's name, a word before another quoted value labels that value
        # (``netsuite id - '…' consumer - '<key>'``): the gap starts after the last one.
        for quoted in _QUOTED.finditer(lowered, name_end, token_start):
            gap_start = quoted.end()
    if not _gap_ok(lowered, name_start, gap_start, source.text[token_start:token_end], token_start):
        return False
    if (
        strength == "vendor"
        and lowered.startswith("key", name_start)
        and not _service_key(source, name_start, name_end, token_start, token_end)
    ):
        return False  # "the <service> key is …" with a token not of that service's shape
    # only "<tool> login <token>": "login succeeded for user <uuid>" stays
    return not (lowered.startswith("login", name_start) and lowered[name_end:token_start].strip())


# A quoted literal right after a secret word, blanks or a dash between (``token '…'``, ``token
# - '…'``; after ``=`` or ``:`` it is assigned: assignments.py judges it): the literal is the
# value, whole, even when a character no token run holds (``=``, ``.``, ``@``) splits it into
# runs of fewer than 16; not when one of _GLUE does (mangled).
_LITERAL_AFTER = re.compile(r"(?:[ \t]{1,4}-)?[ \t]{1,4}([\"'`])([A-Za-z0-9+/=_.~:@-]{16,256}+)\1")


def _literal(source: Source, name_start: int, name_end: int) -> Hit | None:
    match = _LITERAL_AFTER.match(source.text, name_end)
    if match is None:
        return None
    value = match.group(2)
    if not looks_random(value, 16) or is_not_a_secret(value):
        return None
    if not _gap_ok(source.lowered, name_start, name_end, value, match.start(2)):
        return None
    return (match.start(2), match.end(2), _vendor_kind(source.lowered, name_start, match.start(2)))


def _candidate(source: Source, start: int, window_end: int) -> re.Match[str] | None:
    """The first candidate token starting in [start, window_end). A candidate has 16 token
    characters in a row: where the window's mask of token characters has none (prose), no
    pattern runs (it would try every word start)."""
    text = source.text
    end = min(len(text), window_end + 16)
    mask = text[start:end].encode("latin-1", "replace").translate(_TOKEN_MASK)
    at = mask.find(_SIXTEEN)
    if at < 0 or start + at >= window_end:
        return None
    candidate = _CANDIDATE.search(text, start + at, end)
    return None if candidate is None or candidate.start() >= window_end else candidate


def _fragment(text: str, start: int, end: int) -> bool:
    """Whether the run ``text[start:end]`` is a piece of a longer string joined by a character
    no token alphabet has (``'lk3p?r2itd…'``, ``'…Sw%c^lmmX'``): a generated token is a word
    of its own, so such a run is a mangled or masked value, not a token. A question mark ending
    a sentence after a token (``… abc123?`` then a blank) is no glue."""
    if start and text[start - 1] in _GLUE:
        return True
    if end >= len(text):
        return False
    follower = text[end]
    after = text[end + 1 : end + 2]
    if follower in _GLUE or follower == "@":
        return bool(after) and not after.isspace() and not (follower == "?" and after in _CLOSE)
    return False


def _gap_ok(lowered: str, name_start: int, keyword_end: int, token: str, token_start: int) -> bool:
    gap = lowered[keyword_end:token_start]
    if _SENTENCE_END.search(gap) or ")" in gap:
        return False
    words = _WORD.findall(gap)
    if len(words) > 6 or any(word in _BLOCKERS for word in words):
        return False
    looks_like_a_hash = len(token) in (40, 64) and all(char in _HEX for char in token)
    if looks_like_a_hash and (len(words) > 4 or any(word not in _CONNECTORS for word in words)):
        return False
    before = _WORD.findall(lowered[max(0, name_start - 32) : name_start])[-3:]
    return not any(word in _BLOCKERS_BEFORE for word in before)


def _service_key(source: Source, name_start: int, name_end: int, start: int, end: int) -> bool:
    """After only a service's name (service_names.py), a key has that service's shape and is a
    word of its own, between quotes, blanks or punctuation (``instamojo 'ZrGO…'``): a value of
    another length or alphabet, or glued to other characters, is not that service's key (a
    malformed one, or something else). The vendors whose keys context.py has always looked for
    after their names (Mailgun, Twilio, …) keep the looser rule."""
    lowered, text = source.lowered, source.text
    if _CLASSIC_VENDOR.search(lowered, name_start, name_end) is not None:
        return True  # (the cheaper test first: adversarial text repeats "cloudflare-value")
    service = find_service(lowered, name_start, name_end)
    if service is None and lowered.startswith("key", name_start):
        # "the API2Cart key is …": the key of the service named before it
        space = lowered.rfind(" ", max(0, name_start - 24), name_start - 1)
        service = find_service(lowered, space + 1, name_start - 1) if space >= 0 else None
    if service is None:
        return True  # not a service's name: "the key for …" in prose
    return (
        service_key_fits(service, text[start:end])
        and (start == 0 or text[start - 1] in _KEY_EDGE)
        and (end == len(text) or text[end] in _KEY_EDGE)
    )


def _vendor_kind(lowered: str, name_start: int, token_start: int) -> str:
    around = lowered[max(0, name_start - 48) : token_start]
    for word, kind in _VENDORS:
        if word in around:
            return kind
    return "secret_near_keyword"


def _prose_password(text: str, name_end: int) -> Hit | None:
    # Judged on the window the pattern can reach (memoised: adversarial text repeats the same
    # phrase after every "password", and a long window of prose recurs in ordinary text rarely).
    found = _prose_password_in(text[name_end : name_end + _PROSE_REACH])
    return (
        None if found is None else (name_end + found[0], name_end + found[1], "password_in_prose")
    )


@functools.lru_cache(maxsize=2048)
def _prose_password_in(window: str) -> tuple[int, int] | None:
    # The value has a character that is not a letter, a blank or a quote (checked below): where
    # none follows (prose: "the password policy requires …"), the pattern cannot match.
    if _NOT_PROSE.search(window) is None:
        return None
    match = _PROSE_PASSWORD.match(window)
    if match is None:
        return None
    start, end = match.span(2)
    while end > start and window[end - 1] in ".,;:)":
        end -= 1
    value = window[start:end]
    if not value or value[0] in "([{<":
        return None  # a parenthesis: "password = (sensitive value)" in a Terraform plan
    has_letter = any(char.isalpha() for char in value)
    if len(value) < 6 or not has_letter or value.isalpha() or value.lower() in _TECH_WORDS:
        return None
    if is_not_a_secret(value) or (is_name_like(value) and not value.isalnum()):
        return None
    return (start, end)


# HashiCorp Vault AppRole: the ``secret_id`` (a UUID) is the credential, its ``role_id`` is not.
# An "id" after "secret" elsewhere names a secret (Azure's "secret ID"), so only a UUID under
# that name with a ``role_id`` within _APPROLE_REACH characters counts.
_SECRET_ID = re.compile(
    r"secret_id[0-9]?[\"']?[ \t]{0,16}(?::=|=|:)[ \t]{0,16}[\"']?"
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?![0-9a-z_-])"
)
_APPROLE_REACH = 400


def _approle(source: Source) -> Iterator[Hit]:
    lowered = source.lowered
    if "secret_id" not in lowered or "role_id" not in lowered:
        return
    for match in _SECRET_ID.finditer(lowered):
        low, high = max(0, match.start() - _APPROLE_REACH), match.end() + _APPROLE_REACH
        if lowered.find("role_id", low, high) >= 0:
            yield (*match.span(1), "secret_assignment")


def _paired(source: Source) -> Iterator[Hit]:
    """The secret half of a key pair written next to its public half."""
    yield from _approle(source)
    kinds = set(map(operator.itemgetter(2), source.found))  # (C-level: findings can be dense)
    if "aws_access_key_id" not in kinds and "twilio_key" not in kinds:
        return
    text = source.text
    for kind, shape, secret_kind in _PAIRED:
        for _, found_end, found_kind in source.found:
            if found_kind != kind:
                continue
            window = _CANDIDATE.search(text, found_end, min(len(text), found_end + 120))
            if window is None:
                continue
            secret = shape.match(text, window.start())
            if secret is not None and looks_random(secret.group(), 16):
                yield (*secret.span(), secret_kind)
    for found_start, found_end, found_kind in source.found:
        if found_kind == "aws_access_key_id" and text.startswith("ASIA", found_start):
            # A temporary key id comes with a session token: a long base64 run after it.
            window = _B64_START.search(text, found_end, min(len(text), found_end + 400))
            session = None if window is None else _B64_LONG.match(text, window.start())
            if session is not None and looks_random(session.group()[:256], 100):
                yield (*session.span(), "aws_session_token")
        if found_kind == "twilio_key" and text.startswith("AC", found_start):
            window = _HEX32.search(text, found_end, min(len(text), found_end + 120))
            if window is not None and (
                window.start() == 0 or text[window.start() - 1] in "\"' ,:=(\t\n"
            ):
                yield (*window.span(), "twilio_auth_token")
