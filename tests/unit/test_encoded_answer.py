"""The hot path's answer is encoded once (issue 19): the bytes must be the JSON the dict path
would have written, framed as one line with the caller's id."""

from __future__ import annotations

import json

import pytest

from pi_hindsight.hosts.pi import wire
from pi_hindsight.rpc import jsonrpc


def _result(content: str, details: dict[str, object]) -> wire.PrepareResult:
    return wire.PrepareResult(
        message=wire.MemoryMessageWire(
            custom_type="hindsight-memory", content=content, display=False, details=details
        ),
        outcome="delivered",
        reason=None,
        recall_ms=12.5,
        notices=[wire.NoticeWire(level="warning", message="part of memory is unavailable")],
        status_line="memory: example.com/r",
        framing=wire.FramingWire(section="memory", text="Blocks tagged …"),
    )


def test_encoded_once_is_the_json_of_the_dict_path() -> None:
    details = {
        "records": [{"id": "r1", "scores": {"rrf": 0.031}, "shown": ("context",)}],
        "queries": [("project", "port?")],
        "tokens": 123,
        "text": 'é \u2028 \u2029 "quoted" \\ tab\t',
    }
    model = _result("<hindsight-memory>\n- (2026-11-29) a fact\n</hindsight-memory>", details)
    encoded = model.wire_json()
    assert isinstance(encoded, jsonrpc.Encoded)
    assert json.loads(encoded.json) == json.loads(json.dumps(model.wire()))
    assert b"\n" not in encoded.json  # one message, one line


@pytest.mark.parametrize("request_id", [7, "abc", 'a"b\\c', "é\u2028"])
def test_result_line_frames_the_encoded_answer(request_id: int | str) -> None:
    line = jsonrpc.result_line(request_id, jsonrpc.Encoded(b'{"queued":1}'))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"jsonrpc": "2.0", "id": request_id, "result": {"queued": 1}}
    assert line == jsonrpc.encode(jsonrpc.result(request_id, {"queued": 1}))


def test_lone_surrogate_falls_back_to_the_escaping_dict_path() -> None:
    model = _result("half a pair: \ud800", {})
    answer = model.wire_json()
    assert isinstance(answer, dict)  # pydantic cannot write it; jsonrpc.encode escapes it
    line = jsonrpc.encode(jsonrpc.result(1, answer))
    assert json.loads(line)["result"]["message"]["content"] == "half a pair: \ud800"
