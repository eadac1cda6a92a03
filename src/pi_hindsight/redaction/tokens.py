"""Secrets with a recognisable shape: vendor tokens (``ghp_…``, ``AKIA…``, ``xoxb-…``), JSON Web
Tokens, credentials in URLs, ``Authorization`` headers.

Formats follow detect-secrets 1.5's plugins, gitleaks' rules and hindsight_api's
memory_defense. Each pattern is built so that ``re.finditer`` runs in linear time on any input:

- it starts with a literal (``re`` scans for it in C), and the left boundary is a lookbehind
  placed *after* that literal (``ghp_(?<![A-Za-z0-9_]ghp_)…``), so it costs nothing until the
  literal is found and rejects a start inside a longer run at once;
- the boundary class holds every character of the first repeated class, so no start inside a
  run that an earlier attempt already scanned gets past the lookbehind: failed attempts scan
  disjoint stretches of text;
- repeats are possessive or cannot backtrack (the next token is outside their class).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pi_hindsight.redaction.checksums import crc32_base62_valid
from pi_hindsight.redaction.placeholders import DOCUMENTED_EXAMPLES, is_filler, is_placeholder
from pi_hindsight.redaction.source import Hit, Source
from pi_hindsight.redaction.values import (
    entropy,
    is_mangled,
    is_name_like,
    is_not_a_secret,
    looks_random,
)

__all__ = ["PATTERNS", "TokenPattern", "find_tokens", "token"]

_END = r"(?![A-Za-z0-9_])"


@dataclass(frozen=True)
class TokenPattern:
    kind: str
    regex: re.Pattern[str]
    # (literal, case-insensitive): one of them occurs in every match (see triggers.py).
    triggers: tuple[tuple[str, bool], ...]
    group: int = 0  # the part of the match that is the secret
    back: int = 0  # the secret starts this many characters before the match
    lowered: bool = False  # run on the ASCII-lowered text (for case-insensitive literals)
    keep: Callable[[str], bool] | None = None  # the secret's text -> is it one?


def token(
    kind: str,
    prefixes: str,
    body: str,
    *,
    boundary: str = "A-Za-z0-9_",
    end: bool = True,
    keep: Callable[[str], bool] | None = None,
    shaped: bool | Callable[[str], bool] = False,
) -> tuple[TokenPattern, ...]:
    """One pattern per literal prefix (space-separated): prefix, left boundary, body. A match
    whose body is a placeholder (placeholders.py) is no secret; ``keep`` may reject more.

    ``shaped``: ``body`` pins the vendor's exact structure (length and alphabet), or the
    predicate says which matches have it: such a body is a token unless it is a filler
    (``placeholders.is_filler``), even when it reads as typed by hand."""
    patterns = []
    for prefix in prefixes.split():
        literal = re.escape(prefix)
        regex = literal + f"(?<![{boundary}]{literal})(?:{body})" + (_END if end else "")
        judge = _not_placeholder(len(prefix), keep, shaped)
        patterns.append(TokenPattern(kind, re.compile(regex), ((prefix, False),), keep=judge))
    return tuple(patterns)


def _not_placeholder(
    prefix_length: int,
    keep: Callable[[str], bool] | None,
    shaped: bool | Callable[[str], bool] = False,
) -> Callable[[str], bool]:
    def judge(secret: str) -> bool:
        if secret in DOCUMENTED_EXAMPLES:
            return False
        body = secret[prefix_length:]
        exact = shaped(secret) if callable(shaped) else shaped
        if is_filler(body) if exact else is_placeholder(body):
            return False
        return keep is None or keep(secret)

    return judge


def _github(secret: str) -> bool:
    """GitHub and npm tokens: a valid CRC32 makes one certain; otherwise the body must not be
    flat (2.5+ bits of entropy per character: ``a1B2a1B2…`` is a stand-in; checksums.py)."""
    body = secret[4:]
    return crc32_base62_valid(body[:36]) or entropy(body) >= 2.5


def _real_value(secret: str) -> bool:
    return not is_not_a_secret(secret)


def _real_password(secret: str) -> bool:
    return _real_value(secret) and len(set(secret)) > 1


def _real_token(secret: str) -> bool:
    return not is_not_a_secret(secret) and not is_name_like(secret)


# OpenAI's project, service-account and admin keys carry "T3BlbkFJ" (base64 of "OpenAI") in the
# middle: one of those forms without it is a malformed near-miss.
_OPENAI_FORMS = ("sk-proj-", "sk-svcacct-", "sk-admin-")
_OPENAI_MARK = "T3BlbkFJ"


def _query_token(secret: str) -> bool:
    """A URL's query value: a token, not a generated token mangled (values.is_mangled)."""
    return _real_token(secret) and not is_mangled(secret)


def _huggingface(secret: str) -> bool:
    """Hugging Face access tokens are ``hf_`` and 34 letters (older ones with digits): one of
    letters only is a token even when they happen to read as camelCase humps; other bodies must
    not be names."""
    body = secret[3:]
    return (len(body) == 34 and body.isascii() and body.isalpha()) or _real_token(secret)


def _openai(secret: str) -> bool:
    """``sk-ant-`` is Anthropic's: a key there that fails Anthropic's structure is no OpenAI key;
    nor is a project, service-account or admin key without OpenAI's mark."""
    if secret.startswith(_OPENAI_FORMS) and _OPENAI_MARK not in secret:
        return False
    return not secret.startswith("sk-ant-") and _real_token(secret)


def _slack(secret: str) -> bool:
    """Slack tokens end in a random part of 10+ characters with a letter (``xoxb-<team
    id>-<bot id>-<24 characters>``, ``xoxp-…-<32 hex>``, ``xoxe-1-…``) or, in the oldest forms,
    are two or more long numeric ids (``xoxa-<11 digits>-<13 digits>``); ``xoxb-12345-abcd234``,
    ``xoxp-1234567890`` and ``xoxb-my-bot-token`` are not tokens. The numeric ids (team, user,
    bot) are 6 digits or more: ``xoxp-1234-1234-1234-…`` is made up."""
    parts = secret.split("-")[1:]
    last = parts[-1]
    ids = parts[1:-1] if len(parts[0]) == 1 else parts[:-1]  # (after a version: xoxe-1-…)
    if any(part.isdigit() and len(part) < 6 for part in ids):
        return False
    if len(last) >= 10 and not last.isdigit():
        return _real_token(secret)
    return len(parts) >= 2 and all(len(part) >= 8 and part.isdigit() for part in parts)


_ANTHROPIC_FORMS = ("sk-ant-api03-", "sk-ant-admin01-")


def _anthropic(secret: str) -> bool:
    """Anthropic keys of the current forms (``sk-ant-api03-``, ``sk-ant-admin01-``) are 93
    characters and ``AA`` after that prefix; one of those forms with another length is a
    malformed near-miss. Older forms keep the generic rule."""
    for form in _ANTHROPIC_FORMS:
        if secret.startswith(form):
            return len(secret) == len(form) + 95 and secret.endswith("AA")
    return True


def _jwt(secret: str) -> bool:
    """A JSON Web Token's header is base64url JSON naming its algorithm (RFC 7515/7519):
    ``eyJ`` followed by anything else is no token. Unsigned tokens (``alg: none``, an empty
    or missing signature) still carry their claims and are redacted."""
    header = secret.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(decoded, dict) and "alg" in decoded


_DASHED = "A-Za-z0-9_-"
_B64 = "A-Za-z0-9+/=_"

PATTERNS: tuple[TokenPattern, ...] = (
    # Hindsight API keys: hsk_<32 hex> from secrets.token_hex(16), optionally _<hex signature>;
    # hsk_sys_ marks a system key (hindsight_api/extensions/memory_defense.py).
    *token("hindsight_api_key", "hsk_", r"(?:sys_)?[0-9a-f]{32}(?:_[0-9a-f]{8,}+)?", shaped=True),
    *token("npm_token", "npm_", r"[A-Za-z0-9]{36}", keep=_github, shaped=True),
    TokenPattern(
        "npm_token",
        re.compile(r":_(?:authToken|auth|password)[ \t]*=[ \t]*([^\s\"']{1,2048}+)"),
        ((":_auth", False), (":_password", False)),
        group=1,
        keep=_real_value,
    ),
    *token(
        "anthropic_api_key",
        "sk-ant-",
        r"[A-Za-z0-9_-]{20,}+",
        boundary=_DASHED,
        end=False,
        keep=_anthropic,
        shaped=lambda secret: secret.startswith(_ANTHROPIC_FORMS),
    ),
    *token("openrouter_api_key", "sk-or-v1-", r"[0-9a-f]{64}", boundary=_DASHED, shaped=True),
    *token(
        "openai_api_key",
        "sk-",
        r"(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}+",
        boundary=_DASHED,
        end=False,
        keep=_openai,
    ),
    *token("openai_session_token", "sess-", r"[A-Za-z0-9]{40}"),
    *token(
        "stripe_key", "sk_live_ sk_test_ sk_prod_ rk_live_ rk_test_ rk_prod_", r"[A-Za-z0-9]{20,}+"
    ),
    *token("stripe_key", "whsec_", r"[A-Za-z0-9]{24,}+"),
    *token("elevenlabs_api_key", "sk_", r"[0-9a-f]{48}"),
    *token("github_token", "ghp_ gho_ ghu_ ghs_ ghr_", r"[A-Za-z0-9]{36,}+", keep=_github),
    *token("github_token", "github_pat_", r"[A-Za-z0-9_]{40,}+"),
    # GitHub App installation tokens in their newer form: ghs_<installation id>_<JWT>.
    *token(
        "github_token", "ghs_", r"[0-9]{1,20}+_eyJ[A-Za-z0-9_.-]{20,}+", boundary=_DASHED, end=False
    ),
    # GitLab: personal, deploy, feed, runner, CI build and feature-flag tokens are 20 characters
    # (the standard form: the exact shape) or longer (routable tokens carry more); a body of
    # words is no token (glpat-my_docs_token…).
    *token(
        "gitlab_token",
        "glpat- gldt- glft- glrt- glcbt- glffct-",
        r"[A-Za-z0-9_-]{20,}+",
        boundary=_DASHED,
        end=False,
        keep=_real_token,
        shaped=lambda secret: len(secret.partition("-")[2]) == 20,
    ),
    # The kinds of a fixed length (GitLab's token overview; detect-secrets' plugin): SCIM and
    # runner registration 20 to 50, incoming mail 25, pipeline trigger 40, OAuth application
    # secret 64, agent 50 or more.
    *(
        pattern
        for prefixes, length in (
            ("glsoat- GR1348941", "{20,50}+"),
            ("glimt-", "{25}"),
            ("glptt-", "{40}"),
            ("gloas-", "{64}"),
            ("glagent-", "{50,}+"),
        )
        for pattern in token(
            "gitlab_token",
            prefixes,
            "[A-Za-z0-9_-]" + length + "(?![A-Za-z0-9_-])",
            boundary=_DASHED,
            end=False,
            shaped=True,
        )
    ),
    *token(
        "slack_token",
        "xoxa- xoxb- xoxp- xoxo- xoxs- xoxr- xoxe-",
        r"[0-9A-Za-z-]{10,}+",
        boundary=_DASHED,
        end=False,
        keep=_slack,
    ),
    *token("slack_token", "xapp-", r"[0-9]-[A-Za-z0-9-]{20,}+", boundary=_DASHED, end=False),
    # Slack incoming webhooks (services/T…/B…/<secret>) and workflow webhooks and triggers
    # (workflows/T…/A…/<id>/<secret>), or one 43-56 character path.
    TokenPattern(
        "slack_webhook",
        re.compile(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?:T[A-Za-z0-9_]{1,64}+"
            r"/[AB][A-Za-z0-9_]{1,64}+/[A-Za-z0-9_/]{1,256}+|[A-Za-z0-9+/]{43,56}+(?![A-Za-z0-9+/]))"
        ),
        tuple(
            (f"hooks.slack.com/{path}/", False) for path in ("services", "workflows", "triggers")
        ),
    ),
    # Sidekiq Pro/Enterprise credentials (BUNDLE_GEMS__CONTRIBSYS__COM=<8 hex>:<8 hex>).
    TokenPattern(
        "sidekiq_secret",
        re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{8}:[0-9a-f]{8}(?![0-9A-Za-z])"),
        (("contribsys", True),),
    ),
    TokenPattern(
        "discord_webhook",
        re.compile(r"https://discord(?:app)?\.com/api/webhooks/[0-9]{1,24}+/[A-Za-z0-9_-]{20,}+"),
        (("/api/webhooks/", False),),
    ),
    TokenPattern(
        "teams_webhook",
        re.compile(r"\.webhook\.office\.com/webhookb2/[^\s\"'<>]{20,2048}+"),
        ((".webhook.office.com/webhookb2/", False),),
    ),
    TokenPattern(
        "aws_access_key_id",
        re.compile(r"A(?<![A-Za-z0-9_]A)(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[0-9A-Z]{16}" + _END),
        tuple((literal, False) for literal in ("AKIA", "ASIA", "ABIA", "ACCA", "A3T")),
        keep=lambda secret: not is_placeholder(secret[4:]),
    ),
    *token(
        "aws_session_token",
        "IQoJb3JpZ2luX2Vj FwoGZXIvYXdzE",
        r"[A-Za-z0-9+/]{100,}+={0,2}",
        boundary=_B64,
        end=False,
    ),
    *token("google_api_key", "AIza", r"[0-9A-Za-z_-]{35}", boundary=_DASHED, shaped=True),
    *token("google_oauth_token", "ya29.", r"[0-9A-Za-z_-]{20,}+", boundary=_DASHED, end=False),
    *token(
        "google_oauth_client_secret", "GOCSPX-", r"[A-Za-z0-9_-]{28}", boundary=_DASHED, shaped=True
    ),
    *token("huggingface_token", "hf_", r"[A-Za-z0-9]{34}", keep=_huggingface, shaped=True),
    *token("huggingface_token", "api_org_", r"[A-Za-z0-9]{34}", shaped=True),
    *token("pypi_token", "pypi-AgE", r"[A-Za-z0-9_-]{50,}+", boundary=_DASHED, end=False),
    *token("rubygems_token", "rubygems_", r"[0-9a-f]{48}", shaped=True),
    *token("nuget_key", "oy2", r"[a-z0-9]{43}"),
    # Docker personal access tokens: dckr_pat_ and exactly 27 characters (Docker's docs).
    *token(
        "dockerhub_token",
        "dckr_pat_",
        r"[A-Za-z0-9_-]{27}(?![A-Za-z0-9_-])",
        boundary=_DASHED,
        end=False,
        shaped=True,
    ),
    *token("dockerhub_token", "dckr_oat_", r"[A-Za-z0-9_-]{20,}+", boundary=_DASHED, end=False),
    *token(
        "sendgrid_key",
        "SG.",
        r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        boundary=_DASHED,
        shaped=True,
    ),
    *token("twilio_key", "AC SK", r"[0-9a-f]{32}"),
    *token("square_token", "sq0atp- sq0csp-", r"[0-9A-Za-z_-]{22,}+", boundary=_DASHED, end=False),
    # Mailchimp: 32 hex, then -us<datacenter>; found at "-us", the key starts 32 before it.
    TokenPattern(
        "mailchimp_key",
        re.compile(
            r"-us[0-9](?:[0-9](?<=(?<![A-Za-z0-9_])[0-9a-f]{32}-us[0-9]{2})|"
            r"(?<=(?<![A-Za-z0-9_])[0-9a-f]{32}-us[0-9]))" + _END
        ),
        (("-us", False),),
        back=32,
    ),
    *token("mailgun_key", "key-", r"[0-9a-z]{32}"),
    *token(
        "heroku_api_key",
        "HRKU-",
        r"(?:AA[0-9A-Za-z_-]{58}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
        r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12})",
        boundary=_DASHED,
    ),
    *token("databricks_token", "dapi", r"(?:[0-9a-f]{32}|[0-9A-F]{32})(?:-[0-9]+)?", shaped=True),
    *token("digitalocean_token", "dop_v1_ doo_v1_ dor_v1_", r"[0-9a-f]{64}", shaped=True),
    *token("shopify_token", "shpat_ shpca_ shppa_ shpss_", r"[0-9a-fA-F]{32}|[A-Za-z0-9]{32,40}+"),
    *token("groq_api_key", "gsk_", r"[A-Za-z0-9]{52}", shaped=True),
    *token("xai_api_key", "xai-", r"[A-Za-z0-9]{70,}+"),
    *token("replicate_token", "r8_", r"[A-Za-z0-9]{37}", shaped=True),
    *token("perplexity_api_key", "pplx-", r"[A-Za-z0-9]{48}", shaped=True),
    *token(
        "tavily_api_key", "tvly-", r"(?:dev-|prod-)?[A-Za-z0-9]{32}", boundary=_DASHED, shaped=True
    ),
    *token("langsmith_api_key", "lsv2_pt_ lsv2_sk_", r"[0-9a-f]{32}_[0-9a-f]{10}", shaped=True),
    *token("linear_api_key", "lin_api_", r"[A-Za-z0-9]{40,}+", shaped=True),
    # Notion integration tokens: ntn_, 11 digits, 35 letters and digits.
    *token("notion_token", "ntn_", r"[0-9]{11}[A-Za-z0-9]{35}", shaped=True),
    *token("notion_token", "secret_", r"[A-Za-z0-9]{43}", keep=_real_token),
    *token("vault_token", "hvs. hvb. hvr.", r"[A-Za-z0-9_-]{24,}+", boundary=_DASHED, end=False),
    *token("doppler_token", "dp.pt. dp.st. dp.sa. dp.ct. dp.scim. dp.audit.", r"[A-Za-z0-9]{40,}+"),
    TokenPattern(
        "terraform_token",
        re.compile(
            r"\.atlasv1\.(?<=(?<![A-Za-z0-9_])[A-Za-z0-9]{14}\.atlasv1\.)[A-Za-z0-9_=-]{60,}+"
        ),
        ((".atlasv1.", False),),
        back=14,
        keep=lambda secret: not is_filler(secret),
    ),
    *token("age_secret_key", "AGE-SECRET-KEY-1", r"[0-9A-Z]{58}", shaped=True),
    *token(
        "onepassword_token", "ops_eyJ", r"[A-Za-z0-9+/=_-]{100,}+", boundary=_B64 + "-", end=False
    ),
    *token("postman_api_key", "PMAK-", r"[0-9a-f]{24}-[0-9a-f]{34}", shaped=True),
    # Sentry organisation tokens: sntrys_<base64 of JSON claims>_<base64 secret>.
    *token(
        "sentry_token",
        "sntrys_eyJ",
        r"[A-Za-z0-9+/]{40,}+={0,2}_[A-Za-z0-9+/]{40,}+={0,2}",
        boundary=_B64 + "-",
        end=False,
    ),
    *token("sentry_token", "sntryu_", r"[0-9a-f]{64}", shaped=True),
    *token("grafana_token", "glsa_", r"[A-Za-z0-9]{32}_[0-9a-f]{8}", shaped=True),
    *token("grafana_token", "glc_", r"[A-Za-z0-9+/]{32,}+={0,2}", boundary=_B64, end=False),
    *token("newrelic_key", "NRAK-", r"[A-Z0-9]{27}", shaped=True),
    *token("pulumi_token", "pul-", r"[0-9a-f]{40}", shaped=True),
    *token("supabase_token", "sbp_", r"[0-9a-f]{40}", shaped=True),
    *token(
        "atlassian_token", "ATATT3", r"[A-Za-z0-9_=-]{150,}+", boundary="A-Za-z0-9_=-", end=False
    ),
    *token("bitbucket_token", "ATBB", r"[A-Za-z0-9]{32}", shaped=True),
    *token("sonar_token", "sqp_ squ_ sqa_", r"[0-9a-f]{40}", shaped=True),
    *token("figma_token", "figd_", r"[A-Za-z0-9_-]{40,}+", boundary=_DASHED, end=False),
    *token("netlify_token", "nfp_", r"[A-Za-z0-9]{36}", shaped=True),
    *token(
        "planetscale_token",
        "pscale_pw_ pscale_tkn_ pscale_oauth_",
        r"[A-Za-z0-9_=.-]{32,}+",
        boundary=_DASHED,
        end=False,
    ),
    *token("buildkite_token", "bkua_", r"[0-9a-f]{40}", shaped=True),
    *token("flyio_token", "fm2_", r"[A-Za-z0-9+/=,_-]{40,}+", boundary=_B64 + ",-", end=False),
    *token(
        "mapbox_token",
        "sk.eyJ",
        r"[A-Za-z0-9_-]{20,}+\.[A-Za-z0-9_-]{20,}+",
        boundary=_DASHED,
        end=False,
    ),
    TokenPattern(
        "azure_storage_key",
        re.compile(r"AccountKey=([A-Za-z0-9+/]{40,}+={0,2})"),
        (("AccountKey=", False),),
        group=1,
    ),
    TokenPattern(
        "azure_storage_key",
        re.compile(r"SharedAccessKey=([A-Za-z0-9+/]{20,}+={0,2})"),
        (("SharedAccessKey=", False),),
        group=1,
    ),
    # Azure AD (Entra) client secrets: 3 characters, a digit, Q~, 31-34 characters.
    TokenPattern(
        "azure_client_secret",
        re.compile(
            r"Q~(?<=(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}[0-9]Q~)[A-Za-z0-9_~.-]{31,34}+"
            r"(?![A-Za-z0-9_~.-])"
        ),
        (("Q~", False),),
        back=4,
        keep=lambda secret: not is_filler(secret),
    ),
    *token(
        "jwt",
        "eyJ",
        r"[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+(?:\.[A-Za-z0-9_-]{8,}+|\.?)",
        boundary=_DASHED,
        end=False,
        keep=_jwt,
    ),
    # Discord bot tokens: <24-26 characters, base64 of the bot's id: M, N or O first>.<6>.<27+>.
    TokenPattern(
        "discord_token",
        re.compile(
            r"[MNO](?<![A-Za-z0-9_-][MNO])[A-Za-z0-9_-]{23,25}+\.[A-Za-z0-9_-]{6}\."
            r"[A-Za-z0-9_-]{27,}+"
        ),
        (("M", False), ("N", False), ("O", False)),
        keep=lambda secret: not is_filler(secret),
    ),
    # Telegram bot tokens: <bot id, 5-16 digits>:A<34 characters> (AA… in current tokens).
    TokenPattern(
        "telegram_bot_token",
        re.compile(r"[0-9](?<![0-9][0-9])[0-9]{4,15}+:A[0-9A-Za-z_-]{34}(?![A-Za-z0-9_-])"),
        ((":A", False),),
        keep=lambda secret: _real_token(secret.partition(":")[2]),
    ),
    # Credentials inside a URL: scheme://user:PASSWORD@host (the user name is kept; may be empty;
    # a password that repeats the user name is a default or a demo: values.is_stand_in_pair).
    TokenPattern(
        "url_credentials",
        # (a host starts with a letter, a digit or "[": "…:pass@?abbit" is a mangled string)
        re.compile(
            r"://([^\s:/?#@\[\]\"'<>]{0,256}+):(?!\1@)([^\s/?#@\"'<>]{1,256}+)@(?=[A-Za-z0-9\[])"
        ),
        (("://", False),),
        group=2,
        keep=_real_password,
    ),
    # Secrets in URL query strings: ?token=…, &api_key=…, &sig=…, X-Amz-Signature=…
    TokenPattern(
        "url_query_secret",
        re.compile(
            r"[?&](?:access_token|refresh_token|id_token|token|api[_-]?key|apikey|key|secret|"
            r"client_secret|password|passwd|pwd|sig|signature|auth|x-amz-signature|"
            r"x-amz-security-token|x-goog-signature|x-goog-credential)=([^&\s#\"'<>]{6,2048}+)"
        ),
        tuple(
            (literal, True)
            for literal in (
                "token=",
                "key=",
                "secret=",
                "password=",
                "passwd=",
                "pwd=",
                "sig=",
                "signature=",
                "auth=",
                "credential=",
            )
        ),
        group=1,
        lowered=True,
        keep=_query_token,
    ),
    # ?tokenkey=… (DronaHQ and others); its value holds no "?" (text made of "?tokenkey="
    # repeated is no run of values)
    TokenPattern(
        "url_query_secret",
        re.compile(r"[?&]token[_-]?key=([^&\s#\"'<>?]{6,2048}+)"),
        (("key=", True),),
        group=1,
        lowered=True,
        keep=_query_token,
    ),
    # Authorization headers and bare bearer tokens (matched in the lowered text)
    TokenPattern(
        "authorization",
        re.compile(
            r"authorization[\"']?(?:[ \t]{0,16}[:=][ \t]{0,16}[\"']?(?:(?:basic|bearer|token|"
            r"digest|bot|apikey|api-key|sso-key|key|hmac)[ \t]{1,16})?|[ \t]{1,16}[\"']?(?:basic|"
            r"bearer|token|digest)[ \t]{1,16})([a-z0-9._~+/=:@-]{8,4096}+)"
        ),
        (("authorization", True),),
        group=1,
        lowered=True,
        keep=_real_token,
    ),
    TokenPattern(
        "bearer_token",
        re.compile(r"bearer[ \t]{1,16}+([a-z0-9._~+/-]{16,4096}+=*+)"),
        (("bearer", True),),
        group=1,
        lowered=True,
        keep=lambda secret: looks_random(secret, 16),
    ),
)


# A token glued to more token characters by one no token alphabet has (``…07A?XSYHvHK1…``) was
# mangled in a paste or by a test (values.is_mangled); a URL query after a token names a
# parameter (``?key=``, ``&x=``), which is not followed by "=" or "&" here. ("$" is left out: a
# shell variable may follow a token, ``ghp_…$SUFFIX``.)
_GLUED = re.compile(r"[?^][A-Za-z0-9_-]{8,}+(?![=&])")


def find_tokens(source: Source, patterns: Iterable[TokenPattern]) -> Iterator[Hit]:
    """Findings of ``patterns`` (those whose trigger literals occur) in ``source``."""
    text = source.text
    for pattern in patterns:
        haystack = source.lowered if pattern.lowered else text
        for match in pattern.regex.finditer(haystack):
            start, end = match.span(pattern.group)
            start -= pattern.back
            if start >= end or _GLUED.match(text, end):
                continue
            if pattern.keep is None or pattern.keep(text[start:end]):
                yield (start, end, pattern.kind)
