"""Pi 1.x's run model with the real Pi 1.x binary (docs/shim.md, "Pi 1.x run model").

In Pi 1.x ``agent_end`` is not final: Pi retries a failed provider call, compacts and retries on
overflow, and takes queued follow-ups into the same run; ``agent_settled`` ends the request. A run
may also be started by another extension's message (``messageType: "custom"``, no prompt), and
session replacement may enter another working directory. Each test pins what a user sees in
Hindsight and in the evidence ledger for one of these.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.pi import PiRpc, PiWorld, make_repo
from tests.support.pi_requests import FACT, QUESTION, memory_after, messages_of, requests_for
from tests.support.retain import BankView

# Only Pi 1.x has this run model (agent_settled, custom-message runs, retries inside one run);
# `pi_world` runs these tests on the Pi 1.x of tests/plugins/pi_versions.py, Node 22 first on PATH.
pytestmark = [pytest.mark.server, pytest.mark.pi, pytest.mark.pi_only("1.x")]

# A second user extension, as subagent / build-watcher extensions do: its command starts a run
# with its own message (Pi 1.x: before_agent_start{messageType:"custom"}, no prompt).
# An extension that keeps the agent going once when it would stop (Pi 1.x
# agent_before_settle {continue: true}), as task-list and verification extensions do.
CONTINUE_EXTENSION = """
export default function (pi: any) {
\tlet nudged = false;
\tpi.on("agent_before_settle", (event: any) => {
\t\tif (nudged || event.outcome !== "completed") return undefined;
\t\tnudged = true;
\t\tconst nudge = {
\t\t\ttype: "custom_message",
\t\t\tcustomType: "keep-going",
\t\t\tcontent: "Now run the linter.",
\t\t\tdisplay: false,
\t\t};
\t\treturn { entries: [...event.entries, nudge], continue: true };
\t});
}
"""

TRIGGER_EXTENSION = """
export default function (pi: any) {
\tpi.registerCommand("build-done", {
\t\tdescription: "test: a build watcher reporting",
\t\thandler: async (args: string) => {
\t\t\tpi.sendMessage(
\t\t\t\t{ customType: "build-watcher", content: `Build finished: ${args}`, display: true },
\t\t\t\t{ triggerTurn: true },
\t\t\t);
\t\t},
\t});
}
"""


@pytest.fixture
def world(pi_world: PiWorld) -> Iterator[PiWorld]:
    settings_path = pi_world.agent_dir / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings["retry"] = {"enabled": True, "maxRetries": 3, "baseDelayMs": 100}
    settings_path.write_text(json.dumps(settings))
    # These tests are about which messages a request has, not about recall's time bound: give
    # recall room on a loaded machine (the bound has tests of its own).
    config_path = pi_world.state_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["recall"] = {"timeoutMs": 30_000}
    config_path.write_text(json.dumps(config))
    yield pi_world


def _script(world: PiWorld, *rules: dict[str, Any], default: str = "Noted.") -> None:
    world.standin.set_script({"rules": list(rules), "default_reply": default})


def _evidence(world: PiWorld) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(
        world.cli("evidence", "list", "--json", "--limit", "100").stdout
    )["records"]
    return sorted(records, key=lambda record: record["preparedAt"])


Turn = tuple[str, str]  # (role, content) of one retained message


def _retained(world: PiWorld, session_id: str) -> dict[str, list[Turn]]:
    """Each retained request of one Pi session (by request id, in order) with its messages,
    from the outbox once Hindsight confirmed them all; the session's document in Hindsight
    must hold exactly those messages, once each."""
    world.drain()
    items = json.loads(
        world.cli(
            "outbox", "list", "--state", "done", "--session", session_id, "--json", "--content"
        ).stdout
    )
    by_request = {
        str(item["request_id"]): [
            (str(turn["role"]), str(turn["content"])) for turn in json.loads(item["content"][0])
        ]
        for item in items
    }
    document = BankView(world.base_url, world.bank_id).document_turns(f"pi-session-{session_id}")
    held = [(str(turn["role"]), str(turn["content"])) for turn in document]
    assert held == [turn for turns in by_request.values() for turn in turns]
    return by_request


def _settled(rpc: PiRpc, after: int, timeout: float = 90) -> int:
    index, _ = rpc.wait_for(
        lambda e: e.get("type") == "agent_settled", "agent_settled", after=after, timeout=timeout
    )
    return index


def _prompt(rpc: PiRpc, message: str) -> int:
    start = len(rpc.events)
    rpc.send({"type": "prompt", "message": message})
    return _settled(rpc, start)


def _state(rpc: PiRpc) -> dict[str, Any]:
    start = len(rpc.events)
    rpc.send({"id": "state", "type": "get_state"})
    _, response = rpc.wait_for(
        lambda e: e.get("type") == "response" and e.get("command") == "get_state",
        "get_state",
        after=start,
    )
    data: dict[str, Any] = response["data"]
    return data


def _switch(rpc: PiRpc, session_file: Path) -> None:
    start = len(rpc.events)
    rpc.send({"type": "switch_session", "sessionPath": str(session_file)})
    _, response = rpc.wait_for(
        lambda e: e.get("type") == "response" and e.get("command") == "switch_session",
        "switch_session",
        after=start,
    )
    assert response.get("success") is True, response


def _notices(rpc: PiRpc) -> list[str]:
    return [
        str(event.get("message"))
        for event in rpc.events
        if event.get("type") == "extension_ui_request" and event.get("method") == "notify"
    ]


def _first_chunk(rpc: PiRpc, after: int) -> None:
    rpc.wait_for(lambda e: e.get("type") == "message_update", "the answer streaming", after=after)


def test_a_run_another_extension_starts_gets_no_recall_and_no_alarm(
    world: PiWorld, tmp_path: Path
) -> None:
    """Bug: Pi 1.x's custom-message runs have no prompt; the shim sent none and the user saw
    "prepareMemory failed … invalid params: prompt: Field required". Such a run is not a user
    request (R-RECALL-1): no automatic recall, recorded as ``not_user_request``, nothing shown."""
    extension = world.agent_dir / "extensions" / "build-watcher"
    extension.mkdir(parents=True)
    (extension / "index.ts").write_text(TRIGGER_EXTENSION)
    _script(world, {"match": "build finished", "reply": "Two tests failed; look at the parser."})
    repo = make_repo(tmp_path / "watched", "https://example.com/team/watched.git")
    world.register(repo)
    world.run(repo, FACT)
    world.drain()

    rpc = PiRpc(world, repo)
    try:
        _prompt(rpc, QUESTION)  # a user request: recall as always
        start = len(rpc.events)
        rpc.send({"type": "prompt", "message": "/build-done 2 tests failed"})
        _settled(rpc, start)
        notices = _notices(rpc)
    finally:
        assert rpc.close() == 0

    assert not [n for n in notices if "fail" in n.lower() or "invalid" in n.lower()], notices
    custom_runs = [
        request
        for request in world.pi_requests()
        if any("Build finished" in json.dumps(m) for m in messages_of(request))
    ]
    assert custom_runs, "the build watcher's run never reached the model"
    assert not any("<hindsight-memory" in json.dumps(messages_of(r)[-1]) for r in custom_runs)
    outcomes = [record["outcome"] for record in _evidence(world)]
    assert outcomes[-2:] == ["delivered", "not_user_request"], outcomes
    assert "Zephyr" in (memory_after(messages_of(requests_for(world, QUESTION)[0]), QUESTION) or "")


FLAKY = "A flaky question: where do we deploy production?"


def test_a_provider_failure_pi_retries_is_one_request_retained_once_without_the_error(
    world: PiWorld, tmp_path: Path
) -> None:
    """Bug: the shim ended the request at the first ``agent_end`` (the failed attempt), so Pi's
    retry became a second request of its own and the memory's evidence pointed at the failure."""
    repo = make_repo(tmp_path / "retry", "https://example.com/team/retry.git")
    world.register(repo)
    world.run(repo, FACT)
    world.drain()
    _script(
        world,
        {
            "match": "flaky",
            "reply": "Production runs on Zephyr.",
            "fail_first": 1,
            "fail_status": 503,
            "fail_message": "upstream overloaded, try again",
        },
    )
    rpc = PiRpc(world, repo)
    try:
        _prompt(rpc, FLAKY)
        session_id = str(_state(rpc)["sessionId"])
        retries = [e for e in rpc.events if e.get("type") == "auto_retry_start"]
    finally:
        assert rpc.close() == 0

    assert len(retries) == 1, "the stand-in's failure was not retried by Pi"
    failed, retried = requests_for(world, FLAKY)
    assert "Zephyr" in (memory_after(messages_of(failed), FLAKY) or ""), _evidence(world)
    assert messages_of(retried) == messages_of(failed)  # Pi sends the retry the same memory
    retained = _retained(world, session_id)
    assert list(retained.values()) == [
        [("user", FLAKY), ("assistant", "Production runs on Zephyr.")]
    ]
    records = _evidence(world)[1:]  # after the request that retained the fact
    assert [record["requestId"] for record in records] == list(retained)
    assert records[0]["outcome"] == "delivered"
    assert records[0]["attached"] is True and records[0]["confirmed"] is True


def test_an_overflow_pi_compacts_and_retries_is_retained_once(
    world: PiWorld, tmp_path: Path
) -> None:
    """The failed attempt (Pi's overflow error), the compaction and the retry are one request;
    neither the error nor Pi's summary is retained as conversation."""
    settings_path = world.agent_dir / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings["compaction"] = {"keepRecentTokens": 50}  # something to compact in a short session
    settings_path.write_text(json.dumps(settings))
    long_answer = "First answer, at length. " * 40
    _script(
        world,
        {"match": "checkpoint", "reply": "Checkpoint: the first question was answered."},
        {"match": "first question", "reply": long_answer},
        {"match": "overflowing", "reply": "Answer after compaction.", "overflow_first": 1},
    )
    repo = make_repo(tmp_path / "overflow", "https://example.com/team/overflow.git")
    world.register(repo)
    rpc = PiRpc(world, repo)
    try:
        _prompt(rpc, "The first question.")
        _prompt(rpc, "An overflowing question.")
        session_id = str(_state(rpc)["sessionId"])
        compactions = [e for e in rpc.events if e.get("type") == "compaction_end"]
    finally:
        assert rpc.close() == 0

    assert compactions and compactions[0].get("reason") == "overflow", compactions
    retained = _retained(world, session_id)
    assert list(retained.values()) == [
        [("user", "The first question."), ("assistant", long_answer.strip())],
        [("user", "An overflowing question."), ("assistant", "Answer after compaction.")],
    ]
    assert "Checkpoint" not in json.dumps(retained)  # Pi's summary is not conversation
    assert [record["requestId"] for record in _evidence(world)] == list(retained)


def test_a_queued_follow_up_joins_the_request_and_is_retained_once(
    world: PiWorld, tmp_path: Path
) -> None:
    """A follow-up queued while the answer streams joins the running request (one
    ``agent_settled``); its answer, retried once, stays in that request too."""
    _script(
        world,
        # The follow-up's own provider call fails once: Pi retries within the same request.
        {"match": "and also", "reply": "Also done.", "fail_first": 1},
        {
            "match": "slow",
            "reply": "Working through the slow request step by step.",
            "delay_ms": 150,
        },
    )
    repo = make_repo(tmp_path / "followup", "https://example.com/team/followup.git")
    world.register(repo)
    rpc = PiRpc(world, repo)
    try:
        start = len(rpc.events)
        rpc.send({"type": "prompt", "message": "A slow request, please."})
        _first_chunk(rpc, start)
        rpc.send({"type": "follow_up", "message": "And also tidy the imports."})
        _settled(rpc, start)
        settled = [e for e in rpc.events[start:] if e.get("type") == "agent_settled"]
        session_id = str(_state(rpc)["sessionId"])
    finally:
        assert rpc.close() == 0

    assert len(settled) == 1, "the follow-up was not taken into the same run"
    retained = _retained(world, session_id)
    assert list(retained.values()) == [
        [
            ("user", "A slow request, please."),
            ("assistant", "Working through the slow request step by step."),
            ("user", "And also tidy the imports."),
            ("assistant", "Also done."),
        ]
    ]
    assert [record["requestId"] for record in _evidence(world)] == list(retained)


def test_a_continuation_another_extension_asks_for_is_part_of_the_request(
    world: PiWorld, tmp_path: Path
) -> None:
    """Bug: the continuation's run ended with an ``agent_end`` of its own, which the shim took for
    a new request: its answer was retained without the user's words it answered."""
    extension = world.agent_dir / "extensions" / "keep-going"
    extension.mkdir(parents=True)
    (extension / "index.ts").write_text(CONTINUE_EXTENSION)
    _script(
        world,
        {"match": "run the linter", "reply": "The linter is clean."},
        {"match": "rename", "reply": "Renamed the module."},
    )
    repo = make_repo(tmp_path / "continued", "https://example.com/team/continued.git")
    world.register(repo)
    rpc = PiRpc(world, repo)
    try:
        start = _prompt(rpc, "Rename the parser module.")
        runs = [e for e in rpc.events[:start] if e.get("type") == "agent_end"]
        session_id = str(_state(rpc)["sessionId"])
    finally:
        assert rpc.close() == 0

    assert len(runs) == 2, "the extension's continuation did not run"
    retained = _retained(world, session_id)
    assert list(retained.values()) == [
        [
            ("user", "Rename the parser module."),
            ("assistant", "Renamed the module."),
            ("assistant", "The linter is clean."),
        ]
    ]
    assert [record["requestId"] for record in _evidence(world)] == list(retained)


LONG = "Give me a long explanation of where we deploy production."


def test_an_aborted_request_keeps_the_users_words_and_not_the_cut_off_answer(
    world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "abort", "https://example.com/team/abort.git")
    world.register(repo)
    world.run(repo, FACT)
    world.drain()
    _script(
        world,
        {"match": "never mind", "reply": "Fine."},
        {"match": "long", "reply": "Here is a very long answer " * 20, "delay_ms": 200},
    )
    rpc = PiRpc(world, repo)
    try:
        start = len(rpc.events)
        rpc.send({"type": "prompt", "message": LONG})
        _first_chunk(rpc, start)
        rpc.send({"type": "abort"})
        _settled(rpc, start)
        _prompt(rpc, "Never mind then.")
        session_id = str(_state(rpc)["sessionId"])
    finally:
        assert rpc.close() == 0

    retained = _retained(world, session_id)
    assert list(retained.values()) == [
        [("user", LONG)],
        [("user", "Never mind then."), ("assistant", "Fine.")],
    ]
    aborted, after = _evidence(world)[1:]
    assert [aborted["requestId"], after["requestId"]] == list(retained)
    assert aborted["outcome"] == "delivered"
    assert aborted["confirmed"] is True  # its provider request did go out, with the memory
    assert after["outcome"] != "not_user_request"


def test_switching_to_a_session_in_another_directory_re_resolves_scope_and_consent(
    world: PiWorld, tmp_path: Path
) -> None:
    """``switch_session`` into an unregistered project gets no memory and sends nothing there;
    switching back to the registered one has memory again. Nothing of one leaks into the other."""
    registered = make_repo(tmp_path / "registered", "https://example.com/team/registered.git")
    other = make_repo(tmp_path / "other", "https://example.com/team/other.git")
    world.register(registered)
    world.run(registered, FACT)
    world.drain()
    world.run(other, "Hello from the other project.")
    (other_file,) = [
        path
        for path in (world.agent_dir / "sessions").rglob("*.jsonl")
        if json.loads(path.read_text().splitlines()[0]).get("cwd") == str(other)
    ]

    rpc = PiRpc(world, registered)
    try:
        _prompt(rpc, QUESTION)
        registered_file = str(_state(rpc)["sessionFile"])
        _switch(rpc, other_file)
        elsewhere = "Where do we deploy production, from the other project?"
        _prompt(rpc, elsewhere)
        other_session = str(_state(rpc)["sessionId"])
        _switch(rpc, Path(registered_file))
        back = "Back home: where do we deploy production?"
        _prompt(rpc, back)
    finally:
        assert rpc.close() == 0

    assert "Zephyr" in (memory_after(messages_of(requests_for(world, QUESTION)[0]), QUESTION) or "")
    assert memory_after(messages_of(requests_for(world, elsewhere)[0]), elsewhere) is None
    assert "Zephyr" not in json.dumps(messages_of(requests_for(world, elsewhere)[0]))
    records = _evidence(world)
    home, away, again = records[-3:]
    assert away["sessionId"] == other_session and away["outcome"] == "not_registered"
    # Back home: the registered scope again (its memory was already given in this session, so
    # the outcome may be that nothing new was found, but never that memory is off).
    assert again["scopeId"] == home["scopeId"] is not None
    assert again["outcome"] != "not_registered" and again["sessionId"] == home["sessionId"]
    assert _retained(world, other_session) == {}  # nothing of it went to the bank


def test_project_trust_is_not_memory_consent(world: PiWorld, tmp_path: Path) -> None:
    """Trusting a project lets Pi load its ``.pi/`` resources; it never turns memory on, whatever
    the repository carries. Declining trust changes nothing for a registered project."""
    trusted = make_repo(tmp_path / "trusted", "https://example.com/team/trusted.git")
    (trusted / ".pi").mkdir()
    (trusted / ".pi" / "settings.json").write_text("{}")
    (trusted / ".pi" / "hindsight.json").write_text(
        json.dumps({"enabled": True, "recall": {"maxTokens": 900}})
    )
    declined = make_repo(tmp_path / "declined", "https://example.com/team/declined.git")
    (declined / ".pi").mkdir()
    (declined / ".pi" / "settings.json").write_text("{}")
    world.register(declined)

    settings_path = world.agent_dir / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings_path.write_text(json.dumps({**settings, "defaultProjectTrust": "always"}))
    world.run(trusted, "A question in a trusted project.")
    settings_path.write_text(json.dumps({**settings, "defaultProjectTrust": "never"}))
    world.run(declined, FACT)
    world.drain()
    world.run(declined, QUESTION)

    records = _evidence(world)
    assert records[0]["outcome"] == "not_registered"
    request = requests_for(world, "A question in a trusted project.")[0]
    assert memory_after(messages_of(request), "A question in a trusted project.") is None
    assert "Zephyr" in (memory_after(messages_of(requests_for(world, QUESTION)[0]), QUESTION) or "")
