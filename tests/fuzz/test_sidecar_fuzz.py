"""Property-based fuzzing of the real ``pi-hindsight serve`` process (issue 9).

Hypothesis generates frames — invalid JSON and UTF-8, lone surrogates anywhere, deep nesting, odd
id types, wrong param types, huge numbers and lines, unknown methods, requests before
``initialize`` — and writes them to one long-lived sidecar per test. The properties:

- the process lives;
- every request with a valid id gets exactly one JSON-RPC answer, with that id (lone surrogates in
  it replaced by U+FFFD, as the protocol promises), whatever its params;
- stdout carries protocol lines only;
- a valid call works after.

Each test sends at least 10,000 frames (two tests: 20,000 per run). No Hindsight is configured,
so nothing is contacted; calls that would need it fail fast with an answer.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.sidecar import Sidecar

FRAMES_PER_EXAMPLE = 20
EXAMPLES = 520  # x 20 frames: over 10,000 frames per test
ANSWER_TIMEOUT_S = 30.0

SESSION_METHODS = [
    "consent",
    "prepareMemory",
    "confirmDelivery",
    "memoryAttached",
    "turnCompleted",
    "compaction",
    "command",
    "toolCall",
    "status",
    "$/cancelRequest",
    "noSuchMethod",
    "",
]


def fuzzed_sidecar(state_dir: Path, agent_dir: Path) -> Sidecar:
    """One ``serve`` process with no Hindsight configured; its stderr is not kept."""
    env = dict(os.environ, PI_CODING_AGENT_DIR=str(agent_dir))
    for variable in ("HINDSIGHT_BASE_URL", "HINDSIGHT_API_KEY"):
        env.pop(variable, None)
    return Sidecar(state_dir, env=env, stderr=False)


def _expected_id(sent: str) -> str:
    """What the answer's id must be: the string as JSON reads it (a surrogate pair is one
    character), with every lone surrogate replaced by U+FFFD."""
    read: str = json.loads(json.dumps(sent))
    return "".join("\ufffd" if 0xD800 <= ord(char) <= 0xDFFF else char for char in read)


# -- strategies ----------------------------------------------------------------------------------

any_text = st.text(
    st.characters(codec=None, exclude_categories=()),  # surrogates and every other category
    max_size=12,
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(any_text, children, max_size=4)
    ),
    max_leaves=12,
)
methods = st.sampled_from(["initialize", *SESSION_METHODS])
session_methods = st.sampled_from(SESSION_METHODS)
garbage = st.binary(max_size=120).map(lambda data: data.replace(b"\n", b" "))


@dataclass
class Frame:
    data: bytes
    tracked_id: Any = None  # the id an answer must carry, when the frame is a request with one


_ids = itertools.count(10**12)


def _unique_int() -> int:
    """An id no other frame uses (ids well beyond any the fuzzed frames could salvage)."""
    return next(_ids)


def _params_for(method: str, draw: st.DrawFn, cwd: str) -> Any:
    """Params: well-formed, wrongly typed, or arbitrary JSON."""
    shape = draw(st.sampled_from(["valid", "valid", "arbitrary", "wrong-type", "missing"]))
    if shape == "missing":
        return None
    if shape == "wrong-type":
        return draw(st.one_of(st.lists(json_values, max_size=3), any_text, st.integers()))
    if shape == "arbitrary":
        return draw(st.dictionaries(any_text, json_values, max_size=5))
    # Only the chosen method's params are drawn (drawing every method's, then picking one, made
    # generation most of the test's time): the same frames, the same distribution.
    text = draw(any_text)
    valid: dict[str, Callable[[], Any]] = {
        "initialize": lambda: {
            "protocolVersion": draw(st.sampled_from([1, 1, 2, -1])),
            "cwd": draw(st.sampled_from([cwd, cwd, "/nonexistent/dir", "relative", "/"])),
            "sessionId": f"fuzz-{text}",
            "hasUI": draw(st.booleans()),
        },
        "consent": lambda: {"accepted": draw(st.booleans())},
        "prepareMemory": lambda: {"requestId": f"r{text}", "prompt": text, "sessionId": "fuzz"},
        "confirmDelivery": lambda: {
            "requestId": text,
            "confirmed": draw(st.booleans()),
            "payloadBytes": draw(st.integers(min_value=-(2**70), max_value=2**70)),
        },
        "memoryAttached": lambda: {"requestId": text},
        "turnCompleted": lambda: {
            "requestId": f"t{text}",
            "sessionId": "fuzz",
            "messages": [
                {"role": "user", "content": text},
                {"role": "assistant", "content": [{"type": "text", "text": draw(any_text)}]},
                {"role": "toolResult", "content": draw(json_values), "toolName": text},
            ],
        },
        "command": lambda: {
            "name": draw(st.sampled_from(["hindsight", "hindsight:outbox", "hindsight:evidence"])),
            "args": text,
        },
        "toolCall": lambda: {
            "name": draw(st.sampled_from(["hindsight_memory", "hindsight_retain_global", text])),
            "params": draw(st.dictionaries(any_text, json_values, max_size=3))
            | {"action": draw(st.sampled_from(["status", "recall", "nope", text]))},
        },
        "$/cancelRequest": lambda: {"id": draw(json_values)},
    }
    params = valid.get(method)
    return draw(st.dictionaries(any_text, json_values, max_size=3)) if params is None else params()


@st.composite
def frames(draw: st.DrawFn, methods: st.SearchStrategy[str], cwd: str) -> Frame:
    kind = draw(
        st.sampled_from(
            [
                "request",
                "request",
                "request",
                "string-id",
                "notification",
                "odd-id",
                "invalid-utf8",
                "deep",
                "huge-number",
                "constants",
                "truncated",
                "garbage",
                "long-line",
                "separators",
            ]
        )
    )
    if kind == "garbage":
        return Frame(draw(garbage) + b"\n")
    method = draw(methods)
    params = _params_for(method, draw, cwd)
    request_id: Any = _unique_int()
    if kind == "string-id":
        request_id = f"fz{request_id}-{draw(any_text)}"
    elif kind == "odd-id":
        request_id = draw(
            st.one_of(st.floats(allow_nan=False), st.booleans(), st.lists(st.integers()), st.none())
        )
    message: dict[str, Any] = {"jsonrpc": "2.0"}
    if kind != "notification":
        message["id"] = request_id
    message["method"] = method
    if params is not None:
        message["params"] = params
    tracked = None
    if kind not in ("notification", "odd-id"):
        tracked = _expected_id(request_id) if isinstance(request_id, str) else request_id
    if kind == "separators":
        # Raw U+2028/U+2029, and any surrogate written raw (invalid UTF-8 on the wire, read as
        # U+FFFD): one line, still answered. Ids of this kind are integers.
        message = {**message, "extra": "a\u2028b\u2029c"}
        data = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
    else:
        data = json.dumps(message).encode("ascii")
    if kind == "truncated":
        head = data.find(b'"method"')
        if head < 0 or len(data) <= head + 1:
            return Frame(data + b"\n", tracked)
        return Frame(
            data[: draw(st.integers(min_value=head, max_value=len(data) - 1))] + b"\n", tracked
        )
    return Frame(_extend(kind, data, draw) + b"\n", tracked)


def _extend(kind: str, data: bytes, draw: st.DrawFn) -> bytes:
    """A frame's JSON object with one more hostile member appended (by kind)."""
    if kind == "invalid-utf8":
        extra = b'"junk":"\xff\xfe\xc3\x28\xed\xa0\x80"'
    elif kind == "deep":
        depth = draw(st.integers(min_value=20, max_value=3000))
        extra = b'"deep":' + b"[" * depth + b"]" * depth
    elif kind == "huge-number":
        extra = b'"n":' + b"9" * draw(st.integers(min_value=19, max_value=6000))
    elif kind == "constants":
        extra = b'"a":NaN,"b":-Infinity,"c":1e999'
    elif kind == "long-line":
        extra = b'"big":"' + b"x" * draw(st.integers(min_value=100_000, max_value=2_000_000)) + b'"'
    else:
        return data
    return data[:-1] + b"," + extra + b"}"


# -- the tests -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    root = tmp_path_factory.mktemp("fuzz")
    cwd = root / "project"
    cwd.mkdir()
    yield root / "state", root / "agent", cwd


def _run_batch(sidecar: Sidecar, batch: list[Frame], sent: list[int]) -> None:
    sidecar.send_raw(b"".join(frame.data for frame in batch))
    sent[0] += len(batch)
    tracked = {frame.tracked_id for frame in batch if frame.tracked_id is not None}
    sidecar.answered(tracked, timeout=ANSWER_TIMEOUT_S)
    assert sidecar.process.poll() is None, "the sidecar died"
    assert not sidecar.bad_lines, f"non-protocol output: {sidecar.bad_lines[:3]!r}"
    twice = [key for key in tracked if sidecar.answer_count(key) != 1]
    assert not twice, f"answered more than once: {twice[:5]!r}"


def _check_still_serving(sidecar: Sidecar, cwd: Path) -> None:
    params = {"protocolVersion": 1, "cwd": str(cwd), "sessionId": "z"}
    sidecar.request("initialize", params, request_id="after-1", timeout=ANSWER_TIMEOUT_S)
    sidecar.request("status", {}, request_id="after-2", timeout=ANSWER_TIMEOUT_S)
    assert sidecar.answer_count("after-1") == 1 and sidecar.answer_count("after-2") == 1


FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.large_base_example,
    ],
)


@pytest.fixture(scope="module")
def before_initialize(fuzz_dirs: tuple[Path, Path, Path]) -> Iterator[Sidecar]:
    state, agent, _ = fuzz_dirs
    sidecar = fuzzed_sidecar(state / "a", agent)
    yield sidecar
    sidecar.close()


@pytest.fixture(scope="module")
def with_sessions(fuzz_dirs: tuple[Path, Path, Path]) -> Iterator[Sidecar]:
    state, agent, _ = fuzz_dirs
    sidecar = fuzzed_sidecar(state / "b", agent)
    yield sidecar
    sidecar.close()


def test_no_frame_before_initialize_kills_or_silences_the_sidecar(
    before_initialize: Sidecar, fuzz_dirs: tuple[Path, Path, Path]
) -> None:
    """Frames of every kind to a sidecar that never gets ``initialize``: every request still has
    exactly one answer, nothing but protocol lines come out, and it keeps serving."""
    cwd = str(fuzz_dirs[2])
    sent = [0]  # frames written

    @FUZZ_SETTINGS
    @given(
        st.lists(
            frames(session_methods, cwd), min_size=FRAMES_PER_EXAMPLE, max_size=FRAMES_PER_EXAMPLE
        )
    )
    def property_holds(batch: list[Frame]) -> None:
        _run_batch(before_initialize, batch, sent)

    property_holds()
    assert sent[0] >= 10_000, sent[0]
    _check_still_serving(before_initialize, fuzz_dirs[2])


def test_no_frame_with_sessions_kills_or_silences_the_sidecar(
    with_sessions: Sidecar, fuzz_dirs: tuple[Path, Path, Path]
) -> None:
    """The same, with ``initialize`` frames among the rest (valid and not, other directories,
    other protocol versions), so session methods run with and without a session."""
    cwd = str(fuzz_dirs[2])
    sent = [0]  # frames written

    @FUZZ_SETTINGS
    @given(st.lists(frames(methods, cwd), min_size=FRAMES_PER_EXAMPLE, max_size=FRAMES_PER_EXAMPLE))
    def property_holds(batch: list[Frame]) -> None:
        _run_batch(with_sessions, batch, sent)

    property_holds()
    assert sent[0] >= 10_000, sent[0]
    _check_still_serving(with_sessions, fuzz_dirs[2])
