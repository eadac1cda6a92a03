"""Pi 1.x run model: which session entries are one request's messages (hosts/pi/messages.py).

The entry shapes are the ones Pi 1.6.0 writes (see docs/shim.md, "Pi 1.x run model"): a failed
attempt stays in the session and is hidden by a
``context_edit`` whose replacement is null; ``role: system`` messages carry prompt sections.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pi_hindsight.engine.turn_text import render_turn
from pi_hindsight.hosts.pi.messages import request_messages, turn_messages
from pi_hindsight.hosts.pi.naming import CUSTOM_TYPE

REQUEST = "req-1"


def _message(entry_id: str, role: str, text: str, **extra: Any) -> dict[str, Any]:
    content: object = text if role == "user" else [{"type": "text", "text": text}] if text else []
    return {
        "type": "message",
        "id": entry_id,
        "message": {"role": role, "content": content, **extra},
    }


def _memory(entry_id: str, request_id: str = REQUEST) -> dict[str, Any]:
    return {
        "type": "custom_message",
        "id": entry_id,
        "customType": CUSTOM_TYPE,
        "content": "<memory>…</memory>",
        "display": False,
        "details": {"requestId": request_id},
    }


def _hide(entry_id: str, target: str) -> dict[str, Any]:
    return {"type": "context_edit", "id": entry_id, "targetId": target, "replacement": None}


def _retained(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages, _ = request_messages(entries, REQUEST)
    return list(json.loads(render_turn(turn_messages(messages)).content or "[]"))


def test_an_auto_retried_failure_is_retained_once_without_the_provider_error() -> None:
    """Pi 1.x keeps the failed attempt (its text is the provider's error) and hides it with a
    context_edit; the retry's answer is the request's only answer."""
    entries = [
        _message("u1", "user", "how do we deploy?"),
        _memory("m1"),
        _message(
            "a1",
            "assistant",
            "",
            stopReason="error",
            errorMessage='503: {"error":"overloaded"}',
        ),
        _hide("e1", "a1"),
        _message("a2", "assistant", "We deploy with make ship.", stopReason="stop"),
    ]
    messages, memory_entry = request_messages(entries, REQUEST)
    assert memory_entry == "m1"
    assert [m["role"] for m in messages] == ["user", "assistant"]
    turns = _retained(entries)
    assert [t["content"] for t in turns] == ["how do we deploy?", "We deploy with make ship."]
    assert "503" not in json.dumps(turns)


def test_a_partial_answer_cut_off_by_a_dropped_stream_is_not_retained() -> None:
    """Even without a context_edit (and on Pi 0.73.1's agent_end messages), an assistant message
    that ended in an error is no answer."""
    messages = [
        {"role": "user", "content": "explain the cache"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "partial answ"}],
            "stopReason": "error",
            "errorMessage": "terminated: other side closed",
        },
    ]
    turns = turn_messages(messages)
    assert [(t.role, t.text) for t in turns] == [("user", "explain the cache")]


def test_an_aborted_request_keeps_the_users_words_only() -> None:
    """The aborted answer was never sent back to the model by Pi either."""
    entries = [
        _message("u1", "user", "refactor the parser"),
        _memory("m1"),
        _message(
            "a1",
            "assistant",
            "Sure, first I",
            stopReason="aborted",
            errorMessage="Request was aborted",
        ),
    ]
    turns = _retained(entries)
    assert [t["content"] for t in turns] == ["refactor the parser"]


def test_a_queued_follow_up_and_a_compaction_retry_are_one_request() -> None:
    """A follow-up queued during the run joins it (one agent_settled); a compaction retry adds a
    compaction entry and the answer after it."""
    entries = [
        _message("s0", "system", ""),
        _message("u1", "user", "add a flag"),
        _memory("m1"),
        _message("a1", "assistant", "", stopReason="error", errorMessage="400: context window"),
        _hide("e1", "a1"),
        {"type": "compaction", "id": "c1", "summary": "earlier work", "firstKeptEntryId": "u1"},
        _message("a2", "assistant", "Added --flag.", stopReason="stop"),
        _message("u2", "user", "and document it"),
        _message("a3", "assistant", "Documented in README.", stopReason="stop"),
    ]
    turns = _retained(entries)
    assert [t["content"] for t in turns] == [
        "add a flag",
        "Added --flag.",
        "and document it",
        "Documented in README.",
    ]


def test_other_extensions_custom_messages_and_other_requests_memory_are_not_ours() -> None:
    entries = [
        {"type": "custom_message", "id": "x1", "customType": "build-watcher", "content": "done"},
        _memory("m0", request_id="an-earlier-request"),
        _message("u1", "user", "next step"),
        _memory("m1"),
        _message("a1", "assistant", "Do X.", stopReason="stop"),
    ]
    messages, memory_entry = request_messages(entries, REQUEST)
    assert memory_entry == "m1"
    assert [m["role"] for m in messages] == ["user", "assistant"]


_ENTRY = st.one_of(
    st.builds(
        _message,
        st.text(min_size=1, max_size=4),
        st.sampled_from(["user", "assistant", "system", "toolResult"]),
        st.text(max_size=20),
    ),
    st.builds(_memory, st.text(min_size=1, max_size=4), st.sampled_from([REQUEST, "other"])),
    st.builds(_hide, st.text(min_size=1, max_size=4), st.text(min_size=1, max_size=4)),
    st.dictionaries(st.text(max_size=8), st.none() | st.text(max_size=8) | st.integers()),
)


@given(st.lists(_ENTRY, max_size=30))
def test_any_entries_give_messages_in_order_never_hidden_never_system(
    entries: list[dict[str, Any]],
) -> None:
    """Whatever a session file holds: no crash, order kept, each message at most once, nothing
    hidden by a context_edit and no system message."""
    messages, memory_entry = request_messages(entries, REQUEST)
    hidden = {
        str(e.get("targetId"))
        for e in entries
        if e.get("type") == "context_edit" and e.get("replacement") is None
    }
    expected = [
        e["message"]
        for e in entries
        if e.get("type") == "message"
        and str(e.get("id")) not in hidden
        and isinstance(e.get("message"), dict)
        and e["message"].get("role") != "system"
    ]
    assert messages == expected
    ours = [
        e.get("id")
        for e in entries
        if e.get("type") == "custom_message"
        and e.get("customType") == CUSTOM_TYPE
        and isinstance(e.get("details"), dict)
        and e["details"].get("requestId") == REQUEST
        and isinstance(e.get("id"), str)
    ]
    assert memory_entry == (ours[-1] if ours else None)
    turn_messages(messages)  # never raises either
