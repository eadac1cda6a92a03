"""Issue 18: structure decides between a secret and a near-miss (a mangled token, a fragment).

Cases are our own, generated here from the rules' descriptions."""

from __future__ import annotations

import base64
import random
import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_hindsight.redaction import redact

_RNG = random.Random(1818)
_ALNUM = string.ascii_letters + string.digits


def _random(alphabet: str, size: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(size))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(5, 12))
def test_a_random_token_after_a_secret_word_is_redacted(seed: int, size: int) -> None:
    rng = random.Random(seed)  # (a random body: Hypothesis would shrink one to a stand-in)
    token = "".join(
        rng.choice(string.ascii_uppercase)
        + rng.choice(string.ascii_lowercase)
        + rng.choice(_ALNUM)
        + rng.choice(string.digits)
        for _ in range(size)
    )
    assert token not in redact(f"the deploy token - '{token}'").text


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


@pytest.mark.parametrize("glue", list("?^$#*"))
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


@pytest.mark.parametrize("char", list("!|%&~."))
def test_characters_some_vendors_use_keep_a_token_named_value(char: str) -> None:
    value = _random(_ALNUM, 14) + "7" + char + _random(_ALNUM, 20)
    assert value not in redact(f'api_token = "{value}"').text


def test_a_question_after_a_token_is_no_glue() -> None:
    token = "Zq8" + _random(_ALNUM, 29)
    for text in (f"is the token {token}? yes", f"(was the token {token}?)"):
        assert token not in redact(text).text


def _mixed(size: int) -> str:
    """A random body with letters of both cases and digits in every stretch of four."""
    return "".join(
        _random(string.ascii_uppercase, 1)
        + _random(string.ascii_lowercase, 2)
        + _random(string.digits, 1)
        for _ in range(size // 4)
    )


def test_a_makefile_conditional_assignment_is_an_assignment() -> None:
    value = _mixed(24)
    assert value not in redact(f'API_TOKEN ?= "{value}"\n').text
    assert value not in redact(f"DEPLOY_SECRET ?= {value}\n").text


def test_slack_tokens_need_their_random_part_or_long_numeric_ids() -> None:
    team, bot = _random(string.digits, 11), _random(string.digits, 13)
    for real in (f"xoxb-{team}-{bot}-{_mixed(24)}", f"xoxa-{team}-{bot}"):
        assert real not in redact(real).text, real
    for near in ("xoxb-12345-" + _mixed(8)[:7], "xoxp-" + team[:10], "xoxb-my-bot-token"):
        assert redact(near).text == near, near


def test_gitlab_prefixes_around_words_are_no_tokens() -> None:
    assert redact("glpat-" + _mixed(20)).text == "[REDACTED:gitlab_token]"
    for near in ("glimt-my-tokens_are-correct", "glpat-example_token_for_docs_here"):
        assert redact(near).text == near


def test_openai_project_keys_carry_openais_mark() -> None:
    head, tail = _mixed(56) + "ab", _mixed(56) + "cd"
    real = f"sk-proj-{head}T3BlbkFJ{tail}"
    assert real not in redact(real).text
    for near in (f"sk-proj-{head}T4BlbkFJ{tail}", f"sk-svcacct-{head}{tail}"):
        assert redact(near).text == near, near


@pytest.mark.parametrize(
    "text",
    [
        'telegram_api_token = "telegram_api_token = "x""',
        'bot_token = "<xsd:element name="Code" type="x:CodeType"/>"',
    ],
)
def test_a_value_cut_short_by_a_quote_inside_code_is_no_secret(text: str) -> None:
    assert redact(text).text == text


def test_base64_padding_inside_a_value_is_no_comparison() -> None:
    value = _mixed(12) + "==" + _mixed(12)
    assert value not in redact(f'service_token := "{value}"').text
    # (a real comparison in a value is still code)
    text = 'token = "a == b"'
    assert redact(text).text == text


def test_url_credentials_need_a_host_after_the_at_sign() -> None:
    password = _mixed(12)
    assert password not in redact(f"amqps://deploy:{password}@rabbit.internal:5671").text
    text = f"amqps://deploy:{password}@?abbit.internal"
    assert redact(text).text == text


@pytest.mark.parametrize(
    "value",
    ["k{{e}y)s${a]fe(in[side>-_$#vault}}", "Tr0ub4dor&3$", "q7#Lm!x2$Vb9*Rt4^Wz8"],
)
def test_a_hand_typed_value_of_many_symbols_stays_a_secret(value: str) -> None:
    assert value not in redact(f'api_key = "{value}"').text


def test_a_leading_at_sign_is_no_token_start() -> None:
    value = _mixed(32)
    assert value not in redact(f"deploy token = '{value}'").text
    text = f"deploy token = '@{value}'"
    assert redact(text).text == text


@pytest.mark.parametrize(
    "template",
    [
        'System.setProperty("API_TOKEN", "{}");',
        "headers.put('X-Api-Key', '{}')",
        'os.environ.setdefault("DB_PASSWORD", "{}")',
        '["client_secret", "{}"]',
    ],
)
def test_a_secret_named_literal_beside_a_value_marks_the_value(template: str) -> None:
    value = _mixed(20)
    assert value not in redact(template.format(value)).text


@pytest.mark.parametrize(
    "text",
    [
        'ALLOWED = ["api_key", "secret_key", "token"]',
        'field("password", "Enter your password")',
        'header("X-Api-Key", "Authorization")',
        'pair("monkey", "a8Fk29dLq0Zp3Xr7")',
    ],
)
def test_names_and_labels_beside_a_secret_named_literal_stay(text: str) -> None:
    assert redact(text).text == text


def _lower36(size: int) -> str:
    return _random(string.ascii_lowercase + string.digits, size - 1) + "7"


@pytest.mark.parametrize(
    ("kind", "secret"),
    [
        ("pinecone_key", "pcsk_" + _mixed(8)[:6] + "_" + _mixed(64)[:63]),
        ("rootly_token", "rootly_" + _random("0123456789abcdef", 64)),
        (
            "launchdarkly_key",
            "sdk-" + "-".join(_lower36(n) for n in (8, 4, 4, 4, 12)),
        ),
        ("tableau_token", _mixed(24)[:22] + "==:" + _mixed(32)),
        ("huggingface_token", "hf_" + _random(string.ascii_letters, 34)),
        ("planetscale_token", "pscale_pw_" + _mixed(16) + "=" + _mixed(20) + "." + _mixed(8)),
    ],
)
def test_vendor_formats_of_the_third_pass(kind: str, secret: str) -> None:
    result = redact(f"config: {secret} done")
    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text


@pytest.mark.parametrize(
    "text",
    [
        "pcsk_abcd_" + "Q" * 3 + "x9" * 30,  # a 4-character id
        "pcsk_Ab3de_" + "k9Lm" * 17,  # 68 characters after the id: longer than a key
        "YMqNfVWiTSa0QgpoJ9Gp==:" + "Zq8" * 11,  # 20 characters before the padding
    ],
)
def test_vendor_shapes_of_the_wrong_length_are_left_alone(text: str) -> None:
    assert redact(text).text == text


@pytest.mark.parametrize(
    "template",
    [
        "ACRPWD={}\n",
        "DUO_SKEY={}\n",
        "-storagekey {} -container backups",
        "--conf spark.copydata.storageaccountkey={} \\",
    ],
)
def test_compound_secret_names(template: str) -> None:
    value = _mixed(40)
    assert value not in redact(template.format(value)).text


@pytest.mark.parametrize("name", ["monkey", "whiskey", "hotkey", "turkey", "primarykey"])
def test_words_ending_in_key_are_no_secret_names(name: str) -> None:
    text = f"{name} = {_mixed(20)}"
    assert redact(text).text == text


@pytest.mark.parametrize(
    "template",
    [
        'DOCKER_AUTH_CONFIG={{\\"auths\\":{{\\"reg.example.com\\":{{\\"auth\\":\\"{}\\"}}}}}}',
        '{{\\"password\\": \\"{}\\", \\"user\\": \\"deploy\\"}}',
        'body = "{{\\\\\\"api_key\\\\\\": \\\\\\"{}\\\\\\"}}"',
    ],
)
def test_json_inside_a_string_keeps_its_secrets_out(template: str) -> None:
    value = _mixed(28) + "=="
    text = template.format(value)
    result = redact(text).text
    assert value.rstrip("=") not in result, text
    assert "deploy" in result or "reg.example.com" in result or "api_key" in result


def test_a_url_with_a_random_path_segment_under_a_secret_name_is_a_secret() -> None:
    url = "https://hooks.acme-corp.io/hooks/catch/" + _mixed(24)
    assert url not in redact(f"webhook_token = '{url}'").text
    plain = "webhook_token = 'https://docs.acme-corp.io/guides/webhooks/setup'"
    assert redact(plain).text == plain


def test_a_mangled_query_value_is_no_token() -> None:
    value = _mixed(28)
    assert value not in redact(f"https://api.acme-corp.io/v1/list?apikey={value}").text
    text = f"https://api.acme-corp.io/v1/list?apikey={value[:14]}%c^{value[14:]}"
    assert redact(text).text == text


def _random_letters(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(string.ascii_letters) for _ in range(size))


@pytest.mark.parametrize("seed", range(12))
def test_random_letters_are_no_camel_case_identifier(seed: int) -> None:
    """Random letters split into humps too (``wjXKCFzOWEPR…``: wj, XKC, Fz, …), most of them
    without a vowel: after a secret word they are a token."""
    rng = random.Random(seed)
    token = _random_letters(rng, 22)
    humps = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", token)
    if sum(1 for hump in humps if not re.search("[aeiouyAEIOUY]", hump)) * 2 <= len(humps):
        return  # (a draw that reads as words: the rule does not claim it)
    assert token not in redact(f"the service token = '{token}'").text


@pytest.mark.parametrize(
    "name",
    ["XMLHttpRequestHandler", "getHTTPSConnectionPool", "sessionStorageProvider", "mySQLDBConnStr"],
)
def test_identifiers_with_an_acronym_or_two_stay_identifiers(name: str) -> None:
    text = f"the token = {name}"
    assert redact(text).text == text


def test_a_temporary_aws_key_ids_session_token_is_redacted() -> None:
    """A temporary key id (``ASIA…``) comes with a session token: the long base64 run after it
    is one, under any name."""
    key_id = "ASIA" + _random(string.ascii_uppercase + string.digits, 16)
    session = _random(_ALNUM + "+/", 300)
    text = f"aws credentials{{\n  id: {key_id}\n  session: {session}\n}}"
    assert session not in redact(text).text
    plain = f"aws credentials{{\n  id: {key_id}\n  note: {'abcd' * 40}\n}}"
    assert "abcd" * 40 in redact(plain).text


def _atlassian_pat(rng: random.Random, *, colon: bytes = b":", digits: int = 12) -> str:
    """Base64 of a numeric id, a colon and 20 random bytes (Atlassian Data Center's form)."""
    number = "".join(rng.choice(string.digits) for _ in range(digits)).encode()
    return base64.b64encode(number + colon + rng.randbytes(20)).decode()


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("template", ["jira_token: {}", "TOKEN={}", "{}", "BBDC-{}"])
def test_atlassian_data_center_tokens_are_redacted(seed: int, template: str) -> None:
    token = _atlassian_pat(random.Random(seed))
    assert token not in redact(template.format(token)).text


@pytest.mark.parametrize("seed", range(8))
def test_base64_of_another_structure_is_no_atlassian_token(seed: int) -> None:
    rng = random.Random(seed)
    for token in (
        _atlassian_pat(rng, colon=b";"),
        _atlassian_pat(rng, digits=11) + "Q",
        base64.b64encode(bytes(rng.choice(b"0123456789") for _ in range(33))).decode(),
    ):
        text = f"the build id {token} passed"
        assert redact(text).text == text


@pytest.mark.parametrize(
    "template",
    [
        'sumologic.accessId = "{}"',
        "SUMO_ACCESS_ID={}",
        "export SUMOLOGIC_ACCESSID='{}'",
        "sumo_logic_access_id: {}",
    ],
)
def test_sumo_logic_access_ids_under_their_name_are_redacted(template: str) -> None:
    access_id = "su" + _mixed(12)
    assert access_id not in redact(template.format(access_id)).text


def test_a_sumo_shaped_word_elsewhere_stays() -> None:
    text = "summary: the access id is su" + _mixed(12) + " for the sumo wrestler"
    assert redact(text).text == text


@pytest.mark.parametrize("seed", range(6))
def test_azure_container_registry_passwords_are_redacted(seed: int) -> None:
    rng = random.Random(seed)
    body = "".join(rng.choice(_ALNUM + "+/") for _ in range(42))
    password = body + "+ACR" + "".join(rng.choice(_ALNUM) for _ in range(6))
    for text in (f"## Save pass:\n  {password}\n", f"docker login x.azurecr.io -u x -p {password}"):
        assert password not in redact(text).text
    stand_in = "A" * 42 + "+ACR" + password[-6:]
    assert redact(f"pass {stand_in}").text == f"pass {stand_in}"
