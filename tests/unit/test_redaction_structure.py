"""Issue 18: structure decides between a secret and a near-miss (a mangled token, a fragment).

Cases are our own, generated here from the rules' descriptions."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_hindsight.redaction import redact

_RNG = random.Random(1818)
_ALNUM = string.ascii_letters + string.digits


def _random(alphabet: str, size: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(size))


_TOKENS = st.text(alphabet=_ALNUM, min_size=20, max_size=48).filter(
    lambda body: any(c.isdigit() for c in body) and any(c.isalpha() for c in body)
)


@settings(max_examples=60, deadline=None)
@given(token=_TOKENS)
def test_a_random_token_after_a_secret_word_is_redacted(token: str) -> None:
    text = f"the deploy token - '{token}'"
    result = redact(text)
    if len(set(token)) > 8:  # (a body of few distinct characters is a stand-in)
        assert token not in result.text


def _glued(glue: str) -> list[str]:
    left, right = _random(_ALNUM, 12) + "7", "Q" + _random(_ALNUM, 20) + "4"
    return [f"{left}{glue}{right}", f"{glue}{right}", f"{right}{glue}x"]


@pytest.mark.parametrize("glue", list("?^%$#*"))
@pytest.mark.parametrize("template", ["service token - '{}'", "my token is {} ok"])
def test_a_run_glued_to_others_by_a_non_token_character_is_no_token(
    glue: str, template: str
) -> None:
    clean = "".join(_random(string.ascii_letters, 3) + _random(string.digits, 1) for _ in range(7))
    assert clean not in redact(template.format(clean)).text
    for value in _glued(glue):
        text = template.format(value)
        assert redact(text).text == text, text


@pytest.mark.parametrize("glue", list("?^"))
@pytest.mark.parametrize(
    "template", ["npm_token: {}\n", 'segmentApiKey = "{}"', "X_API_KEY={}\n", "--token={} x"]
)
def test_a_token_named_value_outside_every_token_alphabet_is_no_token(
    glue: str, template: str
) -> None:
    clean = "".join(_random(string.ascii_letters, 3) + _random(string.digits, 1) for _ in range(7))
    assert clean not in redact(template.format(clean)).text  # the same value, whole: a token
    for value in _glued(glue):
        text = template.format(value)
        assert redact(text).text == text, text


@pytest.mark.parametrize(
    "template", ["password: {}\n", 'client_secret = "{}"', "DB_PASS={}\n", 'SECRET_KEY = "{}"']
)
def test_a_password_or_secret_may_hold_any_character(template: str) -> None:
    value = _random(_ALNUM, 10) + "?^" + _random(_ALNUM, 10) + "9"
    assert value not in redact(template.format(value)).text


@pytest.mark.parametrize("char", list("!|%$#&"))
def test_characters_some_vendors_use_keep_a_token_named_value(char: str) -> None:
    value = _random(_ALNUM, 14) + "7" + char + _random(_ALNUM, 20)
    assert value not in redact(f'api_token = "{value}"').text


def test_a_question_after_a_token_is_no_glue() -> None:
    token = "Zq8" + _random(_ALNUM, 29)
    for text in (f"is the token {token}? yes", f"(was the token {token}?)"):
        assert token not in redact(text).text
