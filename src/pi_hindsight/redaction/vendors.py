"""Vendor token formats beyond the common ones of tokens.py (issue 18).

Facts (prefix, length, alphabet) from the vendors' documentation and the public rule sets of
gitleaks, secretlint and trufflehog; the patterns are our own, built as tokens.py describes
(literal first, boundary lookbehind after it, possessive or non-backtracking repeats), and every
match whose body is a placeholder is dropped (placeholders.py).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

from pi_hindsight.redaction.tokens import TokenPattern, token
from pi_hindsight.redaction.values import is_name_like, looks_random

__all__ = ["PATTERNS"]

_SUMO_NAME = (
    r"[Ss][Uu][Mm][Oo](?<![A-Za-z0-9][Ss][Uu][Mm][Oo])[A-Za-z0-9_.-]{0,24}?"
    r"[Aa][Cc][Cc][Ee][Ss][Ss][_.-]?[Ii][Dd]"
)

_DASHED = "A-Za-z0-9_-"
_B64 = "A-Za-z0-9+/=_"


def _atlassian_pat(secret: str) -> bool:
    """An Atlassian Data Center personal access token (Jira, Confluence, Bitbucket) is base64 of
    a 12-digit id, ``:`` and 20 random bytes."""
    try:
        raw = base64.b64decode(secret[-44:], validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(raw) == 33 and raw[:12].isdigit() and raw[12:13] == b":"


def _random_body(length: int) -> Callable[[str], bool]:
    return lambda secret: looks_random(secret[length:], 16)


PATTERNS: tuple[TokenPattern, ...] = (
    # Tailscale: tskey-<kind>-<id>[-<secret>] (auth, api, client, scim, webhook keys; older
    # auth keys: tskey-k<id>CNTRL-<secret>).
    *token(
        "tailscale_key",
        "tskey-",
        r"[A-Za-z0-9]{1,24}+-[A-Za-z0-9]{10,}+(?:-[A-Za-z0-9]{10,}+)?",
        boundary=_DASHED,
    ),
    # Vercel: vcp_ (personal), vci_ (integration), vca_ (app), vcr_ (refresh), vck_ (AI
    # gateway key), 20 to 60 letters and digits.
    *token("vercel_token", "vcp_ vci_ vca_ vcr_ vck_", r"[A-Za-z0-9]{20,60}+", shaped=True),
    # Cloudflare user/account API tokens: 40 letters and digits, then their CRC32 in 8 hex digits
    # (test data rarely carries a valid one: the shape decides); Origin CA keys:
    # v1.0-<24 hex>-<146 hex>.
    *token(
        "cloudflare_token",
        "cfut_ cfat_ cfk_",
        r"[A-Za-z0-9]{40}[0-9a-f]{8}",
        boundary=_DASHED,
        shaped=True,
    ),
    *token(
        "cloudflare_origin_ca_key",
        "v1.0-",
        r"[0-9a-f]{24}-[0-9a-f]{146}",
        boundary=_DASHED,
        shaped=True,
    ),
    # Sourcegraph access tokens: sgp_[<16 hex>_|local_]<40 hex>.
    *token(
        "sourcegraph_token", "sgp_", r"(?:[0-9a-fA-F]{16}_|local_)?[0-9a-fA-F]{40}", shaped=True
    ),
    # 1Password account secret keys: A3-XXXXXX-XXXXXX-XXXXX-XXXXX-XXXXX-XXXXX (or 11 in a run).
    *token(
        "onepassword_secret_key",
        "A3-",
        r"[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
        boundary=_DASHED,
    ),
    # Facebook (Meta) access tokens: EAA + app-specific letters, long base62.
    *token("facebook_token", "EAA", r"[A-Za-z0-9]{60,}+", keep=_random_body(3)),
    # Facebook app tokens: <15-16 digit app id>|<secret>; the secret after the bar is redacted.
    TokenPattern(
        "facebook_token",
        re.compile(
            r"\|(?:(?<=(?<![0-9])[0-9]{15}\|)|(?<=(?<![0-9])[0-9]{16}\|))"
            r"([A-Za-z0-9_-]{27,40}+)(?![A-Za-z0-9_-])"
        ),
        (("|", False),),
        group=1,
        keep=lambda secret: looks_random(secret, 16),
    ),
    # AWS Bedrock long-lived API keys: ABSK + base64 ("BedrockAPIKey-…").
    *token("aws_bedrock_key", "ABSK", r"[A-Za-z0-9+/]{100,}+={0,2}", boundary=_B64, end=False),
    *token(
        "aws_bedrock_key",
        "bedrock-api-key-",
        r"[A-Za-z0-9+/=_-]{40,}+",
        boundary=_DASHED,
        end=False,
    ),
    # Microsoft Entra ID (Azure AD) refresh tokens: "0.A" or "1.A", 50+ URL-safe base64
    # characters, an optional ".<digit>", ".Ag" and 250+ more, optionally ".A" and 200+ more.
    *token(
        "azure_entra_refresh_token",
        "0.A 1.A",
        r"[A-Za-z0-9_-]{50,}+(?:\.[0-9])?\.Ag[A-Za-z0-9_-]{250,}+(?:\.A[A-Za-z0-9_-]{200,}+)?",
        boundary="A-Za-z0-9_.-",
        shaped=True,
    ),
    # A 256-bit hex private key (secp256k1: Ethereum and friends) written with 0x.
    *token("hex_private_key", "0x", r"[0-9a-fA-F]{64}", keep=_random_body(2)),
    # EasyPost production / test keys.
    *token("easypost_key", "EZAK EZTK", r"[A-Za-z0-9]{54}", shaped=True),
    # Dynatrace: dt0c01.<24>.<64>.
    *token("dynatrace_token", "dt0c01.", r"[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}", shaped=True),
    # Adobe client secrets.
    *token("adobe_client_secret", "p8e-", r"[A-Za-z0-9]{32}", boundary=_DASHED, shaped=True),
    # Harness: pat./sat.<22>.<24>.<20>.
    *token("harness_token", "pat. sat.", r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),
    # 42 Intra client secrets.
    *token("intra42_secret", "s-s4t2ud- s-s4t2af-", r"[0-9a-f]{64}", boundary=_DASHED, shaped=True),
    *token(
        "duffel_token",
        "duffel_test_ duffel_live_",
        r"[A-Za-z0-9_=-]{43}",
        boundary=_DASHED,
        shaped=True,
    ),
    *token("frameio_token", "fio-u-", r"[A-Za-z0-9_=-]{64}", boundary=_DASHED, shaped=True),
    *token("readme_api_key", "rdme_", r"[a-z0-9]{70}", shaped=True),
    *token(
        "sendinblue_key", "xkeysib-", r"[0-9a-f]{64}-[A-Za-z0-9]{16}", boundary=_DASHED, shaped=True
    ),
    *token("settlemint_token", "sm_pat_ sm_aat_ sm_sat_", r"[A-Za-z0-9]{16}", shaped=True),
    *token("shippo_token", "shippo_live_ shippo_test_", r"[0-9a-fA-F]{40}", shaped=True),
    *token("prefect_token", "pnu_", r"[A-Za-z0-9]{36}", shaped=True),
    *token(
        "flutterwave_key", "FLWSECK_TEST- FLWSECK-", r"[A-Za-z0-9]{12,}+(?:-X)?", boundary=_DASHED
    ),
    *token("clojars_token", "CLOJARS_", r"[A-Za-z0-9]{60}", shaped=True),
    *token("alibaba_key_id", "LTAI", r"[A-Za-z0-9]{20}", keep=_random_body(4)),
    *token("artifactory_token", "AKCp", r"[A-Za-z0-9]{69}", shaped=True),
    *token("artifactory_token", "cmVmd", r"[A-Za-z0-9]{59}", shaped=True),
    *token("openshift_token", "sha256~", r"[A-Za-z0-9_-]{43}", boundary=_DASHED, shaped=True),
    *token("airtable_token", "pat", r"[A-Za-z0-9]{14}\.[0-9a-f]{64}", shaped=True),
    *token("fly_token", "fo1_", r"[A-Za-z0-9_-]{43}", boundary=_DASHED, shaped=True),
    *token("fly_token", "fm1a_ fm1r_", r"[A-Za-z0-9+/]{100,}+={0,3}", boundary=_B64, end=False),
    *token("beamer_token", "b_", r"[A-Za-z0-9=_-]{44}", boundary=_DASHED, keep=_random_body(2)),
    *token(
        "mapbox_token",
        "pk.eyJ",
        r"[A-Za-z0-9_-]{20,}+\.[A-Za-z0-9_-]{20,}+",
        boundary=_DASHED,
        end=False,
    ),
    # Mapbox secret tokens in their other form: "sk." and 80 to 240 letters, digits, "." and
    # "-" (a Java package under "sk." reads as words: the body must look random).
    *token(
        "mapbox_token",
        "sk.",
        r"[A-Za-z0-9.-]{80,240}+",
        boundary="A-Za-z0-9_.-",
        keep=lambda secret: (
            not is_name_like(secret[3:])
            and looks_random(secret[3:].replace(".", "").replace("-", ""), 16)
        ),
    ),
    # BestTime private keys: pri_ and 32 hex.
    *token("besttime_key", "pri_", r"[0-9a-f]{32}", keep=_random_body(4)),
    *token("typeform_token", "tfp_", r"[A-Za-z0-9_.=-]{59}", boundary=_DASHED, shaped=True),
    *token("scalingo_token", "tk-us-", r"[A-Za-z0-9_-]{48}", boundary=_DASHED, shaped=True),
    *token(
        "authress_key",
        "sc_ ext_ scauth_ authress_",
        r"[A-Za-z0-9]{5,30}+\.[A-Za-z0-9]{4,6}+\.acc[_-][A-Za-z0-9-]{10,32}+\.[A-Za-z0-9+/_=-]{30,120}+",
        boundary=_DASHED,
        end=False,
    ),
    *token("octopus_key", "API-", r"[A-Z0-9]{26}", boundary=_DASHED, keep=_random_body(4)),
    # AWS AppSync API keys: da2- and 26 lowercase letters and digits.
    *token("aws_appsync_key", "da2-", r"[a-z0-9]{26}", boundary=_DASHED, shaped=True),
    # Pinecone API keys: pcsk_<5-6 character id>_<63 letters and digits>.
    *token("pinecone_key", "pcsk_", r"[A-Za-z0-9]{5,6}_[A-Za-z0-9]{63}", shaped=True),
    *token("rootly_token", "rootly_", r"[0-9a-f]{64}", shaped=True),
    # LaunchDarkly SDK, mobile and API access keys: <kind>-<UUID-shaped lowercase base36>.
    *token(
        "launchdarkly_key",
        "sdk- mob- api-",
        r"[a-z0-9]{8}-[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{12}",
        boundary=_DASHED,
        keep=_random_body(4),
    ),
    # Sumo Logic access ids: su + 12 letters and digits, assigned to a sumo…access id name.
    TokenPattern(
        "sumologic_access_id",
        re.compile(_SUMO_NAME + r"[\"']?[ \t]{0,4}[:=]{1,2}[ \t]{0,4}[\"']?(su[A-Za-z0-9]{12})\b"),
        (("sumo", True),),
        group=1,
        keep=lambda secret: looks_random(secret, 14),
    ),
    # Atlassian Data Center personal access tokens: base64 of "<12 digits>:<20 bytes>" (44
    # characters; three digits encode as [MNO][DTjz][AEIMQUYcgk][wxyz0-5]), Bitbucket's with
    # "BBDC-".
    TokenPattern(
        "atlassian_dc_token",
        re.compile(
            r"[MNO](?<![A-Za-z0-9+/_-][MNO])[DTjz][AEIMQUYcgk][wxyz0-5][A-Za-z0-9+/]{40}"
            r"(?![A-Za-z0-9+/=_-])"
        ),
        tuple((a + b + c, False) for a in "MNO" for b in "DTjz" for c in "AEIMQUYcgk"),
        keep=_atlassian_pat,
    ),
    *token("atlassian_dc_token", "BBDC-", r"[A-Za-z0-9+/]{44}", boundary=_B64, keep=_atlassian_pat),
    # Azure Container Registry passwords: 42 base64 characters, "+ACR", 6 letters and digits.
    TokenPattern(
        "azure_container_registry_password",
        re.compile(
            r"\+ACR(?<=(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{42}\+ACR)[A-Za-z0-9]{6}(?![A-Za-z0-9+/=])"
        ),
        (("+ACR", False),),
        back=42,
        keep=lambda secret: looks_random(secret[:42], 16),
    ),
    # Tableau personal access token secrets: <22 base64>==:<32 letters and digits>.
    TokenPattern(
        "tableau_token",
        re.compile(r"==:(?<=(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{22}==:)[A-Za-z0-9]{32}(?![A-Za-z0-9])"),
        (("==:", False),),
        back=22,
        keep=lambda secret: looks_random(secret[25:], 16),
    ),
)
