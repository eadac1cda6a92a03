"""Migrating legacy JSONL evidence into the ledger, resumably (R-EVID-7).

The formats accepted are in ``evidence_formats``. Resumption: the cursor (the file's identity and
the byte offset after the last consumed line) is committed in the same transaction as each batch
of rows, so an interrupted migration resumes exactly there; request ids (given, or derived from
the line's bytes) make a replay harmless. A line that cannot be read is counted and reported
with its number, never fatal; an unterminated last line that is not yet valid JSON is left for a
later run (its writer may still be appending).

Originals are never modified or deleted, and their size counts against the cap: when the data
would not fit, the migration stops with :class:`MigrationNoSpace` instead of deleting anything or
raising the cap.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pydantic import Field, computed_field

from pi_hindsight.errors import InputFileError, StateError
from pi_hindsight.legacy.evidence_formats import (
    LEGACY_MAX_DEPTH,
    Bad,
    Skip,
    parse_line,
    parse_object,
)
from pi_hindsight.safe_files import BadJson, loads_line, open_regular
from pi_hindsight.serialisation import Record
from pi_hindsight.stores.evidence import EvidenceLedger, EvidenceSpaceError
from pi_hindsight.stores.evidence.tables import LegacySource, RequestRow, format_bytes

LINE_LIMIT = 16 * 1024 * 1024
DOCUMENT_LIMIT = 64 * 1024 * 1024
BATCH_LINES = 500
BATCH_BYTES = 4 * 1024 * 1024
BAD_LINES_KEPT = 50
_OVERLONG = b"\x00overlong"


class MigrationNoSpace(EvidenceSpaceError):
    """The cap has no room for the rest of a file; what was imported so far stays, resumable."""

    def __init__(self, message: str, *, hint: str, report: MigrationReport) -> None:
        super().__init__(message, hint=hint)
        self.report = report


class MigrationReport(Record):
    path: str
    identity: str
    mode: str  # "lines" (JSONL) or "document" (one JSON document)
    resumed_at_line: int  # 0 when the file was started from the beginning
    next_line: int
    next_offset: int
    size: int
    imported: int  # this run
    duplicates: int  # this run: already in the ledger
    # Everything recorded for this file so far (shown as importedTotal, formats, skipped, bad).
    totals: LegacySource = Field(exclude=True)
    complete: bool
    pending_tail: bool  # an incomplete last line was left for a later run

    @computed_field  # type: ignore[prop-decorator]
    @property
    def imported_total(self) -> int:
        return self.totals.imported

    @computed_field  # type: ignore[prop-decorator]
    @property
    def formats(self) -> dict[str, int]:
        return dict(self.totals.formats)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def skipped(self) -> dict[str, int]:
        return dict(self.totals.skipped)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def bad(self) -> int:
        return self.totals.bad

    @computed_field  # type: ignore[prop-decorator]
    @property
    def bad_lines(self) -> list[dict[str, int | str]]:
        return [{"line": n, "reason": why} for n, why in self.totals.bad_lines]


@dataclass
class _Run:
    """Counters of one run (mutable while reading; kept as a LegacySource)."""

    source: LegacySource
    imported: int = 0
    duplicates: int = 0
    pending_tail: bool = False

    def count(self, result: Skip | Bad, line: int) -> None:
        if isinstance(result, Skip):
            skipped = dict(self.source.skipped)
            skipped[result.reason] = skipped.get(result.reason, 0) + 1
            self.source = self.source.model_copy(update={"skipped": skipped})
        else:
            kept = self.source.bad_lines
            if len(kept) < BAD_LINES_KEPT:
                kept = (*kept, (line, result.reason))
            self.source = self.source.model_copy(
                update={"bad": self.source.bad + 1, "bad_lines": kept}
            )

    def seen(self, fmt: str) -> None:
        formats = dict(self.source.formats)
        formats[fmt] = formats.get(fmt, 0) + 1
        self.source = self.source.model_copy(update={"formats": formats})


def _is_json(raw: bytes) -> bool:
    try:
        loads_line(raw, max_depth=LEGACY_MAX_DEPTH)
    except BadJson:
        return False
    return True


def _document_items(content: bytes) -> list[tuple[object, bytes]] | None:
    """A whole-file JSON document: one object, or a list of objects (each is one record)."""
    try:
        document = loads_line(content, max_depth=LEGACY_MAX_DEPTH + 1)
    except BadJson:
        return None
    items = document if isinstance(document, list) else [document]
    return [(item, json.dumps(item, sort_keys=True).encode()) for item in items]


def _lines(handle: BinaryIO, offset: int, run: _Run) -> Iterator[tuple[bytes, int]]:
    """Complete lines from ``offset`` on, each with the offset after it."""
    while True:
        line = handle.readline(LINE_LIMIT + 1)
        if not line:
            return
        if len(line) > LINE_LIMIT and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):  # skip the rest of an overlong line
                offset += len(line)
                line = handle.readline(LINE_LIMIT)
            offset += len(line)
            yield _OVERLONG, offset
            continue
        if not line.endswith(b"\n") and not _is_json(line):
            run.pending_tail = True  # its writer may still be appending: leave it for later
            return
        offset += len(line)
        yield line, offset


class _Migration:
    def __init__(
        self,
        ledger: EvidenceLedger,
        path: Path,
        handle: BinaryIO,
        size: int,
        progress: Callable[[LegacySource], None] | None,
    ) -> None:
        self.ledger, self.path, self.handle, self.size = ledger, path, handle, size
        self.progress = progress
        head = handle.readline(LINE_LIMIT)
        self.items: list[tuple[object, bytes]] | None = None
        digest = hashlib.sha256(head)
        if head.strip()[:1] in (b"{", b"[") and size <= DOCUMENT_LIMIT and not _is_json(head):
            # Perhaps one pretty-printed document (luxus's last-recall.json); if the whole file
            # is not JSON either, it is JSONL with a damaged first line, read line by line.
            handle.seek(0)
            whole = handle.read()
            self.items = _document_items(whole)
            if self.items is not None:
                digest = hashlib.sha256(whole)
        kind = "jsonl" if self.items is None else "json"
        self.identity = f"{kind}:{digest.hexdigest()[:40]}"
        now = time.time()
        known = ledger.legacy_source(self.identity)
        source = known or LegacySource(
            identity=self.identity,
            path=str(path),
            size=size,
            next_offset=0,
            next_line=0,
            started_at=now,
            updated_at=now,
        )
        if self.items is None and source.next_offset > size:  # truncated and written anew
            source = source.but(next_offset=0, next_line=0, completed_at=None)
        self.run = _Run(source.but(path=str(path), size=size))
        self.committed = self.run.source
        self.resumed_at = source.next_line
        counted = known is not None and (known.next_offset > 0 or known.next_line > 0)
        self.room, self.limit = ledger.legacy_room(0 if counted else size)
        self.not_before = now - ledger.retention_days * 86_400
        self.rows: list[RequestRow] = []
        self.batch_bytes = 0

    def report(self, complete: bool) -> MigrationReport:
        return MigrationReport(
            path=str(self.path),
            identity=self.identity,
            mode="lines" if self.items is None else "document",
            resumed_at_line=self.resumed_at,
            next_line=self.committed.next_line,
            next_offset=self.committed.next_offset,
            size=self.size,
            imported=self.run.imported,
            duplicates=self.run.duplicates,
            totals=self.ledger.legacy_source(self.identity) or self.committed,
            complete=complete,
            pending_tail=self.run.pending_tail,
        )

    def no_space(self, detail: str) -> MigrationNoSpace:
        stats = self.ledger.stats()
        line = self.committed.next_line + 1
        return MigrationNoSpace(
            f"evidence migration of {self.path} stopped at line {line}: {detail}. The evidence "
            f"cap is {format_bytes(self.ledger.cap_bytes)}; kept legacy originals use "
            f"{format_bytes(max(stats.legacy_bytes, self.size))} of it (they count against the "
            f"cap) and the ledger {format_bytes(stats.used_bytes)}. Nothing was deleted and the "
            "cap was not raised.",
            hint="free room by deleting legacy originals you have checked (never done "
            "automatically), lowering evidence.retentionDays, or raising evidence.capBytes; "
            f"then run the same command again: it resumes at line {line}",
            report=self.report(False),
        )

    def take(self, result: RequestRow | Skip | Bad, line: int) -> None:
        if isinstance(result, RequestRow):
            self.run.seen(result.legacy_format or result.source)
            self.rows.append(result)
            self.batch_bytes += len(result.body or "") + 512
        else:
            self.run.count(result, line)

    def full(self, batch_lines: int) -> bool:
        return len(self.rows) >= batch_lines or self.batch_bytes >= BATCH_BYTES

    def commit(self, offset: int, line: int, done: bool) -> None:
        """Rows and cursor in one transaction: a crash before it leaves both as they were."""
        now = time.time()
        source = self.run.source.but(
            next_offset=offset,
            next_line=line,
            updated_at=now,
            completed_at=now if done else None,
        )
        try:
            imported, duplicates = self.ledger.import_legacy_batch(
                source, self.rows, limit_bytes=self.limit
            )
        except EvidenceSpaceError as error:
            self.run.source = self.committed
            raise self.no_space(str(error)) from error
        self.run.source = self.committed = source
        self.run.imported += imported
        self.run.duplicates += duplicates
        self.rows, self.batch_bytes = [], 0
        if self.progress is not None:
            self.progress(self.ledger.legacy_source(self.identity) or source)

    def migrate(self, batch_lines: int) -> MigrationReport:
        if self.room <= 0:
            raise self.no_space("there is no room left under the cap")
        if self.items is not None:
            for index in range(self.run.source.next_line, len(self.items)):
                item, raw = self.items[index]
                self.take(parse_object(item, raw, not_before=self.not_before), index + 1)
                if self.full(batch_lines):
                    self.commit(0, index + 1, done=False)
            self.commit(self.size, len(self.items), done=True)
            return self.report(True)
        line, offset = self.run.source.next_line, self.run.source.next_offset
        self.handle.seek(offset)
        since_commit = 0
        for raw, after in _lines(self.handle, offset, self.run):
            line, offset = line + 1, after
            if raw.strip():
                since_commit += 1
                result: RequestRow | Skip | Bad = Bad(
                    f"line longer than {format_bytes(LINE_LIMIT)}"
                )
                if raw != _OVERLONG:
                    result = parse_line(raw, not_before=self.not_before)
                self.take(result, line)
            if self.full(batch_lines) or since_commit >= 4 * batch_lines:
                self.commit(offset, line, done=False)
                since_commit = 0
        done = not self.run.pending_tail
        self.commit(offset, line, done=done)
        return self.report(done)


def migrate_file(
    ledger: EvidenceLedger,
    path: Path,
    *,
    batch_lines: int = BATCH_LINES,
    progress: Callable[[LegacySource], None] | None = None,
) -> MigrationReport:
    """Import one legacy file (JSONL, or one JSON document), resuming where a previous run
    stopped. ``progress`` is called after each committed batch. Raises
    :class:`MigrationNoSpace` when the cap has no room for more, StateError when unreadable."""
    path = path.expanduser().resolve()
    try:
        # A regular file only: a FIFO, device or directory is refused, never read forever.
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            return _Migration(ledger, path, handle, size, progress).migrate(batch_lines)
    except InputFileError as error:
        raise StateError(f"cannot read legacy evidence: {error}", hint=error.hint) from error
    except OSError as error:
        raise StateError(
            f"cannot read legacy evidence {path}: {error.strerror or error}"
        ) from error
