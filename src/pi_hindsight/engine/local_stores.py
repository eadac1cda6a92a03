"""The engine's local stores — the catalogue, the outbox, the evidence ledger — opened when first
needed, used only on the store thread (``stores/runner.py``), and the one place that reports a
store set aside by this or any process (``set-aside.json``), once per session."""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pi_hindsight.config import EvidenceSettings
from pi_hindsight.engine.types import Notice
from pi_hindsight.errors import StateError
from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.evidence import EVIDENCE_FILE_NAME, EvidenceLedger
from pi_hindsight.stores.outbox import Outbox, OutboxHealth
from pi_hindsight.stores.runner import run_store
from pi_hindsight.stores.set_aside import SetAsideEvent, SetAsideRecord, catalog_hint, describe
from pi_hindsight.stores.sqlite import SetAside

logger = logging.getLogger(__name__)


class LocalState:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.catalog: Catalog | None = None
        self.outbox: Outbox | None = None
        self.evidence: EvidenceLedger | None = None
        self._reported: set[str] = set()  # set-aside events already shown in this session

    async def open_catalog(self) -> Catalog:
        if self.catalog is None:
            self.catalog = await run_store(Catalog, self.state_dir)
        return self.catalog

    async def open_outbox(self) -> Outbox:
        if self.outbox is None:
            self.outbox = await run_store(Outbox, self.state_dir)
        return self.outbox

    async def open_evidence(self, settings: EvidenceSettings) -> EvidenceLedger:
        if self.evidence is None:
            self.evidence = await run_store(
                EvidenceLedger,
                self.state_dir,
                retention_days=settings.retention_days,
                cap_bytes=settings.cap_bytes,
            )
        return self.evidence

    async def outbox_health(self) -> OutboxHealth:
        outbox = await self.open_outbox()
        return await run_store(outbox.health)

    async def retry_dead(self) -> int:
        outbox = await self.open_outbox()
        return await run_store(outbox.retry_dead, None)

    async def seed_delivery(self, keys: Sequence[tuple[str, str]]) -> Counter[str]:
        from pi_hindsight.engine.seeding import delivery_state  # noqa: PLC0415 - on demand

        outbox = await self.open_outbox()
        return await run_store(delivery_state, outbox, keys)

    async def open_for_status(self, evidence: EvidenceSettings) -> None:
        """The outbox, and an evidence ledger only if one exists (read, never created here; a
        damaged one shows as such in the status)."""
        await self.open_outbox()
        if evidence.enabled and (self.state_dir / EVIDENCE_FILE_NAME).exists():
            with contextlib.suppress(StateError):
                await self.open_evidence(evidence)

    async def open_set_asides(self) -> tuple[SetAsideEvent, ...]:
        """Stores set aside by any process and not yet restored or acknowledged."""
        return tuple(await run_store(SetAsideRecord(self.state_dir).open_events))

    async def set_aside_notices(self) -> tuple[tuple[Notice, ...], SetAsideEvent | None]:
        """A warning for every store set aside (by this or any process) and not yet restored or
        acknowledged, each once per session; and the latest such catalogue, if any (it explains
        why a location may look unregistered)."""
        events = tuple(await run_store(SetAsideRecord(self.state_dir).events))
        pending = [event for event in events if event.open]
        notices = [
            Notice.warning(describe(event))
            for event in pending
            if event.event_id not in self._reported
        ]
        self._reported.update(event.event_id for event in pending)
        recorded = {event.event_id for event in events}
        asides: list[SetAside] = [
            store.set_aside
            for store in (self.catalog, self.outbox, self.evidence)
            if store is not None and store.set_aside is not None
        ]
        for aside in asides:
            key = aside.event_id or str(aside.moved_to)
            if key in recorded or key in self._reported:
                continue
            self._reported.add(key)  # the record could not be written: say it here
            notices.append(
                Notice.warning(
                    f"{aside.original} could not be used ({aside.reason}); it was set aside as "
                    f"{aside.moved_to} and a fresh one was created",
                )
            )
        lost = [event for event in pending if event.store == "catalog"]
        return tuple(notices), (lost[-1] if lost else None)

    async def close(self) -> None:
        def close_all() -> None:
            for store in (self.catalog, self.outbox, self.evidence):
                if store is not None:
                    store.close()

        await run_store(close_all)


def with_catalog_hint(off_reason: str, lost: SetAsideEvent | None) -> str:
    """``off_reason`` plus how to get a set-aside catalogue's registrations back."""
    if lost is None:
        return off_reason
    hint = catalog_hint(lost)
    return off_reason if hint in off_reason else f"{off_reason}; {hint}"
