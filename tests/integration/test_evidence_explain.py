"""``evidence explain`` over a session file written by the real Pi binary.

A small probe extension plays the shim's part that matters here: from ``before_agent_start`` it
returns the hidden ``hindsight-memory`` message with ``details.requestId`` (as the shim does), and
it logs when each request was prepared. Pi, talking to the stand-in model, writes the session file
exactly as it does for the real extension; the ledger records what the sidecar would have.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.hosts.pi.explain_reader import explain
from pi_hindsight.hosts.pi.session_file import find_session_file, read_session
from pi_hindsight.stores.evidence import EvidenceLedger, PreparedRecord
from tests.agent_models import AgentStandIn
from tests.plugins.pi_versions import PiInstall
from tests.plugins.standin import pi_env, write_pi_agent_dir

pytestmark = [pytest.mark.pi]

PROBE = r"""
import { appendFileSync } from "node:fs";
export default function (pi: any) {
  let n = 0;
  pi.on("before_agent_start", async (event: any, ctx: any) => {
    n += 1;
    const requestId = `req-${n}`;
    appendFileSync(process.env.PROBE_LOG!, JSON.stringify({
      requestId, at: Date.now() / 1000, sessionId: ctx.sessionManager.getSessionId(),
      sessionFile: ctx.sessionManager.getSessionFile() }) + "\n");
    if (event.prompt.includes("NOMEM")) return undefined;
    const content =
      `<hindsight-memory scope="project:alpha">\n- memory for request ${n}\n</hindsight-memory>`;
    return { message: { customType: "hindsight-memory", display: false, content,
      details: { requestId, scopeId: "project:alpha" } } };
  });
}
"""

PROMPTS = ("where do we deploy?", "and the lint rules?", "NOMEM what time is it")


@pytest.fixture
def pi_session(tmp_path: Path, pi_binary: PiInstall, chat_standin: AgentStandIn) -> dict[str, Any]:
    agent = write_pi_agent_dir(tmp_path / "agent", chat_standin)
    chat_standin.set_script(
        {
            "rules": [
                {
                    "match": "deploy",
                    "tool_calls": [{"name": "bash", "arguments": {"command": "echo ok"}}],
                    "then_reply": "We deploy to the Zephyr cluster.",
                },
                {"match": "lint", "reply": "Ruff with the default rules."},
            ],
            "default_reply": "It is noon.",
        }
    )
    probe = tmp_path / "probe.ts"
    probe.write_text(PROBE)
    log = tmp_path / "probe.jsonl"
    work = tmp_path / "work"
    work.mkdir()
    env = pi_env(agent, pi=pi_binary)
    env["PROBE_LOG"] = str(log)
    completed = subprocess.run(
        pi_binary.argv("-e", str(probe), "-p", *PROMPTS),
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    prepared = [json.loads(line) for line in log.read_text().splitlines()]
    assert [item["requestId"] for item in prepared] == ["req-1", "req-2", "req-3"]
    return {"agent": agent, "prepared": {item["requestId"]: item for item in prepared}}


def _body(n: int) -> str:
    return (
        f'<hindsight-memory scope="project:alpha">\n- memory for request {n}\n</hindsight-memory>'
    )


@pytest.mark.pi_both("session-file")
def test_explain_pairs_each_request_with_its_real_pi_conversation(
    pi_session: dict[str, Any], tmp_path: Path
) -> None:
    agent: Path = pi_session["agent"]
    prepared = pi_session["prepared"]
    state = tmp_path / "state"
    ledger = EvidenceLedger(state, retention_days=30, cap_bytes=50_000_000)
    try:
        for n in (1, 2):
            item = prepared[f"req-{n}"]
            ledger.record_prepared(
                PreparedRecord(
                    f"req-{n}",
                    outcome="delivered",
                    session_id=item["sessionId"],
                    transcript_path=item["sessionFile"],
                    scope_id="project:alpha",
                    bank_ids=["pi-coding"],
                    body=_body(n),
                    record_ids=[f"mem-{n}"],
                    omitted=1 if n == 2 else 0,
                    prepared_at=item["at"],
                )
            )
        ledger.mark_confirmed("req-1", True, 4_000)
        ledger.mark_confirmed("req-2", False, 4_100)  # say the payload check failed
        third = prepared["req-3"]
        ledger.record_prepared(
            PreparedRecord(
                "req-3",
                outcome="nothing_found",
                session_id=third["sessionId"],
                transcript_path=None,  # found through the agent dir by session id
                scope_id="project:alpha",
                bank_ids=["pi-coding"],
                prepared_at=third["at"],
            )
        )
        session_file = find_session_file(agent, third["sessionId"])
        assert session_file is not None and session_file == Path(prepared["req-1"]["sessionFile"])
        session = read_session(session_file)
        entry_ids = {
            e.details.get("requestId"): e.entry_id
            for e in session.entries
            if e.kind == "custom_message"
        }
        assert set(entry_ids) == {"req-1", "req-2"}

        first = ledger.show("req-1")
        assert first is not None
        result = explain(first, session_file=None, agent_dir=agent)
        assert result.diagnosis.reading == "delivered"
        assert result.trace is not None and result.trace.matched_by == "requestId"
        assert result.trace.user_entry is not None
        assert result.trace.user_entry.text == "where do we deploy?"
        assert result.trace.memory_entry is not None
        assert result.trace.memory_entry.entry_id == entry_ids["req-1"]
        assert result.body_matches_session is True
        replies = [entry.text for entry in result.trace.replies]
        assert any(text.startswith("[tool call: bash") for text in replies)
        assert any(text.startswith("[tool result: bash") for text in replies)
        assert replies[-1] == "We deploy to the Zephyr cluster."
        assert all("lint" not in text for text in replies)  # stops at the next request

        second = ledger.show("req-2")
        assert second is not None
        excluded = explain(second, session_file=None, agent_dir=agent)
        assert excluded.diagnosis.reading == "delivery_exclusion"
        assert "not found in the provider payload" in excluded.diagnosis.summary
        assert any("left out by the token budget" in note for note in excluded.diagnosis.notes)
        assert excluded.trace is not None
        assert [e.text for e in excluded.trace.replies] == ["Ruff with the default rules."]

        third_detail = ledger.show("req-3")
        assert third_detail is not None
        miss = explain(third_detail, session_file=None, agent_dir=agent)
        assert miss.diagnosis.reading == "search_miss"
        assert miss.transcript_path == str(session_file)
        assert miss.trace is not None and miss.trace.matched_by == "time"
        assert miss.trace.user_entry is not None
        assert miss.trace.user_entry.text == "NOMEM what time is it"
        assert [e.text for e in miss.trace.replies] == ["It is noon."]
    finally:
        ledger.close()

    env = pi_env(agent)
    env["PI_HINDSIGHT_STATE_DIR"] = str(state)
    cli = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "evidence", "explain", "req-1", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    data = json.loads(cli.stdout)
    assert data["reading"] == "delivered" and data["bodyMatchesSession"] is True
    assert data["userMessage"]["text"] == "where do we deploy?"
    text = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "evidence", "explain", "req-2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "reading: delivery_exclusion" in text
    assert "── user message" in text and "and the lint rules?" in text
    assert "identical to the recorded body" in text
