"""How pi-hindsight reaches a Hindsight server: through which proxy, trusting which certificates.

We decide the proxy ourselves, per server URL, and hand it to every client explicitly (the
official client's aiohttp session would otherwise read the environment itself, and so would
urllib):

- **loopback** (``127.0.0.0/8``, ``::1``, ``localhost``): never a proxy, whatever ``HTTP_PROXY``,
  ``HTTPS_PROXY``, ``ALL_PROXY`` or ``NO_PROXY`` say — a corporate proxy cannot reach the user's
  own machine, and must not see its traffic or its key;
- **another host**: the environment's proxy for the URL's scheme (``https_proxy`` /
  ``HTTPS_PROXY``, ``http_proxy`` / ``HTTP_PROXY``; lower case wins, as in urllib), else
  ``ALL_PROXY``, unless ``NO_PROXY`` matches the host (:func:`bypassed`: ``*``, names with
  their subdomains, IP addresses and networks, each with an optional ``:port``). Only
  ``http://`` proxies are supported (aiohttp's limit); any other is reported and the server is
  reached directly.

A proxy URL may carry ``user:password``: it is used, never shown (:func:`display_proxy`).

``hindsight.caFile`` (user config only) names a PEM file of the certificate authorities that
sign the server's certificate (a private CA); it replaces the system's list for that server.

Cheap to import (no HTTP client; pydantic for :class:`ProxyRoute`): the config and the CLI use it.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

from pydantic import Field, computed_field

from pi_hindsight.serialisation import Record

PROXY_SCHEMES = ("http",)  # what aiohttp can talk to; an https:// or socks proxy is not


def is_loopback_host(host: str | None) -> bool:
    """127.0.0.0/8, ::1 (also IPv4-mapped), ``localhost`` and ``*.localhost`` (RFC 6761)."""
    if not host:
        return False
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.partition("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def url_host(url: str) -> str | None:
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def is_loopback_url(url: str) -> bool:
    return is_loopback_host(url_host(url))


def display_proxy(proxy: str) -> str:
    """A proxy URL without any of its userinfo (user names of proxies are credentials too)."""
    try:
        parts = urlsplit(proxy)
    except ValueError:
        return "(an unreadable proxy URL)"
    netloc = parts.netloc.rpartition("@")[2]
    hidden = "***@" if "@" in parts.netloc else ""
    return f"{parts.scheme}://{hidden}{netloc}" if parts.scheme else f"{hidden}{netloc}"


def _proxy_variables(environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """``{"https": (value, variable)}`` from ``*_proxy`` variables; lower case wins (urllib)."""
    found: dict[str, tuple[str, str]] = {}
    for name, value in environ.items():
        if not value or not name.lower().endswith("_proxy"):
            continue
        kind = name[: -len("_proxy")].lower()
        if kind not in found or name.islower():
            found[kind] = (value.strip(), name)
    return found


def bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` exempts ``host:port``: ``*``; a name and its subdomains (a leading
    dot is ignored: ``example.com`` and ``.example.com`` both match ``a.example.com``); an IP
    address or network (``10.0.0.0/8``); any entry may end in ``:port``. Case-insensitive."""
    name = host.strip("[]").rstrip(".").lower()
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(name)
    except ValueError:
        address = None
    for raw in no_proxy.replace(" ", ",").split(","):
        entry = raw.strip().lower()
        if entry == "*":
            return True
        if not entry:
            continue
        entry_port = None
        if entry.startswith("["):  # [v6]:port or [v6]
            inside, _, rest = entry[1:].partition("]")
            entry, entry_port = inside, rest.removeprefix(":") or None
        elif entry.count(":") == 1:
            entry, entry_port = entry.split(":")
        if entry_port is not None and entry_port != str(port):
            continue
        entry = entry.lstrip(".").rstrip(".")
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if name == entry or name.endswith(f".{entry}"):
            return True
    return False


def proxy_credentials(proxy: str | None) -> tuple[str, ...]:
    """The user name and password of a proxy URL (both kept out of every message)."""
    if not proxy:
        return ()
    try:
        parts = urlsplit(proxy)
        found = (parts.username, parts.password)
    except ValueError:
        return ()
    return tuple(part for part in found if part)


class ProxyRoute(Record):
    """The proxy for one server URL, and why. ``url`` may hold credentials: use it, never show
    it (it is left out of the JSON form and the repr; :meth:`describe` and ``proxy`` hide them)."""

    url: str | None = Field(exclude=True, repr=False)
    reason: str  # "loopback", "no_proxy", "none_set", "environment", "unsupported"
    variable: str | None = None  # the variable it came from (or that was not used)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def proxy(self) -> str | None:
        """The proxy as shown: its URL without credentials."""
        return None if self.url is None else display_proxy(self.url)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def description(self) -> str:
        return self.describe()

    def describe(self) -> str:
        if self.reason == "loopback":
            return "none (loopback: never through a proxy)"
        if self.reason == "no_proxy":
            return f"none (bypassed by {self.variable})"
        if self.reason == "none_set":
            return "none (no proxy variable set)"
        if self.reason == "unsupported":
            return (
                f"none: {self.variable} names a proxy that is not http:// "
                "(not supported); connecting directly"
            )
        return f"{display_proxy(self.url or '')} (from {self.variable})"


def proxy_route(base_url: str, environ: Mapping[str, str]) -> ProxyRoute:
    """Which proxy reaches ``base_url`` under ``environ``'s proxy variables (module docstring)."""
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return ProxyRoute(url=None, reason="none_set")
    if is_loopback_host(host):
        return ProxyRoute(url=None, reason="loopback")
    variables = _proxy_variables(environ)
    chosen = variables.get(parts.scheme) or variables.get("all")
    if chosen is None or not host:
        return ProxyRoute(url=None, reason="none_set")
    value, variable = chosen
    no_proxy = variables.get("no")
    default_port = 443 if parts.scheme == "https" else 80
    if no_proxy is not None and bypassed(host, port or default_port, no_proxy[0]):
        return ProxyRoute(url=None, reason="no_proxy", variable=no_proxy[1])
    scheme = urlsplit(value if "://" in value else f"http://{value}").scheme
    if scheme not in PROXY_SCHEMES:
        return ProxyRoute(url=None, reason="unsupported", variable=variable)
    url = value if "://" in value else f"http://{value}"
    return ProxyRoute(url=url, reason="environment", variable=variable)


class CaFileError(ValueError):
    """``hindsight.caFile`` cannot be used; the message names the file and what is wrong."""


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Certificate checks for an ``https://`` server: the system's CAs, or only ``ca_file``'s."""
    if ca_file is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as error:
        reason = getattr(error, "strerror", None) or getattr(error, "reason", None) or error
        raise CaFileError(
            f"hindsight.caFile {ca_file} cannot be used as a CA certificate file: {reason}"
        ) from error


TLS_HINT = (
    "if the server uses a private certificate authority, set hindsight.caFile in your user "
    "config to its CA certificate (a PEM file); check the server's name and dates otherwise"
)


def describe_tls_failure(error: BaseException) -> str | None:
    """What a certificate failure says, in a few words (None: not a certificate problem).
    Follows the chain (aiohttp's and urllib's wrappers hold the ``ssl`` error)."""
    seen: object = error
    for _ in range(6):
        if not isinstance(seen, BaseException):
            return None
        inner = getattr(seen, "certificate_error", None)  # aiohttp's wrapper: the ssl error
        if isinstance(inner, BaseException) and inner is not seen:
            seen = inner
            continue
        if isinstance(seen, ssl.SSLCertVerificationError):
            detail = getattr(seen, "verify_message", None) or getattr(seen, "reason", None)
            return f"the server's TLS certificate is not trusted ({detail or 'verify failed'})"
        if isinstance(seen, ssl.SSLError):
            return f"the TLS handshake failed ({getattr(seen, 'reason', None) or seen})"
        seen = seen.__cause__ or seen.__context__ or getattr(seen, "reason", None)
    return None
