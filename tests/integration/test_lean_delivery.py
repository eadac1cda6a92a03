"""Lean delivery (issue 12) on a scripted set through real sidecars and the real server.

The set is ``bench/delivery_tokens.py``'s (one definition for the test and the benchmark): a
project scope of 76 facts (some retained before the startup memo was refreshed, near misses of
memo facts after it), a note with a context of its own, User bank preferences, a 50-request
session. The baseline there is a copy of the renderer before issue 12, fed the same recall.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pi_hindsight.engine.memo_overlap import MemoStatements
from pi_hindsight.engine.memory_block import FRAMING, MARK, memo_section

# One worker runs the whole module: its world (76 facts retained, a 50-request session) is built
# once per worker that runs one of its tests, and took ~25 s each time.
pytestmark = [pytest.mark.server, pytest.mark.xdist_group("lean-delivery")]

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # the bench's own helper (_sidecar) is imported by name
    try:
        spec = importlib.util.spec_from_file_location(
            "delivery_tokens", BENCH / "delivery_tokens.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["delivery_tokens"] = module  # dataclasses resolve their module by name
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


bench = _bench()


@pytest.fixture(scope="module")
def world(hindsight_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    return bench.build_world(hindsight_server.base_url, tmp_path_factory.mktemp("lean"))


@pytest.fixture(scope="module")
def run(world: Any) -> Any:
    return bench.run_session(world)


def test_a_50_request_session_carries_memory_not_scaffolding(run: Any) -> None:
    baseline = run.baseline
    assert baseline.repeats >= 1, "the set must exercise a memo fact recalled as a record"
    for tally in (run.lean, run.sectioned):
        assert tally.share >= 0.5, (tally.name, tally.share)
        assert tally.total_tokens <= baseline.total_tokens / 2, (tally.name, tally.total_tokens)
        assert tally.repeats == 0, tally.name
        assert tally.in_memo > 0
        # The same memory, not less of it: a record the memo states reaches the model there.
        assert tally.records + tally.in_memo >= baseline.records * 0.9
    assert run.false_drops == [], run.false_drops
    assert run.judged >= 100


def test_the_framing_is_stated_once_per_session_and_every_block_is_marked(run: Any) -> None:
    first, *later = run.lean.blocks
    assert FRAMING in first and MARK not in first
    for block in later:
        assert FRAMING not in block and block.splitlines()[1] == MARK
    for block in run.sectioned.blocks:  # the host states it (a system prompt section)
        assert FRAMING not in block and block.splitlines()[1] == MARK
    assert run.sectioned.prefix_tokens > 0  # ...once, from the framing the sidecar returned


def _prepare(sidecar: Any, session: str, number: int, prompt: str) -> dict[str, Any]:
    result: dict[str, Any] = sidecar.call(
        "prepareMemory",
        {"requestId": f"{session}-{number}", "prompt": prompt, "sessionId": session},
    )
    return result


def _session_file(path: Path, cwd: Path, message: dict[str, Any], *, compacted: bool) -> None:
    """A Pi session file holding one request and its memory message (and, when ``compacted``,
    a compaction that summarised both away)."""
    entries: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": "resumed", "cwd": str(cwd)},
        {
            "type": "message",
            "id": "u1",
            "parentId": None,
            "message": {"role": "user", "content": "q"},
        },
        {
            "type": "custom_message",
            "id": "m1",
            "parentId": "u1",
            "customType": message["customType"],
            "content": message["content"],
            "display": False,
            "details": message["details"],
        },
        {
            "type": "message",
            "id": "a1",
            "parentId": "m1",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        },
    ]
    if compacted:
        entries.append(
            {
                "type": "compaction",
                "id": "c1",
                "parentId": "a1",
                "summary": "...",
                "firstKeptEntryId": "a1",
            }
        )
    path.write_text("\n".join(json.dumps(entry) for entry in entries) + "\n")


@pytest.fixture
def resumed(world: Any) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A first session's first memory message (it carries the framing and the memo)."""
    state = world.state(f"resume-{len(world.states)}")
    sidecar = world.sidecar(state, "first")
    try:
        opening = _prepare(sidecar, "first", 0, bench.PROMPTS[0])["message"]
    finally:
        sidecar.close()
    assert opening is not None and opening["details"]["framed"] is True
    yield state, opening


def _later_block(sidecar: Any, session: str) -> dict[str, Any]:
    for number, prompt in enumerate(bench.PROMPTS[1:], start=1):
        message = _prepare(sidecar, session, number, prompt)["message"]
        if message is not None:
            return dict(message)
    raise AssertionError("no later request delivered anything")


def test_a_resumed_session_is_not_framed_again_and_keeps_out_what_its_memo_states(
    world: Any, resumed: tuple[Any, dict[str, Any]], tmp_path: Path
) -> None:
    state, opening = resumed
    memo = memo_section(opening["content"])
    assert memo
    path = tmp_path / "resumed.jsonl"
    _session_file(path, world.repo, opening, compacted=False)
    sidecar = world.sidecar(state, "resumed", str(path))
    try:
        later = _later_block(sidecar, "resumed")
    finally:
        sidecar.close()
    assert later["details"]["framed"] is False and FRAMING not in later["content"]
    assert "## Startup memo" not in later["content"]  # visible already, unchanged
    stated = MemoStatements(memo)
    for line in later["content"].splitlines():
        if line.startswith("- ("):
            assert not stated.states(line.split(") ", 1)[1]), line


def test_after_a_compaction_the_next_block_states_the_framing_again(
    world: Any, resumed: tuple[Any, dict[str, Any]], tmp_path: Path
) -> None:
    state, opening = resumed
    path = tmp_path / "compacted.jsonl"
    _session_file(path, world.repo, opening, compacted=True)
    sidecar = world.sidecar(state, "compacted", str(path))
    try:
        message = _prepare(sidecar, "compacted", 0, bench.PROMPTS[0])["message"]
    finally:
        sidecar.close()
    assert message is not None and message["details"]["framed"] is True
    assert FRAMING in message["content"] and "## Startup memo" in message["content"]


def test_a_host_with_a_system_section_gets_the_framing_on_every_answer(world: Any) -> None:
    state = world.state(f"section-{len(world.states)}")
    sidecar = world.sidecar(state, "sectioned")
    try:
        answers = [
            sidecar.call(
                "prepareMemory",
                {
                    "requestId": f"sectioned-{number}",
                    "prompt": prompt,
                    "sessionId": "sectioned",
                    "canSetSystemSection": True,
                },
            )
            for number, prompt in enumerate(bench.PROMPTS[:4])  # a trivial one among them
        ]
    finally:
        sidecar.close()
    framings = {json.dumps(answer["framing"], sort_keys=True) for answer in answers}
    assert len(framings) == 1  # the same text every time: a byte-identical prefix
    (framing,) = (answer["framing"] for answer in answers[:1])
    assert framing == {"section": "hindsight-memory-guide", "text": FRAMING}
    assert {answer["outcome"] for answer in answers} >= {"skipped"}
    assert all(
        answer["message"] is None or FRAMING not in answer["message"]["content"]
        for answer in answers
    )


def test_evidence_says_why_each_delivered_record_came(world: Any) -> None:
    """Issue 13: what the real server's recall said about each delivered record (its type and
    scores) and the query it was sent, redacted as sent, kept in evidence and shown next to the
    delivered line."""
    state = world.state(f"why-{len(world.states)}")
    # Every record recall returned (relevance off): which ones the memo already states depends
    # on when Hindsight refreshed it, and the bars would leave one or none to look at.
    config = json.loads((state / "config.json").read_text())
    config.setdefault("recall", {})["relevance"] = "off"
    (state / "config.json").write_text(json.dumps(config))
    sidecar = world.sidecar(state, "why")
    secret = "ghp_" + "a1B2c3D4" * 5  # a GitHub token: redacted before recall sees it
    prompt = f"{bench.PROMPTS[1]} (my token is {secret})"
    try:
        answer = _prepare(sidecar, "why", 0, prompt)
    finally:
        sidecar.close()
    assert answer["outcome"] == "delivered", answer
    request_id = "why-0"
    shown = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "evidence", "show", request_id, "--json"],
        env=world.env(state),
        check=True,
        capture_output=True,
        text=True,
    )
    data = json.loads(shown.stdout)
    records = data["records"]
    assert records and len(records) == data["recordCount"]
    for record in records:
        assert record["type"] in {"world", "experience", "observation"}, record
        assert isinstance(record["scores"]["final"], float), record
    assert any("semantic" in r["scores"] or "keyword" in r["scores"] for r in records)
    queries = data["queries"]
    assert set(queries) == {"project", "user"}
    assert bench.PROMPTS[1] in queries["project"] and secret not in json.dumps(queries)
    # The details the host keeps carry the same (never shown to the model).
    detail_records = answer["message"]["details"]["records"]
    assert [r["scores"] for r in detail_records] == [r["scores"] for r in records]
    assert (
        "scores" not in answer["message"]["content"] and secret not in answer["message"]["content"]
    )

    text = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "evidence", "explain", request_id],
        env=world.env(state),
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    content = answer["message"]["content"].splitlines()
    # The delivered records; the ones held back as below relevance are listed after them.
    held = "held back (recalled, never shown to the model):"
    delivered = text[: text.index(held)] if held in text else text
    recorded = [line.split("] ", 1)[1] for line in delivered if _numbered(line)]
    assert len(recorded) == len(records)
    for line in recorded:  # each next to the very line the model saw (long ones shortened)
        assert line in content or any(c.startswith(line.rstrip("…")) for c in content), line
    whys = [line for line in delivered if line.startswith("       why: ")]
    assert len(whys) == len(records) and all("score " in why for why in whys)


def _numbered(line: str) -> bool:
    number, _, rest = line.strip().partition(". [")
    return line.startswith("  ") and number.isdigit() and bool(rest)
