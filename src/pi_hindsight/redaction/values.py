"""What a candidate value looks like: a reference, a placeholder, an identifier, prose, or random
enough to be a secret.

Every detector that captures a free-form value (an assignment, a URL password, a ``curl -u``
pair, a token near the word "secret") asks these questions before it redacts, so ``token_type =
"bearer"``, ``GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}`` and ``"sessionToken": "sessionStorage"``
stay. All functions are linear in the length of the value and never raise.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from functools import lru_cache

from pi_hindsight.redaction.placeholders import is_flat

__all__ = [
    "ascii_lower",
    "entropy",
    "is_code",
    "is_mangled",
    "is_name_like",
    "is_not_a_secret",
    "is_prose",
    "is_stand_in_pair",
    "looks_random",
    "word_set",
]


def word_set(words: str) -> frozenset[str]:
    """The blank-separated words of ``words`` (long word lists read better as one string)."""
    return frozenset(words.split())


# Values are judged on their first characters only: what makes a value a reference, a name or
# random shows at its start, and a value of megabytes must cost no more than one of a kilobyte.
_ANALYSED = 512


def _memoised(judge: Callable[[str], bool]) -> Callable[[str], bool]:
    """``judge`` on the value's first characters, memoised for short values (the same values
    recur in a text: ``password=password=…``)."""
    cached = lru_cache(maxsize=4096)(judge)

    def wrapper(value: str) -> bool:
        value = value[:_ANALYSED]
        return cached(value) if len(value) <= 128 else judge(value)

    wrapper.__doc__ = judge.__doc__
    wrapper.__name__ = judge.__name__
    return wrapper


def ascii_lower(text: str) -> str:
    """``text`` with A-Z lowered and nothing else changed, so every index still lines up.

    ``str.lower`` can change the length (``"İ".lower()`` is two code points), which would shift
    every span found in the lowered text. Lowering the UTF-8 bytes touches only ASCII letters;
    ``surrogatepass`` carries lone surrogates through unchanged.
    """
    if text.isascii():
        return text.lower()
    return text.encode("utf-8", "surrogatepass").lower().decode("utf-8", "surrogatepass")


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    if not value:
        return 0.0
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in Counter(value).values())


# References to a secret kept elsewhere, templates and placeholders: never the secret itself.
_REFERENCE = re.compile(
    r"""(?:
        \$\{.*                                  # ${VAR}, ${VAR:-x}, ${{ secrets.X }}
      | \$\(.*                                  # $(cat /run/secrets/x)
      | \$[A-Za-z_][A-Za-z0-9_]*(?:(?:-|\.|\[|::).*)?    # $VAR, $request->token()
      | %[A-Za-z_][A-Za-z0-9_]*%                # %VAR%
      | %\(?[A-Za-z_]*\)?[sdr]                  # %s, %(name)s
      | \{\{.*\}\}                              # {{ template }}
      | \{[A-Za-z0-9_.\[\]'"]*\}                # {name}, {} (format strings)
      | <[^<>]*>                                # <your-token>
      | \[[^\[\]]*\]                            # [token]
      | ![A-Za-z]+(?:[ \t].*)?                  # YAML tags: !vault |, !Ref Name, !Sub '…'
      | \*[A-Za-z_][A-Za-z0-9_-]*               # YAML alias
      | [|>][-+]?[0-9]?                         # YAML block scalar indicator
      | (?:arn|vault|op|sm|ssm|gcpsm|azkv|keyvault|secretref|awssm|doppler|infisical)
        :.*                                     # secret-manager references
      | (?:process\.env|import\.meta\.env|os\.environ|os\.getenv|getenv|env)\b.*
    )""",
    re.VERBOSE | re.DOTALL,
)
_PLACEHOLDER_WORDS = word_set(
    """none null nil true false yes no on off undefined required optional hidden masked redacted
    changeme change_me changeit placeholder example sample dummy fake secret secrets password
    passwd pass token apikey api_key key value todo tbd fixme n/a na string str int bool bytes any
    number boolean object text unknown void uuid default auto env inherit include omit
    same-origin anonymous empty unset blank """
)
_PLACEHOLDER_PARTS = re.compile(
    r"xxxx|\*\*\*|\.\.\.|…|•••|example|placeholder|changeme|dummy|sample|(?:^|[-_ ])your[-_ ]"
    r"|[-_ ]here$|^replace[-_ ]|^insert[-_ ]|^enter[-_ ]|^put[-_ ]",
    re.IGNORECASE,
)
_MASK = re.compile(r"[*xX.•·_#=-]{3,}")
_TYPE = re.compile(
    r"(?:optional|list|dict|set|tuple|union|literal|array|record|map|promise)\s*[\[<(].*",
    re.IGNORECASE | re.DOTALL,
)
_NUMBER = re.compile(r"[-+]?[0-9]{1,11}(?:\.[0-9]+)?")
# A quote cut a line of code short: the value is a name and an operator (``telegram_token = ``,
# from ``x = "telegram_token = "…""``) or the start of a markup tag (``<xsd:element name=``).
# (A blank before the operator: base64 padding follows its value at once.)
_CUT_CODE = re.compile(r"[A-Za-z_][\w.-]{0,80}[ \t]+(?::=|=|:)[ \t]*|<[A-Za-z][\w:.-]{0,40}[ \t].*")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,20}://([^/?#\s]*)")


@_memoised
def is_not_a_secret(value: str) -> bool:
    """A reference, template, placeholder, mask, type, boolean, short number, or a URL whose
    authority carries no credentials."""
    lowered = value.lower()
    if lowered in _PLACEHOLDER_WORDS or "[redacted:" in lowered:
        return True
    if lowered.rstrip().endswith(":") and lowered.rstrip(" :").replace(" ", "").isalpha():
        return True  # a prompt or label: "Password: "
    if _REFERENCE.fullmatch(value) or _MASK.fullmatch(value) or _NUMBER.fullmatch(value):
        return True
    if _CUT_CODE.fullmatch(value):
        return True
    if _PLACEHOLDER_PARTS.search(value) or _TYPE.fullmatch(value):
        return True
    return _is_stand_in(value, lowered) or _harmless_url(value)


def _harmless_url(value: str) -> bool:
    """A URL whose authority carries no credentials, or only stand-in ones, and whose path holds
    no random segment (a webhook's URL is its secret: ``…/hooks/catch/<token>``)."""
    url = _URL.match(value)
    if url is None:
        return False
    userinfo, at, _ = url.group(1).rpartition("@")
    if at and not is_stand_in_pair(*userinfo.partition(":")[::2]):
        return False
    path = value[url.end() :].split("?", 1)[0].split("#", 1)[0]
    return not any(looks_random(segment, 16) for segment in path.split("/"))


def is_stand_in_pair(user: str, password: str) -> bool:
    """A user and password that protect nothing: the same word twice (``postgres:postgres``,
    ``test:test``: a default or a demo), one character repeated (``xxx:yyy``), or a template
    (``<user:password>``)."""
    if password == user or len(set(password)) == 1:
        return True
    return user.startswith(("<", "{")) and password.endswith((">", "}"))


def _is_stand_in(value: str, lowered: str) -> bool:
    """Symbols only (punctuation, an ASCII-art rule), a flat value ("aaaaaaaaaaaa", "AIzaaaa…"),
    or a non-random value saying "fake" ("somefakekey"; test suites also plant "fake" inside
    random tokens, which stay secrets)."""
    if not any(char.isalnum() for char in value):
        return True
    if len(value) >= 12 and is_flat(value):
        return True
    return "fake" in lowered and not _looks_random(value)


# One piece of an identifier, resource name, header name, file name or version: letters with at
# most two trailing digits (``v2``), a word with a common bit size (``sha256``), or a short number.
_SEPARATORS = re.compile(r"[-_./:\\@+]+")
_WORD_PIECE = re.compile(r"[A-Za-z]{1,40}(?:[0-9]{1,2}|128|160|224|256|384|512)?|[0-9]{1,4}")
# Humps of camelCase / PascalCase / ACRONYMCase words.
_HUMP = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


_CONSONANT_RUN = re.compile(r"[bcdfghjklmnpqrstvwxz]{5}")
_VOWEL = re.compile(r"[aeiouyAEIOUY]")


def _is_word_like(piece: str) -> bool:
    letters = piece.rstrip("0123456789")
    if not letters:
        return True
    humps = _HUMP.findall(letters)
    if sum(len(hump) for hump in humps) != len(letters):
        return False
    singles = sum(1 for hump in humps if len(hump) == 1)
    if singles > 1 or not all(_pronounceable(hump) for hump in humps):
        return False
    # Random letters read as humps too (``wjXKCFzOWEPRqhTmmb``: wj, XKC, Fz, …), most of them
    # without a vowel; an identifier's humps are words, and the odd acronym (``XMLHttpDb``).
    vowelless = sum(1 for hump in humps if _VOWEL.search(hump) is None)
    return vowelless < 4 or vowelless * 2 <= len(humps)


def _pronounceable(hump: str) -> bool:
    """A long run of letters is a word (``authentication``, ``dockerconfigjson``) only when it
    has vowels and no five consonants in a row; random letters (``xmplwqertyuiopas``) do not."""
    if len(hump) < 10:
        return True
    if len(hump) > 24:
        return False
    lowered = hump.lower()
    vowels = sum(1 for char in lowered if char in "aeiouy")
    return vowels * 5 >= len(lowered) and _CONSONANT_RUN.search(lowered) is None


@_memoised
def is_name_like(value: str) -> bool:
    """An identifier, enum word, header, resource or file name, host, path, version or date:
    ``bearer``, ``X-API-Key``, ``prod-db-credentials``, ``sessionStorage``, ``self.token``,
    ``/accounts/password/reset``, ``creds.json``, ``HS256``, ``2024-01-01``, ``v1.2.3``."""
    pieces = [piece for piece in _SEPARATORS.split(value.lstrip("~")) if piece]
    if not pieces:
        return bool(value)
    return all(_WORD_PIECE.fullmatch(piece) and _is_word_like(piece) for piece in pieces)


@_memoised
def is_prose(value: str) -> bool:
    """Words separated by spaces (a label, a sentence, a type like ``str | None``)."""
    words = value.split()
    if len(words) < 2:
        return False
    alpha = sum(1 for word in words if word.strip(".,:;!?()'\"").isalpha())
    return alpha * 2 >= len(words)


_CODE = re.compile(r"[\[\]()]|->|::|=>|\|\||&&|==(?!\Z)")  # (a final == is base64 padding)


@_memoised
def is_code(value: str) -> bool:
    """A fragment of code rather than a literal: a call, a subscript, an operator."""
    return _CODE.search(value) is not None


# Characters no API key or token alphabet holds (base64, base64url, hex, base62 with ``_-.~:``
# separators; ``%`` is URL encoding, ``!`` and ``|`` appear in Salesforce and Facebook tokens,
# ``&`` in SAS query strings).
_NOT_TOKEN_CHARS = re.compile(r"[?^$#*]|\A@")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_.~:-]")


def is_mangled(value: str) -> bool:
    """A generated key or token with a character no token alphabet has in it (``u+C4lGv0?ct…``,
    ``WAgP6m4gYc1qe$HnjWAAF5…``): 16+ characters, nearly all (85%) of a token alphabet, and one
    of ``?^$#*`` (or a leading ``@``): mangled in a paste or by a test, not a working token. A
    value of many symbols (``m{{h}o)p${e]…``) or a short one (``Tr0ub4dor&3$``) was typed by
    hand and stays a secret."""
    value = value[:_ANALYSED]
    if len(value) < 16 or _NOT_TOKEN_CHARS.search(value) is None:
        return False
    return len(_TOKEN_CHARS.findall(value)) * 100 >= len(value) * 85


def looks_random(value: str, min_length: int = 16) -> bool:
    """Random enough to be a generated secret: long, not an identifier, a digit and a letter (or
    mixed case), and at least 3 bits of entropy per character."""
    if len(value) < min_length:
        return False
    return _looks_random(value)


@_memoised
def _looks_random(value: str) -> bool:
    if is_name_like(value) or is_prose(value):
        return False
    has_digit = any(char.isdigit() for char in value)
    has_lower = any("a" <= char <= "z" for char in value)
    has_upper = any("A" <= char <= "Z" for char in value)
    if not (has_digit and (has_lower or has_upper)) and not (has_lower and has_upper):
        return False
    return entropy(value) >= 3.0
