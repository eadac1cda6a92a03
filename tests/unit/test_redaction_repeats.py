"""Redaction of text that repeats one construct thousands of times (issue 18 item 5).

context.py judges a window that recurs once per text and assignments.py a short or quoted
value once per text, by the characters they read: a secret after thousands of repeats is
found as it is alone, and the repeats are redacted as one of them is alone.
"""

from __future__ import annotations

import pytest

from pi_hindsight.redaction import redact

FILLERS = (
    "algolia-password ",
    "credential_value ",
    "passphrase-value\n",
    "PASSWORD=x ",
    'password="',
    '"x1y2z3w4" == password ',
    "token abcdefghijklmnopqrstuvwxyz ",
)
TAILS = (
    ("algolia-password x1Y2z3W4v5U6t7S8r9Q0 ", "x1Y2z3W4v5U6t7S8r9Q0"),
    ("the password is Tr0ub4dor&3 ", "Tr0ub4dor&3"),
    ("PASSWORD=Tr0ub4dor3x ", "Tr0ub4dor3x"),
    ('password="Tr0ub4dor&3"', "Tr0ub4dor&3"),
    ("token 9b1cX2d3E4f5G6h7J8k9 ", "9b1cX2d3E4f5G6h7J8k9"),
)


# Farther than a context window reaches (96 characters): a name's window that scans past a
# later name leaves that name unread (context.py), which is not what is tested here.
_APART = "\n" + " " * 128 + "\n\n"


@pytest.mark.parametrize("filler", FILLERS)
@pytest.mark.parametrize(("tail", "secret"), TAILS)
def test_a_secret_after_many_repeats_is_found_as_alone(filler: str, tail: str, secret: str) -> None:
    redacted = redact(filler * 3000 + _APART + tail).text
    assert secret not in redacted
    assert redacted.rsplit("\n\n", 1)[1] == redact(tail).text


@pytest.mark.parametrize("filler", FILLERS)
def test_each_repeat_is_redacted_as_one_alone(filler: str) -> None:
    # Paragraphs apart, each repeat is judged by itself: thousands of them redact alike.
    one = redact(filler.strip("\n") + "\n\n").text
    assert redact((filler.strip("\n") + "\n\n") * 3000).text == one * 3000


# The same construct again, then a secret: the secret's window reads what the repeated ones
# read, up to the secret.
RIGHT_AFTER = (
    ("algolia-password ", "algolia-password x1Y2z3W4v5U6t7S8r9Q0 ", "x1Y2z3W4v5U6t7S8r9Q0"),
    ("credential_value ", "credential_value 9b1cX2d3E4f5G6h7J8k9 ", "9b1cX2d3E4f5G6h7J8k9"),
    ("PASSWORD=x ", "PASSWORD=Tr0ub4dor3x ", "Tr0ub4dor3x"),
)


@pytest.mark.parametrize(("filler", "tail", "secret"), RIGHT_AFTER)
def test_a_secret_right_after_many_repeats_is_found(filler: str, tail: str, secret: str) -> None:
    once = redact(filler + tail + _APART).text  # (text after it: no window cut short)
    many = redact(filler * 3000 + tail + _APART).text
    assert secret not in once
    assert secret not in many
    assert many[-len(tail + _APART) - 20 :] == once[-len(tail + _APART) - 20 :]
