"""The ``/hindsight…`` commands in Pi (R-TOOLS-3): status at a glance, registration (asks first),
templates, recovery for the outbox and the evidence ledger, and seeding (dry run first; offered
right after consent). Each has a CLI twin."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from pi_hindsight.engine.engine import MemoryEngine
from pi_hindsight.engine.types import Notice
from pi_hindsight.errors import NoSession, PiHindsightError, RpcError
from pi_hindsight.hosts.pi.wire import CommandResult, CommandSpecWire, ConfirmRequestWire, Level
from pi_hindsight.paths import pi_agent_dir
from pi_hindsight.rpc.jsonrpc import INVALID_PARAMS

if TYPE_CHECKING:  # seeding and status load on first use: no session's start needs them
    from pi_hindsight.hosts.pi.seed_sessions import PiSessions
    from pi_hindsight.operations.bank_templates import TemplatePreviewResult


def _say(text: str, level: Level = "info", status_line: str | None = None) -> CommandResult:
    return CommandResult(text=text, level=level, status_line=status_line)


def _ask(title: str, message: str, command: str, args: str) -> CommandResult:
    """Ask first: the shim shows the question, then runs ``command`` again with the answer."""
    return CommandResult(
        confirm=ConfirmRequestWire(
            title=title, message=message, method="command", params={"name": command, "args": args}
        )
    )


COMMANDS: dict[str, str] = {
    "hindsight": "Hindsight memory: status at a glance",
    "hindsight:register": "Register this project for Hindsight memory (asks first)",
    "hindsight:templates": "The bundled starter bank templates",
    "hindsight:template-apply": "Apply a bundled template to the selected bank (previews first)",
    "hindsight:outbox": "Retain outbox: status; 'retry' re-queues dead letters",
    "hindsight:evidence": "Evidence ledger: what memory the last requests received",
    "hindsight:seed": "Seed memory from earlier Pi sessions and the git history (dry run first)",
}
# What each command takes after its name (for the README's command reference).
COMMAND_ARGS: dict[str, str] = {
    "hindsight:template-apply": "NAME",
    "hindsight:outbox": "[retry]",
    "hindsight:seed": "[sessions|git]",
}


class PiCommands:
    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self._has_ui = True
        self._handlers: dict[str, Callable[[str, bool | None], Awaitable[CommandResult]]] = {
            "hindsight": self._status,
            "hindsight:register": self._register,
            "hindsight:templates": self._templates,
            "hindsight:template-apply": self._template_apply,
            "hindsight:outbox": self._outbox,
            "hindsight:evidence": self._evidence,
            "hindsight:seed": self._seed,
        }

    def specs(self) -> list[CommandSpecWire]:
        return [CommandSpecWire(name=name, description=text) for name, text in COMMANDS.items()]

    async def run(
        self, name: str, args: str, *, accepted: bool | None, has_ui: bool = True
    ) -> CommandResult:
        handler = self._handlers.get(name)
        if handler is None:
            raise RpcError(INVALID_PARAMS, f"unknown command {name!r}")
        try:
            self._has_ui = has_ui
            return await handler(args.strip(), accepted)
        except NoSession:
            raise
        except PiHindsightError as error:
            return _say(f"/{name} failed: {error.describe()}", "error")

    async def _status(self, args: str, accepted: bool | None) -> CommandResult:
        from pi_hindsight.engine.status import describe_status  # noqa: PLC0415 - on demand

        status = await self.engine.status()
        return _say(describe_status(status), status_line=self.engine.status_line())

    async def _register(self, args: str, accepted: bool | None) -> CommandResult:
        status = await self.engine.status()
        if status.scope is not None:
            return _say(f"already registered: {status.scope.scope_id}", "info")
        if accepted is None:
            proposed = status.proposed_scope
            bank = None if proposed is None else proposed.bank_id
            tags = () if proposed is None else proposed.tags
            return _ask(
                "Register this project for Hindsight memory?",
                f"Project {status.project_id} — bank {bank}, tags {', '.join(tags)}. "
                "Conversations here will be retained and recalled later.",
                "hindsight:register",
                args,
            )
        view = await self.engine.answer_consent(accepted)
        text = "registered; memory is on" if view.enabled else "not registered; memory stays off"
        offer = await seed_offer(self.engine) if view.enabled else None
        if offer is not None:
            text = f"{text}\n{offer.message}"
        return _say(text, "info", status_line=view.status_line)

    async def _templates(self, args: str, accepted: bool | None) -> CommandResult:
        from pi_hindsight.operations.bank_templates import TEMPLATES, TemplatesArgs  # noqa: PLC0415

        listed = await TEMPLATES(self.engine, TemplatesArgs())
        return _say(f"{listed.as_text()}\nApply one with /hindsight:template-apply NAME", "info")

    async def _template_apply(self, args: str, accepted: bool | None) -> CommandResult:
        """Preview (dry run) first; apply only after the user agreed to exactly that preview."""
        from pi_hindsight.operations import bank_templates  # noqa: PLC0415 - rarely used

        name = args.split(maxsplit=1)[0] if args.split() else ""
        if not name:
            return _say(
                "usage: /hindsight:template-apply NAME (see /hindsight:templates)", "warning"
            )
        if self.engine.scope() is None:
            return _say("memory is off here; register the project first", "warning")
        template = bank_templates.TemplateArgs(name=name)
        if accepted is None:
            preview = await bank_templates.TEMPLATE_PREVIEW(self.engine, template)
            return self._template_confirm(preview, name)
        if not accepted:
            return _say(
                f"template {name} not applied (preview only); apply it with "
                f"`pi-hindsight templates apply {name} --apply` or answer yes in Pi"
            )
        applied = await bank_templates.TEMPLATE_APPLY(self.engine, template)
        return _say(applied.as_text(), "info")

    def _template_confirm(self, preview: TemplatePreviewResult, name: str) -> CommandResult:
        if not preview.changes:
            return _say(f"{preview.as_text()}\nNothing to change.", "info")
        if not self._has_ui:  # no dialog possible: show the preview, change nothing
            return _say(
                f"{preview.as_text()}\nNot applied: confirming needs an interactive "
                f"session, or run `pi-hindsight templates apply {name} --apply`."
            )
        return _ask(
            f"Apply template {name} to {preview.target}?",
            preview.as_text(),
            "hindsight:template-apply",
            name,
        )

    async def _outbox(self, args: str, accepted: bool | None) -> CommandResult:
        from pi_hindsight.operations import outbox_upkeep  # noqa: PLC0415 - on demand

        if args == "retry":
            if accepted is None:
                dead = (await self.engine.outbox_health()).dead
                if not dead:
                    return _say("no dead letters to retry", "info")
                return _ask(
                    f"Retry {dead} dead letter(s)?",
                    "They are sent again with their original idempotency keys.",
                    "hindsight:outbox",
                    "retry",
                )
            if not accepted:
                return _say("nothing retried", "info")
            retried = await outbox_upkeep.OUTBOX_RETRY(self.engine, outbox_upkeep.OutboxRetryArgs())
            return _say(retried.render(), "info")
        health = await outbox_upkeep.OUTBOX_STATUS(self.engine, outbox_upkeep.OutboxStatusArgs())
        return _say(health.render(), "warning" if health.dead else "info")

    async def _evidence(self, args: str, accepted: bool | None) -> CommandResult:
        from pi_hindsight.operations import evidence_pages  # noqa: PLC0415 - on demand

        why = self.engine.evidence_unavailable()
        if why is not None:
            return _say(f"no evidence ledger: {why}", "warning")
        page = evidence_pages.EvidenceListArgs(limit=5)
        listed = await evidence_pages.EVIDENCE_LIST(self.engine, page)
        return _say(listed.render(), "info")

    # -- seeding ---------------------------------------------------------------------------

    def _sessions(self) -> PiSessions:
        from pi_hindsight.hosts.pi.seed_sessions import PiSessions  # noqa: PLC0415 - on demand

        info = self.engine.session_info()
        # The asking session is retained live from now on: never seeded as well.
        exclude = () if info is None else (info.session_id,)
        return PiSessions(pi_agent_dir(), exclude=exclude)

    async def _seed(self, args: str, accepted: bool | None) -> CommandResult:
        """The plan first (nothing sent); apply only after the user agreed to it. Applying
        queues the items; the sidecar's retain worker delivers them in the background."""
        from pi_hindsight.operations.scope_seeding import (  # noqa: PLC0415 - on demand
            SEED,
            SeedArgs,
            SeedingContext,
        )

        if accepted is False:
            return _say("seeding cancelled: nothing was sent")
        words = set(args.split())
        seed = SeedArgs(
            sessions="git" not in words or "sessions" in words,
            git="sessions" not in words or "git" in words,
            apply=bool(accepted),
        )
        result = await SEED(SeedingContext(self.engine, (self._sessions(),)), seed)
        if result.applied:
            return _say(f"{result.outcome_line()} in the background (/hindsight:outbox)")
        text = "\n".join(result.plan_lines())
        if not result.items:
            return _say(f"{text}\nNothing to send.")
        if not self._has_ui:
            return _say(
                f"{text}\nNot sent: confirming needs an interactive session, or run "
                "`pi-hindsight scope seed` in this directory."
            )
        return _ask(
            f"Seed memory from {result.sessions} earlier session(s) and "
            f"{result.commits} commit(s)?",
            text,
            "hindsight:seed",
            args,
        )


async def seed_offer(engine: MemoryEngine) -> Notice | None:
    """Right after consent (with a UI only): offer to seed when this location has earlier Pi
    sessions. Never seeds by itself; a failure to count just means no offer."""
    info = engine.session_info()
    if info is None or not info.has_ui or engine.scope() is None:
        return None
    from pi_hindsight.hosts.pi.seed_sessions import earlier_sessions  # noqa: PLC0415

    try:
        seeder = await engine.seeder()
        agent_dir = pi_agent_dir()
        found = await seeder.count_sessions(
            lambda belongs: earlier_sessions(agent_dir, belongs, info.session_id)
        )
    except PiHindsightError:
        return None
    if not found:
        return None
    return Notice.info(
        f"{found} earlier Pi session(s) of this project could be seeded into memory: "
        "/hindsight:seed (shows what would be sent first)",
    )
