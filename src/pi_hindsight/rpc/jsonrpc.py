"""JSON-RPC 2.0 messages over LF-delimited JSON lines (see docs/rpc.md).

Framing splits on the LF byte only: U+2028/U+2029 are legal inside JSON strings and never end a
message. ``json.dumps`` never emits a raw LF (it escapes control characters), so one message is
always one line.

This module is the one place where text from the host becomes ours, so it is made safe here, once,
and nothing downstream can fail on it:

- bytes that are not UTF-8 become U+FFFD (the rest of the message is kept);
- lone surrogates (``"\\ud800"`` — a JavaScript string cut in half is enough) become U+FFFD, in
  keys and values alike, so every string we hold can be encoded, stored and echoed;
- ``NaN``, ``Infinity`` and floats beyond the float range become ``null`` (they have no JSON form
  to answer with), and an integer literal too long for Python (over 4,300 digits) stays its digit
  string; fields we store as integers bound their own range (the params models);
- nesting deeper than :data:`MAX_NESTING` is cut off with a marker (no recursive walker
  downstream can overflow); a message too deep for the parser itself is a parse error.

When a message cannot be parsed, the id is still read from its start if it is there (the shim
always writes ``{"jsonrpc":"2.0","id":…`` first), so the caller gets its answer at once instead of
waiting for its timeout.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from pi_hindsight.errors import RpcError

PROTOCOL_VERSION = 1

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_BUSY = -32001  # implementation-defined server error: too many requests in flight
REQUEST_CANCELLED = -32800

# Deeper than any message the shim sends (Pi messages nest about ten levels, tool arguments a few
# more); deep enough that a real tool argument is never cut.
MAX_NESTING = 100
NESTING_MARKER = "[pi-hindsight: nested deeper than 100 levels; cut here]"

RequestId = int | str

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# A JSON escape of a surrogate code point; absent from a line, no decoded string can hold one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_ID_AT_START = re.compile(
    r'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"[^"\\]*"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")'
)


@dataclass(frozen=True)
class Request:
    method: str
    params: dict[str, Any]
    id: RequestId | None  # None for a notification


@dataclass(frozen=True)
class Encoded:
    """A result already encoded as one line of JSON (UTF-8, no raw LF), sent as it is: a handler
    that builds its answer as a model serialises it once, straight to bytes (issue 19)."""

    json: bytes


def result_line(request_id: RequestId, value: Encoded) -> bytes:
    """The protocol line of a result that is already JSON."""
    head = json.dumps(request_id, ensure_ascii=False).encode("utf-8")
    return b'{"jsonrpc":"2.0","id":' + head + b',"result":' + value.json + b"}\n"


def encode(message: dict[str, Any]) -> bytes:
    """One protocol line. Raises ValueError/TypeError only for a value JSON cannot express."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        # Defensive: a lone surrogate that did not come through decode(). ASCII escapes are valid
        # JSON for it, and the line still goes out.
        ascii_text = json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        return ascii_text.encode("ascii") + b"\n"


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def result(request_id: RequestId, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(
    request_id: RequestId | None, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a no-op for ordinary text)."""
    if text.isascii():
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def _finite_float(literal: str) -> float | None:
    value = float(literal)
    return value if math.isfinite(value) else None


def _any_int(literal: str) -> int | str:
    try:
        return int(literal)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        return literal


def _no_constant(name: str) -> None:
    return None  # NaN, Infinity, -Infinity: not JSON; read as null


def _make_safe(value: Any, depth: int, fix_text: bool) -> Any:
    """Replace lone surrogates (when ``fix_text``) and cut nesting beyond MAX_NESTING.

    Recursion stops at MAX_NESTING, so this can never overflow the stack itself.
    """
    if isinstance(value, str):
        return safe_text(value) if fix_text else value
    if isinstance(value, list):
        if depth >= MAX_NESTING:
            return NESTING_MARKER
        return [_make_safe(item, depth + 1, fix_text) for item in value]
    if isinstance(value, dict):
        if depth >= MAX_NESTING:
            return NESTING_MARKER
        return {
            (safe_text(key) if fix_text else key): _make_safe(item, depth + 1, fix_text)
            for key, item in value.items()
        }
    return value


def salvage_id(data: bytes | str) -> RequestId | None:
    """The id at the start of a message that could not be parsed, if it is plainly there."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    match = _ID_AT_START.match(text[:4096])
    if match is None:
        return None
    token = match.group(1)
    try:
        value = json.loads(token)
    except ValueError:
        return None
    if isinstance(value, str):
        return safe_text(value)
    return value if isinstance(value, int) else None


def parse(line: bytes) -> Any:
    """Bytes of one line → a JSON value that is safe to hold (see the module docstring)."""
    text = line.decode("utf-8", errors="replace")
    try:
        value = json.loads(
            text,
            parse_float=_finite_float,
            parse_int=_any_int,
            parse_constant=_no_constant,
        )
    except RecursionError as failure:
        raise RpcError(
            PARSE_ERROR,
            "parse error: the message is nested too deeply",
            data={"id": salvage_id(text)},
        ) from failure
    except ValueError as failure:
        raise RpcError(
            PARSE_ERROR, f"parse error: {failure}", data={"id": salvage_id(text)}
        ) from failure
    fix_text = _SURROGATE_ESCAPE.search(text) is not None
    maybe_deep = text.count("[") + text.count("{") > MAX_NESTING
    if fix_text or maybe_deep:
        value = _make_safe(value, 0, fix_text)
    return value


def decode(line: bytes) -> Request:
    """Parse one line into a request; raise RpcError (with the id when one was readable)."""
    message = parse(line)
    if not isinstance(message, dict):
        raise RpcError(INVALID_REQUEST, "a request must be a JSON object")
    request_id = message.get("id")
    if request_id is not None and (
        isinstance(request_id, bool) or not isinstance(request_id, int | str)
    ):
        raise RpcError(INVALID_REQUEST, "id must be a string or an integer")
    if message.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'missing "jsonrpc": "2.0"', data={"id": request_id})
    method = message.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(
            INVALID_REQUEST, "method must be a non-empty string", data={"id": request_id}
        )
    params = message.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "params must be an object", data={"id": request_id})
    return Request(method=method, params=params, id=request_id)


def cancelled_id(params: dict[str, Any]) -> RequestId | None:
    """The id a ``$/cancelRequest`` names, or None when it names no valid id."""
    value = params.get("id")
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return value
