from __future__ import annotations

import json

import pytest

from pi_hindsight.errors import RpcError
from pi_hindsight.rpc import jsonrpc


def test_encode_is_one_lf_terminated_line_even_with_separators_in_strings() -> None:
    text = "a\nb\u2028c\u2029d\re"
    line = jsonrpc.encode(jsonrpc.result(1, {"text": text}))
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line)["result"]["text"] == text


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"not json", jsonrpc.PARSE_ERROR),
        (b"\xff\xfe", jsonrpc.PARSE_ERROR),
        (b"[1, 2]", jsonrpc.INVALID_REQUEST),
        (b'{"id": 1, "method": "x"}', jsonrpc.INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": 1}', jsonrpc.INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": true, "method": "x"}', jsonrpc.INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1]}', jsonrpc.INVALID_PARAMS),
    ],
)
def test_decode_rejects_malformed_messages_with_the_right_code(raw: bytes, code: int) -> None:
    with pytest.raises(RpcError) as caught:
        jsonrpc.decode(raw)
    assert caught.value.code == code


def test_decode_keeps_the_id_of_an_invalid_request_for_the_error_answer() -> None:
    with pytest.raises(RpcError) as caught:
        jsonrpc.decode(b'{"id": 7, "method": "x"}')
    assert caught.value.data == {"id": 7}


def test_decode_notification_and_request() -> None:
    request = jsonrpc.decode(b'{"jsonrpc": "2.0", "id": "a", "method": "m", "params": {"k": 1}}')
    assert (request.method, request.params, request.id) == ("m", {"k": 1}, "a")
    note = jsonrpc.decode(b'{"jsonrpc": "2.0", "method": "n"}')
    assert note.id is None and note.params == {}


def test_lone_surrogates_become_replacement_characters_in_keys_and_values() -> None:
    """Issue 9: a lone surrogate (``"\\ud800"``, a JavaScript string cut in half) was kept, so
    echoing it failed inside ``send()`` and the sidecar went silent."""
    request = jsonrpc.decode(
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"m","params":{"k\\udfff":["a\\ud83d"]}}'
    )
    assert request.id == "\ufffd"
    assert request.params == {"k\ufffd": ["a\ufffd"]}
    assert jsonrpc.encode(jsonrpc.result(request.id, request.params)).endswith(b"\n")
    # A real surrogate pair is one character, not two halves.
    pair = jsonrpc.decode(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"t":"\\ud83d\\ude00"}}')
    assert pair.params == {"t": "\U0001f600"}


def test_invalid_utf8_is_replaced_and_the_message_is_kept() -> None:
    request = jsonrpc.decode(b'{"jsonrpc":"2.0","id":3,"method":"m","params":{"t":"a\xffb"}}')
    assert request.params == {"t": "a\ufffdb"}


def test_nesting_beyond_the_limit_is_cut_and_too_deep_for_the_parser_is_a_parse_error() -> None:
    """Issue 9: a 2 KB frame nested 1,000 levels deep raised RecursionError out of decode()."""
    deep = b"[" * 150 + b"]" * 150
    request = jsonrpc.decode(b'{"jsonrpc":"2.0","id":4,"method":"m","params":{"x":' + deep + b"}}")
    node = request.params["x"]
    depth = 1
    while isinstance(node, list):
        node = node[0]
        depth += 1
    assert node == jsonrpc.NESTING_MARKER and depth <= jsonrpc.MAX_NESTING + 1
    too_deep = b'{"jsonrpc":"2.0","id":5,"method":"m","params":' + b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(RpcError) as caught:
        jsonrpc.decode(too_deep + b"}")
    assert caught.value.code == jsonrpc.PARSE_ERROR
    assert caught.value.data == {"id": 5}  # read from the start: the caller gets its answer


def test_numbers_without_a_json_form_are_read_as_null_and_long_integers_as_digits() -> None:
    request = jsonrpc.decode(
        b'{"jsonrpc":"2.0","id":6,"method":"m","params":{"a":NaN,"b":1e999,"c":'
        + b"9" * 5000
        + b"}}"
    )
    assert request.params["a"] is None and request.params["b"] is None
    assert request.params["c"] == "9" * 5000
    assert jsonrpc.encode(jsonrpc.result(6, request.params)).endswith(b"\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"jsonrpc":"2.0","id":12,"method":"x"', 12),
        ('{"id":"abc", broken', "abc"),
        ('{"jsonrpc":"2.0","id":"\\ud800",', "\ufffd"),
        ('{"jsonrpc":"2.0","params":{"id":1}', None),  # never a nested id
        ("garbage", None),
    ],
)
def test_the_id_of_an_unparseable_message_is_read_from_its_start(
    text: str, expected: object
) -> None:
    assert jsonrpc.salvage_id(text) == expected


@pytest.mark.parametrize(("params", "expected"), [({"id": 3}, 3), ({"id": "a"}, "a")])
def test_cancelled_id_accepts_ids(params: dict[str, object], expected: object) -> None:
    assert jsonrpc.cancelled_id(params) == expected


@pytest.mark.parametrize("value", [[1], {"a": 1}, True, 1.5, None])
def test_cancelled_id_refuses_what_cannot_be_an_id(value: object) -> None:
    """Issue 9: ``$/cancelRequest`` with ``{"id": [1]}`` raised TypeError (unhashable)."""
    assert jsonrpc.cancelled_id({"id": value}) is None


def test_encode_never_fails_on_a_lone_surrogate_that_got_past_decode() -> None:
    line = jsonrpc.encode(jsonrpc.result(1, {"t": "\ud800"}))
    assert json.loads(line)["result"]["t"] == "\ud800"
