"""Properties of redaction on generated input: it never raises, its findings describe its output,
a second pass never touches its markers, its trigger pre-pass changes nothing, and its time
grows linearly.

The timing checks pin issue 9's quadratic behaviour (``"-----BEGIN PRIVATE KEY-----\\n" * 7143``,
200 KB: 10.3 s; 1 MB: 249 s, on the sidecar's event loop). They compare the time for n and 4n
characters of the same construct in the same run (linear: ~4x, quadratic: ~16x) and allow 8x;
absolute figures are in bench/redaction_bench.py.
"""

from __future__ import annotations

import gc
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_hindsight import redaction
from pi_hindsight.redaction import _hits, redact, tokens

# Every literal a detector starts from, and constructs that once made a pattern rescan the text.
UNITS = sorted(
    {literal for pattern in tokens.PATTERNS for literal, _ in pattern.triggers}
    | {
        "-----BEGIN PRIVATE KEY-----\n",
        "-----BEGIN ",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n",
        "-----END PRIVATE KEY-----\n",
        "PuTTY-User-Key-File-2: x\n",
        "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t",
        "kind: Secret\ndata:\n  ",
        "  data:\n",
        "password=",
        "password='",
        'password="',
        "password: ",
        "password ",
        "the password is ",
        "PASSWORD=x ",
        "PASSWORD=x" + " " * 64,
        '"secret": "',
        "api_key",
        "api key ",
        "token: ",
        "token token ",
        "--token ",
        "<password>",
        "name: DB_PASSWORD\n",
        "key=",
        "key",
        "auth",
        "://",
        "://a:",
        "://a:b",
        "redis://:",
        "?token=",
        "&key=a",
        "Bearer ",
        "Authorization: Bearer ",
        "Authorization: ",
        "Cookie: a=",
        "curl -u a:",
        "-u a:",
        "mysql -p",
        "docker login -p ",
        'auth=("a", "',
        "IDENTIFIED BY '",
        "eyJ",
        "eyJa.",
        "eyJabcdefgh.eyJabcdefgh.",
        "M" * 24 + ".",
        "1234567890:AA",
        "0123456789abcdef" * 2 + "-us1",
        "abc1Q~",
        "x" * 14 + ".atlasv1.",
        "AKIA",
        "AC" + "0123456789abcdef" * 2 + " ",
        "a1B2c3D4e5F6g7H8 ",
        "[REDACTED:x]",
        " ",
        "\n",
        "=",
        ":",
        "-",
        "'",
        '"',
        "\\n",
    }
)

SMALL, LARGE = 16_000, 64_000


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _seconds(text: str) -> float:
    best = float("inf")
    gc.disable()
    try:
        for _ in range(3):
            start = time.process_time()  # CPU time: other processes share the machine
            redact(text)
            best = min(best, time.process_time() - start)
    finally:
        gc.enable()
    return best


def _ratio(unit: str) -> float:
    """Time for LARGE characters over time for SMALL (the smaller time floored at 2 ms, so that
    timer noise on fast inputs cannot fail the check); the best of three tries."""
    ratios = []
    for _ in range(3):
        small = max(_seconds(_repeat(unit, SMALL)), 0.002)
        ratios.append(_seconds(_repeat(unit, LARGE)) / small)
        if ratios[-1] <= 8:
            break
    return min(ratios)


@pytest.mark.parametrize("unit", UNITS)
def test_time_grows_linearly_on_a_repeated_construct(unit: str) -> None:
    assert _ratio(unit) <= 8, f"redact() is super-linear on {unit!r} repeated"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unit=st.sampled_from(UNITS), glue=st.text(alphabet=" \n=:'\"-_/.aZ9", max_size=4))
def test_time_grows_linearly_on_generated_constructs(unit: str, glue: str) -> None:
    assert _ratio(unit + glue) <= 8, f"redact() is super-linear on {unit + glue!r} repeated"


# Any code point, lone surrogates and NUL included, mixed with detector literals.
ANY_CHARACTER = st.characters(exclude_categories=())
TEXTS = st.lists(
    st.one_of(st.text(ANY_CHARACTER, max_size=12), st.sampled_from(UNITS)), max_size=24
).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_redact_never_raises_and_its_findings_describe_its_output(text: str) -> None:
    result = redact(text)
    cursor, rebuilt = 0, []
    for finding in result.findings:
        assert cursor <= finding.start < finding.end <= len(text)
        rebuilt += [text[cursor : finding.start], f"[REDACTED:{finding.kind}]"]
        cursor = finding.end
    assert "".join([*rebuilt, text[cursor:]]) == result.text
    # Redacting again never touches a marker. (It can find more where a marker moved a boundary:
    # "…-us1-u a:pw" hides "-u" behind a token character until the key before it is replaced;
    # on real text it changes nothing, see test_redaction_corpus.py.)
    markers = [m.span() for m in re.finditer(r"\[REDACTED:[a-z0-9_]+\]", result.text)]
    for again in redact(result.text).findings:
        assert all(again.end <= start or end <= again.start for start, end in markers)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_the_trigger_pass_only_skips_detectors_that_find_nothing(text: str) -> None:
    assert sorted(_hits(text)) == sorted(_hits(text, prefilter=False))


def test_the_trigger_pass_reports_every_literal_on_a_dense_adversarial_text() -> None:
    """RE2's set match reports nothing when its DFA runs out of memory; with literals only, it
    cannot: every literal is still reported in a megabyte of all of them, repeated."""
    triggers = redaction._TRIGGERS
    literals = [literal for literal, _ in triggers.literals()]
    text = _repeat("\ud800".join(literals), 1_000_000)
    assert triggers.present(text) == frozenset(range(len(triggers)))
    present = triggers.present(text[: len(text) // 2].replace("ghp_", "gh_p"))
    assert triggers.index("ghp_", False) not in present
