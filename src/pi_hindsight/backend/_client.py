"""The one holder of the official client's ``ApiClient`` and the one error translation.

Every call to Hindsight runs inside :meth:`Client.call`: it bounds the call by its timeout and
turns every foreign failure (``hindsight_client_api`` and ``aiohttp`` exceptions, timeouts, answers
that do not parse) into our :class:`~pi_hindsight.errors.BackendError` family. Nothing else in
pi-hindsight catches or even names those exceptions (a test checks this). The resource modules
(``memories``, ``banks``, ``mental_models``, ``operations``, ``documents``, ``templates``) build on
:class:`Resource` and take the generated API classes they need from :meth:`Client.api`.

The client's aiohttp session is ours (:class:`_Session`): it never reads proxy variables or
``.netrc`` itself (``trust_env`` off); the proxy is decided per server URL in ``transport.py``
(loopback: never) and passed explicitly, and an ``https://`` server's certificate is checked
against ``hindsight.caFile`` when set. The API key is asked for at every call (a
:data:`KeyProvider` re-reads a rotated key file), so a running session follows a changed key.

Importing this module imports the official client (~0.8 s): only ``backend/hindsight.py`` and the
resource modules import it, lazily from the sidecar (see ``rpc/sidecar.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import aiohttp
from hindsight_client_api.api_client import ApiClient
from hindsight_client_api.configuration import Configuration
from hindsight_client_api.exceptions import ApiException
from hindsight_client_api.rest import RESTClientObject

from pi_hindsight.config.display import display_url, scrub, url_secrets
from pi_hindsight.errors import (
    BackendAuthRejected,
    BackendError,
    BackendMalformed,
    BackendRejected,
    BackendServerError,
    BackendUnavailable,
    BankNotFound,
)
from pi_hindsight.transport import (
    TLS_HINT,
    CaFileError,
    ProxyRoute,
    describe_tls_failure,
    proxy_credentials,
    proxy_route,
    tls_context,
)

T = TypeVar("T")
R = TypeVar("R")
PAGE = 500  # items per page of a listing we read to the end

_NOT_HINDSIGHT_HINT = (
    "check that hindsight.baseUrl points at a Hindsight server (`pi-hindsight status`); "
    "retains stay in the outbox and are retried"
)


def _retry_after(headers: Any) -> float | None:
    if not headers:
        return None
    value = None
    with contextlib.suppress(AttributeError, TypeError):
        value = headers.get("Retry-After") or headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _server_message(body: str | None) -> str:
    if not body:
        return ""
    try:
        parsed = json.loads(body)
    except ValueError:
        return body[:300]
    if isinstance(parsed, dict):
        detail = parsed.get("detail") or parsed.get("message") or parsed.get("error")
        if detail is not None:
            return str(detail)[:300]
    return body[:300]


def _auth_rejected(
    status: int, message: str, what: str, where: str, api_key: str | None
) -> BackendAuthRejected:
    """401/403: our key (or its absence) was refused. The server's own words are kept, scrubbed
    of the key in case something between echoes the header back."""
    sent = "" if api_key else ", none was sent"
    said = scrub(message, (api_key,) if api_key else ())
    said = f": {said}" if said else ""
    return BackendAuthRejected(
        f"{what}{where} failed: {BackendAuthRejected.REFUSED} (HTTP {status}{said}{sent}) — "
        f"{BackendAuthRejected.FIX}",
        status=status,
    )


def translate_api_exception(
    error: ApiException, what: str, bank: str | None, api_key: str | None = None
) -> BackendError:
    status = int(error.status or 0)
    message = _server_message(error.body)
    where = f" (bank {bank})" if bank else ""
    if status in (401, 403):
        return _auth_rejected(status, message, what, where, api_key)
    if status == 0:  # the client could not read the answer at all (e.g. its content type)
        return BackendMalformed(
            f"{what}{where} failed: the answer is not Hindsight's ({error.reason or message})",
            hint=_NOT_HINDSIGHT_HINT,
        )
    text = f"{what}{where} failed: HTTP {status} {message}".rstrip()
    if status == 429 or status >= 500:
        return BackendServerError(text, status=status, retry_after=_retry_after(error.headers))
    if status == 408:
        return BackendUnavailable(text, status=status)
    if status == 404 and "bank" in message.lower():
        return BankNotFound(text, status=status)
    return BackendRejected(text, status=status)


def _malformed(error: BaseException) -> str:
    """What was wrong with an answer, in a few words (never a parser's field-by-field dump)."""
    title = getattr(error, "title", None)  # pydantic's ValidationError names the model
    if isinstance(title, str) and title:
        return f"it is not a {title}"
    if isinstance(error, RecursionError):
        return "it is nested too deeply"
    return f"it could not be read ({type(error).__name__})"


def built(request: T | None, what: str) -> T:
    """A request model built with ``from_dict`` (which returns None only for None input)."""
    if request is None:  # pragma: no cover - from_dict returns None only for None input
        raise BackendRejected(f"{what}: the request could not be built")
    return request


# The API key now: a fixed string, or a callable that re-reads it (a rotated key file).
KeyProvider = Callable[[], str | None]


class _Session(RESTClientObject):
    """The generated REST client with our own aiohttp session: no proxy or ``.netrc`` from the
    environment (``trust_env=False``), the proxy we chose, and our certificate checks."""

    def __init__(self, configuration: Configuration, *, route: ProxyRoute, ca_file: str | None):
        super().__init__(configuration)
        self.proxy = route.url
        self._ca_file = ca_file

    def _ensure_session(self) -> None:
        if self._pool_manager is not None:
            return
        connector = aiohttp.TCPConnector(
            limit=self._configuration.connection_pool_maxsize, ssl=tls_context(self._ca_file)
        )
        self._pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False)


class Client:
    """The official client's ``ApiClient`` for one server, and the translation of its failures."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | KeyProvider | None = None,
        ca_file: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._shown_url = display_url(self.base_url)  # errors never quote a password
        self.route = proxy_route(self.base_url, os.environ if environ is None else environ)
        configuration = Configuration(host=self.base_url)
        self._api_client = ApiClient(configuration)
        self._api_client.rest_client = _Session(configuration, route=self.route, ca_file=ca_file)
        self._api_client.user_agent = "pi-hindsight"
        self._key_provider: KeyProvider = api_key if callable(api_key) else lambda: api_key
        self._api_key: str | None = None  # the key sent now
        # Every key ever sent and the proxy's credentials: kept out of error text.
        self._secrets: list[str] = [*proxy_credentials(self.route.url)]
        self._use_key(self._key_provider())
        self._apis: dict[type[Any], Any] = {}

    def _use_key(self, key: str | None) -> None:
        key = key or None
        if key == self._api_key:
            return
        self._api_key = key
        if key is None:
            self._api_client.default_headers.pop("Authorization", None)
            return
        if key not in self._secrets:
            self._secrets.append(key)
        self._api_client.default_headers["Authorization"] = f"Bearer {key}"

    @property
    def _hidden(self) -> tuple[str, ...]:
        return (*url_secrets(self.base_url), *self._secrets)

    def api(self, kind: type[T]) -> T:
        """The generated API class ``kind`` bound to this client (one instance per class)."""
        found = self._apis.get(kind)
        if found is None:
            found = self._apis[kind] = kind(self._api_client)  # type: ignore[call-arg]
        return found

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._api_client.close()  # type: ignore[no-untyped-call]  # generated code

    @contextlib.asynccontextmanager
    async def call(self, what: str, bank: str | None, timeout: float) -> AsyncIterator[None]:
        """Translate every foreign failure of the wrapped call and bound it by ``timeout``."""
        self._use_key(self._key_provider())  # a rotated key is used from the next call on
        try:
            async with asyncio.timeout(timeout):
                yield
        except ApiException as error:
            raise translate_api_exception(error, what, bank, self._api_key) from error
        except TimeoutError as error:
            raise BackendUnavailable(
                f"{what} timed out after {timeout:.1f}s ({self._shown_url})",
                hint="the Hindsight server is slow or unreachable; check `pi-hindsight status`",
            ) from error
        except CaFileError as error:  # raised when the session is made, at the first call
            raise BackendUnavailable(
                f"{what}: {error}", hint="fix or remove hindsight.caFile in your user config"
            ) from error
        except (aiohttp.ClientError, OSError) as error:
            raise self._unreachable(what, error) from error
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as error:
            raise self._malformed(what, bank, error) from error

    def _malformed(self, what: str, bank: str | None, error: BaseException) -> BackendMalformed:
        # The answer did not parse into the API's models (pydantic's ValidationError is a
        # ValueError), or lacked what we read from it: the server's fault, never the item's.
        return BackendMalformed(
            f"{what}{f' (bank {bank})' if bank else ''}: the answer from {self._shown_url} "
            f"is not Hindsight's: {_malformed(error)}",
            hint=_NOT_HINDSIGHT_HINT,
        )

    def _unreachable(self, what: str, error: BaseException) -> BackendUnavailable:
        """The server could not be reached: a certificate we do not trust, a proxy that does
        not answer, or nothing listening."""
        tls = describe_tls_failure(error)
        if tls is not None:
            return BackendUnavailable(f"{what}: {tls} at {self._shown_url}", hint=TLS_HINT)
        via = "" if self.route.url is None else f" through the proxy {self.route.describe()}"
        hint = "start it with `pi-hindsight server start` or set the server URL"
        if self.route.url is not None:
            hint = f"check the proxy, or add the server's host to NO_PROXY; {hint}"
        return BackendUnavailable(
            f"{what}: cannot reach Hindsight at {self._shown_url}{via}: "
            f"{scrub(str(error), self._hidden)}",
            hint=hint,
        )

    async def lookup(
        self, what: str, bank: str | None, timeout: float, request: Callable[[], Awaitable[T]]
    ) -> T | None:
        """``request()``'s answer, or None when the server answers 404 for the item."""
        try:
            async with self.call(what, bank, timeout):
                return await request()
        except BackendRejected as error:
            if error.status == 404:
                return None
            raise

    async def collect(
        self,
        what: str,
        bank: str,
        timeout: float,
        listing: Callable[..., Awaitable[Any]],
        convert: Callable[[Any], R],
        *,
        field: str = "items",
        page_size: int = PAGE,
        limit: int | None = None,
        **query: Any,
    ) -> list[R]:
        """Every item (up to ``limit``) of the paged ``listing`` of ``bank`` with ``query``."""
        found: list[R] = []
        offset = 0
        while True:
            size = page_size if limit is None else min(limit - len(found), page_size)
            async with self.call(what, bank, timeout):
                page = await listing(
                    bank, limit=size, offset=offset, _request_timeout=timeout, **query
                )
                items = list(getattr(page, field))
                found.extend(convert(item) for item in items)
                total = int(page.total)
            offset += len(items)
            if not items or offset >= total or (limit is not None and len(found) >= limit):
                return found if limit is None else found[:limit]


class Resource:
    """Base of the resource modules' classes: the client they share (``HindsightBackend``
    composes them over one :class:`Client`)."""

    def __init__(self, client: Client) -> None:
        self._client = client
