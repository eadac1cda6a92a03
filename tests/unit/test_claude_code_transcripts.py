"""Claude Code transcripts → requests to retain, and what they say about injected memory.

The fixtures are real Claude Code 2.1.332 transcripts (bulky bookkeeping rows removed):
``tools-and-compaction.jsonl`` (four prompts: plain, one of our MCP tools, a Bash call, then
``/compact`` and one more) and ``delivered-memory.jsonl`` (a prompt whose recalled memory the
UserPromptSubmit hook injected)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pi_hindsight.engine.turn_text import TurnMessage
from pi_hindsight.hosts.claude_code.cursors import Cursor, CursorStore
from pi_hindsight.hosts.claude_code.transcript_file import Delta, parse_delta, read_chunk

DATA = Path(__file__).resolve().parents[1] / "data" / "claude_code"
TOOLS = (DATA / "tools-and-compaction.jsonl").read_bytes()
DELIVERED = (DATA / "delivered-memory.jsonl").read_bytes()


def _delta(data: bytes, **kwargs: object) -> Delta:
    return parse_delta(data, len(data), **kwargs)  # type: ignore[arg-type]


def _messages(delta: Delta) -> list[tuple[str, str, str | None]]:
    return [(m.role, m.text, m.tool_name) for s in delta.segments for m in s.messages]


def test_requests_keep_what_was_said_and_never_our_tools_or_bookkeeping() -> None:
    delta = _delta(TOOLS)
    assert [
        [(m.role, m.text, m.tool_name) for m in segment.messages] for segment in delta.segments
    ] == [
        [("user", "first question", None), ("assistant", "plain answer to first question", None)],
        [
            ("user", "please recall something", None),
            ("assistant", 'Recalled: {"result":"ECHO: memory query"}', None),
        ],
        [
            ("user", "please list files", None),
            ("tool_call", '{"command": "echo listed", "description": "echo"}', "Bash"),
            ("tool_result", "listed", "Bash"),
            ("assistant", "Listed: listed", None),
        ],
        # /compact: its command rows, caveat and summary are Claude Code's, never the user's
        [
            ("user", "after compaction", None),
            ("assistant", "plain answer to after compaction", None),
        ],
    ]
    prompts = ("first question", "please recall something", "please list files", "after compaction")
    rows = [json.loads(line) for line in TOOLS.splitlines()]
    prompt_rows = [
        row["uuid"]
        for row in rows
        if row.get("type") == "user" and row["message"]["content"] in prompts
    ]
    assert [segment.request_id for segment in delta.segments] == prompt_rows
    assert delta.bad_lines == 0
    assert delta.open_tools == {}  # every call had its result


def test_injected_memory_is_an_attachment_never_a_turn_and_the_request_record_holds_it() -> None:
    delta = _delta(DELIVERED)
    texts = [m.text for m in delta.segments[0].messages]
    assert texts == ["Where does production deploy?", "Understood."]
    assert all("hindsight-memory" not in text for text in texts)
    [context] = [c for c in delta.contexts if any("<hindsight-memory" in t for t in c.texts)]
    after = [r for r in delta.api_requests if r.position > context.position]
    assert after and after[0].texts is not None
    assert any(context.texts[0] in sent for sent in after[0].texts)  # byte for byte


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_split_into_deltas_retains_the_same_messages_in_order(data: st.DataObject) -> None:
    """Reading a transcript in pieces (a Stop per request, a checkpoint before compaction, a
    crash and a redo) gives exactly the messages of reading it whole, none twice."""
    ends = [i + 1 for i, byte in enumerate(TOOLS) if byte == 0x0A]
    cuts = sorted(set(data.draw(st.lists(st.sampled_from(ends), max_size=6))))
    whole = _messages(_delta(TOOLS))
    pieces: list[tuple[str, str, str | None]] = []
    ids: list[str] = []
    start, open_tools = 0, {}
    for end in [*cuts, len(TOOLS)]:
        delta = parse_delta(TOOLS[start:end], end, open_tools=open_tools)
        pieces += _messages(delta)
        ids += [segment.request_id for segment in delta.segments]
        start, open_tools = end, dict(delta.open_tools)
    assert pieces == whole
    assert len(ids) == len(set(ids))  # every piece has its own id: the outbox keeps each once
    again = parse_delta(TOOLS[: cuts[0]], cuts[0]) if cuts else None
    if again is not None:
        assert again == parse_delta(TOOLS[: cuts[0]], cuts[0])  # the same bytes: the same ids


def test_a_fork_retains_only_its_own_rows() -> None:
    rows = [json.loads(line) for line in TOOLS.splitlines()]
    last_prompt = next(r for r in rows if r.get("message", {}).get("content") == "after compaction")
    delta = _delta(TOOLS, skip_before=last_prompt["timestamp"])
    assert _messages(delta) == [
        ("user", "after compaction", None),
        ("assistant", "plain answer to after compaction", None),
    ]


def test_read_chunk_takes_complete_lines_and_skips_an_overlong_one(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2')
    assert read_chunk(path, 0) == (b'{"a": 1}\n', 9, False)
    assert read_chunk(path, 9) == (b"", 9, False)  # still being written
    path.write_bytes(b"x" * 100 + b"\n" + b'{"c": 3}\n')
    data, end, more = read_chunk(path, 0, limit=50)
    assert (data, end, more) == (b"\n", 101, True)
    assert read_chunk(path, end) == (b'{"c": 3}\n', 110, False)
    assert read_chunk(path, 0, limit=100) == (b"\n", 101, True)  # the newline just past it


def test_hostile_lines_are_counted_and_skipped_never_fatal() -> None:
    nested = b'{"type": "user", "message": ' + b'{"a": ' * 200 + b"1" + b"}" * 201
    data = (
        b"\n".join(
            [
                b"not json",
                b'"a string"',
                b'{"type": "user", "message": {"content": "\\ud800 lone"}, "uuid": "u1"}',
                nested,
                b'{"type": "assistant", "message": {"content": 42}}',
                b'{"type": "user", "message": "wrong shape"}',
                b"\xff\xfe bad utf-8",
            ]
        )
        + b"\n"
    )
    delta = _delta(data)
    assert delta.bad_lines == 4  # not JSON, not an object, too deep, bad bytes
    assert _messages(delta) == [("user", "\ufffd lone", None)]


def test_cursors_are_durable_private_and_a_damaged_one_counts_as_none(tmp_path: Path) -> None:
    store = CursorStore(tmp_path)
    transcript = tmp_path / "abc.jsonl"
    cursor = Cursor(offset=120, planned=300, open_tools={"t1": "Bash"}, file_id=(1, 2))
    store.save(transcript, cursor)
    assert store.load(transcript) == cursor
    [saved] = list(store.directory.iterdir())
    assert saved.stat().st_mode & 0o777 == 0o600
    assert store.directory.stat().st_mode & 0o777 == 0o700
    saved.write_bytes(b"{broken")
    assert store.load(transcript) == Cursor()
    saved.write_text(json.dumps({"offset": -5, "planned": "x", "openTools": [1]}))
    assert store.load(transcript) == Cursor()


def test_turn_messages_are_the_engines_own_type() -> None:
    delta = _delta(TOOLS)
    assert all(isinstance(m, TurnMessage) for s in delta.segments for m in s.messages)
