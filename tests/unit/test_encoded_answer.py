"""The hot path's answer is encoded once (issue 19): the bytes must be the JSON the dict path
would have written, framed as one line with the caller's id, and the delivery's details in it
exactly what the host's record always held (``DeliveryDetails.to_json``: nothing None, no
empty list at the top)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pi_hindsight.backend.resources import RecallScores
from pi_hindsight.engine.types import DeliveredRecord, DeliveryDetails, HeldRecord, Omitted
from pi_hindsight.hosts.pi import wire
from pi_hindsight.rpc import jsonrpc


def _result(content: str, details: DeliveryDetails) -> wire.PrepareResult:
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


def _as_before(details: DeliveryDetails) -> dict[str, Any]:
    """The details' JSON as it was written before they were serialised with the answer: every
    None left out (nested ones too), then the top level's empty lists and objects."""
    data = details.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {key: value for key, value in data.items() if value not in ([], {})}


DELIVERED = DeliveryDetails(
    request_id="r1",
    scope_id="project:example.com/r",
    bank_id="b",
    bank_ids=("b",),
    record_ids=("m1", "m2"),
    record_keys=("k1", "k2"),
    records=(
        DeliveredRecord(
            id="m1",
            key="k1",
            section="project",
            type="world",
            document_id="docs/a.md",
            occurred="2026-11-29T10:00:00Z",
            context='é \u2028 \u2029 "quoted" \\ tab\t',
            shown=("context", "source"),
            scores=RecallScores(final=0.8, semantic=0.5),
        ),
        DeliveredRecord(id="m2", duplicate_ids=("m3",)),
    ),
    framed=True,
    memo_status="ready",
    omitted=Omitted(budget=1),
    tokens=123,
    recall_ms=12.5,
    total_ms=14.0,
    queries={"project": "port?"},
    held=(HeldRecord(id="h", key="k", section="project", text="t", reason="low"),),
)


@pytest.mark.parametrize(
    "details",
    [DELIVERED, DeliveryDetails(request_id="r2"), DELIVERED.but(records=(), omitted=None)],
    ids=["delivered", "empty", "no-records"],
)
def test_encoded_once_is_the_json_of_the_dict_path(details: DeliveryDetails) -> None:
    model = _result("<hindsight-memory>\n- (2026-11-29) a fact\n</hindsight-memory>", details)
    encoded = model.wire_json()
    assert isinstance(encoded, jsonrpc.Encoded)
    assert json.loads(encoded.json) == json.loads(json.dumps(model.wire()))
    assert b"\n" not in encoded.json  # one message, one line
    sent = json.loads(encoded.json)["message"]["details"]
    assert sent == _as_before(details) == details.to_json()
    assert "held" not in sent and DeliveryDetails.load(sent) == details.but(held=())


@pytest.mark.parametrize("request_id", [7, "abc", 'a"b\\c', "é\u2028"])
def test_result_line_frames_the_encoded_answer(request_id: int | str) -> None:
    line = jsonrpc.result_line(request_id, jsonrpc.Encoded(b'{"queued":1}'))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"jsonrpc": "2.0", "id": request_id, "result": {"queued": 1}}
    assert line == jsonrpc.encode(jsonrpc.result(request_id, {"queued": 1}))


def test_lone_surrogate_falls_back_to_the_escaping_dict_path() -> None:
    model = _result("half a pair: \ud800", DeliveryDetails(request_id="r"))
    answer = model.wire_json()
    assert isinstance(answer, dict)  # pydantic cannot write it; jsonrpc.encode escapes it
    line = jsonrpc.encode(jsonrpc.result(1, answer))
    assert json.loads(line)["result"]["message"]["content"] == "half a pair: \ud800"
