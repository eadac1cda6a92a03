"""``state restore``: bring back what a set-aside store still holds (docs/operations.md).

- outbox: its unfinished items (with their batches and idempotency keys) are queued again in the
  live outbox; a running agent session or ``outbox drain`` delivers them.
- catalog: its scopes, locations and declined consents are imported (nothing existing rewritten).
- evidence: nothing to restore (diagnostics); restoring acknowledges it.

Restoring is idempotent and may be repeated (an agent process that still had the old file open may
have written to it after it was set aside).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pi_hindsight.stores.catalog import Catalog
from pi_hindsight.stores.outbox import Outbox
from pi_hindsight.stores.outbox_requeue import SalvagedBatch, SalvagedItem
from pi_hindsight.stores.salvage import Salvage, salvage
from pi_hindsight.stores.set_aside import SetAsideEvent, SetAsideRecord

OUTBOX_TABLES = ("items", "batches")
CATALOG_TABLES = ("scopes", "locations")
# Declines per location since catalogue migration 4 ("location_declines"); per project before.
CATALOG_DECLINES = ("location_declines", "declines")


@dataclass(frozen=True)
class RestoreOutcome:
    event: SetAsideEvent
    recovered: int  # rows read from the set-aside file
    unreadable: int  # rows (at most) that could not be read
    added: int  # what is now in the live store because of this restore
    already_present: int
    note: str  # what happened, for a person
    read_error: str | None


def restore(state_dir: Path, event_id: str) -> RestoreOutcome:
    record = SetAsideRecord(state_dir)
    event = record.find(event_id)
    moved_to = Path(event.moved_to)
    if event.store == "outbox":
        found = salvage(moved_to, OUTBOX_TABLES)
        outbox = Outbox(state_dir)
        try:
            result = outbox.restore(
                [SalvagedItem.load(row) for row in found.rows("items")],
                [SalvagedBatch.load(row) for row in found.rows("batches")],
            )
        finally:
            outbox.close()
        note = (
            f"{result.added} unfinished item(s) queued again ({result.already_present} already "
            f"queued, {result.finished} delivered earlier, {result.unusable} incomplete); "
            "a running agent session or `pi-hindsight outbox drain` delivers them"
        )
        outcome = _outcome(event, found, result.added, result.already_present, note)
    elif event.store == "catalog":
        found = salvage(moved_to, CATALOG_TABLES, optional=CATALOG_DECLINES)
        catalog = Catalog(state_dir)
        try:
            report = catalog.restore(
                found.rows("scopes"),
                found.rows("locations"),
                found.rows("location_declines") + found.rows("declines"),
            )
        finally:
            catalog.close()
        conflicts = f"; conflicts kept as they are: {'; '.join(report.conflicts)}"
        note = (
            f"{report.added_scopes} scope(s) and {report.added_locations} location(s) restored "
            f"({report.unchanged} already registered){conflicts if report.conflicts else ''}"
        )
        added = report.added_scopes + report.added_locations
        outcome = _outcome(event, found, added, report.unchanged, note)
    else:
        note = f"nothing to restore from the {event.label} (diagnostics only); acknowledged"
        record.acknowledge(event.event_id)
        return RestoreOutcome(event, 0, 0, 0, 0, note, None)
    if not found.opened:
        note = f"nothing could be read: {found.error}"
    elif found.problems:
        note = (
            f"{note}; {outcome.unreadable} row(s) could not be read ({'; '.join(found.problems)})"
        )
    if "committed write(s) are missing" in event.reason:
        note = f"{note}; the missing writes themselves could not be recovered"
    changed = record.mark_restored(event.event_id, note)
    return RestoreOutcome(
        changed,
        outcome.recovered,
        outcome.unreadable,
        outcome.added,
        outcome.already_present,
        note,
        outcome.read_error,
    )


def _outcome(
    event: SetAsideEvent, found: Salvage, added: int, present: int, note: str
) -> RestoreOutcome:
    problems = "; ".join(found.problems) or None
    return RestoreOutcome(event, found.recovered, found.unreadable, added, present, note, problems)
