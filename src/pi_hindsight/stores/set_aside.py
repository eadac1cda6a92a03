"""The set-aside record (``<state dir>/set-aside.json``): every store file that was moved out of
the way, until the user acknowledges or restores it.

A store set aside by one process must be reported by every process (each agent session, ``status``,
``outbox status``, ``scope list``), so the event is kept in a small JSON file beside the stores,
never inside one of them: any SQLite store could be the damaged one. The file is owner-only
(0600), rewritten atomically (temporary file + rename) under a lock, and an unreadable record is
itself set aside and the fact recorded in a fresh one. Nothing here raises: a record that cannot
be written is logged, and the set-aside it describes still happened (and is shown by the process
that did it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pi_hindsight.errors import StateError
from pi_hindsight.serialisation import SnakeRecord

logger = logging.getLogger(__name__)

RECORD_FILE_NAME = "set-aside.json"
FORMAT = "pi-hindsight-set-aside/1"

# What each kind of store holds, and what restoring it means (docs/operations.md).
STORE_LABELS = {
    "outbox": "retain outbox",
    "catalog": "scope catalogue",
    "evidence": "evidence ledger",
    "record": "set-aside record",
}


class SetAsideEvent(SnakeRecord):
    """One store file set aside; ``set-aside.json`` holds these in its ``events`` (snake_case)."""

    event_id: str
    store: str  # "outbox", "catalog", "evidence", "record"
    original: str
    moved_to: str
    reason: str
    at: float
    pid: int
    host: str
    acknowledged_at: float | None = None
    restored_at: float | None = None
    restore_note: str | None = None

    @property
    def open(self) -> bool:
        """Still to be reported: neither acknowledged nor restored."""
        return self.acknowledged_at is None and self.restored_at is None

    @property
    def label(self) -> str:
        return STORE_LABELS.get(self.store, self.store)

    def to_json(self) -> dict[str, Any]:
        """As status and ``state list --json`` show it: the record, and what it means."""
        data = self.model_dump(mode="json")
        data["id"] = data.pop("event_id")
        data["when"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.at))
        data["open"] = self.open
        data["next"] = next_step(self)
        data["description"] = describe(self)
        return data


def next_step(event: SetAsideEvent) -> str:
    """The command that deals with ``event``, as told to the user."""
    ident = event.event_id
    if event.store == "outbox":
        return (
            f"`pi-hindsight state restore {ident}` queues its undelivered requests again "
            f"(or `pi-hindsight state acknowledge {ident}` to drop them)"
        )
    if event.store == "catalog":
        return (
            f"`pi-hindsight state restore {ident}` brings its registrations back "
            f"(or `pi-hindsight scope import FILE` from an export), then "
            f"`pi-hindsight state acknowledge {ident}` if anything is left over"
        )
    return f"`pi-hindsight state acknowledge {ident}` once you have looked at it"


def catalog_hint(event: SetAsideEvent) -> str:
    """Why a location may be unregistered after the catalogue was set aside, and the fix."""
    return (
        f"the scope catalogue was set aside as {event.moved_to} ({event.reason}); bring its "
        f"registrations back with `pi-hindsight state restore {event.event_id}` or "
        "`pi-hindsight scope import FILE`"
    )


def describe(event: SetAsideEvent) -> str:
    """One warning line for a person."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event.at))
    return (
        f"the {event.label} {event.original} could not be used ({event.reason}); it was set "
        f"aside as {event.moved_to} at {when} by process {event.pid}. {_consequence(event)} "
        f"Next: {next_step(event)}."
    )


def _consequence(event: SetAsideEvent) -> str:
    if event.store == "outbox":
        return (
            "Requests waiting in it have not been delivered; nothing already in Hindsight is "
            "affected."
        )
    if event.store == "catalog":
        return "Locations registered in it are off until restored."
    if event.store == "evidence":
        return "Earlier evidence records are in it (diagnostics only; memory is unaffected)."
    return "Earlier set-aside reports are in it."


class SetAsideRecord:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / RECORD_FILE_NAME
        self._lock_path = state_dir / f".{RECORD_FILE_NAME}.lock"

    # -- reading ---------------------------------------------------------------------------

    def events(self) -> list[SetAsideEvent]:
        """Every recorded event, oldest first (an unreadable record is set aside first)."""
        try:
            try:
                return self._load()
            except _Unreadable:
                return self._update(lambda events: events)
        except OSError as error:
            logger.warning("set-aside record %s unreadable: %s", self.path, error)
            return []

    def open_events(self, store: str | None = None) -> list[SetAsideEvent]:
        return [e for e in self.events() if e.open and (store is None or e.store == store)]

    def find(self, event_id: str) -> SetAsideEvent:
        """The event whose id is or starts with ``event_id``."""
        matches = [e for e in self.events() if e.event_id.startswith(event_id)] if event_id else []
        if len(matches) != 1:
            what = "no" if not matches else "more than one"
            raise StateError(
                f"{what} set-aside store matches {event_id!r}",
                hint="see `pi-hindsight state list --all` for the ids",
            )
        return matches[0]

    # -- writing ---------------------------------------------------------------------------

    def add(self, *, store: str, original: Path, moved_to: Path, reason: str) -> SetAsideEvent:
        event = SetAsideEvent(
            event_id=uuid.uuid4().hex[:8],
            store=store,
            original=str(original),
            moved_to=str(moved_to),
            reason=reason,
            at=time.time(),
            pid=os.getpid(),
            host=socket.gethostname(),
        )
        try:
            self._update(lambda events: [*events, event])
        except OSError as error:
            logger.warning("set-aside of %s not recorded in %s: %s", original, self.path, error)
        return event

    def acknowledge(self, event_id: str) -> SetAsideEvent:
        target = self.find(event_id)
        return self._change(target, acknowledged_at=target.acknowledged_at or time.time())

    def mark_restored(self, event_id: str, note: str) -> SetAsideEvent:
        target = self.find(event_id)
        return self._change(target, restored_at=time.time(), restore_note=note)

    def _change(self, target: SetAsideEvent, **changes: Any) -> SetAsideEvent:
        changed = target.model_copy(update=changes)
        try:
            self._update(
                lambda events: [changed if e.event_id == target.event_id else e for e in events]
            )
        except OSError as error:
            raise StateError(f"cannot update {self.path}: {error.strerror or error}") from error
        return changed

    # -- the file --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _load(self) -> list[SetAsideEvent]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} file")
            return [SetAsideEvent.load(entry) for entry in data["events"]]
        except (ValueError, KeyError, TypeError) as error:
            raise _Unreadable(str(error)) from error

    def _update(
        self, change: Callable[[list[SetAsideEvent]], list[SetAsideEvent]]
    ) -> list[SetAsideEvent]:
        with self._locked():
            try:
                events = self._load()
            except _Unreadable as error:
                events = [self._set_aside_self(str(error))]
            events = change(events)
            self._write(events)
            return events

    def _set_aside_self(self, reason: str) -> SetAsideEvent:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
        self.path.rename(target)
        logger.warning("set aside %s as %s: %s", self.path, target, reason)
        return SetAsideEvent(
            event_id=uuid.uuid4().hex[:8],
            store="record",
            original=str(self.path),
            moved_to=str(target),
            reason=f"unreadable: {reason}",
            at=time.time(),
            pid=os.getpid(),
            host=socket.gethostname(),
        )

    def _write(self, events: list[SetAsideEvent]) -> None:
        payload = {"format": FORMAT, "events": [event.model_dump(mode="json") for event in events]}
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        temp.replace(self.path)


class _Unreadable(Exception):
    pass
