"""The hook client's cost (issue 17): it imports none of the heavy standard modules, and the
request it encodes by hand is exactly the JSON the daemon parses."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from pi_hindsight.hosts.claude_code import runtime
from pi_hindsight.hosts.claude_code.hook import HOOK_PREFIX, _hook_line, _message
from pi_hindsight.hosts.claude_code.payloads import parse_request

HEAVY = ("json", "socket", "pathlib", "re", "enum", "typing", "collections", "selectors")


def test_the_hook_imports_nothing_heavy() -> None:
    probe = (
        "import sys, pi_hindsight.hosts.claude_code.hook as h; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == ""


TEXT = st.text(st.characters(codec="utf-8"), max_size=200)


@settings(max_examples=200, deadline=None)
@given(TEXT, TEXT, st.none() | TEXT, st.integers(0, 1 << 40), st.lists(TEXT, max_size=4))
def test_the_hand_encoded_request_is_the_json_the_daemon_reads(
    key: str, event: str, payload: str | None, size: int, ignored: list[str]
) -> None:
    line = _hook_line(key, event, payload, size, ignored)
    assert line.startswith(HOOK_PREFIX)
    line.decode("ascii")  # one ASCII line: nothing can break the framing
    assert b"\n" not in line
    assert json.loads(line.removeprefix(HOOK_PREFIX)) == {
        "v": runtime.PROTOCOL,
        "key": key,
        "op": "hook",
        "event": event,
        "payload": payload,
        "payloadBytes": size,
        "ignored": ignored,
    }


def test_a_hook_request_parses_and_a_message_is_hook_output() -> None:
    payload = json.dumps(
        {
            "session_id": "s1",
            "transcript_path": "/tmp/s1.jsonl",
            "cwd": "/tmp",
            "hook_event_name": "Stop",
            "stop_hook_active": False,
        }
    )
    line = _hook_line("k", "Stop", payload, len(payload), ["note \u2014 é"])
    request = parse_request(line.removeprefix(HOOK_PREFIX))
    assert (request.op, request.key, request.notes) == ("hook", "k", ("note \u2014 é",))
    assert json.loads(_message('say "hi" \u2014 ok')) == {"systemMessage": 'say "hi" \u2014 ok'}
