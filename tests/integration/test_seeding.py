"""Seeding against the real Hindsight server, through the real command line: the dry run's
figures are what is sent, a second seed sends nothing, a seed killed halfway (kill -9) finishes
on the next run with every session exactly once, and only this location's sessions are taken —
Pi's and Claude Code's (``--from`` picks one)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.backend.resources import RetainItem
from pi_hindsight.stores.outbox import Outbox
from pi_hindsight.stores.outbox_items import RetainRequest
from tests.plugins.pi import make_repo
from tests.support.claude_code import Transcript
from tests.support.pi_sessions import Exchange, write_session
from tests.support.retain import BankView

pytestmark = pytest.mark.server

CLAUDE_FIXTURE = Path(__file__).resolve().parents[1] / "data" / "claude_code"


@pytest.fixture(autouse=True)
def claude_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Claude Code's config dir of this test alone (seeding reads every host's sessions)."""
    config = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    return config


def _configure(state: Path, base_url: str) -> str:
    bank = f"seed-{uuid.uuid4().hex[:10]}"
    state.mkdir(parents=True, exist_ok=True)
    config = {"hindsight": {"baseUrl": base_url}, "banks": {"project": {"bankId": bank}}}
    (state / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return bank


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def _seed_json(*args: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_cli("scope", "seed", *args, "--json").stdout)
    return data


def _seed_items(state: Path) -> list[Any]:
    outbox = Outbox(state)
    try:
        items = outbox.items(limit=1_000_000)
    finally:
        outbox.close()
    return [item for item in items if (item.request_id or "").startswith("seed:")]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_the_dry_run_is_what_is_sent_only_this_location_and_a_second_seed_sends_nothing(
    tmp_path: Path, isolated_dirs: Path, hindsight_server: Any
) -> None:
    base_url = str(hindsight_server.base_url)
    bank = _configure(isolated_dirs, base_url)
    agent = Path(os.environ["PI_CODING_AGENT_DIR"])
    repo = make_repo(tmp_path / "repo", "https://example.com/team/seeded.git")
    for number in range(3):
        _git(
            repo,
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            f"Switch the deploy to Zephyr, step {number}\n\nWhy: it is faster.",
        )
    worktree = tmp_path / "repo-wt"
    _git(repo, "worktree", "add", "-q", str(worktree))
    (repo / "sub").mkdir()
    clone = make_repo(tmp_path / "clone", "https://example.com/team/seeded.git")
    _cli("scope", "register", str(repo))
    _cli("scope", "register", str(clone))  # the same scope, at another location

    ours = {
        write_session(agent, repo, [Exchange("We deploy to the Zephyr cluster.", "Noted.")]),
        write_session(
            agent,
            repo / "sub",
            [
                Exchange("Lint with ruff at length 100.", "Ok."),
                Exchange("Tests run with pytest -q.", "Fine."),
            ],
        ),
        write_session(
            agent,
            worktree,
            [Exchange("Staging is called Quasar.", "Got it.", failed_attempt=True)],
            version="1.x",
        ),
    }
    write_session(agent, clone, [Exchange("A fact of the other clone only.", "Ok.")])
    write_session(agent, tmp_path, [Exchange("A fact of another directory.", "Ok.")])
    live = write_session(agent, repo, [Exchange("Retained live already.", "Yes.")])
    live_id = live.stem.split("_", 1)[1]
    outbox = Outbox(isolated_dirs)  # what live retain left: an item under a random request id
    try:
        outbox.enqueue(
            RetainRequest(
                live_id, bank, RetainItem("[]", f"pi-session-{live_id}", ()), str(uuid.uuid4())
            )
        )
    finally:
        outbox.close()

    plan = _seed_json(str(repo), "--dry-run")
    assert (plan["sessions"], plan["requests"], plan["commits"]) == (3, 4, 4)
    assert plan["skipped"] == {"retained-live": 1}
    assert plan["otherLocations"] == 2  # the other clone's session and the other directory's
    assert plan["bankId"] == bank and plan["tags"] == ["project:example.com/team/seeded"]
    assert plan["estimatedTokens"] > plan["characters"] // 4
    assert {unit["label"] for unit in plan["units"] if unit["kind"] == "session"} == {
        *map(str, ours),
        str(live),
    }
    assert _seed_items(isolated_dirs) == []  # a dry run sends nothing

    applied = _seed_json(str(repo), "--yes")
    assert applied["queued"] == plan["items"] == 5  # 4 requests + 1 history document
    assert applied["queuedCharacters"] == plan["characters"]
    assert applied["delivery"]["done"] == 5
    items = _seed_items(isolated_dirs)
    assert len(items) == plan["items"]
    assert sum(len(item.retain.content) for item in items) == plan["characters"]
    assert {tuple(item.retain.tags) for item in items} == {("project:example.com/team/seeded",)}
    assert {item.bank_id for item in items} == {bank}

    again = _seed_json(str(repo), "--yes")
    assert (again["items"], again["applied"]) == (0, False)
    assert again["skipped"] == {"retained-live": 1, "seeded": 3}
    assert len(_seed_items(isolated_dirs)) == 5

    view = BankView(base_url, bank)
    texts = " ".join(memory["text"] for memory in view.memories())
    assert "Zephyr cluster" in texts and "Quasar" in texts and "ruff" in texts
    assert "other clone" not in texts and "another directory" not in texts


def test_a_seed_killed_halfway_finishes_on_the_next_run_with_every_session_once(
    tmp_path: Path, isolated_dirs: Path, hindsight_server: Any
) -> None:
    base_url = str(hindsight_server.base_url)
    bank = _configure(isolated_dirs, base_url)
    agent = Path(os.environ["PI_CODING_AGENT_DIR"])
    repo = make_repo(tmp_path / "repo", "https://example.com/team/killed.git")
    _cli("scope", "register", str(repo))
    sessions = {}
    for number in range(60):
        exchanges = [
            Exchange(f"Fact number {number} part {part} is kept.", "Noted.") for part in range(2)
        ]
        path = write_session(agent, repo, exchanges, version="1.x" if number % 2 else "0.73")
        sessions[path.stem.split("_", 1)[1]] = exchanges

    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pi_hindsight",
            "scope",
            "seed",
            str(repo),
            "--sessions",
            "--yes",
            "--no-wait",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("queued 3/"):
            process.send_signal(signal.SIGKILL)
            break
    process.wait(timeout=60)
    process.stdout.close()
    assert process.stderr is not None
    process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    halfway = {item.session_id for item in _seed_items(isolated_dirs)}
    assert 3 <= len(halfway) < 60, "the kill did not land halfway"

    finished = _seed_json(str(repo), "--sessions", "--yes")
    assert finished["sessions"] == 60 - len(halfway) + sum(
        1 for unit in finished["units"] if unit["key"] in halfway and unit["items"]
    )
    items = _seed_items(isolated_dirs)
    per_request = Counter((item.session_id, item.request_id) for item in items)
    assert set(per_request.values()) == {1} and len(per_request) == 120
    assert {item.session_id for item in items} == set(sessions)
    assert finished["delivery"]["done"] == finished["queued"]
    # Every session's document holds each of its requests exactly once.
    view = BankView(base_url, bank)
    for session_id, exchanges in list(sessions.items())[::7]:
        turns = view.document_turns(f"pi-session-{session_id}")
        users = [turn["content"] for turn in turns if turn["role"] == "user"]
        assert users == [exchange.user for exchange in exchanges]


def test_only_a_registered_location_is_seeded(
    tmp_path: Path, isolated_dirs: Path, hindsight_server: Any
) -> None:
    _configure(isolated_dirs, str(hindsight_server.base_url))
    repo = make_repo(tmp_path / "repo", "https://example.com/team/unregistered.git")
    done = _cli("scope", "seed", str(repo), "--dry-run", check=False)
    assert done.returncode == 1
    assert "only a registered location can be seeded" in done.stderr
    assert "Traceback" not in done.stderr


def _claude_transcript(config: Path, cwd: Path, prompts: list[str]) -> str:
    session_id = str(uuid.uuid4())
    folder = config / "projects" / str(cwd).replace("/", "-")
    transcript = Transcript(folder / f"{session_id}.jsonl", session_id)
    for prompt in prompts:
        transcript.append(
            *(dict(row, cwd=str(cwd)) for row in transcript.request(prompt, "Noted."))
        )
    return session_id


def test_claude_codes_sessions_are_seeded_beside_pis_and_from_picks_one(
    tmp_path: Path, isolated_dirs: Path, hindsight_server: Any, claude_config: Path
) -> None:
    base_url = str(hindsight_server.base_url)
    bank = _configure(isolated_dirs, base_url)
    agent = Path(os.environ["PI_CODING_AGENT_DIR"])
    repo = make_repo(tmp_path / "repo", "https://example.com/team/both-hosts.git")
    worktree = tmp_path / "repo-wt"
    _git(repo, "worktree", "add", "-q", str(worktree))
    _cli("scope", "register", str(repo))
    write_session(agent, repo, [Exchange("Pi says: we deploy to Zephyr.", "Noted.")])
    # A real Claude Code transcript (tools, our own MCP tool, a compaction), started in the repo.
    real = (CLAUDE_FIXTURE / "tools-and-compaction.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in real.splitlines()]
    real_id = next(row["sessionId"] for row in rows if row.get("sessionId"))
    folder = claude_config / "projects" / str(repo).replace("/", "-")
    folder.mkdir(parents=True)
    (folder / f"{real_id}.jsonl").write_text(
        "".join(
            json.dumps({**row, "cwd": str(repo)} if "cwd" in row else row) + "\n" for row in rows
        ),
        encoding="utf-8",
    )
    in_worktree = _claude_transcript(claude_config, worktree, ["Staging is called Quasar."])
    _claude_transcript(claude_config, tmp_path, ["A fact of another directory."])
    live = _claude_transcript(claude_config, repo, ["Retained live already."])
    outbox = Outbox(isolated_dirs)  # what the live hooks left: an item under the prompt's id
    try:
        outbox.enqueue(
            RetainRequest(
                live, bank, RetainItem("[]", f"claude-code-session-{live}", ()), str(uuid.uuid4())
            )
        )
    finally:
        outbox.close()

    both = _seed_json(str(repo), "--sessions", "--dry-run")
    assert (both["sessions"], both["requests"]) == (3, 6)  # 1 Pi + 4 and 1 Claude Code
    hosts = Counter(unit["host"] for unit in both["units"] if unit["state"] == "send")
    assert hosts == {"pi": 1, "claude-code": 2}
    assert both["skipped"] == {"retained-live": 1}
    assert both["otherLocations"] == 1  # Claude Code's session of another directory
    only = _seed_json(str(repo), "--sessions", "--from", "claude-code", "--dry-run")
    assert (only["sessions"], only["requests"]) == (2, 5)
    assert {unit["host"] for unit in only["units"]} == {"claude-code"}
    pi_only = _seed_json(str(repo), "--sessions", "--from", "pi", "--dry-run")
    assert {unit["host"] for unit in pi_only["units"]} == {"pi"}
    assert _seed_items(isolated_dirs) == []

    applied = _seed_json(str(repo), "--sessions", "--from", "claude-code", "--yes")
    assert applied["queued"] == only["items"] == 5
    assert applied["delivery"]["done"] == 5
    items = _seed_items(isolated_dirs)
    assert {item.session_id for item in items} == {real_id, in_worktree}
    assert {item.bank_id for item in items} == {bank}
    view = BankView(base_url, bank)
    turns = view.document_turns(f"claude-code-session-{real_id}")
    users = [turn["content"] for turn in turns if turn["role"] == "user"]
    assert users == [
        "first question",
        "please recall something",
        "please list files",
        "after compaction",
    ]
    assert "mcp__hindsight" not in json.dumps(turns)  # our own tool is not history
    [said] = [
        turn["content"]
        for turn in view.document_turns(f"claude-code-session-{in_worktree}")
        if turn["role"] == "user"
    ]
    assert said == "Staging is called Quasar."

    again = _seed_json(str(repo), "--sessions", "--yes")
    assert again["sessions"] == 1 and again["skipped"] == {"retained-live": 1, "seeded": 2}
    assert {unit["host"] for unit in again["units"] if unit["state"] == "send"} == {"pi"}
