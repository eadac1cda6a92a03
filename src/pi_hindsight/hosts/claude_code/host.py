"""The Claude Code adapter: hook events → engine calls, engine records → hook output.

One engine per Claude Code session, over the daemon's shared stores, connection and retain
worker (``SharedParts``). What each event does (docs/hosts/claude-code.md):

- ``SessionStart``: open the session (scope and consent, once per session id); the framing of
  memory (R-RECALL-5), once, and the startup memo's block after it, as the hook's additional
  context — again at each SessionStart (resume, clear, after a compaction). An unregistered
  location gets no connection at all and, once per session, a system message saying how to
  register (hooks cannot ask).
- ``UserPromptSubmit``: recall for the prompt, as additional context, a block with the mark only
  (the framing is in the session already); evidence recorded. A
  location registered meanwhile (``pi-hindsight scope register``, ``/hindsight-register``) is
  picked up at the next prompt.
- ``Stop`` / ``SubagentStop`` / ``PreCompact`` / ``SessionEnd``: the transcript's new entries
  since the cursor, as requests, through the same retain policy and redaction into the outbox
  (``cursors.py`` says why a crash loses and duplicates nothing). The same pass reads what the
  transcript says of the memory we injected: *attached* when its attachment row holds our exact
  text, *confirmed* when Claude Code's record of the next provider request holds it (true or
  false as found; left unknown when that record is absent — never claimed).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_hindsight.engine.engine import MemoryEngine
from pi_hindsight.engine.types import (
    CompletedTurn,
    Delivery,
    HostFacts,
    Notice,
    SessionInfo,
    UserRequest,
)
from pi_hindsight.errors import InputFileError, PiHindsightError
from pi_hindsight.hosts.adapter import HostAdapter, HostSession
from pi_hindsight.hosts.claude_code.cursors import Cursor, CursorStore
from pi_hindsight.hosts.claude_code.naming import CLAUDE_CODE_HOST, REGISTER_COMMAND
from pi_hindsight.hosts.claude_code.payloads import (
    HookContext,
    HookEvent,
    HookOutput,
    ToolCallAnswer,
    ToolSpecAnswer,
)
from pi_hindsight.hosts.claude_code.transcript_file import Delta, parse_delta, read_chunk
from pi_hindsight.safe_files import FileMissing
from pi_hindsight.tools import MemoryTools

logger = logging.getLogger(__name__)

MAX_PENDING = 64  # deliveries awaiting their transcript row, per session
SESSION_IDLE_S = 2 * 3600.0
MESSAGE_MAX_CHARS = 1_500


@dataclass(kw_only=True)
class SessionState(HostSession):
    """A Claude Code session: the shared bookkeeping (``HostSession``) and what only hooks need
    — deliveries awaiting their transcript row, whether the register hint was given, when the
    session was last used (idle ones are evicted)."""

    session_id: str
    pending: dict[str, str] = field(default_factory=dict)  # delivered text -> request id
    awaiting: dict[str, str] = field(default_factory=dict)  # attached, awaiting its request
    hinted: bool = False
    missing_noted: bool = False
    last_used: float = field(default_factory=time.monotonic)
    # The framing (R-RECALL-5) is in the session's context: stated by our SessionStart context
    # (at start, resume, clear and after each compaction), so prompt blocks carry the mark only.
    framed: bool = False

    def deliver(self, delivery: Delivery) -> str | None:
        text = delivery.text
        if text is not None:
            self.pending[text] = delivery.details.request_id
            while len(self.pending) > MAX_PENDING:
                self.pending.pop(next(iter(self.pending)))
        return text


def hook_output(event: str, context: str | None, notices: Sequence[Notice]) -> HookOutput | None:
    """Claude Code's hook output: additional context (SessionStart, UserPromptSubmit) for the
    model; a system message for the user (never sent to the model)."""
    specific = None
    if context and event in ("SessionStart", "UserPromptSubmit"):
        specific = HookContext(hook_event_name=event, additional_context=context)
    text = system_message(notices)
    if specific is None and text is None:
        return None
    return HookOutput(hook_specific_output=specific, system_message=text)


def system_message(notices: Sequence[Notice]) -> str | None:
    """Notices, each once, as one bounded line for the user; None when there are none."""
    messages = list(dict.fromkeys(notice.message for notice in notices))
    if not messages:
        return None
    text = "pi-hindsight: " + "; ".join(messages)
    if len(text) > MESSAGE_MAX_CHARS:
        text = text[: MESSAGE_MAX_CHARS - 1] + "…"
    return text


def unregistered_hint(cwd: Path) -> str:
    """Hooks cannot ask: the one system message of an unregistered location."""
    hint = CLAUDE_CODE_HOST.register_hint(cwd)
    return (
        f"memory is off here: {cwd} is not registered; {hint} to turn it on; nothing is sent "
        "to Hindsight until then"
    )


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class ClaudeCodeHost:
    def __init__(self, state_dir: Path, make_engine: Callable[[], MemoryEngine]) -> None:
        self.cursors = CursorStore(state_dir)
        self._make_engine = make_engine
        self._sessions: dict[str, SessionState] = {}
        self._registry = asyncio.Lock()
        self._transcript_locks: dict[Path, asyncio.Lock] = {}

    # -- sessions --------------------------------------------------------------------------

    async def _session(
        self, session_id: str, cwd: Path, transcript: Path | None, reason: str
    ) -> SessionState:
        info = SessionInfo(
            session_id=session_id,
            cwd=cwd,
            transcript_path=None if transcript is None else str(transcript),
            has_ui=False,  # hooks cannot ask: consent is `scope register`
            reason=reason,
        )
        return await self.open(info)

    # -- what a host adapter provides (hosts/adapter.py) ------------------------------------

    @property
    def facts(self) -> HostFacts:
        return CLAUDE_CODE_HOST

    async def open(self, info: SessionInfo) -> SessionState:
        """The session's state, its engine's session opened once per session id."""
        async with self._registry:
            state = self._sessions.get(info.session_id)
            if state is None:
                state = SessionState(self._make_engine(), session_id=info.session_id)
                self._sessions[info.session_id] = state
        state.last_used = time.monotonic()
        async with state.lock:
            if not state.opened:
                view = await state.open(info)
                state.notices.extend(view.notices)
        return state

    def deliver(self, session: SessionState, delivery: Delivery) -> str | None:
        """The block as additional context; remembered until the transcript shows it."""
        return session.deliver(delivery)

    def show(self, notices: Sequence[Notice]) -> str | None:
        """The notices as one system message for the user (never sent to the model)."""
        return system_message(notices)

    async def _recheck(self, state: SessionState, event: HookEvent) -> None:
        """A location registered since the session opened is on from the next prompt."""
        if state.engine.scope() is not None or not state.engine.awaits_registration():
            return
        async with state.lock:
            info = SessionInfo(
                event.session_id, event.cwd, _path_text(event.transcript_path), False, "prompt"
            )
            await state.open(info)
        scope = state.engine.scope()
        if scope is not None:
            state.notices.append(Notice.info(f"memory is on now ({scope.scope_id})"))

    def _hint(self, state: SessionState, cwd: Path) -> list[Notice]:
        if state.hinted or state.engine.scope() is not None:
            return []
        state.hinted = True
        if state.engine.awaits_registration():
            return [Notice.info(unregistered_hint(cwd))]
        return [Notice.info(f"memory is off here: {state.engine.off_reason()}")]

    def evict_idle(self, max_idle_s: float = SESSION_IDLE_S) -> int:
        cutoff = time.monotonic() - max_idle_s
        idle = [sid for sid, s in self._sessions.items() if s.last_used < cutoff]
        for session_id in idle:
            del self._sessions[session_id]
        return len(idle)

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    # -- hook events -----------------------------------------------------------------------

    async def hook(self, event: HookEvent, notes: Sequence[str] = ()) -> HookOutput | None:
        state = await self._session(
            event.session_id, event.cwd, event.transcript_path, event.source or event.name
        )
        for note in notes:
            state.tell_once(note)
        if event.name == "SessionStart":
            context, notices = await self._session_start(state, event)
        elif event.name == "UserPromptSubmit":
            context, notices = await self._prompt(state, event)
        else:
            context, notices = None, await self._retain(state, event)
        return hook_output(event.name, context, [*state.take_notices(), *notices])

    async def _session_start(
        self, state: SessionState, event: HookEvent
    ) -> tuple[str | None, list[Notice]]:
        engine = state.engine
        if event.source == "compact":
            await engine.compacted()  # what was delivered is summarised away
        if event.source == "fork" and event.transcript_path is not None:
            await self._mark_fork(event.transcript_path)
        framing = engine.framing()
        if framing is None:
            state.framed = False
            return None, self._hint(state, event.cwd)
        request_id = f"start-{event.source or 'startup'}-{uuid.uuid4().hex[:12]}"
        memo = await engine.startup_memo(
            UserRequest(request_id, event.session_id, "", host_states_framing=True)
        )
        state.framed = True
        block = self.deliver(state, memo)
        paused = engine.retain_paused()  # the token budget (engine/budget.py): say so at start
        notices = [*memo.notices, *([Notice.warning(f"retain {paused}")] if paused else [])]
        return framing if block is None else f"{framing}\n\n{block}", notices

    async def _mark_fork(self, transcript: Path) -> None:
        """A fork's file starts with a copy of the history it came from, retained already under
        that session: only rows newer than the fork are its own."""
        cursor = await asyncio.to_thread(self.cursors.load, transcript)
        if cursor.offset == 0 and cursor.planned is None and cursor.skip_before is None:
            marked = cursor.but(skip_before=_now_iso())
            await asyncio.to_thread(self.cursors.save, transcript, marked)

    async def _prompt(
        self, state: SessionState, event: HookEvent
    ) -> tuple[str | None, list[Notice]]:
        await self._recheck(state, event)
        notices = self._hint(state, event.cwd)
        prompt = event.prompt or ""
        if prompt.lstrip().startswith(f"/{REGISTER_COMMAND}"):
            return None, notices  # our own command: nothing to recall for it
        request_id = event.prompt_id or f"prompt-{uuid.uuid4().hex}"
        # Without our SessionStart context (memory turned on mid-session, a restarted daemon)
        # the session's first block states the framing instead.
        request = UserRequest(
            request_id, event.session_id, prompt, host_states_framing=state.framed
        )
        delivery = await state.engine.prepare(request)
        return self.deliver(state, delivery), [*notices, *delivery.notices]

    # -- retain ----------------------------------------------------------------------------

    async def _retain(self, state: SessionState, event: HookEvent) -> list[Notice]:
        path = event.transcript_path
        if path is None:
            return []
        if path.name != f"{event.session_id}.jsonl":
            return [Notice.warning(f"{path} is not this session's transcript; not read")]
        lock = self._transcript_locks.setdefault(path, asyncio.Lock())
        async with lock:
            return await self._catch_up(state, event, path)

    def _read(self, path: Path, cursor: Cursor) -> tuple[Cursor, Delta]:
        info = path.stat()
        file_id = (info.st_dev, info.st_ino)
        if (cursor.file_id not in (None, file_id)) or info.st_size < cursor.offset:
            logger.warning("%s was replaced or cut; reading it from its start", path)
            cursor = cursor.restarted()
        cursor = cursor.but(file_id=file_id)
        limit = None if cursor.planned is None else cursor.planned - cursor.offset
        if limit is not None and limit <= 0:
            cursor = cursor.but(planned=None)
            limit = None
        data, end, more = read_chunk(path, cursor.offset, *(() if limit is None else (limit,)))
        delta = parse_delta(
            data,
            end,
            open_tools=cursor.open_tools,
            skip_before=cursor.skip_before,
            more=more or (limit is not None and end < info.st_size),
        )
        return cursor, delta

    async def _catch_up(self, state: SessionState, event: HookEvent, path: Path) -> list[Notice]:
        engine = state.engine
        notices: list[Notice] = []
        while True:
            cursor = await asyncio.to_thread(self.cursors.load, path)
            try:
                cursor, delta = await asyncio.to_thread(self._read, path, cursor)
            except (FileNotFoundError, FileMissing):
                if not state.missing_noted and engine.scope() is not None:
                    state.missing_noted = True
                    notices.append(
                        Notice.warning(
                            f"Claude Code kept no transcript at {path} (--no-session-persistence?)"
                            "; nothing of this session is retained",
                        )
                    )
                return notices
            except (OSError, InputFileError) as error:
                return [*notices, Notice.warning(f"transcript not read: {error}")]
            if delta.bad_lines:
                logger.warning("%s: %d unreadable line(s) skipped", path, delta.bad_lines)
            retained = engine.scope() is not None
            if retained and delta.segments and cursor.planned is None:
                planned = cursor.but(planned=delta.end)
                await asyncio.to_thread(self.cursors.save, path, planned)
            if retained:
                try:
                    for segment in delta.segments:
                        await engine.complete_turn(
                            CompletedTurn(
                                request_id=segment.request_id,
                                session_id=event.session_id,
                                messages=segment.messages,
                                transcript_path=str(path),
                            )
                        )
                except PiHindsightError as error:  # the cursor stays: redone next time
                    return [*notices, Notice.warning(f"retain not queued: {error.describe()}")]
                await self._observe(state, delta, path)
            moved = Cursor(
                offset=delta.end,
                open_tools=delta.open_tools,
                skip_before=cursor.skip_before,
                file_id=cursor.file_id,
            )
            if moved != cursor:
                await asyncio.to_thread(self.cursors.save, path, moved)
            if not delta.more:
                return notices

    async def _observe(self, state: SessionState, delta: Delta, path: Path) -> None:
        """Attached and confirmed, as the transcript shows them (module docstring)."""
        engine = state.engine
        if state.awaiting and delta.api_requests:
            first = delta.api_requests[0]
            if first.texts is not None:
                for text, waiting in state.awaiting.items():
                    found = any(text in sent for sent in first.texts)
                    await engine.delivery_confirmed(waiting, found, None)
            state.awaiting.clear()
        for context in delta.contexts:
            # The block is the whole context, or follows the framing (SessionStart).
            delivered = [t for t in state.pending if any(t in held for held in context.texts)]
            for text in delivered:
                request_id = state.pending.pop(text)
                await engine.memory_attached(
                    request_id, entry_id=context.entry_id, transcript_path=str(path)
                )
                after = [r for r in delta.api_requests if r.position > context.position]
                if not after:
                    state.awaiting[text] = request_id
                elif after[0].texts is not None:
                    found = any(text in sent for sent in after[0].texts)
                    await engine.delivery_confirmed(request_id, found, None)

    # -- tools (the MCP server) ------------------------------------------------------------

    async def tool_specs(self, session_id: str, cwd: Path) -> list[ToolSpecAnswer]:
        state = await self._session(session_id, cwd, None, "mcp")
        return [
            ToolSpecAnswer(
                name=spec.name,
                label=spec.label,
                description=spec.description,
                parameters=spec.parameters,
                timeout_ms=spec.timeout_ms,
            )
            for spec in MemoryTools(state.engine).specs()
        ]

    async def call_tool(
        self, session_id: str, cwd: Path, name: str, arguments: dict[str, Any]
    ) -> ToolCallAnswer:
        state = await self._session(session_id, cwd, None, "mcp")
        result = await MemoryTools(state.engine).call(name, arguments)
        return ToolCallAnswer(text=result.text, is_error=result.is_error)


def _path_text(path: Path | None) -> str | None:
    return None if path is None else str(path)


if TYPE_CHECKING:

    def _provides_the_adapter(host: ClaudeCodeHost) -> HostAdapter[SessionState]:
        return host  # mypy checks ClaudeCodeHost provides what hosts/adapter.py asks
