from __future__ import annotations

import json

import pytest

from pi_hindsight.errors import RpcError
from pi_hindsight.rpc import protocol


def test_encode_is_one_lf_terminated_line_even_with_separators_in_strings() -> None:
    text = "a\nb\u2028c\u2029d\re"
    line = protocol.encode(protocol.result(1, {"text": text}))
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line)["result"]["text"] == text


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"not json", protocol.PARSE_ERROR),
        (b"\xff\xfe", protocol.PARSE_ERROR),
        (b"[1, 2]", protocol.INVALID_REQUEST),
        (b'{"id": 1, "method": "x"}', protocol.INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": 1}', protocol.INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": true, "method": "x"}', protocol.INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1]}', protocol.INVALID_PARAMS),
    ],
)
def test_decode_rejects_malformed_messages_with_the_right_code(raw: bytes, code: int) -> None:
    with pytest.raises(RpcError) as caught:
        protocol.decode(raw)
    assert caught.value.code == code


def test_decode_keeps_the_id_of_an_invalid_request_for_the_error_answer() -> None:
    with pytest.raises(RpcError) as caught:
        protocol.decode(b'{"id": 7, "method": "x"}')
    assert caught.value.data == {"id": 7}


def test_decode_notification_and_request() -> None:
    request = protocol.decode(b'{"jsonrpc": "2.0", "id": "a", "method": "m", "params": {"k": 1}}')
    assert (request.method, request.params, request.id) == ("m", {"k": 1}, "a")
    note = protocol.decode(b'{"jsonrpc": "2.0", "method": "n"}')
    assert note.id is None and note.params == {}
