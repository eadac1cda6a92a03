"""Issue 18: keyword and context forms of secrets (passphrases, name variants, C arrays, Vault
AppRole, a quoted literal after a secret word) and their near-misses.

Cases are our own, generated here from the rules' descriptions."""

from __future__ import annotations

import random
import string

import pytest

from pi_hindsight.redaction import redact

_RNG = random.Random(1819)
_ALNUM = string.ascii_letters + string.digits


def _token(size: int = 32) -> str:
    """Random letters of both cases and digits (at least one of each)."""
    body = [_RNG.choice(_ALNUM) for _ in range(size - 3)]
    return "".join([*body, _RNG.choice(string.ascii_uppercase), "7", "q"])


def _uuid() -> str:
    hexes = "0123456789abcdef"
    parts = ("".join(_RNG.choice(hexes) for _ in range(size)) for size in (8, 4, 4, 4, 12))
    return "-".join(parts)


# -- passphrases ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        'password = "{}"',
        'db_password_super_secure = "{}"',
        "api_key: '{}'",
        "aws_secret_access_key: {}",
        '"password": "{}"',
    ],
)
def test_a_passphrase_under_a_secret_name_is_a_secret(template: str) -> None:
    phrase = " ".join(
        _RNG.choice(["mellow", "quartz", "ribbon", "anvil", "tundra"]) for _ in range(5)
    )
    text = template.format(phrase)
    assert phrase not in redact(text).text


@pytest.mark.parametrize(
    "text",
    [
        '"password": "Enter your new password"',  # a label: a capital, a placeholder word
        '"apiKey": "used for the upload requests"',  # inline under a token name: a label
        '{"user": "ana", "password": "not set yet"}',  # inline, three words: a label
        "password: value",
        "token: see below",
        'password = "Forgot your password? Reset it here."',
    ],
)
def test_labels_and_short_phrases_under_secret_names_stay(text: str) -> None:
    assert redact(text).text == text


# -- a secret word with one letter more ----------------------------------------------------


@pytest.mark.parametrize(
    "template",
    ["secrete = {}", 'secrets = "{}"', "passwords: '{}'", 'my_secrete := "{}"'],
)
def test_a_secret_word_with_one_letter_more_names_a_secret(template: str) -> None:
    value = "Q,.:-~@*" + _token(8)
    assert value not in redact(template.format(value)).text


@pytest.mark.parametrize(
    "text",
    [
        "secretary = 'Margaret Hughes'",
        "secretly = True",
        "secretion_rate: 0.35",
        "tokens = 800",
    ],
)
def test_longer_words_starting_with_a_secret_word_stay(text: str) -> None:
    assert redact(text).text == text


# -- C character arrays and std::string::assign ---------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        'secret[] = "{}";',
        'char password[25] = "{}";',
        'static const char api_token[64]= "{}";',
        'secret.assign("{}", 17);',
        "password.assign('{}');",
    ],
)
def test_a_c_array_or_assign_call_of_a_secret_name_is_a_secret(template: str) -> None:
    value = "m{{h}o)p" + _token(12)
    assert value not in redact(template.format(value)).text


@pytest.mark.parametrize(
    "text",
    [
        "db_pass[] = 'Tr0ub4dor&3';",  # single quotes: a PHP array append, not a C array
        'names[0] = "Tr0ub4dor&3 x"',
        'char token[64] = "";',
        'label.assign("Tr0ub4dor&3")',
        'password.assign("abc")',
    ],
)
def test_other_arrays_and_assign_calls_stay(text: str) -> None:
    assert redact(text).text == text


# -- HashiCorp Vault AppRole ----------------------------------------------------------------


def test_an_approle_secret_id_beside_its_role_id_is_redacted() -> None:
    role, secret = _uuid(), _uuid().upper()
    text = f"vault:\n  role_id = '{role}'\n  secret_id = '{secret}'\n"
    out = redact(text).text
    assert secret not in out
    assert role in out  # the role id names the role; it is no secret


@pytest.mark.parametrize(
    "text",
    [
        f"secret_id = '{_uuid()}'",  # no role id: Azure's "secret ID" names a secret
        f"role_id = '{_uuid()}'\nsecret_id = '{_uuid().replace('-', '')}'",  # not a UUID
        f"role_id = '{_uuid()}'\nsecret_id = '{_uuid()}1'",  # a UUID too long
    ],
)
def test_a_secret_id_that_is_no_approle_credential_stays(text: str) -> None:
    assert redact(text).text == text


# -- a quoted literal after a secret word ---------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "token - '{}'",
        'the new token "{}"',
        "acmecrm token - '{}'",
        "onepagecrm token - '{}'",  # a service's name before the word leaves the token to it
    ],
)
def test_a_quoted_literal_after_a_secret_word_is_taken_whole(template: str) -> None:
    value = f"{_token(15)}={_token(20)}.{_token(8)}"  # runs of fewer than 16 between = and .
    out = redact(template.format(value)).text
    assert value[:15] not in out and value[-8:] not in out


@pytest.mark.parametrize(
    "text",
    [
        "token - 'R1kugPxUfw9oSeg=f7tofx?rLnG2PIEVuOSJhUNNahEe'",  # mangled by a ?
        "token - 'https://example.com/docs/tokens/rotation'",
        "token - 'some.dotted.identifier.name'",
        # a quote cut the code short: the inner name is no opener of a literal
        'api_token = "telegram_api_token = "02069194:A_97ku-ti19yovlr7rlncw8iobfnc2ly06fw_""',
    ],
)
def test_literals_after_a_secret_word_that_are_no_token_stay(text: str) -> None:
    assert redact(text).text == text


# -- a service's key in prose ---------------------------------------------------------------


def test_a_service_key_in_prose_has_the_services_shape() -> None:
    key = "".join(_RNG.choice("0123456789abcdef") for _ in range(31)) + "a"
    assert key not in redact(f"Your API2Cart key is {key}, keep it safe.").text
    malformed = key[:10] + "J" + key[11:]  # not hex: no API2Cart key
    text = f"Your API2Cart key is {malformed}, keep it safe."
    assert redact(text).text == text


# -- Jenkins credentials, curl -u key:, Authorization -----------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "<secret>{{AQAAABAAAAAQ{}=}}</secret>",
        "<secret>{{AQAAABAAA {}==}}</secret>",  # a key pasted after the marker
        "<password>{{AQAAABAAAAAg{}}}</password>",
    ],
)
def test_a_jenkins_encrypted_secret_is_redacted(template: str) -> None:
    body = _token(44)
    assert body not in redact(template.format(body)).text


@pytest.mark.parametrize(
    "text",
    [
        "<secret>{AQAAABAAA}</secret> marks an encrypted value",  # the marker alone is no secret
        "<id>{AQAAABAAAB placeholder}</id>",  # a word after it: too short for a key
        "<description>AQAAABAAAA without braces</description>",
    ],
)
def test_text_about_the_jenkins_marker_stays(text: str) -> None:
    assert redact(text).text == text


def test_a_key_as_the_curl_user_with_an_empty_password_is_redacted() -> None:
    key = "d2LkV" + _token(7)
    assert key not in redact(f'curl -u "{key}:" https://localhost:9200').text
    for text in ("curl -u admin: https://x", "curl -u deploy-bot-2024: https://x"):
        assert redact(text).text == text


def test_an_authorization_header_value_with_an_at_sign_is_redacted_whole() -> None:
    text = 'curl -H "Authorization: sha256~bRLFnzd5@=-.a+/hgdS"'
    assert "hgdS" not in redact(text).text


# -- services added to the table --------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "key"),
    [
        ('const hs = new HubSpotAPI("{}");', _uuid()),
        ("onesignal: {}", _uuid()),
        ("loggly '{}'", _uuid()),
        (
            "agora {}",
            "".join(_RNG.choice(string.ascii_lowercase + string.digits) for _ in range(31)) + "7",
        ),
        (
            "keenio '{}'",
            "".join(_RNG.choice(string.ascii_uppercase + string.digits) for _ in range(63)) + "Q",
        ),
    ],
)
def test_a_key_of_the_services_shape_after_a_newly_listed_name_is_redacted(
    template: str, key: str
) -> None:
    assert key not in redact(template.format(key)).text


@pytest.mark.parametrize(
    "text",
    [
        "onesignal: 0a1b2c3d",  # too short for its shape
        "hubspot user 4f2a9c1e-77aa-4c1b-9d2e",  # a truncated UUID
        "agora marketplace opens at nine",
    ],
)
def test_other_text_after_a_newly_listed_name_stays(text: str) -> None:
    assert redact(text).text == text


# -- a literal returned by a secret-named function ------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        'def get_api_key():\n    return "{}"',
        "func getToken() string {{ return '{}' }}",
        'public String getPassword() {{\n    return "{}";\n}}',
        'def client_secret(self) -> str:\n    return "{}"',
        'func getBetterStackToken() string{{ return "{}" }}',  # a service's key of its shape
    ],
)
def test_a_literal_returned_by_a_secret_named_function_is_redacted(template: str) -> None:
    value = _token(24)
    assert value not in redact(template.format(value)).text


@pytest.mark.parametrize(
    "text",
    [
        'def token_type():\n    return "bearer"',
        'def get_name(): return "Tr0ub4dor&3xx"',
        'def get_token(): return "Bearer " + token',
        'def password_prompt(): return "Enter your password: "',
        # named for a service: a value not of that service's shape (BetterStack: 24)
        'func getBetterStackToken() string{ return "DyntJD0ER8QpuT0O1WqsclApO2" }',
        'if ok { return "Tr0ub4dor&3xx" }',
    ],
)
def test_other_returned_literals_stay(text: str) -> None:
    assert redact(text).text == text
