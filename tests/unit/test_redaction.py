"""Secret redaction: what it catches, what it leaves alone, and that detect-secrets' regex
detectors catch nothing it misses (detect-secrets is the oracle here, not a runtime dependency)."""

from __future__ import annotations

import pytest

from pi_hindsight.redaction import KINDS, redact

# Fake secrets with real formats (none of them is valid anywhere).
HINDSIGHT_KEY = "hsk_" + "0123456789abcdef" * 2
NPM_TOKEN = "npm_" + "aBcDeFgHiJ" * 3 + "klmnop"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPL2"
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBa2TrsJ2K1hWLpQv0ytQXBb1L4HtjTnZvaQO0ajHUxrQAAAJiPZcWvj2XF\n"
    "-----END OPENSSH PRIVATE KEY-----"
)

CAUGHT = [
    (f"use {HINDSIGHT_KEY} for the server", HINDSIGHT_KEY, "hindsight_api_key"),
    (f"HINDSIGHT_API_KEY={HINDSIGHT_KEY}_deadbeef01", HINDSIGHT_KEY, "hindsight_api_key"),
    (f"//registry.npmjs.org/:_authToken={NPM_TOKEN}", NPM_TOKEN, "npm_token"),
    (
        "//registry.npmjs.org/:_authToken=0f2c7b8e-1234-4c2a-9d1e-abcdefabcdef",
        "0f2c7b8e-1234-4c2a-9d1e-abcdefabcdef",
        "npm_token",
    ),
    (f"token {GITHUB_TOKEN}", GITHUB_TOKEN, "github_token"),
    (f"aws_access_key_id = {AWS_KEY}", AWS_KEY, "aws_access_key_id"),
    (f"key:\n{PRIVATE_KEY}\nafter", "QyNTUxOQAAACBa2TrsJ2K1hWLpQv0ytQXBb1L4Htj", "private_key"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7xyzABCDEFGH\nZm9vYmFy\n\nLater text.",
        "MIIEpAIBAAKCAQEA7xyzABCDEFGH",
        "private_key",
    ),
    ("API_KEY=abc123", "abc123", "env_assignment"),
    ("PASSWORD: hunter2hunter2", "hunter2hunter2", "env_assignment"),
    ("export DB_PASSWORD='correct horse battery'", "correct horse battery", "env_assignment"),
    ("  client_secret: s3cr3t-v@lue", "s3cr3t-v@lue", "env_assignment"),
    ('config = {"apiKey": "9f8e7d6c5b4a"}', "9f8e7d6c5b4a", "secret_assignment"),
    ("run it with --password=Sup3rS3cret! now", "Sup3rS3cret!", "secret_assignment"),
    ("Authorization: Bearer abcdef1234567890abcdef", "abcdef1234567890abcdef", "authorization"),
    (
        "curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='",
        "dXNlcjpwYXNzd29yZA==",
        "authorization",
    ),
    ("bearer eyJabc.def.ghi-0123456789abcdef", "eyJabc.def.ghi-0123456789abcdef", "bearer_token"),
    ("postgres://admin:s3cr3tP4ss@db.example.com/app", "s3cr3tP4ss", "url_credentials"),
    ("https://h.example/x?api_key=abcd1234efgh&x=1", "abcd1234efgh", "url_query_secret"),
    ("凭证为" + HINDSIGHT_KEY + "。", HINDSIGHT_KEY, "hindsight_api_key"),
    ("OPENAI_API_KEY=sk-proj-" + "Ab1" * 16, "sk-proj-" + "Ab1" * 16, "openai_api_key"),
    ("sk-ant-api03-" + "x1Y2" * 10, "sk-ant-api03-" + "x1Y2" * 10, "anthropic_api_key"),
    ("xoxb-123456789012-123456789012-abcdefghijkl", "xoxb-123456789012", "slack_token"),
]

LEFT_ALONE = [
    "We deploy to the Zephyr cluster in Frankfurt; the service listens on port 8080.",
    "def login(password: str) -> None:\n    token = get_token()",
    "max_tokens: 800",
    "API_KEY=${API_KEY}",
    "secret_key: os.environ['SECRET']",
    "The password is required; the token: expires soon.",
    "primary_key: id_column_name_1",
    "Use `pi-hindsight outbox retry --all` after the outage.",
    "hsk_ is the prefix of Hindsight keys",
    "The commit 3f9a2c1e0b4d5f6a7b8c9d0e1f2a3b4c5d6e7f80 fixed it.",
]


@pytest.mark.parametrize(("text", "secret", "kind"), CAUGHT)
def test_secrets_are_replaced_and_reported(text: str, secret: str, kind: str) -> None:
    result = redact(text)
    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert kind in {finding.kind for finding in result.findings}
    assert all(finding.kind in KINDS for finding in result.findings)
    assert redact(result.text).text == result.text, "redaction must be idempotent"


@pytest.mark.parametrize("text", LEFT_ALONE)
def test_ordinary_text_and_code_are_left_alone(text: str) -> None:
    result = redact(text)
    assert result.text == text and not result.changed


def test_findings_point_at_the_secret_in_the_original_text() -> None:
    text = f"a {GITHUB_TOKEN} b {AWS_KEY} c"
    result = redact(text)
    assert [text[f.start : f.end] for f in result.findings] == [GITHUB_TOKEN, AWS_KEY]
    assert result.text == "a [REDACTED:github_token] b [REDACTED:aws_access_key_id] c"


def test_overlapping_detectors_never_leave_a_fragment() -> None:
    text = f"export GITHUB_TOKEN={GITHUB_TOKEN}  # ci"
    result = redact(text)
    assert "A1b2" not in result.text and len(result.findings) == 1


# (detect-secrets 1.5 misses a bare npm token, Hindsight keys, sk-proj-/sk-ant- keys, bearer
# tokens and multi-line key bodies; see docs/adr/0005-secret-redaction.md.)
SAMPLES_FOR_THE_ORACLE = [
    AWS_KEY,
    GITHUB_TOKEN,
    "//registry.npmjs.org/:_authToken=" + NPM_TOKEN,
    "xoxp-1234567890-0987654321-abcdef0123",
    "https://hooks.slack.com/services/T0ABCDEFG/B0ABCDEFG/abcdefghijklmnopqrstuvwx",
    "sk_live_" + "a1B2c3D4e5" * 3,
    "SG." + "a" * 22 + "." + "b" * 43,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0",
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5pM1kG0zT\n",
    "glpat-" + "a1B2c3D4e5F6g7H8i9J0",
    "mysql://root:hunter22@localhost/db",
    "AC" + "0123456789abcdef" * 2,
    "pypi-AgEIcHlwaS5vcmc" + "A1b2" * 20,
    "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.abcdefghijklmnopqrstuvwxyz01234",
    "0123456789abcdef0123456789abcdef-us12",
]


def test_detect_secrets_regex_detectors_find_nothing_we_miss() -> None:
    detect_secrets = pytest.importorskip("detect_secrets.core.plugins.util")
    from detect_secrets.plugins.base import RegexBasedDetector

    detectors = [
        cls()
        for cls in detect_secrets.get_mapping_from_secret_type_to_class().values()
        if issubclass(cls, RegexBasedDetector) and cls.secret_type != "Public IP (ipv4)"
    ]
    for sample in SAMPLES_FOR_THE_ORACLE:
        theirs = [d.secret_type for d in detectors if list(d.analyze_string(sample))]
        assert theirs, f"the oracle should recognise {sample!r}"
        assert redact(sample).changed, f"detect-secrets finds {theirs} in {sample!r}; we do not"
