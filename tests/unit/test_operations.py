"""The operations layer (issue 19, item 2): the memory tool's schema is generated from the
operations' argument models, one variant per action, and round-trips them; results have one text
form and one JSON form (recall's lists each record with what a script needs)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest

from pi_hindsight.backend.resources import MemoryRecord, RecallScores
from pi_hindsight.operations.base import OperationArgs, OperationInputError
from pi_hindsight.operations.memory_actions import MEMORY_ACTIONS, RETAIN_GLOBAL
from pi_hindsight.operations.memory_search import RecalledRecord, RecallResult
from pi_hindsight.operations.outbox_upkeep import OutboxStatusResult
from pi_hindsight.tools.specs import (
    PARAMETERS_FILE,
    generate_parameters,
    memory_parameters,
    parse_action,
    retain_global_parameters,
    variants_schema,
)

# One full call per action: every argument each action takes, with a value it accepts.
EXAMPLES: dict[str, dict[str, Any]] = {
    "status": {"operationId": "op-1"},
    "recall": {
        "query": "deploy target",
        "types": ["world", "observation"],
        "queryTimestamp": "2026-11-30T10:00:00+00:00",
        "startDate": "2026-11-01T00:00:00+00:00",
        "endDate": "2026-12-01T00:00:00+00:00",
        "maxTokens": 500,
    },
    "reflect": {"query": "Where do we deploy?", "context": "a release"},
    "refresh_memo": {},
    "retain": {"content": "The nightly build runs on Wombat.", "context": "ci", "force": True},
    "mission": {
        "mission": "a",
        "retainMission": "b",
        "observationsMission": "c",
        "apply": True,
    },
    "mental_models": {
        "modelAction": "update",
        "modelId": "m1",
        "name": "Deploys",
        "sourceQuery": "How do we deploy?",
        "showContent": True,
        "modelMaxTokens": 2048,
        "apply": True,
    },
    "forget": {"recordId": "r1", "confirm": True},
    "correct": {"recordId": "r1", "content": "We deploy to Nimbus."},
    "corrections": {},
}


def test_every_action_has_its_variant_in_the_generated_schema() -> None:
    schema = memory_parameters()
    assert schema["type"] == "object" and schema["required"] == ["action"]
    assert schema["additionalProperties"] is False
    action = schema["properties"]["action"]
    assert action["enum"] == list(MEMORY_ACTIONS) == list(EXAMPLES)
    for name, operation in MEMORY_ACTIONS.items():
        assert f"{name}: {operation.summary}" in action["description"]
        for field in operation.args.model_fields.values():
            alias = field.alias
            assert alias in schema["properties"], (name, alias)
            assert name in schema["properties"][alias]["description"].split(":")[0].split("/")


def test_the_schema_is_one_flat_object_every_host_accepts() -> None:
    """Anthropic refuses anyOf/oneOf/allOf at the top of a tool's schema (Claude Code passes
    MCP schemas on); references would need resolving; tags never widen the scope."""
    for schema in (memory_parameters(), retain_global_parameters()):
        text = json.dumps(schema)
        assert not {"anyOf", "oneOf", "allOf", "$ref", "$defs", "title"} & set(_keys(schema))
        assert "tags" not in schema["properties"] and "tagsMatch" not in text
        jsonschema.Draft202012Validator.check_schema(schema)


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in _keys(item)}
    if isinstance(value, list):
        return {key for item in value for key in _keys(item)}
    return set()


@pytest.mark.parametrize("action", list(EXAMPLES))
def test_each_variant_round_trips_its_argument_model(action: str) -> None:
    operation = MEMORY_ACTIONS[action]
    args = operation.parse(EXAMPLES[action])
    call = {"action": action, **args.model_dump(mode="json", by_alias=True, exclude_defaults=True)}
    jsonschema.validate(call, memory_parameters())  # what the host checks
    assert parse_action(call, MEMORY_ACTIONS) == action
    again = operation.parse({key: value for key, value in call.items() if key != "action"})
    assert again == args
    assert set(call) - {"action"} == set(EXAMPLES[action])  # every example argument survived


def test_retain_global_round_trips_too() -> None:
    args = RETAIN_GLOBAL.parse({"content": "tabs over spaces", "force": True})
    call = args.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    jsonschema.validate(call, retain_global_parameters())
    assert RETAIN_GLOBAL.parse(call) == args


def test_bad_calls_say_what_is_wrong() -> None:
    with pytest.raises(OperationInputError, match="action 'recall' needs a non-empty 'query'"):
        MEMORY_ACTIONS["recall"].parse({})
    with pytest.raises(OperationInputError, match="needs a non-empty 'recordId'"):
        MEMORY_ACTIONS["forget"].parse({"recordId": ""})
    with pytest.raises(OperationInputError, match="tags"):
        MEMORY_ACTIONS["recall"].parse({"query": "x", "tags": ["project:other"]})
    with pytest.raises(OperationInputError, match="'startDate' must be before 'endDate'"):
        MEMORY_ACTIONS["recall"].parse(
            {"query": "x", "startDate": "2026-12-01", "endDate": "2026-11-01"}
        )
    with pytest.raises(OperationInputError, match="must be one of status, recall"):
        parse_action({"action": "drop_everything"}, MEMORY_ACTIONS)


def test_a_shared_property_with_two_shapes_is_refused() -> None:
    class Short(OperationArgs):
        query: str

    class Number(OperationArgs):
        query: int

    with pytest.raises(TypeError, match="'query' has two shapes"):
        variants_schema({"a": ("a", Short), "b": ("b", Number)})


def test_recall_json_lists_each_record_with_its_id_text_type_dates_source_and_scores() -> None:
    record = MemoryRecord(
        id="0190aaaa-0001",
        text="We deploy to Zephyr. api_key=sk-live-abcdefghijklmnopqrstuvwx",
        type="world",
        context="a release",
        occurred_start="2026-11-30T10:00:00+00:00",
        mentioned_at="2026-11-30T10:05:00+00:00",
        document_id="pi-session-1",
        scores=RecallScores(final=0.9, reranker=0.8, semantic=0.7),
    )
    result = RecallResult(scope="project-x", records=[RecalledRecord.of(record)])
    data = json.loads(json.dumps(result.to_json()))
    assert data["scope"] == "project-x" and data["count"] == 1
    (shown,) = data["records"]
    assert shown["id"] == "0190aaaa-0001" and shown["type"] == "world"
    assert shown["text"].startswith("We deploy to Zephyr.")
    assert "sk-live" not in shown["text"]  # redacted, as the text form is
    assert shown["occurredStart"] == "2026-11-30T10:00:00+00:00"
    assert shown["mentionedAt"] == "2026-11-30T10:05:00+00:00"
    assert shown["source"] == "pi-session-1"
    assert shown["scores"] == {"final": 0.9, "reranker": 0.8, "semantic": 0.7, "keyword": None}
    text = result.as_text()
    assert "We deploy to Zephyr." in text and "sk-live" not in text
    assert text.endswith("Their record ids (for forget or correct): 0190aaaa-0001")
    assert RecallResult(scope="s", records=[]).as_text() == "No memories in s match."


def test_recall_text_keeps_the_ids_when_the_records_are_trimmed() -> None:
    records = [
        RecalledRecord(id=f"id-{n}", text="word " * 300, mentioned_at=datetime.now(UTC).isoformat())
        for n in range(20)
    ]
    text = RecallResult(scope="s", records=records).as_text()
    assert "output trimmed" in text
    assert text.endswith(", ".join(f"id-{n}" for n in range(20)))


def test_the_committed_schemas_are_the_generated_ones() -> None:
    """A session reads ``tools/parameters.json``; it must say what the operations take."""
    assert json.loads(PARAMETERS_FILE.read_text(encoding="utf-8")) == generate_parameters(), (
        "stale: run `.venv/bin/python scripts/tool_schemas.py`"
    )


def test_the_outbox_health_has_one_wording_and_a_camel_case_json_form() -> None:
    health = OutboxStatusResult(
        pending=2,
        submitted=1,
        dead=1,
        done=5,
        oldest_pending_age_s=90.0,
        last_error="HTTP 400 bad",
        last_error_at=None,
    )
    lines = health.render().splitlines()
    assert lines[0] == (
        "outbox: 2 pending, 1 awaiting confirmation, 1 dead, 5 done; oldest pending 1.5m"
    )
    assert lines[1] == "last error: HTTP 400 bad"
    assert lines[2].startswith("dead letters: `pi-hindsight outbox list --state dead`")
    data = health.to_json()
    assert data["oldestPendingAgeS"] == 90.0 and data["setAsideReports"] == []
    quiet = health.model_copy(update={"dead": 0, "last_error": None, "oldest_pending_age_s": None})
    assert quiet.render() == "outbox: 2 pending, 1 awaiting confirmation, 0 dead, 5 done"
