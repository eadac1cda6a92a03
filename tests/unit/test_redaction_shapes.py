"""Issue 18: a body of the vendor's exact shape is a token unless it is a filler; lengths, alphabets
and structures that a format pins reject near-misses; glued tokens are no tokens.

Cases are our own, written from the vendors' documented formats (prefix, length, alphabet)."""

from __future__ import annotations

import random
import string

import pytest

from pi_hindsight.redaction import redact
from pi_hindsight.redaction.placeholders import is_filler, is_placeholder

_RNG = random.Random(1818)
_ALNUM = string.ascii_letters + string.digits
_ORDERED = "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789abcdefghijklmnopqrstuvwxyz"


def _random(size: int, alphabet: str = _ALNUM) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(size))


def _redacted(secret: str, context: str = "export TOKEN={}") -> bool:
    return secret not in redact(context.format(secret)).text


def _untouched(text: str) -> bool:
    return redact(text).text == text


# ---- hand-typed bodies of the exact shape are tokens; fillers are not ---------------------------
@pytest.mark.parametrize(
    "secret",
    [
        "gsk_" + _ORDERED[:52],  # Groq: 52 letters and digits
        "glpat-" + _ORDERED[:20],  # GitLab's standard form: 20
        "glsa_" + _ORDERED[:32] + "_89abcdef",  # Grafana service account
        "vcp_" + _ORDERED[:40],  # Vercel: 20 to 60
        "lin_api_" + _ORDERED[:34] + "EXAMPLE",  # Linear: a word inside the exact shape
        "dckr_pat_" + "Example1234567890" + _ORDERED[:10],  # Docker: exactly 27
        "ntn_" + "12345678901" + _ORDERED[:35],  # Notion: 11 digits, 35 letters and digits
        "sk-ant-api03-" + _ORDERED[:60] + "-" + _ORDERED[:32] + "AA",  # Anthropic: 95, then AA
    ],
)
def test_a_hand_typed_body_of_the_exact_shape_is_a_token(secret: str) -> None:
    assert is_placeholder(secret.split("_", 1)[-1]) or "EXAMPLE" in secret or "-" in secret
    assert _redacted(secret)


@pytest.mark.parametrize(
    "text",
    [
        "gsk_" + "x" * 52,
        "vcp_" + "A" * 40,
        "glsa_" + "0" * 32 + "_00000000",
        "sha256~XXXXXXXXXX_PUT_YOUR_TOKEN_HERE_XXXXXXXXXXXX",  # OpenShift: 43, slot markers
        "client_secret=bP88Q~" + "x" * 34,  # Azure AD secret of x's
        'token = "' + "x" * 14 + ".atlasv1." + "x" * 67 + '"',  # Terraform Cloud
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",  # the AWS documentation's example
        "hf_" + "Fake" * 8 + "Fa",  # 34 letters of four kinds
        "https://x.appsync-api.us-west-2.amazonaws.com/graphql da2-" + "a" * 26,  # AppSync
        "see da2-" + _random(20, string.ascii_lowercase),  # AppSync keys are 26
    ],
)
def test_fillers_of_the_exact_shape_stay(text: str) -> None:
    assert _untouched(text)


def test_a_hand_typed_body_of_an_open_length_is_a_placeholder() -> None:
    assert _untouched("see glpat-" + _ORDERED[:26])  # routable GitLab tokens are longer
    assert _untouched("see cfut_" + _ORDERED[:40])  # not Cloudflare's 40 + 8 hex


def test_fillers_are_placeholders_but_not_every_placeholder_is_a_filler() -> None:
    assert is_filler("x" * 40) and is_placeholder("x" * 40)
    assert is_filler("YOUR_TOKEN_HERE") and is_filler("<token>")
    assert is_placeholder(_ORDERED[:40]) and not is_filler(_ORDERED[:40])
    assert is_placeholder("realExampleToken1") and not is_filler("realExampleToken1")
    assert not is_filler(_random(40))


# ---- lengths and alphabets the formats pin -----------------------------------------------------
@pytest.mark.parametrize(
    ("prefix", "length", "near"),
    [
        ("glptt-", 40, (20, 39, 41)),  # pipeline trigger tokens
        ("glimt-", 25, (21, 24, 26)),  # incoming mail
        ("gloas-", 64, (40, 63, 65)),  # OAuth application secrets
        ("glagent-", 50, (20, 49)),  # agent tokens: 50 or more
        ("glsoat-", 20, (19, 51)),  # SCIM: 20 to 50
        ("GR1348941", 50, (19, 51)),  # runner registration: 20 to 50
        ("gsk_", 52, (48, 51, 53, 56)),
        ("dckr_pat_", 27, (20, 26, 28)),
        ("hf_", 34, (33, 35)),
    ],
)
def test_vendor_lengths(prefix: str, length: int, near: tuple[int, ...]) -> None:
    alphabet = _ALNUM if prefix in ("gsk_", "hf_") else _ALNUM + "_-"
    secret = prefix + _random(1, string.ascii_letters) + _random(length - 1, alphabet)
    assert _redacted(secret), secret
    for size in near:
        text = prefix + _random(1, string.ascii_letters) + _random(size - 1, _ALNUM)
        assert _untouched(f"value {text} here"), text


def test_notion_tokens_start_with_eleven_digits() -> None:
    body = _random(35)
    assert _redacted("ntn_" + _random(11, string.digits) + body)
    assert _untouched("ntn_" + _random(10, string.digits) + body + "x")
    assert _untouched("ntn_" + "1" * 60)


def test_cloudflare_tokens_are_forty_characters_and_eight_hex() -> None:
    body = _random(40) + _random(8, "0123456789abcdef")
    for prefix in ("cfut_", "cfat_", "cfk_"):
        assert _redacted(prefix + body)
        assert _untouched(f"{prefix}{body}Z")
        assert _untouched(f"{prefix}{body[:-1]}")
        assert _untouched(f"x{prefix}{body}")


def test_hugging_face_tokens_are_34_characters() -> None:
    assert _redacted("hf_" + _random(34))
    assert _untouched("- (id)hf_requiredCharacteristicTypesForDisplayMetadata;")


def test_slack_ids_are_long_numbers() -> None:
    team, user = _random(11, string.digits), _random(12, string.digits)
    real = f"xoxp-{team}-{user}-{_random(12, string.digits)}-{_random(32, '0123456789abcdef')}"
    assert _redacted(real)
    assert _redacted(f"xoxo-523423-234243-234233-{_random(20, '0123456789abcdef')}")
    assert _untouched(f"xoxp-1234-1234-1234-{_random(32, '0123456789abcdef')}")


def test_anthropic_keys_of_another_length_are_near_misses() -> None:
    assert _untouched("sk-ant-api03-" + _random(60) + "AA")
    assert _redacted("sk-ant-admin01-" + _random(93) + "AA")


# ---- structures --------------------------------------------------------------------------------
def test_tailscale_keys_name_their_kind_and_id() -> None:
    for secret in (
        "tskey-auth-" + _random(12) + "-" + _random(30),
        "tskey-client-" + _random(12) + "-" + _random(30),
        "tskey-" + _random(8, string.ascii_lowercase) + "-" + _random(35),
        "tskey-k" + _random(7) + "CNTRL-" + _random(22),
    ):
        assert _redacted(secret), secret
    assert _untouched("tskey-foo")
    assert _untouched("tskey-" + _random(30))  # no kind


def test_discord_bot_tokens() -> None:
    tail = "." + _random(6) + "." + _random(27)
    for first in ("MT", "Nz", "OT", "MZ"):
        secret = first + _random(22) + tail
        assert _redacted(secret, "DISCORD={}"), secret
    assert _untouched("PZ" + _random(22) + tail)  # not base64 of an id
    assert _untouched("MT" + _random(25) + tail)  # first part too long


def test_telegram_bot_tokens() -> None:
    body = _random(34, string.ascii_lowercase + string.digits + "_-")
    assert _redacted(f"63684512:A{body}", "telegram bot: {}")
    assert _redacted(f"4839574812:AA{body[:33]}", "bot token {}")
    assert _untouched(f"token 6512:A{body}")  # bot ids are 5 digits or more
    assert _untouched('type="clm37470754:AgencyIdentificationCodeContentType"/>')


def test_sentry_org_tokens_carry_base64_claims() -> None:
    claims = "eyJpYXQiOjE3MDAwMDAwMDAuMCwidXJsIjoiaHR0cHM6Ly9zZW50cnkuaW8iLCJvcmciOiJhY21lIn0="
    secret = f"sntrys_{claims}_{_random(43, _ALNUM + '+/')}"
    assert _redacted(secret)
    mangled = f"sntrys_eyJFAKE-{claims[8:]}_{_random(43)}"
    assert _untouched(f"SENTRY={mangled}")


# ---- glued tokens ------------------------------------------------------------------------------
def test_a_token_glued_to_more_characters_is_mangled() -> None:
    tailscale = "tskey-" + _random(8, string.ascii_lowercase) + "-" + _random(22)
    assert _untouched(f"tailscale = '{tailscale}?{_random(60)}'")
    jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + _random(26)
    assert _untouched(f"token: {jwt}?{_random(40)}.{_random(43)}")


def test_a_token_before_a_url_query_or_a_shell_variable_is_still_redacted() -> None:
    secret = "tskey-api-" + _random(12) + "-" + _random(30)
    assert _redacted(secret, "https://example.com/{}?verbose=1")
    assert _redacted(secret, "https://example.com/{}?access_token_param=1")
    assert _redacted(secret, "KEY={}$DEPLOYMENT_SUFFIX")
