"""The host adapters over a real engine (real SQLite, no server: an unregistered location makes
no connection): both provide what ``hosts/adapter.py`` asks, share the session bookkeeping, and
reach the engine through its named methods only (issue 19)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pi_hindsight.app import CLI_HOST, build_engine
from pi_hindsight.engine.types import SessionInfo, Shown, VisibleContext
from pi_hindsight.hosts.adapter import HostAdapter, HostSession
from pi_hindsight.hosts.claude_code.host import ClaudeCodeHost
from pi_hindsight.hosts.claude_code.naming import CLAUDE_CODE_HOST
from pi_hindsight.hosts.pi.host import PiHost
from pi_hindsight.hosts.pi.naming import PI_HOST
from tests.plugins.pi import make_repo


def test_both_adapters_provide_what_a_host_adapter_must(isolated_dirs: Path) -> None:
    pi = PiHost(build_engine(PI_HOST, isolated_dirs))
    claude = ClaudeCodeHost(isolated_dirs, lambda: build_engine(CLAUDE_CODE_HOST, isolated_dirs))
    assert isinstance(pi, HostAdapter) and isinstance(claude, HostAdapter)
    assert (pi.facts.name, claude.facts.name) == ("pi", "claude-code")


def test_an_unregistered_location_says_how_to_register_in_each_host(
    tmp_path: Path, isolated_dirs: Path
) -> None:
    repo = make_repo(tmp_path / "repo", "https://example.com/t/adapter.git")

    async def run() -> None:
        claude = ClaudeCodeHost(
            isolated_dirs, lambda: build_engine(CLAUDE_CODE_HOST, isolated_dirs)
        )
        info = SessionInfo("s-1", repo, None, has_ui=False, reason="startup")
        state = await claude.open(info)
        again = await claude.open(info)  # one session per id, opened once
        assert again is state and state.opened
        engine = state.engine
        assert engine.awaits_registration() and not engine.is_registered()
        assert engine.session_info() == info and engine.scope() is None
        assert "/hindsight-register" in engine.off_reason()  # Claude Code's own way
        assert f"pi-hindsight scope register {repo}" in engine.off_reason()
        # The outbox and evidence through named methods: nothing queued, nothing dead.
        health = await engine.outbox_health()
        assert (health.pending, health.dead) == (0, 0)
        assert await engine.retry_dead() == 0
        assert health.counts_line() == "0 pending, 0 awaiting confirmation, 0 dead, 0 done"
        await engine.shutdown(0.0)

        pi = PiHost(build_engine(PI_HOST, isolated_dirs))
        session = await pi.open(SessionInfo("s-2", repo, None, has_ui=True, reason="startup"))
        assert session is pi.session and session.view is not None
        assert session.view.consent is not None  # Pi asks
        assert "answer the consent prompt" in pi.engine.off_reason()
        assert pi.engine.resolution_warnings() == ()
        await pi.engine.shutdown(0.0)

    asyncio.run(run())


def test_a_session_is_told_each_warning_once(isolated_dirs: Path) -> None:
    session = HostSession(build_engine(CLI_HOST, isolated_dirs, passive=True))
    assert not session.opened
    for _ in range(3):
        session.tell_once("the transcript is not this session's")
    assert [n.message for n in session.take_notices()] == ["the transcript is not this session's"]
    session.tell_once("the transcript is not this session's")
    assert session.take_notices() == []


def test_the_visible_context_takes_in_what_a_delivery_showed() -> None:
    """The deliverer reports what its block showed (``Delivery.shown``) instead of changing
    the context it was given; the session takes it in."""
    memory = VisibleContext(record_ids={"a"}, memo_text="earlier memo", memo_version="v1")
    memory.take_in(None)
    assert memory.record_ids == {"a"}
    memory.take_in(Shown(frozenset({"b"}), frozenset({"kb"}), framed=True))
    assert (memory.record_ids, memory.record_keys, memory.framed) == ({"a", "b"}, {"kb"}, True)
    assert memory.memo_version == "v1"  # a block without the memo leaves it be
    memory.take_in(Shown(frozenset(), frozenset(), False, memo_version="v2", memo_text="new"))
    assert memory.memo_version == "v2" and memory.memo_text == "earlier memo\nnew"
    assert memory.framed  # once framed, the context stays framed


def test_pi_commands_read_the_outbox_and_the_ledger_through_the_engine(
    tmp_path: Path, isolated_dirs: Path
) -> None:
    repo = make_repo(tmp_path / "repo", "https://example.com/t/commands.git")

    async def run() -> None:
        pi = PiHost(build_engine(PI_HOST, isolated_dirs))
        await pi.open(SessionInfo("s-3", repo, None, has_ui=True, reason="startup"))
        outbox = await pi.commands.run("hindsight:outbox", "", accepted=None)
        assert outbox.text == "outbox: 0 pending, 0 awaiting confirmation, 0 dead, 0 done"
        retry = await pi.commands.run("hindsight:outbox", "retry", accepted=None)
        assert retry.text == "no dead letters to retry"
        # The ledger records every session, memory on or off: nothing asked of it yet.
        evidence = await pi.commands.run("hindsight:evidence", "", accepted=None)
        lines = (evidence.text or "").splitlines()
        assert evidence.level == "info" and lines[0] == "no matching evidence"
        assert lines[-1] == "details: `pi-hindsight evidence explain ID`" and len(lines) == 3
        await pi.engine.shutdown(0.0)

    asyncio.run(run())
