"""Issue 18, second pass on keys next to a service's name: a key quoted right after a service
named by an everyday word (service_literals.py), a service's exact key shape under a name that
holds its name and a secret word, and the vendor formats added with them (Entra refresh tokens,
Mapbox ``sk.`` tokens, BestTime ``pri_`` keys, Webex bot tokens, GoCanvas keys, ``?tokenkey=``);
with near-misses for each.

Cases are our own, generated here from the formats' descriptions (facts from trufflehog's public
detector patterns); none comes from another scanner's suite."""

from __future__ import annotations

import random
import string

import pytest

from pi_hindsight.redaction import redact

_RNG = random.Random(2018)
_LOWER = string.ascii_lowercase + string.digits
_UPPER = string.ascii_uppercase + string.digits
_ALNUM = string.ascii_letters + string.digits
_URLSAFE = _ALNUM + "_-"
_HEX = "0123456789abcdef"


def _random(alphabet: str, size: int) -> str:
    """Random characters of ``alphabet``, with a digit and a letter where it has both."""
    body = [_RNG.choice(alphabet) for _ in range(size)]
    letters = [char for char in alphabet if char.isalpha()]
    digits = [char for char in alphabet if char.isdigit()]
    if letters and digits:
        body[0], body[-1] = _RNG.choice(letters), _RNG.choice(digits)
    return "".join(body)


def _uuid() -> str:
    return "-".join(_random(_HEX, size) for size in (8, 4, 4, 4, 12))


def _entra_refresh() -> str:
    return f"0.A{_random(_URLSAFE, 60)}.Ag{_random(_URLSAFE, 300)}"


# (text template, the secret in it)
_RAILWAY, _MITE, _KANBAN = _uuid(), _random(_LOWER, 16), _random(_UPPER, 12)
_MUX, _PUSHER, _BEE = _random(_ALNUM + "/+", 75), _random(_LOWER, 20), _random(_UPPER, 80)
_GITHUB_ID, _GITHUB_SECRET = _random(_ALNUM, 20), _random(_HEX, 40)
SERVICE_LITERALS = [
    (f"railway = '{_RAILWAY}'", _RAILWAY),
    (f'RAILWAY: "{_RAILWAY}"', _RAILWAY),
    (f"mite '{_MITE}' 'acme.mite.yo.lk'", _MITE),
    (f"kanban '{_KANBAN}' kanban 'acme.kanbantool.com'", _KANBAN),
    (f"kanbantool := '{_KANBAN}'", _KANBAN),
    (f"mux '{_uuid()}' mux ' {_MUX} '", _MUX),
    (f"pusher - '{_PUSHER}'", _PUSHER),
    (f"gn.top_news(scraping_bee = '{_BEE}')", _BEE),
    (f"Scraping-Bee: '{_BEE}'", _BEE),
    (f"github = '{_GITHUB_ID}', '{_GITHUB_SECRET}'", _GITHUB_SECRET),
    (f'github: ("Iv1.{_random(_HEX, 16)}", "{_GITHUB_SECRET}")', _GITHUB_SECRET),
]


@pytest.mark.parametrize(("text", "secret"), SERVICE_LITERALS)
def test_a_key_quoted_right_after_an_everyday_service_name(text: str, secret: str) -> None:
    redacted = redact(text).text
    assert secret not in redacted
    assert "[REDACTED:secret_near_keyword]" in redacted


@pytest.mark.parametrize(
    "text",
    [
        "kanban 'ABCDEFGHIJKL'",  # capitals alone: an acronym or a board name
        f"kanban '{_random(_UPPER, 11)}'",  # one short
        f"mite '{'wordswordswordsw'}'",  # letters alone
        "railway = '00000000-0000-0000-0000-000000000000'",  # a stand-in
        f"railway = '{_uuid().upper()}'",  # not the lowercase form Railway issues
        f"railway_station_id = '{_uuid()}'",  # a longer name: not the service's
        f"mux '{_uuid()}'",  # Mux's token id, not its secret
        "pusher - '4870172'",  # Pusher's app id
        f"github = 'acme/widgets', '{_GITHUB_SECRET}'",  # a repository and a commit
        f"git checkout github '{_GITHUB_SECRET}'",
        f"railway is at '{_uuid()}'",  # a word between: no key of the name
        f"the kanban board '{_KANBAN}'",
    ],
)
def test_near_misses_after_an_everyday_service_name_are_left_alone(text: str) -> None:
    assert redact(text).text == text


# -- a service's exact shape under a name holding its name and a secret word -------------------

# 27 characters that read as an identifier (syllables, one "_"): the shape decides
_CLOUDINARY = "kelomira7_tavunesodilapekos"
_CASHBOARD = "-".join(_random(_UPPER, 3) for _ in range(4))
_AERO = _random(_ALNUM, 16) + ":c*X"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"[DEBUG] Using cloudinary_apiSecret={_CLOUDINARY}", _CLOUDINARY),
        (f'api:\n  cashboard_key: "{_CASHBOARD}"\n  cashboard_user: "ts7z"', _CASHBOARD),
        (f"CASHBOARD_API_KEY={_CASHBOARD}", _CASHBOARD),
        # a bare key name right after the service's name (Aero Workflow's alphabet has symbols)
        (f"[DEBUG] Using aeroworkflow KEY={_AERO}\n", _AERO),
    ],
)
def test_a_services_exact_shape_under_its_secret_name(text: str, secret: str) -> None:
    assert secret not in redact(text).text


@pytest.mark.parametrize(
    "text",
    [
        f"cloudinary_apiSecret={_CLOUDINARY[:-1]}",  # one short: an identifier
        "cashboard_key: 'ABC-DEF-GHI-JKL'",  # letters alone
        f"cashboard_key_name: '{_CASHBOARD}'",  # metadata, not a key
        f"cashboard_url: '{_CASHBOARD}'",
        f"api_secret_name = '{_CLOUDINARY}'",  # no service named
        f"Using KEY={_AERO}",  # no service's name before the key: mangled
        f"Using aeroworkflow KEY={_AERO[:-1]}",  # one short
        f"Using aeroworkflow x KEY={_AERO}",  # another word between
    ],
)
def test_other_values_under_a_services_secret_name_are_left_alone(text: str) -> None:
    assert redact(text).text == text


# -- vendor formats ------------------------------------------------------------------------------

_WEBEX = _random(_ALNUM, 64) + "_" + _random(_ALNUM, 4) + "_" + _uuid()
_GOCANVAS = _random(_ALNUM + "/+", 43) + "="
_MAPBOX = "sk." + ".".join(_random(_ALNUM, 3) for _ in range(25))
_BESTTIME = "pri_" + _random(_HEX, 32)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"AADRefreshToken | {_entra_refresh()} |", None),
        (f"refresh: 1.A{_random(_URLSAFE, 55)}.0.Ag{_random(_URLSAFE, 260)}", None),
        (f'webexbot = "{_WEBEX}"', _WEBEX),
        (f"gocanvas: {_GOCANVAS} / gocanvasemail = someone@example.com", _GOCANVAS),
        (f"mapbox {_MAPBOX} A3xF", _MAPBOX),
        (f'url := "https://api.example.com/v1/besttime/keys/{_BESTTIME}"', _BESTTIME),
        (f"https://api.example.com/v1/x?tokenkey={_random(_LOWER, 50)}", None),
    ],
)
def test_new_vendor_shapes_are_redacted(text: str, secret: str | None) -> None:
    redacted = redact(text).text
    assert redacted != text
    if secret is not None:
        assert secret not in redacted


@pytest.mark.parametrize(
    "text",
    [
        f"0.A{_random(_URLSAFE, 60)}.Ag{_random(_URLSAFE, 100)}",  # second part too short
        f"version 10.A{_random(_URLSAFE, 60)}.Ag{_random(_URLSAFE, 300)}",  # glued to a digit
        f"webex '{_WEBEX[:-1]}'",  # one short
        f"gocanvas: {_GOCANVAS[:-2]}=",  # 42 and padding
        "import sk.mycompany.project.module.submodule.internal.services.implementations."
        "ClassNameHolderFactory;",
        "mapbox sk." + ".".join(_random(_ALNUM, 3) for _ in range(15)),  # too short
        "pri_" + _random(_HEX, 31),
        "pri_" + "0" * 32,
        "https://api.example.com/v1/x?tokenkey=abc",
    ],
)
def test_near_misses_of_the_new_vendor_shapes_are_left_alone(text: str) -> None:
    assert redact(text).text == text


# -- Jenkins credentials: braces mark a secret value in another element too ----------------------

_ENCRYPTED = "<secret>{AQAAABAAA" + _random(_ALNUM, 30) + "}</secret>"


@pytest.mark.parametrize(
    "inner",
    ["aha " + _random(_HEX, 64), _random(_ALNUM, 30), "service key " + _random(_URLSAFE, 24)],
)
def test_a_braced_key_beside_a_jenkins_secret_is_redacted(inner: str) -> None:
    secret = inner.rsplit(maxsplit=1)[-1]
    text = f"{_ENCRYPTED}\n<id>{{{inner}}}</id>"
    assert secret not in redact(text).text


@pytest.mark.parametrize(
    "text",
    [
        # an id or a user name, as the words before it say
        f"{_ENCRYPTED}\n<id>{{anypoint id {_random(_HEX, 32)}}}</id>",
        f"{_ENCRYPTED}\n<id>{{BS_USERNAME {_random(_URLSAFE, 20)}}}</id>",
        # no Jenkins secret in the text: braces alone say nothing
        f"<id>{{aha {_random(_HEX, 64)}}}</id>",
        # a word, not a token
        f"{_ENCRYPTED}\n<description>{{configurationforproduction}}</description>",
    ],
)
def test_braced_ids_users_and_words_are_left_alone(text: str) -> None:
    # (the encrypted secret on the first line is redacted: only the element after it is judged)
    assert redact(text).text.endswith(text.rsplit("\n", 1)[-1])


# -- after a service's name, a word before another quoted value labels that value ------------------

_NETSUITE = _random(_ALNUM, 64)


def test_a_label_before_an_earlier_value_does_not_block_the_key() -> None:
    text = f"netsuite id - '{_random(_ALNUM, 8)}'\nconsumer - '{_NETSUITE}'"
    assert _NETSUITE not in redact(text).text


@pytest.mark.parametrize(
    "text",
    [
        f"netsuite account id '{_NETSUITE}'",  # the label is the key's own
        f"netsuite id - '{_random(_ALNUM, 8)}' request id - '{_NETSUITE}'",
        f"netsuite id - '{_random(_ALNUM, 8)}' consumer - '{_NETSUITE[:-1]}'",  # not its shape
    ],
)
def test_a_label_right_before_the_value_still_blocks_it(text: str) -> None:
    assert redact(text).text == text
