"""What stands between a developer and a team's server, on loopback: a private certificate
authority, a TLS front for the real Hindsight, and a corporate forward proxy.

- :func:`private_ca` writes a CA certificate and a server certificate (with its key) signed by
  it, for the names given (``cryptography``, which Hindsight's server extra brings along).
- :class:`TlsFront` terminates TLS with that certificate on 127.0.0.1 and passes the bytes to
  the real Hindsight (how a team puts TLS in front of it: a reverse proxy).
- :class:`ForwardProxy` is an HTTP proxy: ``CONNECT host:port`` tunnels and absolute-form
  requests, with ``Proxy-Authorization`` required when it has credentials. Host names are
  mapped to loopback addresses, so a "remote" server (``hindsight.team.test``) is reached
  through it without any DNS. It keeps every byte it saw in the clear, to show what a proxy
  can and cannot read.

Each runs its own asyncio loop in a thread; ``close()`` stops it.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA certificate (what hindsight.caFile names)
    cert: Path  # the server's certificate
    key: Path  # the server's private key


_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def private_ca(directory: Path, names: list[str]) -> Certificates:
    """A CA and a server certificate for ``names`` (DNS names or IP addresses)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("pi-hindsight test team CA"))
        .issuer_name(_name("pi-hindsight test team CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    alternatives: list[x509.GeneralName] = []
    for name in names:
        try:
            alternatives.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alternatives.append(x509.DNSName(name))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    found = Certificates(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    found.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    found.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    found.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    found.key.chmod(0o600)
    return found


class _Loop:
    """An asyncio loop in a daemon thread, and one server started on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._server: asyncio.Server | None = None

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout=30)

    def listen(self, handler: Any, **kwargs: Any) -> int:
        self._server = self.run(asyncio.start_server(handler, "127.0.0.1", 0, **kwargs))
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def close(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
                for task in asyncio.all_tasks():
                    if task is not asyncio.current_task():
                        task.cancel()

        self.run(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: Any) -> None:
    try:
        while chunk := await reader.read(65536):
            if seen is not None:
                seen(chunk)
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError, OSError):
        pass
    finally:
        writer.close()


async def _splice(
    a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    b: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    seen: Any = None,
) -> None:
    await asyncio.gather(_pipe(a[0], b[1], seen), _pipe(b[0], a[1], seen))


class TlsFront:
    """TLS on 127.0.0.1 in front of ``upstream`` (``host``, ``port``), as a team's reverse proxy."""

    def __init__(self, certificates: Certificates, upstream: tuple[str, int]) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certificates.cert, certificates.key)
        self._upstream = upstream
        self._loop = _Loop()
        self.port = self._loop.listen(self._serve, ssl=context)
        self.handshakes_failed = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.close()
            return
        await _splice((reader, writer), upstream)

    def close(self) -> None:
        self._loop.close()


class ForwardProxy:
    """An HTTP forward proxy on 127.0.0.1 (module docstring)."""

    def __init__(self, hosts: dict[str, str], credentials: tuple[str, str] | None) -> None:
        self._hosts = hosts  # "name" -> "127.0.0.1"
        self._expected = None
        if credentials is not None:
            token = base64.b64encode(":".join(credentials).encode()).decode()
            self._expected = f"Basic {token}"
        self.requests: list[str] = []  # request lines, as received
        self.refused: list[str] = []  # request lines without the right Proxy-Authorization
        self.cleartext = bytearray()  # every byte it could read
        self._loop = _Loop()
        self.port = self._loop.listen(self._serve)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _target(self, authority: str) -> tuple[str, int]:
        host, _, port = authority.rpartition(":")
        return self._hosts.get(host, host), int(port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        self.cleartext += head
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        self.requests.append(lines[0])
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])
        }
        if self._expected is not None and headers.get("proxy-authorization") != self._expected:
            self.refused.append(lines[0])
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                         b"Proxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")  # fmt: skip
            await writer.drain()
            writer.close()
            return
        try:
            if method == "CONNECT":
                upstream = await asyncio.open_connection(*self._target(target))
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await _splice((reader, writer), upstream, self.cleartext.extend)
                return
            authority = target.split("://", 1)[1].split("/", 1)[0]
            path = "/" + target.split("://", 1)[1].partition("/")[2]
            host, port = self._target(authority if ":" in authority else f"{authority}:80")
            upstream = await asyncio.open_connection(host, port)
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        dropped = ("proxy-", "connection:", "keep-alive:")
        kept = [h for h in lines[1:] if h and not h.lower().startswith(dropped)]
        upstream[1].write(f"{method} {path} {version}\r\n".encode("latin-1"))
        upstream[1].write(("\r\n".join([*kept, "Connection: close"]) + "\r\n\r\n").encode())
        await _splice((reader, writer), upstream, self.cleartext.extend)

    def close(self) -> None:
        self._loop.close()
