"""Seeding's parts without a server: Pi session files (both formats) → requests as live retain
sees them, the git digest on hostile output, hostile session files, the corrections store and
the delivery's corrections filter."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_hindsight.backend.resources import MemoryRecord
from pi_hindsight.engine import git_history
from pi_hindsight.engine.delivery import hold_back, hold_back_memo
from pi_hindsight.engine.memory_block import record_key
from pi_hindsight.engine.seeding import ScanReport, estimate_tokens
from pi_hindsight.engine.turn_text import render_turn
from pi_hindsight.hosts.pi.seed_sessions import PiSessions, requests_of
from pi_hindsight.hosts.pi.session_file import read_session
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.corrections import Corrected, CorrectionRecord
from tests.plugins.pi import make_repo
from tests.support.pi_sessions import Exchange, write_session


def _turns(path: Path) -> list[list[tuple[str, str]]]:
    return [
        [(message.role, message.text) for message in turn.messages]
        for turn in requests_of(read_session(path).entries)
    ]


def test_a_pi_0_73_session_becomes_one_request_per_user_message(tmp_path: Path) -> None:
    path = write_session(
        tmp_path / "agent",
        tmp_path,
        [
            Exchange("We deploy to Zephyr.", "Noted.", memory="- an old memory line"),
            Exchange("List the files.", "Listed.", tool=("bash", {"command": "ls"}, "a.txt")),
            Exchange("And after compaction?", "Still here."),
        ],
        compaction_after=2,
    )
    turns = _turns(path)
    assert turns == [
        [("user", "We deploy to Zephyr."), ("assistant", "Noted.")],
        [
            ("user", "List the files."),
            ("tool_call", '{"command": "ls"}'),
            ("tool_result", "a.txt"),
            ("assistant", "Listed."),
        ],
        [("user", "And after compaction?"), ("assistant", "Still here.")],
    ]
    text = json.dumps(turns)
    assert "old memory line" not in text  # our injected memory is never retained
    assert "discussed earlier work" not in text  # nor the compaction summary, as anything


def test_a_pi_1x_session_drops_system_messages_failed_attempts_and_usage(tmp_path: Path) -> None:
    path = write_session(
        tmp_path / "agent",
        tmp_path,
        [
            Exchange("The staging database is Quasar.", "Understood.", failed_attempt=True),
            Exchange("Second request.", "Second answer."),
        ],
        version="1.x",
    )
    assert _turns(path) == [
        [("user", "The staging database is Quasar."), ("assistant", "Understood.")],
        [("user", "Second request."), ("assistant", "Second answer.")],
    ]
    raw = path.read_text()
    assert '"role": "system"' in raw and "context_edit" in raw and '"usage"' in raw


def test_a_context_edit_with_a_replacement_changes_what_is_retained(tmp_path: Path) -> None:
    path = write_session(tmp_path / "agent", tmp_path, [Exchange("Original text.", "Answer.")])
    lines = path.read_text().splitlines()
    user = next(json.loads(line) for line in lines if '"role": "user"' in line)
    last = json.loads(lines[-1])
    edit = {
        "type": "context_edit",
        "id": "edit0001",
        "parentId": last["id"],
        "timestamp": last["timestamp"],
        "targetId": user["id"],
        "replacement": "Edited text.",
    }
    path.write_text("\n".join([*lines, json.dumps(edit)]) + "\n")
    assert _turns(path) == [[("user", "Edited text."), ("assistant", "Answer.")]]


def test_only_the_main_branch_is_seeded(tmp_path: Path) -> None:
    path = write_session(tmp_path / "agent", tmp_path, [Exchange("Kept request.", "Kept.")])
    lines = path.read_text().splitlines()
    first = json.loads(lines[3])  # the first user message: branch off its parent
    branch = {
        "type": "message",
        "id": "abandon1",
        "parentId": first["parentId"],
        "timestamp": first["timestamp"],
        "message": {"role": "user", "content": "Abandoned branch.", "timestamp": 1},
    }
    # The abandoned branch is written *before* the kept path's leaf, so the leaf stays last.
    path.write_text("\n".join([*lines[:3], json.dumps(branch), *lines[3:]]) + "\n")
    assert _turns(path) == [[("user", "Kept request."), ("assistant", "Kept.")]]


def _scan(agent: Path, cwd: Path) -> tuple[list[str], ScanReport]:
    report = ScanReport()
    found = PiSessions(agent).scan(lambda directory: directory == cwd, report)
    return [session.session_id for session in found], report


def test_hostile_session_files_are_counted_and_reported_never_fatal(tmp_path: Path) -> None:
    agent, cwd = tmp_path / "agent", tmp_path / "work"
    cwd.mkdir()
    good = write_session(agent, cwd, [Exchange("A good request here.", "Fine.")], session_id="good")
    folder = good.parent
    header = json.dumps({"type": "session", "version": 3, "id": "bad", "cwd": str(cwd)}).encode()
    (folder / "x_bad.jsonl").write_bytes(
        header
        + b"\n"
        + b'{"type":"message","id":"u1","parentId":null,"message":{"role":"user",'
        + b'"content":"bad \xff\xfe bytes and a lone \\ud800 surrogate"}}\n'
        + b"not json at all\n"
        + b'{"type":"message","id":"a1","parentId":"u1","message":{"role":"assistant",'
        + b'"content":[{"type":"text","text":"'
        + b"x" * 17_000_000
        + b'"}]}}\n'
    )
    (folder / "y_noheader.jsonl").write_text('{"type":"message"}\n')
    os.mkfifo(folder / "z_fifo.jsonl")
    (folder / "w_dir.jsonl").mkdir()
    found, report = _scan(agent, cwd)
    assert sorted(found) == ["bad", "good"]
    assert report.problems["unreadable session line (skipped)"] == 2  # not JSON; over 16 MB
    assert report.problems["invalid text replaced by U+FFFD"] >= 3  # two bad bytes, a surrogate
    assert report.problems["not a Pi session file (no session header)"] == 1
    assert report.problems["unreadable session file"] == 2  # the FIFO and the directory
    turns = requests_of(read_session(folder / "x_bad.jsonl").entries)
    content = render_turn(turns[0].messages).content
    content.encode("utf-8")  # no lone surrogate survives into what would be sent
    assert "\ufffd" in content


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=400))
def test_any_bytes_in_a_session_file_never_raise(tmp_path: Path, data: bytes) -> None:
    agent, cwd = tmp_path / "agent", tmp_path / "work"
    cwd.mkdir(exist_ok=True)
    folder = agent / "sessions" / "--work--"
    folder.mkdir(parents=True, exist_ok=True)
    header = json.dumps({"type": "session", "version": 3, "id": "s", "cwd": str(cwd)}).encode()
    (folder / "s.jsonl").write_bytes(header + b"\n" + data)
    found, _ = _scan(agent, cwd)
    assert found == ["s"]


def _commit(repo: Path, message: bytes) -> None:
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "--allow-empty",
            "--cleanup=verbatim",
            "-F",
            "-",
        ],
        cwd=repo,
        input=message,
        check=True,
        capture_output=True,
    )


def _raw_commit(repo: Path, message: bytes) -> None:
    """A commit whose message bytes are stored as given (``git commit`` would re-encode them)."""

    def git(*args: str, data: bytes | None = None) -> str:
        done = subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True, check=True)
        return done.stdout.decode().strip()

    tree, parent = git("rev-parse", "HEAD^{tree}"), git("rev-parse", "HEAD")
    body = f"tree {tree}\nparent {parent}\nauthor t <t@e> 1796125060 +0000\n"
    body += "committer t <t@e> 1796125060 +0000\n\n"
    sha = git("hash-object", "-t", "commit", "-w", "--stdin", data=body.encode() + message)
    git("update-ref", "HEAD", sha)


def test_git_history_with_bad_bytes_and_a_huge_body_is_read_and_counted(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    _raw_commit(repo, b"Bad bytes \xff\xfe in a subject\n\nand \xed\xa0\x80 a surrogate in UTF-8\n")
    _commit(repo, b"A huge body\n\n" + b"long line " * 50_000)
    _commit(repo, b"Fine: use Zephyr\n\nBecause it is fast.")
    log = git_history.read_history(repo, markers=[])
    assert log.commits[0].subject == "Fine: use Zephyr"
    assert len(log.commits) == 4  # with the initial commit
    assert log.problems["invalid UTF-8 in git output (replaced)"] >= 2
    assert (
        log.problems[f"a commit body longer than {git_history.BODY_MAX_CHARS} characters (cut)"]
        == 1
    )
    text = git_history.render_range("p", log.commits)
    text.encode("utf-8")
    assert len(text) < 10_000


def test_git_ranges_are_stable_when_seeding_resumes_after_a_marker(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    for number in range(12):
        _commit(repo, f"Commit {number}".encode())
    commits = git_history.read_history(repo, markers=[]).commits
    first = git_history.ranges(commits, size=5)
    assert [len(r) for r in first] == [5, 5, 3]  # 13 commits, oldest range first
    marker = first[0][0].sha  # the newest commit of the first (oldest) range was queued
    rest = git_history.read_history(repo, markers=[marker]).commits
    assert git_history.ranges(rest, size=5) == first[1:]
    assert git_history.known_markers(repo, {marker[:12], "0123456789ab"}) == [marker[:12]]
    document = git_history.range_document("p", first[0][-1].sha, first[0][0].sha)
    assert git_history.range_newest(document, "p") == marker[:12]
    assert git_history.range_newest(document, "other") is None


def test_the_token_estimate_counts_chunks_and_content() -> None:
    assert estimate_tokens([]) == 0
    one = estimate_tokens([100])
    assert one == 3_150 + 25_600 + 3 * 25
    assert estimate_tokens([3_001]) > 2 * (3_150 + 25_600)


def test_corrections_are_kept_per_scope_listed_lifted_and_logged(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path)
    try:
        correction = CorrectionRecord(
            "project:a",
            "r1",
            record_key("Wrong fact."),
            "Wrong fact.",
            "Right fact.",
            "note-1",
            "cli",
            1.0,
        )
        catalog.add_correction(correction, bank_id="b")
        assert catalog.corrected("project:a") == Corrected(
            frozenset({"r1"}), frozenset({record_key("Wrong fact.")})
        )
        assert not catalog.corrected("project:b")
        catalog.log_forget("project:a", "b", record_ids=["r2"], document_ids=["d1"], actor="pi")
        counts = catalog.lifecycle_counts("project:a")
        assert (counts.corrections, counts.forgotten_documents) == (1, 1)
        assert not catalog.remove_correction("project:b", "r1", bank_id="b", actor="cli")
        assert catalog.remove_correction("project:a", "r1", bank_id="b", actor="cli")
        assert [entry.action for entry in catalog.lifecycle_log("project:a")] == [
            "uncorrect",
            "forget",
            "correct",
        ]
        assert catalog.lifecycle_log("project:a")[1].actor == "pi"
    finally:
        catalog.close()


def test_the_delivery_filter_holds_back_the_record_its_text_and_observations_of_it() -> None:
    wrong = MemoryRecord(id="f1", text="We deploy to Zephyr.")
    same_text = MemoryRecord(id="o1", text="we deploy to  ZEPHYR.", type="observation")
    built_on = MemoryRecord(id="o2", text="Deploys: Zephyr, weekly.", source_memory_ids=("f1",))
    other = MemoryRecord(id="f2", text="Lint with ruff.")
    corrected = Corrected(frozenset({"f1"}), frozenset({record_key(wrong.text)}))
    kept, held = hold_back([wrong, same_text, built_on, other], corrected)
    assert kept == [other] and held == 3


def test_the_memo_does_not_go_on_stating_a_corrected_record() -> None:
    """Regression: a correction deletes no fact, so the startup memo (Hindsight's text,
    regenerated from the bank's facts) went on listing the wrong statement, and the delivered
    block carried it in its memo section although the records filter had held it back."""
    wrong = "Our production deploy target is the Zephyr cluster in Frankfurt."
    memo = (
        "## Facts\n\n- Where do we deploy production?\n- " + wrong + "\n"
        '* Correction: it was wrong: "' + wrong + '"\n2. OUR production deploy target is '
        "the  Zephyr cluster in Frankfurt.\nLint with ruff."
    )
    corrected = Corrected(frozenset({"f1"}), frozenset({record_key(wrong)}))
    kept, held = hold_back_memo(memo, corrected)
    assert held == 2
    assert kept.splitlines() == [
        "## Facts",
        "",
        "- Where do we deploy production?",
        '* Correction: it was wrong: "' + wrong + '"',  # the correction quoting it stays
        "Lint with ruff.",
    ]
    assert hold_back_memo(memo, Corrected(frozenset({"f1"}), frozenset())) == (memo, 0)


_LINE = st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=40)


@given(st.lists(_LINE, max_size=8), _LINE.filter(str.strip), st.integers(0, 8))
def test_the_memo_filter_removes_the_corrected_statement_and_nothing_else(
    lines: list[str], wrong: str, at: int
) -> None:
    key = record_key(wrong)
    said = " ".join(wrong.split()).casefold()
    others = [line for line in lines if said not in " ".join(line.split()).casefold()]
    memo = [*others[:at], f"- {wrong}", *others[at:]]
    corrected = Corrected(frozenset(), frozenset({key}))
    assert hold_back_memo("\n".join(memo), corrected) == ("\n".join(others), 1)
