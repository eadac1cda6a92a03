"""Claude Code's hook payloads and daemon requests, validated by pydantic models
(docs/adr/0010-one-serialisation-mechanism.md): each kind of bad input is a PayloadError naming
the field and what is wrong, and any input at all is a typed record or a PayloadError — never
another exception (the daemon turns a PayloadError into the hook's fail-open message)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_hindsight.hosts.claude_code import runtime
from pi_hindsight.hosts.claude_code.payloads import (
    EVENTS,
    DaemonAnswer,
    HookContext,
    HookOutput,
    PayloadError,
    PingAnswer,
    parse_event,
    parse_request,
)

GOOD = {"session_id": "0f1e2d3c-aaaa", "cwd": "/work/repo", "prompt": "hello"}


def test_a_good_payload_is_a_typed_event_and_unknown_fields_are_ignored() -> None:
    event = parse_event("UserPromptSubmit", json.dumps({**GOOD, "effort": "high", "x": [1]}))
    assert (event.name, event.session_id, event.cwd, event.prompt) == (
        "UserPromptSubmit",
        "0f1e2d3c-aaaa",
        Path("/work/repo"),
        "hello",
    )


@pytest.mark.parametrize(
    ("event", "change", "message"),
    [
        ("UserPromptSubmit", {"session_id": None}, "hook payload: 'session_id' is missing"),
        (
            "UserPromptSubmit",
            {"session_id": 42},
            "hook payload: 'session_id' must be a string, not a number",
        ),
        (
            "UserPromptSubmit",
            {"session_id": "../../etc/passwd"},
            "hook payload: 'session_id' is not an id (letters, digits, - _ . :)",
        ),
        ("UserPromptSubmit", {"cwd": "relative"}, "hook payload: 'cwd' must be an absolute path"),
        ("UserPromptSubmit", {"cwd": ["/"]}, "hook payload: 'cwd' must be a string, not a list"),
        ("UserPromptSubmit", {"prompt": None}, "hook payload: 'prompt' is missing"),
        (
            "UserPromptSubmit",
            {"prompt": {"a": 1}},
            "hook payload: 'prompt' must be a string, not an object",
        ),
        ("Stop", {}, "hook payload: 'transcript_path' is missing"),
        (
            "SessionStart",
            {"source": "x" * 65},
            "hook payload: 'source' is longer than 64 characters",
        ),
    ],
)
def test_bad_fields_are_named_with_what_is_wrong(
    event: str, change: dict[str, object], message: str
) -> None:
    payload = {key: value for key, value in {**GOOD, **change}.items() if value is not None}
    with pytest.raises(PayloadError) as caught:
        parse_event(event, json.dumps(payload))
    assert str(caught.value) == message


def test_a_payload_for_another_event_says_how_to_fix_the_install() -> None:
    with pytest.raises(PayloadError, match="run `pi-hindsight setup --host claude-code` again"):
        parse_event("UserPromptSubmit", json.dumps({**GOOD, "hook_event_name": "Stop"}))


def _line(**fields: object) -> bytes:
    return json.dumps({"v": runtime.PROTOCOL, "key": "k", **fields}).encode()


def test_requests_are_typed_and_bad_ones_say_what_is_missing() -> None:
    hook = parse_request(
        _line(op="hook", event="UserPromptSubmit", payload=json.dumps(GOOD), ignored=["a", 3])
    )
    assert hook.event is not None and hook.event.prompt == "hello" and hook.notes == ("a",)
    call = parse_request(
        _line(op="call", sessionId="s1", cwd="/r", tool="hindsight_recall", arguments={"q": 1})
    )
    assert (call.op, call.session_id, call.cwd, call.arguments) == (
        "call",
        "s1",
        Path("/r"),
        {"q": 1},
    )
    with pytest.raises(PayloadError, match="'sessionId' is missing"):
        parse_request(_line(op="tools", cwd="/r"))
    with pytest.raises(PayloadError, match="needs a string 'tool' and an 'arguments' object"):
        parse_request(_line(op="call", sessionId="s1", cwd="/r", tool="t"))
    with pytest.raises(PayloadError, match="too large \\(9000000 bytes\\)"):
        parse_request(_line(op="hook", event="Stop", payloadBytes=9_000_000))
    with pytest.raises(PayloadError, match="restart the daemon"):
        parse_request(json.dumps({"v": 1, "key": "k", "op": "ping"}).encode())


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=15,
)
FIELDS = st.dictionaries(
    st.sampled_from(
        ["session_id", "cwd", "prompt", "transcript_path", "prompt_id", "source", "reason"]
    ),
    JSON,
    max_size=7,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([*EVENTS, "Bogus"]), st.one_of(FIELDS.map(json.dumps), st.text()))
def test_any_payload_is_an_event_or_a_payload_error(event: str, text: str) -> None:
    try:
        parsed = parse_event(event, text)
    except PayloadError as error:
        assert str(error)
    else:
        assert parsed.cwd.is_absolute()


REQUEST_KEYS = ("v", "key", "op", "event", "payload", "payloadBytes", "sessionId", "cwd", "tool")
REQUEST_KEYS += ("arguments", "ignored")


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(REQUEST_KEYS),
        JSON,
    ),
    st.booleans(),
)
def test_any_request_line_is_a_request_or_a_payload_error(
    fields: dict[str, object], current: bool
) -> None:
    if current:
        fields = {**fields, "v": runtime.PROTOCOL}
    try:
        parse_request(json.dumps(fields).encode())
    except PayloadError as error:
        assert str(error)


def test_answers_keep_their_wire_form() -> None:
    output = HookOutput(
        hook_specific_output=HookContext(hook_event_name="SessionStart", additional_context="c"),
        system_message=None,
    )
    assert DaemonAnswer(ok=True, result=output).to_json() == {
        "ok": True,
        "result": {
            "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "c"}
        },
    }
    assert DaemonAnswer(ok=True, result=PingAnswer(pid=7)).to_json() == {
        "ok": True,
        "result": {"pid": 7, "sessions": None},
    }
    assert DaemonAnswer(ok=False, error="no").to_json() == {"ok": False, "error": "no"}
