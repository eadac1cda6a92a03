"""Seeding a newly registered scope: a host's earlier sessions and the repository's history, as
the documents live retain would have produced, through the durable outbox (docs/lifecycle.md).

Two steps, always in this order: :meth:`Seeder.plan` says exactly what would be sent (sessions,
requests, commits, characters, an estimate of the LLM tokens Hindsight will spend) and sends
nothing; :meth:`Seeder.apply` commits that plan to the outbox, whose worker delivers it. The plan
holds the rendered, redacted items themselves, so its figures are what is sent. Commands reach
this through the seeding operation (``operations/scope_seeding.py``), which also renders the plan.

Idempotent and resumable: every seeded item has a deterministic request id
(``seed:<session id>:<first entry id>``, ``seed:git:<document id>``) and the outbox stores a
(session, request id) once. What is already there is recognised before anything is sent:

- a session with outbox items under other request ids was retained live: skipped whole;
- a session whose document Hindsight already has, and which has no seed items in the outbox,
  was retained live (or seeded from another machine): skipped whole;
- a session with seed items is seeded again request by request, adding only what is missing —
  so a seed killed halfway (kill -9) completes on the next run, with every request once.

Only a registered scope is seeded, into its own bank with its exact tags; never the User bank.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from pi_hindsight.backend import MemoryBackend
from pi_hindsight.backend.resources import RetainItem
from pi_hindsight.config import Settings
from pi_hindsight.engine import git_history
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH, Scope, resolve_scope
from pi_hindsight.engine.turn_text import ToolPolicy, TurnMessage, render_turn
from pi_hindsight.engine.types import HostFacts
from pi_hindsight.errors import BackendError, PiHindsightError, ScopeError
from pi_hindsight.identity import ProjectIdentity
from pi_hindsight.redacting import redact
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.outbox import Outbox
from pi_hindsight.stores.outbox_items import RetainRequest
from pi_hindsight.stores.runner import run_store

SEED_PREFIX = "seed:"
T = TypeVar("T")

# The LLM input tokens Hindsight (1.1.0) spends per retained document: each chunk of
# ``CHUNK_CHARS`` characters is one fact-extraction call (a fixed prompt of ~12.5 K characters
# plus the chunk), and consolidating the chunk's facts costs ~25.6 K tokens more (its prompt of
# ~17 K characters plus the observations it compares against), as measured by
# bench/seed_bench.py (100 sessions and 300 commits into a new bank). Consolidation grows with
# the bank, and a real model's answers add roughly the content again: an estimate, not a bill.
CHUNK_CHARS = 3_000
EXTRACT_PROMPT_TOKENS = 3_150
CONSOLIDATE_PROMPT_TOKENS = 25_600
CONTENT_PASSES = 3  # the content is read in, restated as facts, and read again to consolidate
ESTIMATE_NOTE = (
    "LLM input tokens, per document: ceil(chars / 3000) chunks x (3150 extraction + 25600 "
    "consolidation) + 3 x chars / 4 (measured on hindsight-api 1.1.0, bench/seed_bench.py)"
)

UnitKind = Literal["session", "git"]
UnitState = Literal["send", "retained-live", "in-hindsight", "seeded", "empty"]


@dataclass(frozen=True)
class HistoricTurn:
    """One earlier request of a host session: its first entry's id (stable), when it was said,
    and its messages as the host adapter turns them into turns for live retain."""

    key: str
    timestamp: str | None
    messages: tuple[TurnMessage, ...]


@dataclass(frozen=True)
class HistoricSession:
    session_id: str
    source: str  # where it was read (a session file)
    turns: tuple[HistoricTurn, ...]


@dataclass
class ScanReport:
    """What reading hosts' files and git found wrong: counted, with a few examples."""

    problems: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    other_locations: int = 0  # sessions of other projects or locations (left alone)

    def add(self, problem: str, example: str | None = None, count: int = 1) -> None:
        self.problems[problem] += count
        if example is not None and len(self.examples) < 10:
            self.examples.append(example)


class SessionSource(Protocol):
    """A host's earlier sessions (one adapter per host, in ``hosts/``)."""

    @property
    def host(self) -> HostFacts: ...

    def scan(self, belongs: Callable[[Path], bool], report: ScanReport) -> list[HistoricSession]:
        """The sessions whose start directory ``belongs`` here; problems go to ``report``."""
        ...


@dataclass(frozen=True)
class SeedUnit:
    """One session or one range of commits, and what seeding does with it."""

    kind: UnitKind
    key: str  # the session id, or the history document id
    label: str  # the session file, or the commit range
    state: UnitState
    requests: tuple[RetainRequest, ...] = ()  # what would be queued (state "send")
    found: int = 0  # requests found in the session, or commits in the range
    host: str | None = None  # whose session it is (HostFacts.name); None for git

    @property
    def characters(self) -> int:
        return sum(len(request.item.content) for request in self.requests)


def estimate_tokens(document_chars: Sequence[int]) -> int:
    total = 0
    for chars in document_chars:
        if chars <= 0:
            continue
        chunks = math.ceil(chars / CHUNK_CHARS)
        total += chunks * (EXTRACT_PROMPT_TOKENS + CONSOLIDATE_PROMPT_TOKENS)
        total += CONTENT_PASSES * math.ceil(chars / 4)
    return total


@dataclass(frozen=True)
class SeedPlan:
    scope: Scope
    units: tuple[SeedUnit, ...]
    problems: dict[str, int]
    examples: tuple[str, ...]
    server_error: str | None  # Hindsight could not be asked what it already holds
    git_error: str | None = None
    other_locations: int = 0

    @property
    def to_send(self) -> list[SeedUnit]:
        return [unit for unit in self.units if unit.state == "send"]

    def _count(self, kind: UnitKind) -> int:
        return sum(1 for unit in self.to_send if unit.kind == kind)

    @property
    def sessions(self) -> int:
        return self._count("session")

    @property
    def requests(self) -> int:
        return sum(len(unit.requests) for unit in self.to_send if unit.kind == "session")

    @property
    def commits(self) -> int:
        return sum(unit.found for unit in self.to_send if unit.kind == "git")

    @property
    def items(self) -> int:
        return sum(len(unit.requests) for unit in self.to_send)

    @property
    def characters(self) -> int:
        return sum(unit.characters for unit in self.to_send)

    @property
    def estimated_tokens(self) -> int:
        return estimate_tokens([unit.characters for unit in self.to_send])

    def skipped(self) -> dict[str, int]:
        counts = Counter(unit.state for unit in self.units if unit.state != "send")
        return dict(sorted(counts.items()))


@dataclass(frozen=True)
class SeedResult:
    items: int
    characters: int
    keys: tuple[tuple[str, str], ...]  # (outbox session, request id) of every item queued


Progress = Callable[[int, int, SeedUnit], None]  # (units done, units in all, the unit)
BackendProvider = Callable[[], Awaitable[MemoryBackend]]


def seed_request_id(session_id: str, key: str) -> str:
    return f"{SEED_PREFIX}{session_id}:{key}"


def location_matcher(
    identity: ProjectIdentity, scope: Scope, settings: Settings, catalog: Catalog
) -> Callable[[Path], bool]:
    """Whether a session started in a directory belongs to this location: it resolves to the
    same registered scope and — for a repository — the same clone (its common git dir: this
    checkout and all its worktrees), or — for a plain directory — lies inside it."""
    cache: dict[Path, bool] = {}

    def belongs(directory: Path) -> bool:
        try:
            resolved = directory.resolve()
        except OSError:
            return False
        if resolved not in cache:
            cache[resolved] = _belongs(resolved)
        return cache[resolved]

    def _belongs(resolved: Path) -> bool:
        if not resolved.is_dir():
            return False
        other = resolve_scope(resolved, settings, catalog)
        if other.registered is None or other.registered.scope_id != scope.scope_id:
            return False
        if identity.git_common_dir is not None:
            return other.identity.git_common_dir == identity.git_common_dir
        return resolved == identity.root or identity.root in resolved.parents

    return belongs


class Seeder:
    def __init__(
        self,
        *,
        scope: Scope,
        identity: ProjectIdentity,
        settings: Settings,
        state_dir: Path,
        outbox: Outbox,
        backend: BackendProvider,
    ) -> None:
        if "{" in scope.bank_id:
            raise ScopeError(
                f"scope {scope.scope_id} uses a bank per session ({scope.bank_id}): "
                "earlier sessions have no bank to be seeded into"
            )
        self.scope = scope
        self.identity = identity
        self.settings = settings
        self.state_dir = state_dir
        self.outbox = outbox
        self._backend = backend

    # -- plan ------------------------------------------------------------------------------

    async def plan(self, *, sessions: Sequence[SessionSource], git: bool) -> SeedPlan:
        """What seeding from ``sessions`` (each host's earlier sessions) and, with ``git``, the
        history would send; sends nothing."""
        report = ScanReport()
        found: list[tuple[SessionSource, list[HistoricSession]]] = []
        for source in sessions:
            found.append((source, await asyncio.to_thread(self._scan, source, report)))
        server_docs, server_error = await self._server_documents()
        ids = [session.session_id for _, held in found for session in held]
        known = await run_store(_known_requests, self.outbox, ids)
        units: list[SeedUnit] = []
        for source, held in found:
            units += await asyncio.to_thread(
                self._session_units, source.host, held, known, server_docs
            )
        git_error = None
        if git:
            git_known = await run_store(
                _known_requests, self.outbox, [git_history.queue_key(self.scope.project_id)]
            )
            git_units, git_error = await asyncio.to_thread(
                self._git_units, server_docs, git_known, report
            )
            units += git_units
        return SeedPlan(
            scope=self.scope,
            units=tuple(units),
            problems=dict(report.problems),
            examples=tuple(report.examples),
            server_error=server_error,
            git_error=git_error,
            other_locations=report.other_locations,
        )

    def _scan(self, source: SessionSource, report: ScanReport) -> list[HistoricSession]:
        return self._matching(lambda belongs: source.scan(belongs, report))

    def _matching(self, work: Callable[[Callable[[Path], bool]], T]) -> T:
        catalog = Catalog(self.state_dir)  # this thread's own connection
        try:
            return work(location_matcher(self.identity, self.scope, self.settings, catalog))
        finally:
            catalog.close()

    async def count_sessions(self, count: Callable[[Callable[[Path], bool]], int]) -> int:
        """``count(belongs)`` in a thread: how many earlier sessions a host has here."""
        return await asyncio.to_thread(self._matching, count)

    async def _server_documents(self) -> tuple[set[str], str | None]:
        try:
            backend = await self._backend()
            listed = await backend.list_documents(
                self.scope.bank_id,
                tags=self.scope.tags,
                tags_match=SCOPE_TAGS_MATCH,
                timeout=max(10.0, self.settings.timeout_ms / 1000),
            )
        except BackendError as error:
            return set(), error.describe()
        return {document.id for document in listed}, None

    def _policy(self) -> ToolPolicy:
        retain = self.settings.retain
        return ToolPolicy(retain.tool_calls, retain.tool_results, retain.tool_result_max_chars)

    def _item(
        self,
        content: str,
        document_id: str,
        context: str,
        timestamp: str | None,
        metadata: dict[str, str],
        mode: Literal["append", "replace"],
    ) -> RetainItem:
        return RetainItem(
            content=content,
            document_id=document_id,
            tags=self.scope.tags,
            timestamp=timestamp or datetime.now(UTC).isoformat(),
            context=context,
            metadata=metadata,
            update_mode=mode,
        )

    def _session_units(
        self,
        host: HostFacts,
        found: list[HistoricSession],
        known: dict[str, set[str]],
        server_docs: set[str],
    ) -> list[SeedUnit]:
        policy = self._policy()
        context = host.session_context(self.scope.project_id)
        units: list[SeedUnit] = []
        for session in found:
            document_id = host.session_document(session.session_id)
            queued = known.get(session.session_id, set())
            seeded = {rid for rid in queued if rid.startswith(SEED_PREFIX)}

            def unit(
                state: UnitState,
                requests: tuple[RetainRequest, ...] = (),
                session: HistoricSession = session,
            ) -> SeedUnit:
                return SeedUnit(
                    "session", session.session_id, session.source, state, requests,
                    len(session.turns), host.name,
                )  # fmt: skip

            if queued - seeded:
                units.append(unit("retained-live"))
                continue
            if document_id in server_docs and not seeded:
                units.append(unit("in-hindsight"))
                continue
            requests: list[RetainRequest] = []
            for turn in session.turns:
                request_id = seed_request_id(session.session_id, turn.key)
                if request_id in seeded:
                    continue
                text = render_turn(turn.messages, policy)
                if not text.content:
                    continue
                metadata = {
                    "source": host.name,
                    "session_id": session.session_id,
                    "request_id": request_id,
                    "origin": "seed",
                }
                item = self._item(
                    text.content, document_id, context, turn.timestamp, metadata, "append"
                )
                requests.append(
                    RetainRequest(session.session_id, self.scope.bank_id, item, request_id)
                )
            if requests:
                units.append(unit("send", tuple(requests)))
            else:
                units.append(unit("seeded" if seeded else "empty"))
        return units

    def _git_units(
        self, server_docs: set[str], known: dict[str, set[str]], report: ScanReport
    ) -> tuple[list[SeedUnit], str | None]:
        project_id = self.scope.project_id
        key = git_history.queue_key(project_id)
        queued_docs = {rid.removeprefix(f"{SEED_PREFIX}git:") for rid in known.get(key, set())}
        candidates = {
            newest
            for document_id in server_docs | queued_docs
            if (newest := git_history.range_newest(document_id, project_id)) is not None
        }
        root = self.identity.root
        if self.identity.git_common_dir is None:
            return [], f"{root} is not a git repository"
        markers = git_history.known_markers(root, candidates)
        log = git_history.read_history(root, markers=markers)
        for problem, count in log.problems.items():
            report.add(problem, count=count)
        if log.error is not None:
            return [], log.error
        units: list[SeedUnit] = []
        for commits in git_history.ranges(log.commits):
            document_id = git_history.range_document(project_id, commits[-1].sha, commits[0].sha)
            request_id = f"{SEED_PREFIX}git:{document_id}"
            label = f"{commits[-1].sha[:12]}..{commits[0].sha[:12]}"
            content = redact(git_history.render_range(project_id, commits)).text
            metadata = {"source": "git", "origin": "seed", "request_id": request_id,
                        "newest": commits[0].sha, "commits": str(len(commits))}  # fmt: skip
            item = self._item(content, document_id, f"git history of project {project_id}",
                              commits[0].date or None, metadata, "replace")  # fmt: skip
            units.append(
                SeedUnit(
                    kind="git",
                    key=document_id,
                    label=label,
                    state="send",
                    requests=(RetainRequest(key, self.scope.bank_id, item, request_id),),
                    found=len(commits),
                )
            )
        return units, None

    # -- apply -----------------------------------------------------------------------------

    async def apply(self, plan: SeedPlan, progress: Progress | None = None) -> SeedResult:
        """Commit the plan's items to the outbox, unit by unit, in order (a session's requests
        in their order; history ranges oldest first). Safe to run again on the same plan."""
        if plan.server_error is not None:
            raise PiHindsightError(
                f"Hindsight could not be asked which sessions it already holds "
                f"({plan.server_error}); nothing was queued",
                hint="start or check the server (`pi-hindsight status`), then seed again",
            )
        units = plan.to_send
        keys: list[tuple[str, str]] = []
        characters = 0
        for index, unit in enumerate(units, start=1):
            for request in unit.requests:
                await run_store(self.outbox.enqueue, request)
                keys.append((request.session_id, request.request_id or ""))
                characters += len(request.item.content)
            if progress is not None:
                progress(index, len(units), unit)
        return SeedResult(len(keys), characters, tuple(keys))


def _known_requests(outbox: Outbox, session_ids: Sequence[str]) -> dict[str, set[str]]:
    """Request ids the outbox holds (any state) per session: run on the store thread."""
    known: dict[str, set[str]] = {}
    for session_id in dict.fromkeys(session_ids):
        items = outbox.items(session_id=session_id, limit=1_000_000)
        if items:
            known[session_id] = {item.request_id or item.item_id for item in items}
    return known


def delivery_state(outbox: Outbox, keys: Sequence[tuple[str, str]]) -> Counter[str]:
    """How many of ``keys`` are in each outbox state: run on the store thread."""
    wanted: dict[str, set[str]] = {}
    for session_id, request_id in keys:
        wanted.setdefault(session_id, set()).add(request_id)
    states: Counter[str] = Counter()
    for session_id, request_ids in wanted.items():
        for item in outbox.items(session_id=session_id, limit=1_000_000):
            if item.request_id in request_ids:
                states[item.state] += 1
    return states
