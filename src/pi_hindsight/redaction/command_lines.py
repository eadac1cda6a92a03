"""Credentials in commands and headers: ``curl -u user:password``, ``auth=("user", "password")``,
``mysql -pPASSWORD``, ``docker login -p PASSWORD``, ``sshpass -p PASSWORD``, ``Cookie:`` values.

All patterns are bounded (no repeat runs past 4096 characters) and start on a literal or a
cheap character test, so they stay linear; each runs only when its trigger literal occurs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from pi_hindsight.redaction.source import Hit, Source
from pi_hindsight.redaction.values import is_not_a_secret, is_stand_in_pair, looks_random

__all__ = [
    "CLI_TRIGGERS",
    "SQL_TRIGGERS",
    "find_auth_pairs",
    "find_cli_passwords",
    "find_cookies",
    "find_curl_users",
    "find_sql_passwords",
]

# -u / --user user:password (curl, httpie -a is not covered): the pair quoted (the user may be
# empty), bare, or a bare user and a quoted password (kevin:'…'). The password is the last group.
_CURL_USER = re.compile(
    r"-(?<![A-Za-z0-9_-]-)(?:u|-user)(?:[ \t]{1,16}|=)(?:"
    r"\"([^\"\r\n:]{0,256}):([^\"\r\n]{0,256})\""
    r"|'([^'\r\n:]{0,256}):([^'\r\n]{0,256})'"
    r"|([^\s:\"'`]{1,256}):\"([^\"\r\n]{1,256})\""
    r"|([^\s:\"'`]{1,256}):'([^'\r\n]{1,256})'"
    r"|([^\s:\"'`]{1,256}):([^\s\"'`]{0,256}))"
)


@functools.lru_cache(maxsize=4096)
def _real_password(value: str) -> bool:
    """Three or more characters with a letter or digit, not only digits (a uid:gid, a port), not
    a reference or placeholder (memoised: repeated values cost one lookup)."""
    return (
        len(value) >= 3
        and not value.isdigit()
        and any(char.isalnum() for char in value)
        and not is_not_a_secret(value)
    )


def find_curl_users(source: Source) -> Iterator[Hit]:
    text = source.text
    for match in _CURL_USER.finditer(text):
        password_group = match.lastindex or 2  # 2, 4, 6, 8 or 10: the alternative that matched
        password = match.group(password_group)
        if is_stand_in_pair(match.group(password_group - 1), password):
            continue
        if _real_password(password):
            yield (*match.span(password_group), "basic_auth")
        elif not password and looks_random(match.group(password_group - 1), 12):
            yield (*match.span(password_group - 1), "basic_auth")  # curl -u sk_test_…: (a key)


# auth=("user", "password"), HTTPBasicAuth("user", "password"), BasicAuth('u', 'p') (lowered)
_AUTH_PAIR = re.compile(
    r"auth[ \t]{0,16}(?:=[ \t]{0,16})?\([ \t]{0,16}([\"'])[^\"'\r\n]{0,256}\1[ \t]{0,16},"
    r"[ \t]{0,16}([\"'])([^\"'\r\n]{1,256})\2"
)


def find_auth_pairs(source: Source) -> Iterator[Hit]:
    text = source.text
    for match in _AUTH_PAIR.finditer(source.lowered):
        start, end = match.span(3)
        if _real_password(text[start:end]):
            yield (start, end, "basic_auth")


# mysql -pPASSWORD (attached only: "-p db" prompts), docker login -p PASSWORD, sshpass -p PASSWORD
_ATTACHED = re.compile(r"[ \t]-p([\"']?)([^\s\"'-][^\s\"']{0,255})\1(?=\s|\Z)")
_SPACED = re.compile(r"[ \t]-p[ \t]{1,16}([\"']?)([^\s\"'-][^\s\"']{0,255})\1(?=\s|\Z)")
_CLI = re.compile(
    r"(mysql|mariadb)|(sshpass|(?:docker|podman|nerdctl|oras|skopeo|buildah|helm registry)"
    r"[ \t]+login)"
)
CLI_TRIGGERS = ("mysql", "mariadb", "sshpass", " login")


def find_cli_passwords(source: Source) -> Iterator[Hit]:
    """``-p`` values on a line after its first command, each line scanned once from there."""
    text, lowered = source.text, source.lowered
    size = len(text)
    found: list[Hit] = []
    position = 0
    while (command := _CLI.search(lowered, position)) is not None:
        where = command.start()
        line_end = text.find("\n", where)
        line_end = size if line_end < 0 else line_end
        patterns = (_ATTACHED,) if command[1] else (_ATTACHED, _SPACED)  # mysql -p db prompts
        for pattern in patterns:
            spans = [match.span(2) for match in pattern.finditer(text, where, line_end)]
            found.extend(
                (start, end, "cli_password")
                for start, end in spans
                if _real_password(text[start:end])
            )
        position = line_end + 1
    found.sort()  # the two patterns' findings, in order
    return iter(found)


_COOKIE = re.compile(r"(?:set-)?cookie[\"']?[ \t]{0,16}:[ \t]{0,16}([^\r\n\"']{1,4096}+)")
_PAIR = re.compile(r"[^=;\s]{1,128}=([^;\s]{16,4096})")


def find_cookies(source: Source) -> Iterator[Hit]:
    """Random-looking values of ``Cookie:`` / ``Set-Cookie:`` headers (session ids)."""
    text = source.text
    for header in _COOKIE.finditer(source.lowered):
        start, end = header.span(1)
        for pair in _PAIR.finditer(text, start, end):
            if looks_random(pair.group(1), 16):
                yield (*pair.span(1), "cookie")


# CREATE USER … IDENTIFIED BY '…', ALTER ROLE … WITH [ENCRYPTED] PASSWORD '…' (lowered)
_SQL = re.compile(
    r"(?:identified[ \t]{1,16}by|with[ \t]{1,16}(?:encrypted[ \t]{1,16})?password)[ \t]{1,16}"
    r"'([^'\r\n]{1,256})'"
)
SQL_TRIGGERS = ("identified", "password '")


def find_sql_passwords(source: Source) -> Iterator[Hit]:
    text = source.text
    for match in _SQL.finditer(source.lowered):
        start, end = match.span(1)
        if _real_password(text[start:end]):
            yield (start, end, "sql_password")
