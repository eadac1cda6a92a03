"""A team's shared Hindsight with an API key (issue 10, item 4), against the real server.

One real Hindsight with a key serves the run (``tests/plugins/team_server.py``: the launcher's
CLI with ``--api-key-env``, a state dir of its own). Several
developers reach it, each with their own state dir and the key from their own environment:

- two developers in clones of one repository share that project's memory (the domain bank and
  its exact tags), while another project's memory stays walled off;
- a missing and a wrong key give a clear "the server refused the API key" with the fix in every
  status, keep every retain in the outbox (nothing dead-lettered), and once the key is fixed a new
  sidecar delivers them;
- the key (and the wrong one) never appears in a command line, a launcher record, a log, a
  status, a notice, an evidence record or any file under a state directory.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.errors import BackendAuthRejected
from pi_hindsight.launcher.procs import cmdline
from tests.plugins.pi import make_repo
from tests.plugins.team_server import KEY_VAR, TeamServer
from tests.support.retain import BankView, exchange, marker, register, wait_until_delivered
from tests.support.sidecar import Sidecar

pytestmark = [pytest.mark.server]

CLIENT_VAR = "TEAM_HINDSIGHT_KEY"  # what each developer's config names
DOMAIN_BANK = "pi-coding"  # the default domain bank: every project of the team, tagged
APP_REMOTES = ("git@example.com:team/app.git", "https://example.com/team/app")
OTHER_REMOTE = "https://example.com/team/other.git"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Outputs:
    """Everything the tests saw, to search for the key at the end."""

    texts: list[str] = field(default_factory=list)

    def add(self, value: Any) -> Any:
        self.texts.append(value if isinstance(value, str) else json.dumps(value))
        return value


def _cli(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pi_hindsight", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=check,
    )


def _team_env(key: str | None) -> dict[str, str]:
    return {} if key is None else {CLIENT_VAR: key}


def _developer(root: Path, base_url: str, *, key_reference: bool = True) -> Path:
    """A developer's own state dir, pointing at the team's server; the key comes from their
    environment (``{"source": "env"}``), never from the file."""
    state = root / "state"
    state.mkdir(parents=True)
    hindsight: dict[str, Any] = {"baseUrl": base_url}
    if key_reference:
        hindsight["apiKey"] = {"source": "env", "name": CLIENT_VAR}
    # A loaded machine (CI) must not turn a slow recall into a failed one: these tests are
    # about keys and scopes, not recall's time bound.
    config = {"hindsight": hindsight, "recall": {"timeoutMs": 30_000}}
    (state / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return state


def _prepare(sidecar: Sidecar, session: str, prompt: str) -> dict[str, Any]:
    result: dict[str, Any] = sidecar.call(
        "prepareMemory", {"requestId": str(uuid.uuid4()), "prompt": prompt, "sessionId": session}
    )
    return result


def _recalled(sidecar: Sidecar, session: str, prompt: str, text: str, seen: Outputs) -> bool:
    """Whether a request in ``session`` gets ``text`` in its memory (a few tries: consolidation
    may still be indexing)."""
    for _ in range(5):
        prepared = seen.add(_prepare(sidecar, session, prompt))
        assert prepared["outcome"] in ("delivered", "nothing_found"), prepared
        if prepared["message"] and text in prepared["message"]["content"]:
            return True
        time.sleep(1)
    return False


def _until_refused(sidecar: Sidecar, *, timeout: float = 120.0) -> dict[str, Any]:
    """The sidecar's status once its retain worker has been refused (it tries in the
    background; how soon depends on the machine's load)."""
    deadline = time.monotonic() + timeout
    while True:
        status: dict[str, Any] = sidecar.call("status", {})
        if BackendAuthRejected.REFUSED in (status["outbox"]["lastError"] or ""):
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"the worker was not refused after {timeout}s: {status}")
        time.sleep(0.5)


def _status_cli(state: Path, cwd: Path, key: str | None) -> dict[str, Any]:
    env = dict(_cli_env(state), **_team_env(key))
    found: dict[str, Any] = json.loads(_cli("status", "--cwd", str(cwd), "--json", env=env).stdout)
    return found


def _files_hold(directory: Path, secret: str) -> list[Path]:
    needle = secret.encode()
    return [p for p in directory.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_a_team_server_needs_its_key_and_keeps_it_out_of_records_logs_and_command_lines(
    team_server: TeamServer,
) -> None:
    url, key = team_server.base_url, team_server.key
    for sent, expected in ((None, 401), ("wrong-" + key[::-1], 401), (key, 200)):
        request = urllib.request.Request(f"{url}/v1/default/banks?limit=1")  # noqa: S310
        if sent is not None:
            request.add_header("Authorization", f"Bearer {sent}")
        try:
            with _OPENER.open(request, timeout=30) as response:
                status = response.status
        except urllib.error.HTTPError as error:
            status = error.code
        assert status == expected, sent
    with _OPENER.open(f"{url}/health", timeout=30) as response:  # the launcher's own probe
        assert response.status == 200

    record = json.loads((team_server.state_dir / "server" / "server.json").read_text())
    assert record["auth"] == {"api_key_env": KEY_VAR} and record["host"] == "127.0.0.1"
    env = dict(os.environ, **{KEY_VAR: key})
    shown = _cli("server", "status", "--state-dir", str(team_server.state_dir), env=env).stdout
    assert f"API key required (read from ${KEY_VAR} at start)" in shown
    assert f"${KEY_VAR} in this environment: accepted" in shown
    wrong = dict(os.environ, **{KEY_VAR: "x" * 20})
    shown_wrong = _cli(
        "server", "status", "--state-dir", str(team_server.state_dir), "--json", env=wrong
    ).stdout
    assert json.loads(shown_wrong)["auth"] == {
        "api_key_env": KEY_VAR,
        "key_in_this_environment": "refused",
    }

    assert set(team_server.pids) >= {"hindsight", "postgres"}
    for name, pid in team_server.pids.items():  # what `ps` shows
        argv = cmdline(pid)
        assert argv, f"{name} ({pid}) is not running"
        assert key not in " ".join(argv)
    for text in (team_server.start_output, shown, shown_wrong):
        assert key not in text
    assert _files_hold(team_server.state_dir, key) == []  # records, logs, the stand-in's log


def test_two_developers_share_a_projects_memory_and_another_project_stays_walled_off(
    team_server: TeamServer, tmp_path: Path
) -> None:
    url, key = team_server.base_url, team_server.key
    seen = Outputs()
    alice = _developer(tmp_path / "alice", url)
    bob = _developer(tmp_path / "bob", url)
    alice_app = make_repo(tmp_path / "alice" / "src" / "app", APP_REMOTES[0])
    bob_app = make_repo(tmp_path / "bob" / "work" / "app", APP_REMOTES[1])
    bob_other = make_repo(tmp_path / "bob" / "work" / "other", OTHER_REMOTE)
    register(alice, alice_app)
    register(bob, bob_app)
    register(bob, bob_other)
    fact, other_fact = marker(), marker()

    a = Sidecar(alice, extra_env=_team_env(key))
    b = Sidecar(bob, extra_env=_team_env(key))
    try:
        assert seen.add(a.initialize(alice_app, "alice-1"))["enabled"] is True
        a.turn("alice-1", "a-r1", exchange(f"Remember: the app deploys to the {fact} cluster."))
        seen.add(wait_until_delivered(a))

        assert seen.add(b.initialize(bob_app, "bob-1"))["enabled"] is True
        scope_a, scope_b = seen.add(a.call("status", {})), seen.add(b.call("status", {}))
        assert scope_a["scope"]["bankId"] == scope_b["scope"]["bankId"] == DOMAIN_BANK
        assert scope_a["scope"]["tags"] == scope_b["scope"]["tags"]
        assert _recalled(b, "bob-1", "Which cluster does the app deploy to?", fact, seen)

        # Bob's other project: the same bank, other exact tags — Alice's fact is not there.
        b.turn("bob-1", "b-r1", exchange("Thanks."))
        seen.add(b.stderr)
        seen.add(b.shutdown())
        b.close()
        b = Sidecar(bob, extra_env=_team_env(key))
        assert seen.add(b.initialize(bob_other, "bob-2"))["enabled"] is True
        b.turn("bob-2", "b-r2", exchange(f"Remember: the other tool deploys to {other_fact}."))
        seen.add(wait_until_delivered(b))
        assert _recalled(b, "bob-2", "Where does the other tool deploy to?", other_fact, seen)
        # A recall that ran (not one that failed) and did not find it; `skipped`: it found only
        # what this session already got (the other project's own fact).
        ran = ("delivered", "nothing_found", "skipped")
        for _ in range(3):
            prepared = seen.add(_prepare(b, "bob-2", "Which cluster does the app deploy to?"))
            assert prepared["outcome"] in ran, prepared
            assert fact not in json.dumps(prepared)
        prepared = seen.add(_prepare(a, "alice-1", "Where does the other tool deploy to?"))
        assert prepared["outcome"] in ran, prepared
        assert other_fact not in json.dumps(prepared)
    finally:
        for sidecar in (a, b):
            seen.add(sidecar.stderr)
            sidecar.shutdown()
            sidecar.close()
    for text in seen.texts:
        assert key not in text
    for state in (alice, bob):
        assert _files_hold(state, key) == []


def test_a_missing_or_wrong_key_is_shown_keeps_retains_and_they_arrive_once_it_is_fixed(
    team_server: TeamServer, tmp_path: Path
) -> None:
    url, key = team_server.base_url, team_server.key
    wrong = f"team-{secrets.token_urlsafe(24)}"  # someone's key, just not this server's
    seen = Outputs()
    carol = _developer(tmp_path / "carol", url)
    repo = make_repo(tmp_path / "carol" / "app", APP_REMOTES[1])
    register(carol, repo)
    texts = {}

    for attempt, sent in (("missing", None), ("wrong", wrong)):
        sidecar = Sidecar(carol, extra_env=_team_env(sent))
        session = f"carol-{attempt}"
        try:
            assert seen.add(sidecar.initialize(repo, session))["enabled"] is True
            first = seen.add(_prepare(sidecar, session, "What do we deploy to?"))
            assert first["outcome"] == "backend_unavailable"
            assert BackendAuthRejected.REFUSED in first["reason"]
            assert BackendAuthRejected.FIX in first["reason"]
            (notice,) = first["notices"]
            assert notice["level"] == "warning"
            assert BackendAuthRejected.REFUSED in notice["message"]
            assert BackendAuthRejected.FIX in notice["message"]
            again = seen.add(_prepare(sidecar, session, "And the database?"))
            assert again["outcome"] == "backend_unavailable" and again["notices"] == []

            texts[session] = f"Remember: with the {attempt} key we use {marker()}."
            assert sidecar.turn(session, f"{session}-r1", exchange(texts[session]))["queued"] == 1
            # The worker tries, is refused, pauses (and never dead-letters).
            status = seen.add(_until_refused(sidecar))
            assert status["outbox"]["dead"] == 0
            assert status["outbox"]["pending"] == len(texts)
            assert BackendAuthRejected.REFUSED in (status["outbox"]["lastError"] or "")
            assert BackendAuthRejected.REFUSED in status["backend"]["lastError"]
            assert BackendAuthRejected.FIX in status["backend"]["lastError"]
            tool = seen.add(
                sidecar.call(
                    "toolCall", {"name": "hindsight_memory", "params": {"action": "status"}}
                )
            )
            assert BackendAuthRejected.REFUSED in tool["content"][0]["text"]
            command = seen.add(sidecar.call("command", {"name": "hindsight", "args": ""}))
            assert BackendAuthRejected.FIX in command["text"]
        finally:
            seen.add(sidecar.stderr)
            seen.add(sidecar.shutdown())
            sidecar.close()
        probe = seen.add(_status_cli(carol, repo, sent))["server"]
        assert probe["healthy"] is False
        assert BackendAuthRejected.REFUSED in probe["problem"]
        assert BackendAuthRejected.FIX in probe["problem"]
        env = dict(_cli_env(carol), **_team_env(sent))
        text = seen.add(_cli("status", "--cwd", str(repo), env=env).stdout)
        assert f"unavailable ({BackendAuthRejected.REFUSED}" in text

    outbox = seen.add(_cli("outbox", "status", "--json", env=_cli_env(carol)).stdout)
    assert json.loads(outbox)["dead"] == 0

    # The key fixed (the developer exports the team's key): the next sidecar delivers it all.
    fixed = Sidecar(carol, extra_env=_team_env(key))
    try:
        seen.add(fixed.initialize(repo, "carol-fixed"))
        drained = seen.add(wait_until_delivered(fixed))
        assert drained["dead"] == 0
        assert seen.add(_prepare(fixed, "carol-fixed", "What do we use?"))["outcome"] in (
            "delivered",
            "nothing_found",
        )
    finally:
        seen.add(fixed.stderr)
        seen.add(fixed.shutdown())
        fixed.close()
    bank = BankView(url, DOMAIN_BANK, api_key=key)
    for session, text in texts.items():
        turns = bank.document_turns(f"pi-session-{session}")
        assert text in json.dumps(turns), session
    assert _status_cli(carol, repo, key)["server"]["healthy"] is True

    evidence = _cli("evidence", "list", "--json", env=_cli_env(carol)).stdout
    assert BackendAuthRejected.REFUSED in evidence  # the refused requests are on record
    seen.add(evidence)
    for secret in (key, wrong):
        for text in seen.texts:
            assert secret not in text
        assert _files_hold(carol, secret) == []
        assert _files_hold(team_server.state_dir, secret) == []


def _cli_env(state: Path) -> dict[str, str]:
    return dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state))
