"""One exception tree for the whole package.

Every error we raise derives from :class:`PiHindsightError`. The tree is split by what a caller
does about it, not by where it happened::

    PiHindsightError
    ├── ConfigError            bad configuration: name the file, the key and the fix; not retried
    ├── InputFileError         a file we do not control (config, repository file, Pi session,
    │                          export) cannot be read safely: special file, too large, not UTF-8,
    │                          bad or too deeply nested JSON (``safe_files.py``); never modified
    ├── StateError             a local state file (catalog, outbox, evidence) is unusable
    │   └── CorruptStateError  ...because it is damaged or foreign; it is set aside, never deleted
    ├── ScopeError             the session has no usable scope (e.g. not registered)
    ├── NoSession              a call that needs a session came before ``initialize``
    ├── BackendError           talking to Hindsight failed
    │   ├── BackendUnavailable     transport failure or timeout: retry later
    │   │   └── BackendMalformed       an answer that is not Hindsight's (does not parse: a proxy,
    │   │                              another server, a bug): retry later with backoff; never
    │   │                              the item's fault, so never dead-lettered for it
    │   ├── BackendRejected        4xx that will never succeed as sent: do not retry
    │   │   └── BankNotFound
    │   ├── BackendAuthRejected    401/403: the server refused our API key (missing or wrong).
    │   │                          The configuration's fault, never the item's: nothing is
    │   │                          dead-lettered; retry, with backoff, once the key is fixed
    │   └── BackendServerError     5xx / 429: retry with backoff (``retry_after`` when given)
    ├── LauncherError          the local Hindsight server could not be started or stopped
    └── RpcError               a JSON-RPC request was malformed or named an unknown method

Foreign exceptions (``aiohttp``, ``hindsight_client_api``, ``sqlite3``) are translated at the
boundary modules (``backend/hindsight.py``, ``stores/sqlite.py``); nothing above them sees them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class PiHindsightError(Exception):
    """Base class of every error this package raises."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    def describe(self) -> str:
        """The message plus the hint, as shown to a person."""
        text = str(self)
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class ConfigError(PiHindsightError):
    """Configuration is invalid; the message names the file, the key and the fix."""


class InputFileError(PiHindsightError):
    """A file we read but do not control is unusable; the message names it and what is wrong."""


class StateError(PiHindsightError):
    """A local state store cannot be used."""


class CorruptStateError(StateError):
    """A state file is damaged or is not ours; it has been (or must be) set aside."""


class ScopeError(PiHindsightError):
    """The session has no usable memory scope."""


class NoSession(PiHindsightError):
    """A call that needs the session came before the host opened one (``initialize``)."""


class BackendError(PiHindsightError):
    """A call to Hindsight failed."""

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return not isinstance(self, BackendRejected)


class BackendUnavailable(BackendError):
    """Hindsight could not be reached, or did not answer in time. Retry later."""


class BackendMalformed(BackendUnavailable):
    """Hindsight's answer did not have the shape its API promises. Retry later, with backoff."""


class BackendRejected(BackendError):
    """Hindsight refused the request as sent (4xx other than 408/429). Do not retry."""


class BankNotFound(BackendRejected):
    """The bank does not exist."""


class BackendAuthRejected(BackendError):
    """Hindsight refused the API key we sent, or that we sent none (401/403). Its message says
    so and how to fix it (:attr:`FIX`); it never quotes the key."""

    REFUSED = "the server refused the API key"
    FIX = "set hindsight.apiKey (or HINDSIGHT_API_KEY) to the team's key"


class BackendServerError(BackendError):
    """Hindsight failed (5xx) or asked us to slow down (429). Retry with backoff."""


class LauncherError(PiHindsightError):
    """The local Hindsight server could not be started, checked or stopped."""


class RpcError(PiHindsightError):
    """A JSON-RPC message could not be handled; carries the JSON-RPC error code."""

    def __init__(self, code: int, message: str, *, data: object | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


def validation_problems(error: ValidationError, whole: str) -> str:
    """Pydantic's errors as one line, each naming its field (``whole`` for the input itself):
    the one wording of bad tool arguments and bad RPC params."""
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or whole}: {item['msg']}"
        for item in error.errors()
    )
