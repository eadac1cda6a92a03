"""The Claude Code hook client and its per-user daemon, as real processes: hostile payloads fail
open, the socket is owner-only, one daemon per key, idle exit, and a crash (``kill -9`` of the
hook or the daemon mid-retain) loses and duplicates nothing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_hindsight.hosts.claude_code import runtime
from pi_hindsight.hosts.claude_code.cursors import Cursor, CursorStore
from pi_hindsight.hosts.claude_code.hook import TIMEOUTS_S, DaemonUnavailable, call
from tests.plugins.pi import make_repo
from tests.support.claude_code import (
    HOOK,
    Transcript,
    daemon_pid,
    outbox_count,
    outbox_turns,
    payload,
    run_hook,
    wait_gone,
)
from tests.support.retain import register, write_config

OUTPUT_KEYS = {"hookSpecificOutput", "systemMessage"}


def _fails_open(run: Any) -> None:
    """Exit 0, nothing on stderr, and at most one JSON object of hook output on stdout."""
    assert run.returncode == 0
    assert "Traceback" not in run.stderr and run.stderr == ""
    output = run.output
    assert output is None or (isinstance(output, dict) and set(output) <= OUTPUT_KEYS)


HOSTILE = {
    "not json": b"{this is not json",
    "empty": b"",
    "a list": b"[1, 2, 3]",
    "lone surrogates": b'{"session_id": "s1", "cwd": "/tmp", "prompt": "\\ud800\\udfff\\ud83d"}',
    "bad utf-8": b'{"session_id": "\xff\xfe", "cwd": "/tmp"}',
    "wrong types": b'{"session_id": 42, "cwd": ["/"], "prompt": {"a": 1}}',
    "path-like id": b'{"session_id": "../../etc/passwd", "cwd": "/tmp", "prompt": "x"}',
    "relative cwd": b'{"session_id": "s1", "cwd": "relative/dir", "prompt": "x"}',
    "deep": b'{"session_id": "s1", "cwd": "/tmp", "prompt": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    "huge": b'{"session_id": "s1", "cwd": "/tmp", "prompt": "' + b"a" * (9 << 20) + b'"}',
    "wrong event name": b'{"session_id": "s1", "cwd": "/tmp", "hook_event_name": "Stop"}',
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_payload_fails_open_with_a_clear_message(
    hook_env: dict[str, str], case: str
) -> None:
    run = run_hook("UserPromptSubmit", HOSTILE[case], hook_env)
    _fails_open(run)
    message = (run.output or {}).get("systemMessage", "")
    if case == "lone surrogates":  # usable once made safe: /tmp is simply not registered
        assert "/tmp is not registered" in message
        return
    assert message.startswith("pi-hindsight: memory unavailable for this event (")
    assert "payload" in message or "hook" in message


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    event=st.sampled_from(["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd", "Bogus"]),
    body=st.one_of(
        st.text(max_size=300),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(
                    st.sampled_from(
                        [
                            "session_id",
                            "cwd",
                            "prompt",
                            "transcript_path",
                            "prompt_id",
                            "source",
                            "x",
                        ]
                    ),
                    inner,
                    max_size=6,
                )
            ),
            max_leaves=20,
        ).map(json.dumps),
    ),
)
def test_any_request_gets_an_answer_or_a_clean_error_and_the_daemon_goes_on(
    hook_env: dict[str, str], event: str, body: str
) -> None:
    """The hook client ↔ daemon protocol: whatever a payload holds, the answer is hook output
    (or nothing) or a clean error naming the problem — never a traceback, never a dead daemon."""
    request = {"op": "hook", "event": event, "payload": body, "payloadBytes": len(body)}
    try:
        result = call(request, timeout=30, env=hook_env)
    except DaemonUnavailable as error:
        assert str(error) and "Traceback" not in str(error)
    else:
        assert result is None or (isinstance(result, dict) and set(result) <= OUTPUT_KEYS)
    assert isinstance(call({"op": "ping"}, timeout=10, env=hook_env), dict)


def test_an_unregistered_location_is_told_once_per_session_how_to_register(
    hook_env: dict[str, str], tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    session = str(uuid.uuid4())
    start = run_hook(
        "SessionStart", payload("SessionStart", session, repo, source="startup"), hook_env
    )
    _fails_open(start)
    message = (start.output or {})["systemMessage"]
    assert "not registered" in message and f"pi-hindsight scope register {repo}" in message
    assert "hookSpecificOutput" not in (start.output or {})
    prompt = run_hook(
        "UserPromptSubmit",
        payload("UserPromptSubmit", session, repo, prompt="what now?", prompt_id="p1"),
        hook_env,
    )
    _fails_open(prompt)
    assert prompt.output is None  # said once; nothing for the model


def test_the_socket_is_owner_only_and_another_user_cannot_connect(
    hook_env: dict[str, str],
) -> None:
    assert isinstance(call({"op": "ping"}, timeout=30, env=hook_env), dict)
    address = runtime.address(hook_env)
    assert address.directory.stat().st_mode & 0o777 == 0o700
    assert address.socket.stat().st_mode & 0o777 == 0o600
    if os.getuid() != 0:
        pytest.skip("needs root to try as another user")
    child = os.fork()
    if child == 0:  # as nobody: the socket's directory is closed to it
        code = 3
        try:
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(str(address.socket))
            code = 1
        except PermissionError:
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "another user reached the daemon"


def test_a_runtime_dir_that_is_not_ours_is_refused_and_the_hook_fails_open(
    hook_env: dict[str, str], tmp_path: Path
) -> None:
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    (xdg / "pi-hindsight").symlink_to(tmp_path)  # a link: never followed into
    env = {**hook_env, "XDG_RUNTIME_DIR": str(xdg)}
    run = run_hook("Stop", payload("Stop", "s1", tmp_path, transcript_path="/x/s1.jsonl"), env)
    _fails_open(run)
    assert "is not a directory" in (run.output or {})["systemMessage"]
    assert daemon_pid(env) is None


def test_a_file_where_the_runtime_dir_goes_is_named_with_the_fix(
    hook_env: dict[str, str], tmp_path: Path
) -> None:
    """Regression: a plain file there gave the bare "[Errno 17] File exists" (mkdir's
    FileExistsError), which says neither what is wrong nor how to fix it."""
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    (xdg / "pi-hindsight").write_text("a file")
    env = {**hook_env, "XDG_RUNTIME_DIR": str(xdg)}
    run = run_hook("Stop", payload("Stop", "s1", tmp_path, transcript_path="/x/s1.jsonl"), env)
    _fails_open(run)
    message = (run.output or {})["systemMessage"]
    assert "is not a directory; remove it" in message and "Errno" not in message
    assert daemon_pid(env) is None


def test_a_repository_env_with_no_readable_launcher_turns_memory_off_not_elsewhere(
    hook_env: dict[str, str], tmp_path: Path
) -> None:
    """Regression: when a repository's .claude/settings.json set PI_HINDSIGHT_STATE_DIR and
    Claude Code's own environment could not be read (here: no CLAUDE_PID; in the e2e run, an MCP
    server outliving ``claude -p``), the variable was dropped and a daemon started on the
    default state dir: the repository had moved memory. Now memory is off for the event."""
    repo = tmp_path / "cloned"
    (repo / ".claude").mkdir(parents=True)
    evil = tmp_path / "evil-state"
    settings = {"env": {"PI_HINDSIGHT_STATE_DIR": str(evil), "HINDSIGHT_API_KEY": "stolen"}}
    (repo / ".claude" / "settings.json").write_text(json.dumps(settings))
    env = {k: v for k, v in hook_env.items() if k != "CLAUDE_PID"}
    as_claude_sets_it = {**env, "PI_HINDSIGHT_STATE_DIR": str(evil), "HINDSIGHT_API_KEY": "stolen"}
    run = run_hook(
        "UserPromptSubmit",
        payload("UserPromptSubmit", "s1", repo, prompt="hello"),
        as_claude_sets_it,
        cwd=repo,
    )
    _fails_open(run)
    message = (run.output or {})["systemMessage"]
    assert "memory is off here" in message and "PI_HINDSIGHT_STATE_DIR" in message
    assert "stolen" not in message
    dropped = {k: v for k, v in env.items() if k != "PI_HINDSIGHT_STATE_DIR"}
    for each in (env, as_claude_sets_it, dropped):
        assert daemon_pid(each) is None  # no daemon anywhere: nothing connected, nothing moved
    assert not evil.exists()


def test_racing_hooks_start_one_daemon_and_it_exits_when_idle(
    hook_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**hook_env, "PI_HINDSIGHT_DAEMON_IDLE_S": "3"}
    body = json.dumps(payload("SessionEnd", "s1", tmp_path, reason="other"))
    processes = [
        subprocess.Popen([*HOOK, "SessionEnd"], stdin=subprocess.PIPE, env=env) for _ in range(4)
    ]
    for process in processes:
        assert process.communicate(body.encode(), timeout=60) == (None, None)
        assert process.returncode == 0
    pid = daemon_pid(env)
    assert pid is not None
    assert _daemons_for(env["PI_HINDSIGHT_STATE_DIR"]) == [pid]
    assert wait_gone(pid, 30), "the daemon did not exit when idle"
    assert not runtime.address(env).socket.exists()


def _daemons_for(state_dir: str) -> list[int]:
    """Running daemons of this state dir (a loser of the start race has exited already)."""
    listed = subprocess.run(
        ["pgrep", "-f", "pi_hindsight claude-code daemon"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    mark = f"PI_HINDSIGHT_STATE_DIR={state_dir}\0".encode()
    found = []
    for pid in listed:
        try:
            if mark in Path(f"/proc/{pid}/environ").read_bytes():
                found.append(int(pid))
        except OSError:
            continue
    return found


def _registered(hook_env: dict[str, str], tmp_path: Path) -> Path:
    """A registered repository, with Hindsight unreachable: retains wait in the outbox."""
    repo = make_repo(tmp_path / "repo", "https://example.com/team/crash.git")
    state = Path(hook_env["PI_HINDSIGHT_STATE_DIR"])
    write_config(state, "http://127.0.0.1:9", f"test-{uuid.uuid4().hex[:8]}")
    register(state, repo)
    return repo


def _big_transcript(tmp_path: Path, session: str, requests: int) -> Transcript:
    transcript = Transcript(tmp_path / "projects" / "-repo" / f"{session}.jsonl", session)
    rows = []
    for n in range(requests):
        rows += transcript.request(
            f"Question {n}: where is item {n} kept?", f"Item {n} is on shelf {n}."
        )
    transcript.append(*rows)
    return transcript


@pytest.mark.parametrize("victim", ["daemon", "hook"])
def test_a_kill_9_mid_retain_loses_and_duplicates_nothing(
    hook_env: dict[str, str], tmp_path: Path, victim: str
) -> None:
    """Regression: a crash between committing a delta and moving the cursor must neither drop
    the rest of the delta nor commit any of it twice (write-ahead cursor, stable request ids)."""
    repo = _registered(hook_env, tmp_path)
    state = Path(hook_env["PI_HINDSIGHT_STATE_DIR"])
    session = str(uuid.uuid4())
    requests = 1500
    transcript = _big_transcript(tmp_path, session, requests)
    stop = json.dumps(payload("Stop", session, repo, transcript_path=str(transcript.path)))
    hook = subprocess.Popen([*HOOK, "Stop"], stdin=subprocess.PIPE, env=hook_env)
    assert hook.stdin is not None
    hook.stdin.write(stop.encode())
    hook.stdin.close()
    deadline = time.monotonic() + 120
    while outbox_count(state, session) < 20:  # mid-retain: some committed, most not yet
        assert time.monotonic() < deadline, "retain never started"
        time.sleep(0.01)
    pid = daemon_pid(hook_env)
    assert pid is not None
    os.kill(pid if victim == "daemon" else hook.pid, signal.SIGKILL)
    hook.wait(timeout=60)
    committed_at_kill = outbox_count(state, session)
    if victim == "daemon":
        assert committed_at_kill < requests, "the kill came too late to test anything"
        assert wait_gone(pid)
    again = run_hook("Stop", stop, hook_env)  # the next hook (a new daemon after a crash)
    _fails_open(again)
    deadline = time.monotonic() + 300
    while outbox_count(state, session) < requests and time.monotonic() < deadline:
        time.sleep(0.2)  # (a slow machine: the hook may have stopped waiting first)
    _fails_open(run_hook("Stop", stop, hook_env))  # waits for the one before, then finds nothing
    items = outbox_turns(state, session)
    expected = [
        [
            {"role": "user", "content": f"Question {n}: where is item {n} kept?"},
            {"role": "assistant", "content": f"Item {n} is on shelf {n}."},
        ]
        for n in range(requests)
    ]
    assert [turns for _, turns in items] == expected
    assert len({request_id for request_id, _ in items}) == requests
    transcript.append(*transcript.request("One more question?", "One more answer."))
    _fails_open(run_hook("Stop", stop, hook_env))
    assert len(outbox_turns(state, session)) == requests + 1


def test_a_crash_after_commit_before_the_cursor_moved_is_redone_over_the_same_bytes(
    hook_env: dict[str, str], tmp_path: Path
) -> None:
    """Regression: a request retained in part (a checkpoint mid-request: PreCompact,
    SubagentStop) and a crash before the cursor moved. Redone over a longer file, the part's
    request id would take the longer content, be stored once as the shorter one, and the rest
    of the request would be lost. The write-ahead cursor redoes exactly the bytes committed."""
    repo = _registered(hook_env, tmp_path)
    state = Path(hook_env["PI_HINDSIGHT_STATE_DIR"])
    session = str(uuid.uuid4())
    transcript = Transcript(tmp_path / "projects" / "-repo" / f"{session}.jsonl", session)
    transcript.append(*transcript.request("Where do builds run?", "On the Orion runners."))
    user, _ = transcript.request("And where are they cached?", "")
    transcript.append(user)  # mid-request: the prompt is there, the answer is not yet
    event = payload("PreCompact", session, repo, transcript_path=str(transcript.path))
    _fails_open(run_hook("PreCompact", event, hook_env))
    assert len(outbox_turns(state, session)) == 2
    committed_end = transcript.path.stat().st_size
    store = CursorStore(state)
    # What a crash between the outbox commit and the cursor's move leaves on disk:
    store.save(transcript.path, Cursor(planned=committed_end))
    transcript.append(
        transcript.row(
            "assistant",
            message={"role": "assistant", "content": [{"type": "text", "text": "In Vega."}]},
        )
    )
    stop = payload("Stop", session, repo, transcript_path=str(transcript.path))
    _fails_open(run_hook("Stop", stop, hook_env))
    turns = [turn for _, item in outbox_turns(state, session) for turn in item]
    assert turns == [
        {"role": "user", "content": "Where do builds run?"},
        {"role": "assistant", "content": "On the Orion runners."},
        {"role": "user", "content": "And where are they cached?"},
        {"role": "assistant", "content": "In Vega."},
    ]


def test_a_stopped_daemon_costs_the_hook_its_bound_and_loses_nothing_once_it_continues(
    hook_env: dict[str, str], tmp_path: Path
) -> None:
    """A daemon stopped by SIGSTOP (a debugger, ^Z, a frozen container) still accepts
    connections (the kernel queues them) but answers nothing: each hook gives up at its own
    bound with a visible message and exit 0, so the prompt goes on; once the daemon continues,
    the turn is retained exactly once."""
    repo = _registered(hook_env, tmp_path)
    state = Path(hook_env["PI_HINDSIGHT_STATE_DIR"])
    session = str(uuid.uuid4())
    transcript = Transcript(tmp_path / "projects" / "-repo" / f"{session}.jsonl", session)
    start = payload("SessionStart", session, repo, source="startup")
    _fails_open(run_hook("SessionStart", start, hook_env))  # the daemon is up
    pid = daemon_pid(hook_env)
    assert pid is not None
    transcript.append(*transcript.request("Where do the nightly builds run?", "On Orion."))
    events = {
        "UserPromptSubmit": payload(
            "UserPromptSubmit", session, repo, prompt="And the caches?", prompt_id="p2"
        ),
        "Stop": payload("Stop", session, repo, transcript_path=str(transcript.path)),
    }
    # Both hooks at once, each waiting its own bound: each reads its payload from a file (through
    # a pipe, the second would get it only once the first had waited out its bound).
    for event, event_payload in events.items():
        (tmp_path / f"{event}.json").write_text(json.dumps(event_payload))
    os.kill(pid, signal.SIGSTOP)
    try:
        hooks = {}
        for event in events:
            with (tmp_path / f"{event}.json").open("rb") as stdin:
                hooks[event] = subprocess.Popen(
                    [*HOOK, event],
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=hook_env,
                )
        for event, process in hooks.items():
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0 and err == b""
            message = json.loads(out)["systemMessage"]
            bound = f"{TIMEOUTS_S[event]:.0f} s"
            assert message == (
                "pi-hindsight: memory unavailable for this event "
                f"(the daemon did not answer within {bound})"
            ), event
        assert outbox_count(state, session) == 0  # nothing happened while it was stopped
    finally:
        os.kill(pid, signal.SIGCONT)
    # It goes on with what was queued: the Stop it received retains the turn.
    deadline = time.monotonic() + 120
    while outbox_count(state, session) == 0:
        assert time.monotonic() < deadline, "the queued Stop was never handled"
        time.sleep(0.1)
    assert daemon_pid(hook_env) == pid  # the same daemon, alive
    _fails_open(run_hook("Stop", events["Stop"], hook_env))  # nothing new: nothing twice
    assert [turns for _, turns in outbox_turns(state, session)] == [
        [
            {"role": "user", "content": "Where do the nightly builds run?"},
            {"role": "assistant", "content": "On Orion."},
        ]
    ]
    assert isinstance(call({"op": "ping"}, timeout=10, env=hook_env), dict)
