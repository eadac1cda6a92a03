"""Who can reach the launched Hindsight: the address it binds and the team's API key.

By default Hindsight listens on 127.0.0.1 and needs no key: only this machine's users reach it.
A team's server (``server start --api-key-env VAR``) runs Hindsight's own API-key tenant
extension (``hindsight_api.extensions.builtin.tenant:ApiKeyTenantExtension``): every request
must then carry ``Authorization: Bearer <key>`` (``/health`` excepted). The key is read from the
environment variable the user names and handed to Hindsight in its environment only — never on a
command line, in ``server.json`` (which records the variable's *name*), in a log or in an error.

Another address is used only when the user passes ``--host`` in so many words, and only with a
key: a keyless server on a network address would let anyone who reaches it read every bank.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Literal

from pi_hindsight.errors import LauncherError

LOOPBACK = "127.0.0.1"
TENANT_EXTENSION = "hindsight_api.extensions.builtin.tenant:ApiKeyTenantExtension"
TENANT_EXTENSION_ENV = "HINDSIGHT_API_TENANT_EXTENSION"
TENANT_KEY_ENV = "HINDSIGHT_API_TENANT_API_KEY"
MIN_KEY_CHARS = 16
KEY_HINT = (
    'generate one with `python3 -c "import secrets; print(secrets.token_urlsafe(32))"`, '
    "export it in that variable, and give it to each developer through their own environment"
)

KeyCheck = Literal["accepted", "refused", "unset", "unknown"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What a bearer token can hold: visible ASCII. Hindsight strips the header value, so a key with
# spaces at either end could never match; a control character cannot go in a header at all.
_KEY_CHARS = re.compile(r"[\x21-\x7e]+")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def bind_host(host: str | None) -> str:
    """The address to listen on: 127.0.0.1 unless one is given; an IP literal or localhost."""
    if host is None:
        return LOOPBACK
    value = host.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    if value == "localhost":
        return LOOPBACK
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise LauncherError(
            f"--host {host!r} is not an IP address",
            hint="give the address to listen on, e.g. 127.0.0.1 (the default), an address of "
            "this machine's network interface, or 0.0.0.0 for every interface",
        ) from None


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def connect_host(host: str) -> str:
    """Where this machine reaches a server bound to ``host`` (a wildcard: its loopback)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.is_unspecified:
        return "::1" if address.version == 6 else LOOPBACK
    return host


def url_host(host: str) -> str:
    """``host`` as it goes in a URL (an IPv6 literal in brackets)."""
    return f"[{host}]" if ":" in host else host


def exposure_warning(host: str, port: int) -> str | None:
    """The warning a non-loopback address gets (None for loopback)."""
    if is_loopback(host):
        return None
    where = "every network interface" if host in ("0.0.0.0", "::") else host  # noqa: S104
    return (
        f"Hindsight listens on {where} (port {port}): other machines can reach it, and only the "
        "API key keeps them out; the key and all memory travel unencrypted over plain HTTP, so "
        "put a TLS reverse proxy or a VPN in front of it across any network you do not trust"
    )


def check_exposure(host: str, api_key_env: str | None) -> None:
    if api_key_env is None and not is_loopback(host):
        raise LauncherError(
            f"refusing to listen on {host} without an API key: anyone who reaches it could read "
            "and change every bank",
            hint="add `--api-key-env VAR` with the team's key in $VAR, or leave out --host to "
            "listen on 127.0.0.1 only",
        )


def check_env_name(name: str, *, option: str = "--api-key-env") -> str:
    if not _ENV_NAME.fullmatch(name):
        # Not quoted: a value given in its place is likely the secret itself.
        example = "HINDSIGHT_TEAM_KEY" if option == "--api-key-env" else "HINDSIGHT_DATABASE_URL"
        raise LauncherError(
            f"{option} takes an environment variable name, and what was given is not one",
            hint=f"give the variable's name, not the secret itself: e.g. `{option} {example}` "
            f"after `export {example}=...`",
        )
    return name


def team_key(environ: Mapping[str, str], name: str) -> str:
    """The API key held in the variable ``name``; the key never appears in an error."""
    check_env_name(name)
    key = environ.get(name)
    if not key:
        raise LauncherError(
            f"the environment variable {name} is not set or is empty", hint=KEY_HINT
        )
    if not _KEY_CHARS.fullmatch(key):
        raise LauncherError(
            f"the key in {name} contains spaces or characters an HTTP header cannot carry",
            hint=KEY_HINT,
        )
    if len(key) < MIN_KEY_CHARS:
        raise LauncherError(
            f"the key in {name} has {len(key)} characters; a team's key needs at least "
            f"{MIN_KEY_CHARS}",
            hint=KEY_HINT,
        )
    return key


def tenant_env(key: str) -> dict[str, str]:
    """The settings that make Hindsight refuse every request without ``key``."""
    return {TENANT_EXTENSION_ENV: TENANT_EXTENSION, TENANT_KEY_ENV: key}


def key_accepted(base_url: str, key: str | None, *, timeout: float = 5.0) -> bool | None:
    """Whether the server answers an authenticated request (a one-bank listing) with ``key``:
    True on 200, False on 401/403, None when it cannot tell (unreachable, another answer)."""
    request = urllib.request.Request(f"{base_url}/v1/default/banks?limit=1")  # noqa: S310
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return True if response.status == 200 else None
    except urllib.error.HTTPError as error:
        return False if error.code in (401, 403) else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def check_key(base_url: str, environ: Mapping[str, str], name: str) -> KeyCheck:
    """What the running server makes of the key in ``$name`` of this environment."""
    key = environ.get(name)
    if not key:
        return "unset"
    found = key_accepted(base_url, key)
    return "unknown" if found is None else "accepted" if found else "refused"
