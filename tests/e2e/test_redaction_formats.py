"""End to end with the real Pi binary (issue 18): a secret of each vendor format redaction newly
covers never reaches Hindsight (retained documents and memories are searched) nor the model
(every provider payload of a later session is searched), and the user's own rule and allow entry
from the user's config work on the real retain path."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import string
import uuid
import zlib
from pathlib import Path

import pytest
from hindsight_client_api.api.documents_api import DocumentsApi
from hindsight_client_api.api_client import ApiClient
from hindsight_client_api.configuration import Configuration

from tests.plugins.pi import PiWorld, make_repo
from tests.support.retain import BankView

pytestmark = [pytest.mark.server, pytest.mark.pi]

_RNG = random.Random(1818)
_ALNUM = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"


def _random(alphabet: str, size: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(size))


def _github(prefix: str) -> str:
    body = _random(_ALNUM, 30)
    number, digits = zlib.crc32(body.encode()), ""
    base62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
    while number:
        number, digit = divmod(number, 62)
        digits = base62[digit] + digits
    return prefix + body + digits.rjust(6, "0")


def _cloudflare(prefix: str) -> str:
    body = _random(_ALNUM, 40)
    return f"{prefix}{body}{zlib.crc32(body.encode()):08x}"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


# One secret of each newly covered format (kind -> value), as a user would paste them.
NEW_SECRETS = {
    "tailscale_key": "tskey-auth-" + _random(_ALNUM, 12) + "-" + _random(_ALNUM, 30),
    # a body typed by hand in the vendor's exact shape is a token all the same
    "vercel_token": "vcp_aBcDeFgHiJkLmNoPqRsT1234567890" + _random(_ALNUM, 8),
    "cloudflare_token": _cloudflare("cfut_"),
    "cloudflare_origin_ca_key": "v1.0-" + _random(_HEX, 24) + "-" + _random(_HEX, 146),
    "sourcegraph_token": "sgp_" + _random(_HEX, 16) + "_" + _random(_HEX, 40),
    "stripe_key": "rk_prod_" + _random(_ALNUM, 40),
    "onepassword_secret_key": "A3-"
    + "-".join(_random(string.ascii_uppercase + string.digits, n) for n in (6, 6, 5, 5, 5, 5)),
    "facebook_token": "EAA" + _random(_ALNUM, 100),
    "aws_bedrock_key": "ABSK" + _random(_ALNUM + "+/", 120),
    "hex_private_key": "0x" + _random(_HEX, 64),
    "easypost_key": "EZAK" + _random(_ALNUM, 54),
    "dynatrace_token": "dt0c01." + _random(_ALNUM, 24) + "." + _random(_ALNUM, 64),
    "github_token": _github("ghs_"),
    "anthropic_api_key": "sk-ant-api03-" + _random(_ALNUM + "_-", 93) + "AA",
    "slack_webhook": "https://hooks.slack.com/workflows/T"
    + _random(string.ascii_uppercase + string.digits, 10)
    + "/A"
    + _random(string.ascii_uppercase + string.digits, 10)
    + "/"
    + _random(string.digits, 18)
    + "/"
    + _random(_ALNUM, 24),
    # an unsigned JSON Web Token (alg none, empty signature) still carries its claims
    "jwt": _b64url(b'{"alg":"none","typ":"JWT"}')
    + "."
    + _b64url(b'{"sub":"' + _random(_ALNUM, 16).encode() + b'","role":"admin"}')
    + ".",
    "pinecone_key": "pcsk_" + _random(_ALNUM, 6) + "_" + _random(_ALNUM, 63),
    "rootly_token": "rootly_" + _random(_HEX, 64),
    "tableau_token": _random(_ALNUM, 22) + "==:" + _random(_ALNUM, 32),
    # Sidekiq Pro's gem server credentials, beside the variable that names them
    "sidekiq_secret": "BUNDLE_GEMS__CONTRIBSYS__COM=" + _random(_HEX, 8) + ":" + _random(_HEX, 8),
    "groq_api_key": "gsk_0123456789abcdefghijklmnopqrstuvwxyz" + _random(_ALNUM, 16),
    "grafana_token": "glsa_" + _random(_ALNUM, 32) + "_" + _random(_HEX, 8),
    "linear_api_key": "lin_api_" + _random(_ALNUM, 40),
    "dockerhub_token": "dckr_pat_Example" + _random(_ALNUM + "_-", 20),
    "gitlab_token": "glptt-" + _random(_ALNUM + "_-", 40),
    "notion_token": "ntn_" + _random(string.digits, 11) + _random(_ALNUM, 35),
    "discord_token": "MZ"
    + _random(_ALNUM, 22)
    + "."
    + _random(_ALNUM, 6)
    + "."
    + _random(_ALNUM, 27),
    "telegram_bot_token": "63684512:A" + _random(string.ascii_lowercase + string.digits, 34),
    "aws_appsync_key": "da2-" + _random(string.ascii_lowercase + string.digits, 26),
    "azure_entra_refresh_token": "0.A"
    + _random(_ALNUM + "_-", 60)
    + ".Ag"
    + _random(_ALNUM + "_-", 300),
    "besttime_key": "pri_" + _random(_HEX, 31) + "7",
}
# Forms newly recognised around a value: a Makefile's conditional assignment, a secret-named
# literal passed beside its value, a service's name (line template, value).
NEW_FORMS = {
    "makefile": ("DEPLOY_TOKEN ?= {}", _random(_ALNUM, 28) + "7q"),
    "literal_pair": ('System.setProperty("API_TOKEN", "{}");', _random(_ALNUM, 28) + "4k"),
    # a key after only a service's name, in that service's shape (Instamojo: 40 alphanumerics)
    "service_name": ("instamojo '{}'", _random(_ALNUM, 38) + "8r"),
    # keyword and context forms (issue 18, recall): a passphrase, a C array, a literal returned
    # by a secret-named function, Vault AppRole's secret_id, a literal after "token -", Jenkins
    "passphrase": ("api_key: '{}'", "mellow quartz ribbon anvil tundra"),
    "c_array": ('char secret[25] = "{}";', "m{h}o)p" + _random(_ALNUM, 14) + "3x"),
    "returned": ('def get_api_key():\n    return "{}"', _random(_ALNUM, 26) + "5w"),
    "approle": (
        "role_id = '" + str(uuid.UUID(int=_RNG.getrandbits(128))) + "'\nsecret_id = '{}'",
        str(uuid.UUID(int=_RNG.getrandbits(128))),
    ),
    "dash_literal": ("token - '{}'", _random(_ALNUM, 14) + "=" + _random(_ALNUM, 20) + "9c"),
    "jenkins": ("<secret>{{AQAAABAAA {}==}}</secret>", _random(_ALNUM, 42) + "2b"),
    # keys next to a service's name, second pass: quoted right after a service named by an
    # everyday word, GitHub's OAuth client pair, a service's exact shape under its secret name
    "service_literal": ("railway = '{}'", str(uuid.UUID(int=_RNG.getrandbits(128)))),
    "github_oauth_pair": ("github = '" + _random(_ALNUM, 20) + "', '{}'", _random(_HEX, 40)),
    "service_secret_name": ("cloudinary_apiSecret={}", "kelomira7_tavunesodilapekos"),
    "webex_bot": (
        'webexbot = "{}"',
        _random(_ALNUM, 64)
        + "_"
        + _random(_ALNUM, 4)
        + "_"
        + str(uuid.UUID(int=_RNG.getrandbits(128))),
    ),
}
USER_TOKEN = "acme_" + _random(string.ascii_lowercase + string.digits, 12)
ALLOWED = "sk_test_" + _random(_ALNUM, 30)  # a published test key the user allows


def _document_ids(world: PiWorld) -> list[str]:
    async def fetch() -> list[str]:
        async with ApiClient(Configuration(host=world.base_url)) as client:
            listing = await DocumentsApi(client).list_documents(world.bank_id, limit=100)
        return [str(item.id) for item in listing.items]

    return asyncio.run(fetch())


def test_new_vendor_formats_and_user_rules_end_to_end(pi_world: PiWorld, tmp_path: Path) -> None:
    path = pi_world.state_dir / "config.json"
    config = json.loads(path.read_text())
    config["redaction"] = {"patterns": {"acme_token": "acme_[a-z0-9]{12}"}, "allow": [ALLOWED]}
    path.write_text(json.dumps(config))
    repo = make_repo(tmp_path / "echo", "https://example.com/team/echo.git")
    pi_world.register(repo)

    marker = f"Vega{uuid.uuid4().hex[:8]}"
    lines = "\n".join(f"- {kind}: {value}" for kind, value in NEW_SECRETS.items())
    code = "\n".join(template.format(value) for template, value in NEW_FORMS.values())
    pi_world.run(
        repo,
        f"Our deploy host is called {marker}. Its credentials, for the record:\n{lines}\n"
        f"- internal: {USER_TOKEN}\n- public test key: {ALLOWED}\nand in the build:\n{code}\n",
    )
    pi_world.drain()

    bank = BankView(pi_world.base_url, pi_world.bank_id)
    held = bank.everything(_document_ids(pi_world))
    assert marker in held, "the session was not retained"
    for kind, value in NEW_SECRETS.items():
        assert value not in held, kind
        assert f"[REDACTED:{kind}]" in held, kind
    for form, (_, value) in NEW_FORMS.items():
        assert value not in held, form
    assert USER_TOKEN not in held and "[REDACTED:acme_token]" in held
    assert ALLOWED in held, "the allow entry was redacted all the same"

    # A later session is given the memory of the first: no secret reaches the model with it.
    requests_before = len(pi_world.pi_requests())
    pi_world.run(repo, f"What is our deploy host {marker} called?")
    later = json.dumps(pi_world.pi_requests()[requests_before:])
    assert "<hindsight-memory" in later, "the later session was given no memory"
    for kind, value in NEW_SECRETS.items():
        assert value not in later, kind
    for form, (_, value) in NEW_FORMS.items():
        assert value not in later, form
    assert USER_TOKEN not in later
