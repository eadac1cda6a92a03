"""The redaction module as it was before issue 9, kept unchanged as the baseline of
bench/redaction_bench.py (not used by pi-hindsight).

Secret redaction: a pure, fast function applied to everything before it is retained.

Public API::

    redact(text) -> Redacted(text, findings)
    Finding(kind, start, end)      # where in the *original* text, and what kind of secret
    KINDS                          # every kind this module can report

``redact`` replaces each secret with ``[REDACTED:<kind>]`` and reports what it replaced (never the
secret itself). It is deterministic and pure (no I/O, no configuration), so the same function can
run on every retain and on every recall. Detection is best effort (R-EVID-6): what is and is not
caught is listed in ``docs/security.md``; why this is our own pattern set rather than
``detect-secrets`` is in ``docs/adr/0005-secret-redaction.md``.

How it stays fast: every pattern is anchored on something literal (a vendor prefix, ``://``,
``BEGIN``, ``=`` or ``:``) so Python's regex engine can skip ahead, a cheap pre-check skips the
assignment patterns for text without ``=``/``:``, and all matches are merged as spans in one pass
(so overlapping detectors never corrupt each other's replacement).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["KINDS", "Finding", "Redacted", "redact"]

# Token patterns begin with their literal prefix so ``re`` can scan for it quickly; the left
# token boundary is checked in Python (a leading lookbehind would disable that fast scan). The
# boundary is the ASCII token alphabet: ``\b`` is Unicode-aware, so a key butted against CJK text
# would have none (Hindsight's own memory_defense makes the same choice).
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_END = r"(?![A-Za-z0-9_])"

# (kind, pattern, group, bounded, needles): ``group`` is the part that is the secret (0: the whole
# match); ``bounded``: the match must not follow a token character; ``needles``: lowercase
# literals one of which must occur in the lowercased text for the pattern to run at all (a
# C-speed ``in`` check that skips patterns whose first character is not a literal). Vendor
# formats follow detect-secrets 1.5's plugins and hindsight_api's memory_defense.
_TOKEN_PATTERNS: tuple[tuple[str, str, int, bool, tuple[str, ...]], ...] = (
    # Hindsight API keys: hsk_<32 hex> from secrets.token_hex(16), optionally _<hex signature>;
    # hsk_sys_ marks a system key (hindsight_api/extensions/memory_defense.py).
    ("hindsight_api_key", r"hsk_(?:sys_)?[0-9a-f]{32}(?:_[0-9a-f]{8,})?" + _END, 0, True, ()),
    # npm: granular/automation tokens (npm_ + 36 base62); any token in .npmrc form
    ("npm_token", r"npm_[A-Za-z0-9]{36}" + _END, 0, True, ()),
    ("npm_token", r":_(?:authToken|auth|password)\s*=\s*([^\s\"']+)", 1, False, ()),
    ("anthropic_api_key", r"sk-ant-[A-Za-z0-9_-]{20,}", 0, True, ()),
    ("openai_api_key", r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", 0, True, ("sk-",)),
    ("stripe_key", r"sk_(?:live|test)_[A-Za-z0-9]{20,}", 0, True, ()),
    ("stripe_key", r"rk_(?:live|test)_[A-Za-z0-9]{20,}", 0, True, ()),
    ("github_token", r"gh[pousr]_[A-Za-z0-9]{36,}", 0, True, ()),
    ("github_token", r"github_pat_[A-Za-z0-9_]{40,}", 0, True, ()),
    ("gitlab_token", r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|oas)-[A-Za-z0-9_-]{20,}", 0, True, ()),
    ("slack_token", r"xox[abposr]-[0-9A-Za-z-]{10,}", 0, True, ("xox",)),
    ("slack_webhook", r"https://hooks\.slack\.com/services/T\w+/B\w+/\w+", 0, False, ()),
    (
        "aws_access_key_id",
        r"A(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[0-9A-Z]{16}" + _END,
        0,
        True,
        ("akia", "asia", "abia", "acca", "a3t"),
    ),
    ("google_api_key", r"AIza[0-9A-Za-z_-]{35}" + _END, 0, True, ()),
    ("google_oauth_token", r"ya29\.[0-9A-Za-z_-]{20,}", 0, True, ("ya29.",)),
    ("huggingface_token", r"hf_[A-Za-z0-9]{30,}" + _END, 0, True, ()),
    ("pypi_token", r"pypi-AgE[A-Za-z0-9_-]{50,}", 0, True, ("pypi-",)),
    ("sendgrid_key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", 0, True, ()),
    ("twilio_key", r"AC[0-9a-f]{32}" + _END, 0, True, ()),
    ("twilio_key", r"SK[0-9a-f]{32}" + _END, 0, True, ()),
    ("square_token", r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}", 0, True, ()),
    ("mailchimp_key", r"-us[0-9]{1,2}" + _END, 0, False, ()),  # widened to the key in Python
    ("databricks_token", r"dapi[0-9a-f]{32}" + _END, 0, True, ()),
    ("digitalocean_token", r"do[opr]_v1_[0-9a-f]{64}" + _END, 0, True, ()),
    ("shopify_token", r"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}" + _END, 0, True, ()),
    ("groq_api_key", r"gsk_[A-Za-z0-9]{40,}" + _END, 0, True, ()),
    ("azure_storage_key", r"AccountKey=([A-Za-z0-9+/=]{80,})", 1, False, ()),
    ("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", 0, True, ()),
    (
        "discord_token",
        r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}",
        0,
        True,
        ("m", "n", "o"),
    ),
    ("telegram_bot_token", r"[0-9]{8,10}:AA[0-9A-Za-z_-]{33}", 0, True, (":aa",)),
    # A private key block, BEGIN to END across lines; without an END (a truncated paste), the
    # base64 lines that follow the BEGIN line.
    (
        "private_key",
        r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----"
        r"(?:.*?-----END \1PRIVATE KEY\2-----|(?:\r?\n[A-Za-z0-9+/=]{4,}(?=\r?\n|\Z))*)",
        0,
        False,
        (),
    ),
    ("private_key", r"PuTTY-User-Key-File-\d+:.*(?:\r?\n(?!\r?\n).*)*", 0, False, ()),
    # Credentials inside a URL: scheme://user:PASSWORD@host (the user name is kept)
    ("url_credentials", r"://[^\s:/?#@\[\]]+:([^\s/?#@]+)@", 1, False, ()),
    # Secrets in URL query strings: ?token=…, &api_key=…, &sig=…
    *(
        (
            "url_query_secret",
            separator + r"(?:access_token|refresh_token|id_token|token|api[_-]?key|apikey|key|"
            r"secret|client_secret|password|passwd|sig|signature|auth)=([^&\s#\"'<>]{6,})",
            1,
            False,
            (),
        )
        for separator in (r"\?", "&")
    ),
    # Authorization headers and bare bearer tokens
    (
        "authorization",
        r"(?i:authorization)\s*[:=]\s*[\"']?(?i:basic|bearer|token|digest)\s+"
        r"([A-Za-z0-9._~+/=-]{8,})",
        1,
        False,
        ("authorization",),
    ),
    ("bearer_token", r"(?i:bearer)\s+([A-Za-z0-9._~+/-]{16,}=*)", 1, False, ("bearer",)),
)

# Assignments to secret-named keys: ``API_KEY=…``, ``export DB_PASSWORD="…"``, ``password: …``,
# ``"client_secret": "…"``, ``--token=…``. The regex is anchored on the secret word (fast); the
# value rules are in :func:`_assignment`. The key name stays (it tells the reader what was there).
_SECRET_WORDS = ("pass", "pwd", "secret", "token", "key", "credential")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
# After a key name: an optional closing quote, the operator, the value.
_ASSIGNMENT_TAIL = re.compile(
    r"[\"']?[ \t]*(?::=|=>|=|:)[ \t]*(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;)(\]}{&]+)"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NAME_SPLIT = re.compile(r"[_.\-]+")
# A key name is secret when one of its words is one of these (``DB_PASSWORD``, ``authToken``,
# ``client_secret``; not ``max_tokens``, ``passed`` or ``bypass``) ...
_SECRET_PARTS = frozenset(
    {
        "pass",
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "token",
        "apikey",
        "credential",
        "credentials",
        "authtoken",
        "accesstoken",
        "secretkey",
        "privatekey",
    }
)
# ... or it has one of these words right before "key" (``api_key``, ``accessKey``; not ``key``).
_KEY_QUALIFIERS = frozenset(
    {"api", "access", "private", "secret", "session", "signing", "encryption", "master", "client"}
)
# What may precede the key name on a line for the line to be a ``.env``/YAML/shell assignment.
_LINE_HEAD = re.compile(r"[ \t]*(?:export[ \t]+|set[ \t]+|-[ \t]+)?[\"']?")
_TRAILING_COMMENT = re.compile(r"[ \t]+#.*$")

# Values of assignments that are not secrets: references, placeholders, types, code.
_NOT_A_VALUE = re.compile(
    r"""^(?:
        \$\{?[A-Za-z_][A-Za-z0-9_]*\}?          # $VAR, ${VAR}
      | %[A-Za-z_]+%                            # %VAR%
      | <[^>]*>                                 # <your-token>
      | \{\{.*\}\}                              # {{ template }}
      | (?:process\.env|os\.environ|os\.getenv|getenv|settings|config|self|args|options)\b.*
      | (?:none|null|nil|true|false|undefined|str|string|int|bool|bytes|optional\[.*\]|any)
      | [*xX.•_-]{3,}                           # ***, xxx, ...
      | (?:redacted|changeme|placeholder|example|dummy|secret|password|token|required)
    )$""",
    re.IGNORECASE | re.VERBOSE,
)

_COMPILED_TOKENS = tuple(
    (kind, re.compile(pattern, re.DOTALL if kind == "private_key" else 0), group, bounded, needles)
    for kind, pattern, group, bounded, needles in _TOKEN_PATTERNS
)
_ASSIGNMENT_KINDS = ("env_assignment", "secret_assignment")

KINDS: frozenset[str] = frozenset((*(kind for kind, *_ in _TOKEN_PATTERNS), *_ASSIGNMENT_KINDS))


@dataclass(frozen=True)
class Finding:
    """One redacted secret: its kind and its span in the original text (never its value)."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Redacted:
    """The text with every detected secret replaced, and what was replaced."""

    text: str
    findings: tuple[Finding, ...]

    @property
    def changed(self) -> bool:
        return bool(self.findings)


def _assignment(text: str, name_start: int, match: re.Match[str]) -> Finding | None:
    """The secret value of a ``name = value`` match, or None when it is not a secret.

    On a line of its own (``.env``, YAML, shell) the whole rest of the line is the value and any
    non-placeholder value counts. Inline (code, prose) a value counts when quoted, or when it is
    at least 8 characters and not plain letters (so "the token: expires soon" stays).
    """
    start, end = match.span(1)
    value = text[start:end]
    quoted = len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]
    line_start = text.rfind("\n", 0, name_start) + 1
    on_own_line = _LINE_HEAD.fullmatch(text, line_start, name_start) is not None
    if on_own_line and not quoted:
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end
        rest = _TRAILING_COMMENT.sub("", text[start:line_end]).rstrip()
        end = start + len(rest)
        value = rest
    if quoted:
        start, end, value = start + 1, end - 1, value[1:-1]
    stripped = value.strip()
    if (
        not stripped
        or text[end : end + 1] == "("
        or "(" in stripped
        or "[REDACTED:" in stripped
        or (stripped.isdigit() and len(stripped) < 12)
        or _NOT_A_VALUE.match(stripped)
    ):
        return None
    if not (on_own_line or quoted) and (len(stripped) < 8 or stripped.isalpha()):
        return None
    if quoted and len(stripped) < 4:
        return None
    kind = "env_assignment" if on_own_line else "secret_assignment"
    return Finding(kind, start, end)


def _is_secret_name(name: str) -> bool:
    parts = [part for part in _NAME_SPLIT.split(_CAMEL.sub("_", name).lower()) if part]
    if any(part in _SECRET_PARTS for part in parts):
        return True
    return any(
        first in _KEY_QUALIFIERS and second == "key" for first, second in itertools.pairwise(parts)
    )


def _assignment_matches(text: str, lowered: str) -> Iterator[tuple[int, re.Match[str]]]:
    """``name = value`` matches whose name is a secret's, found by C-speed ``find``.

    Yields the start of the name and the match of what follows it.
    """
    seen: set[int] = set()
    for word in _SECRET_WORDS:
        position = lowered.find(word)
        while position >= 0:
            name_start, name_end = position, position + len(word)
            while name_start > 0 and text[name_start - 1] in _NAME_CHARS:
                name_start -= 1
            while name_end < len(text) and text[name_end] in _NAME_CHARS:
                name_end += 1
            if name_start not in seen:
                seen.add(name_start)
                if _is_secret_name(text[name_start:name_end]):
                    match = _ASSIGNMENT_TAIL.match(text, name_end)
                    if match is not None:
                        yield name_start, match
            position = lowered.find(word, name_end)


def _candidates(text: str) -> Iterator[Finding]:
    lowered = text.lower()
    for kind, pattern, group, bounded, needles in _COMPILED_TOKENS:
        if needles and not any(needle in lowered for needle in needles):
            continue
        for match in pattern.finditer(text):
            start, end = match.span(group)
            if bounded and start > 0 and text[start - 1] in _TOKEN_CHARS:
                continue
            if kind == "mailchimp_key":  # the regex found "-usNN"; the key is 32 hex before it
                if start < 32 or not _is_hex(text[start - 32 : start]):
                    continue
                start -= 32
            if end > start and "[REDACTED:" not in text[start:end]:
                yield Finding(kind, start, end)
    if "=" not in text and ":" not in text:
        return
    for name_start, match in _assignment_matches(text, lowered):
        finding = _assignment(text, name_start, match)
        if finding is not None:
            yield finding


def _is_hex(value: str) -> bool:
    return all(char in "0123456789abcdef" for char in value)


def redact(text: str) -> Redacted:
    """Replace every detected secret in ``text`` with ``[REDACTED:<kind>]``.

    Overlapping detections are merged (the earliest-starting detector names the span), so the
    result never contains a fragment of a secret that one detector cut and another missed.
    """
    if not text:
        return Redacted(text, ())
    found = sorted(_candidates(text), key=lambda f: (f.start, -f.end))
    if not found:
        return Redacted(text, ())
    merged: list[Finding] = []
    for finding in found:
        if merged and finding.start < merged[-1].end:
            last = merged[-1]
            if finding.end > last.end:
                merged[-1] = Finding(last.kind, last.start, finding.end)
            continue
        merged.append(finding)
    parts: list[str] = []
    cursor = 0
    for finding in merged:
        parts.append(text[cursor : finding.start])
        parts.append(f"[REDACTED:{finding.kind}]")
        cursor = finding.end
    parts.append(text[cursor:])
    return Redacted("".join(parts), tuple(merged))
