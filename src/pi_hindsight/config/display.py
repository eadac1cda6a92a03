"""How configuration values and problems are shown: never a secret, never raw hostile text.

- A secret-like key (``apiKey``, ``…token``, ``password``, …) is described by its type only:
  "got a list", never the value.
- A URL is shown without its password (``http://user:***@host/…``) or query secrets.
- Any other value or key is escaped (control characters, lone surrogates) and cut short, since it
  may come from a hostile repository file and lands in Pi's UI and the terminal.
- Problems become few notices (:func:`config_notices`): a repository file's, however many, are one
  warning; the user's own files are listed up to a few, then counted.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pi_hindsight.safe_files import printable

if TYPE_CHECKING:
    from pi_hindsight.config.schema import Settings

_SECRET_SUFFIXES = (
    "apikey",
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "bearer",
)
_USERINFO = re.compile(r"//[^/@?#]*@")
NOTICES_PER_FILE = 5
NOT_ALLOWED_IN_REPOSITORY = "ignored: a repository file may not set this"


def is_secret_key(key: str) -> bool:
    """``hindsight.apiKey``, ``x.accessToken``, ``password``…; not ``recall.maxTokens``."""
    last = key.rpartition(".")[2]
    return re.sub(r"[^a-z]", "", last.lower()).endswith(_SECRET_SUFFIXES)


def type_name(value: object) -> str:
    """The JSON type of ``value`` with an article: "a list", "an object", "a number"…"""
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    names.update({list: "a list", dict: "an object", type(None): "null"})
    return names.get(type(value), f"a {type(value).__name__}")


def display_url(url: str) -> str:
    """``url`` without its password (``user:***@``; a lone user part, often a token, is ``***``)
    and with the values of secret-like query parameters hidden."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return _USERINFO.sub("//***@", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:***@{host}" if colon else f"***@{host}"
    if any(is_secret_key(name) for name, _ in query):
        hidden = [(name, "***" if is_secret_key(name) else value) for name, value in query]
        parts = parts._replace(query=urlencode(hidden, safe="*"))
    return urlunsplit(parts._replace(netloc=netloc))


def url_secrets(url: str) -> tuple[str, ...]:
    """The secret parts of ``url`` (password, lone user part, secret query values), to scrub
    from error texts that may quote the URL."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query)
    except ValueError:
        return ()
    found = [parts.password if parts.password else parts.username]
    found.extend(value for name, value in query if is_secret_key(name))
    return tuple(secret for secret in found if secret)


def basic_auth(url: str) -> tuple[str, str | None]:
    """``url`` without userinfo, and the ``Authorization`` header its userinfo stood for."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    token = base64.b64encode(userinfo.encode("utf-8", "replace")).decode("ascii")
    return urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def shown_key(key: str) -> str:
    return printable(key, 120)


@dataclass(frozen=True)
class ConfigProblem:
    source: str  # a file path or an environment variable name
    key: str
    message: str
    fix: str
    level: Literal["info", "warning"] = "warning"
    count: int = 1  # how many problems this line stands for (a "(more)" line: the rest)

    def describe(self) -> str:
        """One line, safe to print: control characters and lone surrogates escaped, cut short."""
        fix = f" ({self.fix})" if self.fix else ""
        return printable(f"{self.source}: {shown_key(self.key)}: {self.message}{fix}", 2_000)


def shown_value(value: object, key: str = "") -> str:
    """A value for a message: a secret's type only, a URL without its password, anything else
    as a short escaped repr."""
    if is_secret_key(key):
        return f"{type_name(value)}; the value is not shown"
    if isinstance(value, str) and key.endswith(("Url", "url", "URL")):
        return printable(repr(display_url(value)), 120)
    if isinstance(value, (dict, list)):
        return f"{type_name(value)} of {len(value)}"
    return printable(repr(value), 80)


def config_notices(
    problems: Iterable[ConfigProblem], project_file: str | None, allowed: Iterable[str]
) -> list[str]:
    """The warnings to show in a session: the repository file's as one, each other file's up to
    :data:`NOTICES_PER_FILE` (then counted). Every problem stays listed in status/validate."""
    by_source: dict[str, list[ConfigProblem]] = {}
    for problem in problems:
        if problem.level == "warning":
            by_source.setdefault(problem.source, []).append(problem)
    notices: list[str] = []
    for source, listed in by_source.items():
        if source == project_file:
            notices.append(_project_notice(source, listed, allowed))
            continue
        notices.extend(problem.describe() for problem in listed[:NOTICES_PER_FILE])
        rest = sum(problem.count for problem in listed[NOTICES_PER_FILE:])
        if rest:
            notices.append(
                f"{printable(source, 300)}: {rest} more problem(s); "
                "see `pi-hindsight config validate`"
            )
    return notices


def _project_notice(source: str, problems: list[ConfigProblem], allowed: Iterable[str]) -> str:
    root = PurePath(source).parent.parent
    see = f"see `pi-hindsight config validate --cwd {root}`"
    unreadable = next((p for p in problems if p.key == "(file)"), None)
    if unreadable is not None:
        return f"{unreadable.describe()}; memory stays as you configured it ({see})"
    count = sum(problem.count for problem in problems)
    not_allowed = [p for p in problems if p.message.startswith(NOT_ALLOWED_IN_REPOSITORY)]
    others = [p for p in problems if p not in not_allowed and p.key != "(more)"]
    parts = [f"{shown_key(p.key)}: {printable(p.message, 200)}" for p in others[:3]]
    if len(others) > 3:
        parts.append("…")
    if not_allowed:
        keys = ", ".join(shown_key(p.key) for p in not_allowed[:6])
        more = ", …" if count - len(others) > 6 else ""
        parts.append(
            f"not allowed here: {keys}{more} (a repository file may only set "
            f"{', '.join(allowed)}, lowering or switching off only)"
        )
    return f"{printable(source, 300)}: {count} setting(s) ignored: {'; '.join(parts)}; {see}"


def redacted(settings: Settings) -> dict[str, Any]:
    """The effective settings as JSON: the API key hidden, the server URL without its password."""
    data = settings.model_dump(by_alias=True, mode="json")
    hindsight = data.get("hindsight", {})
    if hindsight.get("apiKey"):
        hindsight["apiKey"] = "***"
    if hindsight.get("baseUrl"):
        hindsight["baseUrl"] = display_url(hindsight["baseUrl"])
    return data
