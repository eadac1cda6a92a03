"""Claude Code's earlier sessions as seeding reads them (``hosts/claude_code/seed_transcripts.py``):
real Claude Code 2.1.332 transcripts (``tests/data/claude_code``) in a config dir laid out as
Claude Code lays it out, and hostile ones. The requests are exactly what live retain reads from
the same bytes; nothing of ours (injected memory, our MCP tools) and nothing of another
location, another session or a subagent is taken; a damaged file loses only what is damaged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.engine.seeding import HistoricSession, ScanReport
from pi_hindsight.hosts.claude_code import seed_transcripts
from pi_hindsight.hosts.claude_code.naming import CLAUDE_CODE_HOST
from pi_hindsight.hosts.claude_code.seed_transcripts import (
    ClaudeCodeSessions,
    claude_config_dir,
    read_transcript,
)
from pi_hindsight.hosts.claude_code.transcript_file import parse_delta
from tests.support.claude_code import Transcript

DATA = Path(__file__).resolve().parents[1] / "data" / "claude_code"
TOOLS = (DATA / "tools-and-compaction.jsonl").read_bytes()
DELIVERED = (DATA / "delivered-memory.jsonl").read_bytes()
TOOLS_CWD = Path("/work/scratch/cc/ws-21")  # as the fixtures' rows carry it
DELIVERED_CWD = Path("/tmp/ccsmoke/repo")


def _rows(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def _session_id(data: bytes) -> str:
    return str(next(row["sessionId"] for row in _rows(data) if row.get("sessionId")))


def _place(config: Path, data: bytes, *, name: str | None = None, folder: str = "-p") -> Path:
    path = config / "projects" / folder / f"{name or _session_id(data)}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _scan(config: Path, *here: Path, exclude: tuple[str, ...] = ()) -> tuple[
    list[HistoricSession], ScanReport
]:  # fmt: skip
    report = ScanReport()
    source = ClaudeCodeSessions(config, exclude=exclude)
    found = source.scan(lambda directory: directory in here, report)
    return found, report


def _texts(session: HistoricSession) -> list[list[tuple[str, str, str | None]]]:
    return [[(m.role, m.text, m.tool_name) for m in turn.messages] for turn in session.turns]


def test_a_real_transcript_gives_live_retains_requests_with_their_ids_and_times(
    tmp_path: Path,
) -> None:
    path = _place(tmp_path, TOOLS)
    [session], report = _scan(tmp_path, TOOLS_CWD)
    assert (session.session_id, session.source) == (_session_id(TOOLS), str(path))
    live = parse_delta(TOOLS, len(TOOLS))  # what live retain reads from the same bytes
    assert _texts(session) == [
        [(m.role, m.text, m.tool_name) for m in s.messages] for s in live.segments
    ]
    assert [turn.key for turn in session.turns] == [s.request_id for s in live.segments]
    prompts = {row["uuid"]: row["timestamp"] for row in _rows(TOOLS) if row.get("type") == "user"}
    assert [turn.timestamp for turn in session.turns] == [prompts[t.key] for t in session.turns]
    assert _texts(session)[1] == [  # our own MCP tool (mcp__hindsight__memory) is not history
        ("user", "please recall something", None),
        ("assistant", 'Recalled: {"result":"ECHO: memory query"}', None),
    ]
    assert dict(report.problems) == {} and report.other_locations == 0
    assert ClaudeCodeSessions(tmp_path).host == CLAUDE_CODE_HOST


def test_injected_memory_is_never_seeded_and_other_locations_are_left_alone(
    tmp_path: Path,
) -> None:
    _place(tmp_path, TOOLS, folder="-work-scratch-cc-ws-21")
    _place(tmp_path, DELIVERED, folder="-tmp-ccsmoke-repo")
    [session], report = _scan(tmp_path, DELIVERED_CWD)
    assert _texts(session) == [
        [("user", "Where does production deploy?", None), ("assistant", "Understood.", None)]
    ]
    assert "<hindsight-memory" in DELIVERED.decode()  # it was there, as an attachment row
    assert report.other_locations == 1
    found, _ = _scan(tmp_path, DELIVERED_CWD, exclude=(session.session_id,))
    assert found == []  # the session asking is retained live, never seeded as well


def test_reading_in_any_chunk_size_gives_the_same_requests(tmp_path: Path) -> None:
    path = _place(tmp_path, TOOLS)
    whole = read_transcript(path)
    longest = max(len(line) + 1 for line in TOOLS.splitlines())
    for chunk in (longest, longest + 777, 2 * longest, len(TOOLS) // 2):
        assert read_transcript(path, chunk_bytes=chunk) == whole  # each cut mid-request
    assert len(whole.turns) == 4 and whole.bad_lines == 0


def test_hostile_lines_are_counted_and_the_rest_of_the_file_is_read(tmp_path: Path) -> None:
    lines = TOOLS.splitlines(keepends=True)
    damaged = b"".join(
        [
            lines[0],
            b"{not json\n",
            b"\xff\xfe\x00 binary junk\n",
            b'{"type": "user", "message": ' + b'{"a": ' * 300 + b"1" + b"}" * 301 + b"\n",
            *lines[1:],
        ]
    ).rstrip(b"\n")  # and the last line without its newline (Claude Code stopped mid-write)
    _place(tmp_path, damaged, name=_session_id(TOOLS))
    [session], report = _scan(tmp_path, TOOLS_CWD)
    clean = _place(tmp_path / "clean", TOOLS)
    assert session.turns == read_transcript(clean).turns  # nothing but the damage is lost
    assert report.problems["unreadable transcript line (skipped)"] == 3


def test_odd_unicode_survives_and_invalid_text_is_replaced_and_counted(tmp_path: Path) -> None:
    transcript = Transcript(tmp_path / "projects" / "-odd" / "odd-1.jsonl", "odd-1")
    odd = "naïve café — 日本語 — עברית\u202e — e\u0301 — 🧪🏳️‍🌈 — \u2028 sep"
    transcript.append(*(dict(row, cwd=str(tmp_path)) for row in transcript.request(odd, "ok")))
    with transcript.path.open("ab") as handle:
        handle.write(
            b'{"type": "user", "uuid": "u-bad", "cwd": "/x", "sessionId": "odd-1", '
            b'"message": {"role": "user", "content": "bad \xc3\x28 byte and \\ud800 lone"}}\n'
        )
    [session], report = _scan(tmp_path, tmp_path)
    assert _texts(session) == [
        [("user", odd, None), ("assistant", "ok", None)],
        [("user", "bad \ufffd( byte and \ufffd lone", None)],
    ]
    assert report.problems["invalid text replaced by U+FFFD"] == 2


def test_an_overlong_line_is_skipped_and_counted_not_the_file(tmp_path: Path) -> None:
    transcript = Transcript(tmp_path / "projects" / "-p" / "long-1.jsonl", "long-1")
    rows = [dict(row, cwd=str(tmp_path)) for row in transcript.request("before", "a")]
    huge = transcript.row("user", message={"role": "user", "content": "x" * 50_000})
    after = [dict(row, cwd=str(tmp_path)) for row in transcript.request("after", "b")]
    transcript.append(*rows, huge, *after)
    read = read_transcript(transcript.path, chunk_bytes=20_000)
    assert [[m.text for m in turn.messages] for turn in read.turns] == [
        ["before", "a"],
        ["after", "b"],
    ]
    assert read.bad_lines == 1


def test_a_transcript_too_large_or_unusable_is_named_and_the_others_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = _place(tmp_path, TOOLS, name="big-1", folder="-a")
    _place(tmp_path, DELIVERED, folder="-b")
    monkeypatch.setattr(seed_transcripts, "MAX_TRANSCRIPT_BYTES", len(DELIVERED) + 1)
    nowhere = _place(tmp_path, b'{"type": "queue-operation"}\n', name="nowhere-1", folder="-c")
    _place(tmp_path, TOOLS, name="bad name!", folder="-d")
    (tmp_path / "projects" / "-e").mkdir()
    (tmp_path / "projects" / "-e" / "linked-1.jsonl").symlink_to(big)
    (tmp_path / "projects" / "-f" / "dir-1.jsonl").mkdir(parents=True)
    found, report = _scan(tmp_path, TOOLS_CWD, DELIVERED_CWD)
    assert [session.session_id for session in found] == [_session_id(DELIVERED)]
    assert report.problems == {
        "unreadable transcript": 2,  # too large, and a directory
        "transcript names no start directory (skipped)": 1,
        "not a Claude Code transcript name (skipped)": 1,
    }
    [too_large] = [example for example in report.examples if example.startswith(str(big))]
    assert "larger than" in too_large and "not read" in too_large
    assert str(nowhere) in report.examples


def test_subagents_files_are_not_sessions_and_side_chains_are_not_history(
    tmp_path: Path,
) -> None:
    main = Transcript(tmp_path / "projects" / "-p" / "main-1.jsonl", "main-1")
    main.append(*(dict(row, cwd=str(tmp_path)) for row in main.request("the task", "done")))
    side = [
        dict(row, cwd=str(tmp_path), isSidechain=True)
        for row in main.request("subagent prompt", "subagent answer")
    ]
    main.append(*side)
    for path in (
        tmp_path / "projects" / "-p" / "agent-a1.jsonl",
        tmp_path / "projects" / "-p" / "main-1" / "subagents" / "agent-a2.jsonl",
    ):
        Transcript(path, "main-1").append(*side)
    [session], _ = _scan(tmp_path, tmp_path)
    assert _texts(session) == [[("user", "the task", None), ("assistant", "done", None)]]


def test_a_forks_copied_rows_stay_with_the_session_they_came_from(tmp_path: Path) -> None:
    origin = Transcript(tmp_path / "projects" / "-p" / "origin-1.jsonl", "origin-1")
    said = [dict(row, cwd=str(tmp_path)) for row in origin.request("first", "one")]
    origin.append(*said)
    fork_path = tmp_path / "projects" / "-p" / "fork-1.jsonl"
    fork = Transcript(fork_path, "fork-1")
    copies = [  # as Claude Code branches a session: each row copied, its uuid kept
        {**row, "sessionId": "fork-1", "forkedFrom": {"sessionId": "origin-1", "messageUuid": u}}
        for row in said
        if (u := row["uuid"])
    ]
    fork.append(*copies, *(dict(row, cwd=str(tmp_path)) for row in fork.request("second", "two")))
    found, _ = _scan(tmp_path, tmp_path)
    assert {s.session_id: _texts(s) for s in found} == {
        "origin-1": [[("user", "first", None), ("assistant", "one", None)]],
        "fork-1": [[("user", "second", None), ("assistant", "two", None)]],
    }
    origin.path.unlink()  # the origin is gone: the copies are all that is left of it
    [alone], _ = _scan(tmp_path, tmp_path)
    assert [[m.text for m in turn.messages] for turn in alone.turns] == [
        ["first", "one"],
        ["second", "two"],
    ]


def test_the_config_dir_is_claude_codes_own_rule(tmp_path: Path) -> None:
    assert claude_config_dir({"CLAUDE_CONFIG_DIR": str(tmp_path)}) == tmp_path
    assert claude_config_dir({}) == Path.home() / ".claude"
    assert _scan(tmp_path / "none", tmp_path) == ([], ScanReport())
