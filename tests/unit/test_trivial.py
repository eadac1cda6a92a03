"""Which requests are not worth retaining (engine/trivial.py): examples, and the property that
no request in which the user or the assistant states a project fact is ever skipped."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_hindsight.engine.trivial import classify, is_pleasantry
from pi_hindsight.engine.turn_text import TurnMessage


def _turn(user: str, assistant: str = "", tools: tuple[str, ...] = ()) -> list[TurnMessage]:
    messages = [TurnMessage("user", user)]
    for name in tools:
        messages.append(TurnMessage("tool_call", "{}", tool_name=name))
        messages.append(TurnMessage("tool_result", "result", tool_name=name))
    messages.append(TurnMessage("assistant", assistant))
    return messages


@pytest.mark.parametrize(
    ("user", "assistant", "tools", "reason"),
    [
        ("thanks!", "You're welcome!", (), "acknowledgement"),
        ("ok, go ahead", "", (), "acknowledgement"),
        (
            "Perfect, thank you 👍",
            "Glad to help. Let me know if you need anything else.",
            (),
            "acknowledgement",
        ),
        ("", "", ("bash",), "empty"),
        ("", "", (), "empty"),
        (
            "what do you remember about the cache?",
            "Memory says the cache is Redis.",
            ("hindsight_memory",),
            "memory tools only",
        ),
    ],
)
def test_trivial_requests_are_named(
    user: str, assistant: str, tools: tuple[str, ...], reason: str
) -> None:
    skip = classify(_turn(user, assistant, tools))
    assert skip is not None and skip.reason == reason


@pytest.mark.parametrize(
    ("user", "assistant", "tools"),
    [
        ("thanks", "Done: the build now uses port 8080.", ()),
        ("ok", "", ("bash",)),  # work was done: its mention may matter
        (
            "We deploy on Fridays. What do you remember about the cache?",
            "It is Redis.",
            ("hindsight_memory",),
        ),
        ("what is in the cache?", "", ("hindsight_memory", "read")),
        ("no", "We use tabs.", ()),
        ("fix the flaky test in tests/test_api.py", "", ()),
    ],
)
def test_requests_with_content_are_kept(user: str, assistant: str, tools: tuple[str, ...]) -> None:
    assert classify(_turn(user, assistant, tools)) is None


def test_an_aborted_request_is_skipped_only_when_it_said_nothing() -> None:
    skip = classify(_turn("ok do it"), aborted=True)
    assert skip is not None and skip.reason == "aborted"
    assert classify(_turn("The API key rotates monthly; now refactor auth"), aborted=True) is None


# -- the property -------------------------------------------------------------------------------

_NAMES = st.from_regex(r"[a-z][a-z0-9_-]{2,12}", fullmatch=True)
_FACT_TEMPLATES = (
    "The {a} service listens on port {n}.",
    "We use {a} for {b}",
    "Tests run with `make {a}`",
    "config lives in src/{a}/{b}.py",
    "{A} depends on {b} version {n}",
    "the {a} table is sharded by {b}",
    "never push to {a} directly",
    "we deploy {a} on fridays",
    "our staging cluster is called {A}",
    "I prefer {a} over {b}",
)


@st.composite
def facts(draw: st.DrawFn) -> str:
    template = draw(st.sampled_from(_FACT_TEMPLATES))
    a, b = draw(_NAMES), draw(_NAMES)
    return template.format(a=a, b=b, A=a.capitalize(), n=draw(st.integers(1, 65_535)))


_PLEASANTRIES = st.sampled_from(
    [
        "thanks",
        "ok",
        "Great!",
        "sounds good",
        "go ahead",
        "👍",
        "You're welcome.",
        "sure, do it",
        "",
    ]
)
_QUESTIONS = st.sampled_from(["what do you remember?", "anything about the cache?", "why?"])
_TOOLS = st.lists(
    st.sampled_from(["hindsight_memory", "hindsight_retain_global", "bash", "read"]), max_size=3
)


@st.composite
def turns_with_a_fact(draw: st.DrawFn) -> tuple[list[TurnMessage], bool]:
    """A request where the user, or the assistant outside a memory-tools-only request, states a
    fact among any pleasantries and questions."""
    fact = draw(facts())
    tools = tuple(draw(_TOOLS))
    memory_only = bool(tools) and all(t.startswith("hindsight_") for t in tools)
    who = "user" if memory_only else draw(st.sampled_from(["user", "assistant"]))
    pieces = draw(st.lists(st.one_of(_PLEASANTRIES, _QUESTIONS), max_size=3))
    at = draw(st.integers(0, len(pieces)))
    with_fact = " ".join([*pieces[:at], fact, *pieces[at:]])
    other = " ".join(draw(st.lists(_PLEASANTRIES, max_size=2)))
    user, assistant = (with_fact, other) if who == "user" else (other, with_fact)
    return _turn(user, assistant, tools), draw(st.booleans())


@settings(max_examples=600, deadline=None)
@given(turns_with_a_fact())
def test_no_request_stating_a_fact_is_skipped(case: tuple[list[TurnMessage], bool]) -> None:
    messages, aborted = case
    assert classify(messages, aborted=aborted) is None


@settings(max_examples=300, deadline=None)
@given(facts())
def test_no_fact_is_a_pleasantry(fact: str) -> None:
    assert not is_pleasantry(fact)


def test_a_fact_run_into_a_memory_question_is_kept() -> None:
    # Found by the property below: no full stop between a statement and a question.
    messages = _turn("We use a00 for a00 what do you remember?", "", ("hindsight_memory",))
    assert classify(messages) is None
    assert classify(_turn("do you remember we use postgres?", "", ("hindsight_memory",))) is None
