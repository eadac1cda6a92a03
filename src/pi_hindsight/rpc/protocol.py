"""JSON-RPC 2.0 messages over LF-delimited JSON lines (see docs/rpc.md).

Framing splits on the LF byte only: U+2028/U+2029 are legal inside JSON strings and never end a
message. ``json.dumps`` with ``ensure_ascii=False`` never emits a raw LF (it escapes control
characters), so one message is always one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pi_hindsight.errors import RpcError

PROTOCOL_VERSION = 1

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800

RequestId = int | str


@dataclass(frozen=True)
class Request:
    method: str
    params: dict[str, Any]
    id: RequestId | None  # None for a notification


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


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


def decode(line: bytes) -> Request:
    """Parse one line into a request; raise RpcError (with the id when one was readable)."""
    try:
        message = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as failure:
        raise RpcError(PARSE_ERROR, f"parse error: {failure}") from failure
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
