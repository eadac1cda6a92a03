"""Seeding a registered scope from a host's earlier sessions and the git history
(docs/lifecycle.md#seeding), for ``pi-hindsight scope seed`` and the host's seed command.

The plan always comes first and sends nothing; with ``apply`` the same plan is committed to the
durable outbox, whose worker delivers it. Where earlier sessions are found is the host's part:
its :class:`~pi_hindsight.engine.seeding.SessionSource` comes in through the context. What only
an adapter does stays there: asking before queueing (the context's ``approve``), showing progress
(``progress``), and the command line's wait for delivery (``delivery``/``measured``, filled in
by ``cli/seed_cmd.py``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from pi_hindsight.operations.base import Operation, OperationArgs, OperationResult

if TYPE_CHECKING:
    from pi_hindsight.engine.seeding import Progress, Seeder, SeedPlan, SessionSource


class SeedingEngine(Protocol):
    """What seeding needs from a session's engine (``engine.MemoryEngine`` provides it)."""

    async def seeder(self) -> Seeder: ...

    def wake_worker(self) -> None: ...


@dataclass(frozen=True)
class SeedingContext:
    """The session's engine, the hosts' earlier sessions (one source per host), and the
    adapter's hooks: ``approve`` sees the plan before anything is queued (False: nothing is),
    ``progress`` each unit queued."""

    engine: SeedingEngine
    sessions: Sequence[SessionSource] = ()
    approve: Callable[[ScopeSeedResult], bool] | None = None
    progress: Progress | None = None


class SeedArgs(OperationArgs):
    sessions: bool = Field(default=True, description="the host's earlier sessions of this location")
    git: bool = Field(default=True, description="a digest of the git history")
    apply: bool = Field(
        default=False, description="queue the plan (false: only show what would be sent)"
    )

    @model_validator(mode="after")
    def _some_source(self) -> SeedArgs:
        if not self.sessions and not self.git:
            raise ValueError("seed from the sessions, the git history or both")
        return self


class _Shape(BaseModel):
    model_config = ConfigDict(populate_by_name=True, alias_generator=to_camel)


class SeedUnitView(_Shape):
    """One session or one range of commits, and what seeding does with it."""

    kind: str  # "session" | "git"
    host: str | None = None  # whose session ("pi", "claude-code"); None for git
    key: str
    label: str
    state: str  # send | retained-live | in-hindsight | seeded | empty
    found: int  # requests in the session, or commits in the range
    items: int
    characters: int


class DeliveryCount(_Shape):
    """The queued items' outbox states once the command line stopped waiting."""

    ready: int = 0
    sending: int = 0
    submitted: int = 0
    done: int = 0
    dead: int = 0


class MeasuredSpend(_Shape):
    """The extraction the run cost, as the server recorded it (None: not known)."""

    spend: dict[str, int | bool | None] | None
    describe: str


class ScopeSeedResult(OperationResult):
    scope: str
    bank_id: str
    tags: list[str]
    sessions: int
    requests: int
    commits: int
    items: int
    characters: int
    estimated_tokens: int
    estimate: str
    skipped: dict[str, int]
    other_locations: int
    problems: dict[str, int]
    examples: list[str]
    server_error: str | None
    git_error: str | None
    units: list[SeedUnitView]
    applied: bool = False
    declined: bool = False  # the plan was shown and the user said no
    queued: int = 0
    queued_characters: int = 0
    # (outbox session, request id) of every item queued: for waiting on them, not for output.
    queued_keys: list[tuple[str, str]] = Field(default_factory=list, exclude=True)
    delivery: DeliveryCount | None = None
    measured: MeasuredSpend | None = None

    @classmethod
    def of_plan(cls, plan: SeedPlan) -> ScopeSeedResult:
        from pi_hindsight.engine.seeding import ESTIMATE_NOTE  # noqa: PLC0415 - on demand

        scope = plan.scope
        return cls(
            scope=scope.scope_id,
            bank_id=scope.bank_id,
            tags=list(scope.tags),
            sessions=plan.sessions,
            requests=plan.requests,
            commits=plan.commits,
            items=plan.items,
            characters=plan.characters,
            estimated_tokens=plan.estimated_tokens,
            estimate=ESTIMATE_NOTE,
            skipped=plan.skipped(),
            other_locations=plan.other_locations,
            problems=dict(plan.problems),
            examples=list(plan.examples),
            server_error=plan.server_error,
            git_error=plan.git_error,
            units=[
                SeedUnitView(
                    kind=unit.kind,
                    host=unit.host,
                    key=unit.key,
                    label=unit.label,
                    state=unit.state,
                    found=unit.found,
                    items=len(unit.requests),
                    characters=unit.characters,
                )
                for unit in plan.units
            ],
        )

    def plan_lines(self) -> list[str]:
        """What would be sent (or was): sources, counts, characters and the token estimate."""
        skipped = ", ".join(f"{count} {state}" for state, count in self.skipped.items())
        hosts = Counter(unit.host for unit in self.units if unit.kind == "session")
        by_host = ", ".join(f"{host} {count}" for host, count in sorted(hosts.items()) if host)
        git_documents = sum(1 for unit in self.units if unit.kind == "git" and unit.state == "send")
        lines = [
            f"seeding {self.scope} (bank {self.bank_id}, tags {', '.join(self.tags)}):",
            f"  sessions: {self.sessions} to send ({self.requests} requests)"
            + (f"; skipped: {skipped}" if skipped else "")
            + (f"; found: {by_host}" if by_host else ""),
        ]
        if self.other_locations:
            lines.append(f"  left alone: {self.other_locations} sessions of other locations")
        lines.append(f"  git: {self.commits} commits in {git_documents} documents")
        if self.git_error:
            lines.append(f"  git: not read ({self.git_error})")
        lines.append(
            f"  to send: {self.items} items, {self.characters:,} characters, "
            f"~{self.estimated_tokens:,} LLM tokens for Hindsight to extract them (estimated)"
        )
        for problem, count in sorted(self.problems.items()):
            lines.append(f"  problem: {count} x {problem}")
        for example in self.examples[:3]:
            lines.append(f"    e.g. {example}")
        if self.server_error:
            lines.append(f"  Hindsight not asked what it already holds: {self.server_error}")
        return lines

    def outcome_line(self) -> str:
        """What became of the plan."""
        if self.applied:
            return (
                f"queued {self.queued} item(s), {self.queued_characters:,} characters; "
                "the outbox delivers them"
            )
        if not self.items:
            return "nothing to send"
        if self.declined:
            return "nothing was sent"
        return "dry run: nothing was sent"

    def render(self) -> str:
        return "\n".join([*self.plan_lines(), self.outcome_line()])


async def seed_scope(context: SeedingContext, args: SeedArgs) -> ScopeSeedResult:
    """Plan; with ``apply`` (and the adapter's approval) queue exactly that plan and wake the
    outbox's worker. Safe to run again: what is queued or in Hindsight already is skipped."""
    seeder = await context.engine.seeder()
    plan = await seeder.plan(sessions=context.sessions if args.sessions else (), git=args.git)
    result = ScopeSeedResult.of_plan(plan)
    if not args.apply or not plan.items:
        return result
    if context.approve is not None and not context.approve(result):
        return result.model_copy(update={"declined": True})
    done = await seeder.apply(plan, context.progress)
    context.engine.wake_worker()
    return result.model_copy(
        update={
            "applied": True,
            "queued": done.items,
            "queued_characters": done.characters,
            "queued_keys": list(done.keys),
        }
    )


SEED = Operation(
    "seed",
    "seed the registered scope from earlier sessions and the git history (plan first)",
    SeedArgs,
    ScopeSeedResult,
    seed_scope,
)
