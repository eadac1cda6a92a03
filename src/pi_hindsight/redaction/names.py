"""Which key names hold secrets: ``DB_PASSWORD``, ``authToken``, ``client_secret``, ``api_key``,
``tls.key`` — and which only mention one: ``token_type``, ``secret_name``, ``api_key_header``,
``PASSWORD_RESET_URL``, ``max_tokens``.

A name is split into words (``dbPassword`` → db, password). Its *last* word decides first: a
name ending in a word that describes metadata (type, name, url, header, id, length, …) names
something about a secret, not the secret. Otherwise one secret word makes it a secret name, of
one of three strengths that the value rules in :mod:`.assignments` use:

- ``password``: a human-chosen password; a plain word can be one (``password: swordfish``).
- ``strong``: a generated secret (token, secret, API key); a plain word is an enum, not a secret.
- ``weak``: a name that often holds other things (``auth``, ``tls.key``, ``.dockerconfigjson``);
  only a value random enough to be generated counts.
"""

from __future__ import annotations

import itertools
from typing import Literal

from pi_hindsight.redaction.service_names import SERVICE_NAMES
from pi_hindsight.redaction.source import name_parts
from pi_hindsight.redaction.values import word_set

__all__ = [
    "KEY_QUALIFIERS",
    "NOT_SECRET_KEYS",
    "SECRET_WORDS",
    "VENDOR_WORDS",
    "NameHit",
    "Strength",
    "name_strength",
    "prose_key",
    "word_strength",
]

Strength = Literal["password", "strong", "weak"]
# (start, end, strength, by_previous_word): a secret name in the text; by_previous_word marks a
# bare "key" made secret by the word before it ("API key", "secret access key": prose). The
# strength "vendor" marks a name that only mentions a vendor whose keys have no shape of their
# own (``mailgun.client(…)``): context.py looks for a random token after it, assignments do not.
NameHit = tuple[int, int, Strength | Literal["vendor"], bool]
VENDOR_WORDS = (
    "mailgun",
    "twilio",
    "datadog",
    "heroku",
    "sendgrid",
    "algolia",
    "cloudflare",
    "login",
    *SERVICE_NAMES,
)

# Every secret name contains one of these (lowercase) words. The longer forms of "pass" are
# listed so that the word standing alone, the common case, needs no look around it.
SECRET_WORDS = (
    "password",
    "passwd",
    "passphrase",
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "credential",
    "creds",
    "auth",
    "dockercfg",
    "dockerconfigjson",
    *VENDOR_WORDS,
)

_PASSWORD_PARTS = frozenset({"pass", "password", "passwd", "passphrase", "pwd", "pw"})
_PASSWORD_SUFFIXES = ("password", "passwd", "passphrase", "pass", "pwd")
# English words ending in "pass" that are not passwords.
_NOT_PASSWORDS = frozenset(
    {"bypass", "compass", "encompass", "overpass", "underpass", "surpass", "trespass"}
)
_STRONG_PARTS = frozenset(
    {
        "secret",
        "token",
        "apikey",
        "credential",
        "credentials",
        "creds",
        "authtoken",
        "accesstoken",
        "secretkey",
        "privatekey",
        "accesskey",
        "clientsecret",
        "apitoken",
    }
)
_STRONG_SUFFIXES = ("token", "secret", "apikey", "secretkey", "privatekey", "accesskey")
# Words right before "key" that make it a secret key (``api_key``, ``accessKey``, "app key").
KEY_QUALIFIERS = word_set(
    """api access private secret session signing sign encryption encrypt master client app
    application auth license licence account service admin rest personal subscription storage
    shared webhook hmac jwt deploy write consumer merchant partner root sas ingest ingestion bot
    developer dev integration"""
)
_WEAK_PARTS = frozenset({"auth", "dockerconfigjson", "dockercfg"})
# Qualifiers long enough to be told apart at the end of a word ("monkey", "hotkey" stay).
_QUALIFIER_ENDINGS = tuple(word for word in KEY_QUALIFIERS if len(word) >= 5)
# Keys that are not secrets: primary_key, cache_key, ssh_key (a path or a public key), …
NOT_SECRET_KEYS = word_set(
    """primary foreign sort partition cache public pub ssh gpg pgp idempotency object s3 redis
    map dict hash unique composite natural surrogate row lookup search translation i18n message
    route react list item group index join range hot short shortcut keyboard"""
)
# A name ending in one of these describes a secret rather than holding one.
_METADATA = word_set(
    """type types name names id ids url uri urls uris endpoint endpoints path paths file files dir
    directory header headers length len size count limit limits max min expiry expires
    expiration expire exp ttl timeout lifetime age prefix suffix env var vars variable field
    fields param params label policy policies mode format kind reset hint regex pattern enabled
    enable disabled required store manager provider source ref refs arn version hash hashes
    rotation rotate rounds algorithm alg scheme scope scopes location placeholder prompt input
    error errors message msg text title description desc help link class style icon strength
    validator validation rule rules check callback handler method usage used stats budget cost
    request response status state issuer audience host port server cache index idx offset column
    col table schema model dto serializer form view page route at in on by date time ms seconds
    secs days hours minutes stdin fd key keys list map set dict mapping changed updated created
    generated filename filepath option options flag flags counter template tmpl config settings
    service services client clients helper helpers util utils lookup loader getter setter
    factory builder parser reference section block visible visibility hidden toggle button"""
)


_CACHE: dict[str, Strength | None] = {}
_CACHE_LIMIT = 4096


def name_strength(name: str) -> Strength | None:
    """How strongly ``name`` says its value is a secret, or None when it does not (memoised:
    the same names recur throughout a text)."""
    try:
        return _CACHE[name]
    except KeyError:
        pass
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    strength = _CACHE[name] = _strength(name)
    return strength


def _strength(name: str) -> Strength | None:
    parts = name_parts(name)
    # A numbered name is its word's: token1, api_key_2, sumoKey1.
    while parts and parts[-1].isdigit():
        parts.pop()
    if parts and parts[-1][-1:].isdigit() and parts[-1].rstrip("0123456789"):
        parts[-1] = parts[-1].rstrip("0123456789")
    if not parts:
        return None
    if parts[-1] == "key" and not _qualified_key(parts):
        # tls.key (a file in a Kubernetes secret), OPENAI_KEY, stripeKey: only a random value
        # counts; primary_key, cache_key, a bare "key": no secret at all.
        is_file = name.lower().endswith(".key")
        return "weak" if is_file or (len(parts) > 1 and parts[-2] not in NOT_SECRET_KEYS) else None
    if parts[-1] in _METADATA and parts[-1] != "key":
        return None
    # The last secret word decides: password_secret is the name of a secret holding a password.
    strength: Strength | None = None
    for index in range(len(parts) - 1, -1, -1):
        strength = _word_strength(parts, index)
        if strength is not None:
            break
    if strength is None and any(part in _WEAK_PARTS for part in parts):
        strength = "weak"
    return strength


# A secret word with one more letter is that word: a plural or a misspelling (``secrets``,
# ``secrete``, ``passwords``); "secretly", "secretary" have more.
_ONE_LETTER_MORE = frozenset({"secret", "password", "passwd", "passphrase"})


def _word_strength(parts: list[str], index: int) -> Strength | None:
    part = parts[index]
    if len(part) > 6 and part[-1].isalpha() and part[:-1] in _ONE_LETTER_MORE:
        part = part[:-1]
    if part in _PASSWORD_PARTS or (
        part.endswith(_PASSWORD_SUFFIXES) and part not in _NOT_PASSWORDS
    ):
        return "password"
    if part in _STRONG_PARTS or part.endswith(_STRONG_SUFFIXES):
        return "strong"
    if part == "key" and index and parts[index - 1] in KEY_QUALIFIERS:
        return "strong"
    if part == "skey" or (part.endswith("key") and part[:-3].endswith(_QUALIFIER_ENDINGS)):
        return "strong"  # Duo's skey; a qualifier run into "key": storagekey, storageaccountkey
    return None


def _qualified_key(parts: list[str]) -> bool:
    return any(
        first in KEY_QUALIFIERS and second == "key" for first, second in itertools.pairwise(parts)
    )


_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")


def word_strength(word: str) -> Strength | None:
    """What a secret word names when it stands alone (``token``, ``--token``, ``token.``)."""
    return _strength(word)


def prose_key(text: str, lowered: str, start: int) -> Strength | Literal["vendor"] | None:
    """A bare "key": "the API key is …" (strong), "the key for … is …" (as after a vendor's
    name: a random token after it counts), "the cache key" (nothing)."""
    if start < 2 or text[start - 1] not in " \t" or lowered[start - 2] not in _LETTERS:
        return None
    low = max(0, start - 24)
    space = lowered.rfind(" ", low, start - 1)
    previous = lowered[space + 1 if space >= 0 else low : start].strip()
    if previous in KEY_QUALIFIERS:
        return "strong"
    return None if previous in NOT_SECRET_KEYS else "vendor"


# The words that name a generated credential, whose value is drawn from a token alphabet (the
# name of a secret or a password may hold anything a person typed).
_TOKEN_WORDS = ("token", "key", "apikey")
_PERSON_WORDS = ("secret", "credential", "creds", *_PASSWORD_SUFFIXES, "pwd")


def names_a_token(name: str) -> bool:
    """Whether ``name`` (a secret name) names an API key or token rather than a secret or a
    password: ``npmtoken``, ``segmentApiKey``, ``X-Api-Key``; not ``client_secret``,
    ``SECRET_KEY`` (framework secret keys hold symbols), ``token_password``."""
    lowered = name.lower()
    return lowered.endswith(_TOKEN_WORDS) and not any(word in lowered for word in _PERSON_WORDS)
