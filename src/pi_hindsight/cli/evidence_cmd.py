"""``pi-hindsight evidence …``: what memory each request got, and how far it went."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import click

from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.config import load_config
from pi_hindsight.errors import StateError
from pi_hindsight.hosts.pi.explain_reader import explain
from pi_hindsight.legacy.evidence_import import MigrationNoSpace, MigrationReport, migrate_file
from pi_hindsight.operations.evidence_pages import EVIDENCE_LIST, flag, when
from pi_hindsight.paths import pi_agent_dir
from pi_hindsight.stores.evidence.diagnosis import (
    Explanation,
    delivered_lines,
    held_as_item,
    why_it_came,
)
from pi_hindsight.stores.evidence.ledger import EVIDENCE_FILE_NAME, OUTCOMES, EvidenceLedger
from pi_hindsight.stores.evidence.stats import EvidenceStats
from pi_hindsight.stores.evidence.tables import (
    EvidenceDetail,
    EvidenceRecord,
    LegacySource,
    format_bytes,
    iso,
)

if TYPE_CHECKING:
    from pi_hindsight.engine.recording import LedgerFilters
    from pi_hindsight.stores.evidence.shapes import EvidencePage

_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}


def _ledger(state_dir: Path | None) -> EvidenceLedger:
    """Open (creating if needed) the ledger with the configured retention and cap."""
    directory = resolve_state_dir(state_dir)
    settings = load_config(directory).settings.evidence
    return EvidenceLedger(
        directory, retention_days=settings.retention_days, cap_bytes=settings.cap_bytes
    )


def _open(state_dir: Path | None) -> EvidenceLedger | None:
    """The ledger for a read command, or None when none was ever written (nothing is created)."""
    if not (resolve_state_dir(state_dir) / EVIDENCE_FILE_NAME).exists():
        return None
    return _ledger(state_dir)


def _missing(state_dir: Path | None, as_json: bool) -> None:
    path = resolve_state_dir(state_dir) / EVIDENCE_FILE_NAME
    if as_json:
        echo_json({"path": str(path), "exists": False})
    else:
        click.echo(f"no evidence recorded yet ({path} does not exist)")


def _since(text: str | None) -> float | None:
    """``2d``, ``12h``, ``30m`` ago, or an ISO date/time (UTC unless it says otherwise)."""
    if text is None:
        return None
    match = _SINCE.match(text)
    if match:
        return time.time() - float(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as error:
        raise click.BadParameter(f"{text!r}: use 2d, 12h, 30m or an ISO date/time") from error
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:g} ms"


@click.group()
def evidence() -> None:
    """The evidence ledger: per request, the memory prepared, attached and confirmed."""


@evidence.command()
@state_dir_option
def path(state_dir: Path | None) -> None:
    """Print where evidence.sqlite is (it may not exist yet)."""
    click.echo(str(resolve_state_dir(state_dir) / EVIDENCE_FILE_NAME))


def _print_stats(stats: EvidenceStats, enabled: bool) -> None:
    click.echo(f"path:       {stats.path}")
    if not enabled:
        click.echo("recording:  OFF (evidence.enabled is false); existing records are kept")
    by_outcome = stats.by_outcome or {}
    outcomes = ", ".join(f"{name} {count}" for name, count in sorted(by_outcome.items()))
    click.echo(f"records:    {stats.records}" + (f" ({outcomes})" if outcomes else ""))
    for label, counts in (
        ("attached", stats.delivered_attached or {}),
        ("confirmed", stats.delivered_confirmed or {}),
    ):
        click.echo(
            f"  delivered and {label}: yes {counts['true']}, no {counts['false']}, "
            f"unknown {counts['unknown']}"
        )
    click.echo(f"span:       {when(stats.oldest_at)} … {when(stats.newest_at)} (UTC)")
    click.echo(
        f"size:       {format_bytes(stats.disk_bytes)} on disk (main + WAL), "
        f"{format_bytes(stats.used_bytes)} in use, of {format_bytes(stats.budget_bytes)} "
        f"available under the {format_bytes(stats.cap_bytes)} cap"
    )
    click.echo(f"retention:  {stats.retention_note}")
    if stats.legacy_sources:
        click.echo(
            f"legacy:     {len(stats.legacy_sources)} file(s), originals "
            f"{format_bytes(stats.legacy_bytes)} (kept; they count against the cap)"
        )
        for source in stats.legacy_sources:
            state = "complete" if source.completed_at else f"next line {source.next_line + 1}"
            click.echo(f"  {source.path}: {source.imported} imported, {state}")
    for problem in stats.problems:
        click.echo(f"problem:    {problem}")


@evidence.command()
@state_dir_option
@json_option
def stats(state_dir: Path | None, as_json: bool) -> None:
    """Counts, size on disk, the cap and the retention in force (and whether the cap cut it)."""
    ledger = _open(state_dir)
    if ledger is None:
        _missing(state_dir, as_json)
        return
    try:
        data = ledger.stats()
    finally:
        ledger.close()
    enabled = load_config(resolve_state_dir(state_dir)).settings.evidence.enabled
    if as_json:
        echo_json({**data.to_json(), "enabled": enabled})
    else:
        _print_stats(data, enabled)


evidence.add_command(
    click.Command(
        "status",
        callback=stats.callback,
        params=stats.params,
        help="Same as `stats` (every store has a status command).",
    )
)


@evidence.command("list")
@click.option("--scope", help="Only this scope id.")
@click.option("--session", help="Only this Pi session id.")
@click.option("--since", help="Only since: 2d, 12h, 30m, or an ISO date/time.")
@click.option("--outcome", type=click.Choice(OUTCOMES), help="Only this outcome.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--before", metavar="CURSOR", help="The cursor a previous page printed.")
@state_dir_option
@json_option
def list_(
    scope: str | None,
    session: str | None,
    since: str | None,
    outcome: str | None,
    limit: int,
    before: str | None,
    state_dir: Path | None,
    as_json: bool,
) -> None:
    """Requests, newest first (metadata only; `show` prints a body)."""
    ledger = _open(state_dir)
    if ledger is None:
        _missing(state_dir, as_json)
        return
    args = EVIDENCE_LIST.parse(
        {
            "scope": scope,
            "session": session,
            "since": _since(since),
            "outcome": outcome,
            "limit": limit,
            "before": before,
        }
    )
    try:
        result = asyncio.run(EVIDENCE_LIST(_LedgerPages(ledger), args))
    finally:
        ledger.close()
    if as_json:
        echo_json(result.to_json())
    else:
        click.echo(result.render())


class _LedgerPages:
    """The ledger file as the evidence operations' context (``operations/evidence_pages.py``)."""

    def __init__(self, ledger: EvidenceLedger) -> None:
        self.ledger = ledger

    def evidence_unavailable(self) -> str | None:
        return None

    async def ledger_page(
        self, limit: int, **filters: Unpack[LedgerFilters]
    ) -> tuple[EvidencePage, str]:
        page = self.ledger.list(limit=limit, **filters)
        return page, self.ledger.stats(counts=False).retention_note


def _resolve(ledger: EvidenceLedger, request_id: str) -> str:
    full = ledger.resolve_id(request_id)
    if full is None:
        raise StateError(
            f"no evidence for request {request_id}",
            hint="`pi-hindsight evidence list` shows the recorded ids (a unique prefix of 8+ "
            "characters is enough); older records may have expired",
        )
    return full


def _print_record(record: EvidenceRecord) -> None:
    rows: list[tuple[str, Any]] = [
        ("request", record.request_id),
        (
            "prepared",
            f"{iso(record.prepared_at)} — {record.outcome}"
            + (f" ({record.reason})" if record.reason else ""),
        ),
        ("scope", f"{record.scope_id or '-'}  banks {', '.join(record.bank_ids) or '-'}"),
        ("session", f"{record.session_id or '-'}  entry {record.entry_id or '-'}"),
        ("session file", record.transcript_path or "-"),
        (
            "records",
            f"{record.record_count} delivered, omitted: {_omitted(record)}"
            + (f", ~{record.tokens} tokens" if record.tokens is not None else ""),
        ),
        ("timings", f"recall {_ms(record.recall_ms)}, total {_ms(record.total_ms)}"),
        ("attached", f"{flag(record.attached)}  {iso(record.attached_at) or ''}".rstrip()),
        (
            "confirmed",
            f"{flag(record.confirmed)}  {iso(record.confirmed_at) or ''}"
            + (
                f" payload {record.payload_bytes} bytes" if record.payload_bytes is not None else ""
            ),
        ),
    ]
    rows.append(("retain", _retain(record)))
    if record.memo is not None:
        rows.append(("memo", f"{record.memo.memo_id} refreshed {record.memo.refreshed_at or '?'}"))
    if record.source != "live":
        rows.append(("source", record.source))
    if record.meta:
        rows.append(("metadata", ", ".join(f"{k}={v}" for k, v in record.meta.items())[:300]))
    for label, value in rows:
        click.echo(f"{label + ':':<14}{value}")


def _retain(record: EvidenceRecord) -> str:
    """What retain did with the completed request (issue 21)."""
    if record.retain == "skipped":
        return f"skipped: {record.retain_reason} (not sent: no knowledge in it)"
    if record.retain == "queued":
        return "queued (to the outbox, then Hindsight)"
    return "- (no decision recorded: not completed, retain off, or an older record)"


_OMITTED_LABELS = (
    ("budget", "by the budget"),
    ("inMemo", "in memo"),
    ("alreadyDelivered", "already delivered"),
    ("duplicate", "duplicate"),
    ("relevance", "below relevance"),
    ("corrected", "corrected"),
)


def _omitted(record: EvidenceRecord) -> str:
    by = dict(record.omitted_by) or {"budget": record.omitted}
    parts = [f"{by[key]} {label}" for key, label in _OMITTED_LABELS if by.get(key)]
    return ", ".join(parts) or "none"


def _print_items(detail: EvidenceDetail) -> None:
    """Per delivered record, next to the line the model saw: why recall returned it (type,
    scores, the arms that found it) and what the block did not show (R-RECALL-4)."""
    for section, query in detail.record.queries.items():
        click.echo(f"{'query sent:':<14}{section} {query!r}")
    if detail.items:
        _print_delivered(detail)
    else:
        click.echo(f"{'record ids:':<14}{', '.join(detail.record.record_ids) or '-'}")
    _print_held(detail)


def _print_held(detail: EvidenceDetail) -> None:
    """The records recall returned that delivery held back, under the delivered ones: "why
    didn't it remember X?" shows X and why (issue 17)."""
    if not detail.held:
        return
    click.echo("held back (recalled, never shown to the model):")
    for number, item in enumerate(detail.held, 1):
        text = item.text if len(item.text) <= 100 else item.text[:99] + "…"
        occurred = f"({item.occurred[:10]}) " if item.occurred else ""
        click.echo(f"  {number}. [{item.section}] - {occurred}{text}")
        why = f"{item.reason}: {item.detail}" if item.detail else item.reason
        click.echo(f"       why not: {why}")
        click.echo(f"       recall said: {why_it_came(held_as_item(item))}")
        same = f"  same text as {', '.join(item.duplicate_ids)}" if item.duplicate_ids else ""
        click.echo(f"       id {item.record_id}{same}")


def _print_delivered(detail: EvidenceDetail) -> None:
    click.echo("delivered records (why each came):")
    shown_lines = delivered_lines(detail.body, len(detail.items))
    for number, (item, shown_line) in enumerate(zip(detail.items, shown_lines, strict=True), 1):
        if shown_line is not None:
            text = shown_line if len(shown_line) <= 110 else shown_line[:109] + "…"
            click.echo(f"  {number}. [{item.section}] {text}")
        else:
            click.echo(f"  {number}. [{item.section}] {item.record_id}")
        click.echo(f"       why: {why_it_came(item)}")
        fields = [
            f"id {item.record_id}",
            f"occurred {(item.occurred or '-')[:19]}",
            f"doc {item.document_id or '-'}",
            f"chunk {item.chunk_id or '-'}",
        ]
        line = "       " + "  ".join(fields)
        if item.context:
            line += f"  context {item.context[:120]!r}"
        if item.shown:
            line += f"  (shown: {', '.join(item.shown)})"
        if item.duplicate_ids:
            line += f"  same text as {', '.join(item.duplicate_ids)}"
        click.echo(line)


@evidence.command()
@click.argument("request_id")
@click.option("--no-body", is_flag=True, help="Leave the delivered memory out.")
@state_dir_option
@json_option
def show(request_id: str, no_body: bool, state_dir: Path | None, as_json: bool) -> None:
    """One request: states, timings, record ids, and the memory body delivered."""
    ledger = _open(state_dir)
    if ledger is None:
        _missing(state_dir, as_json)
        return
    try:
        detail = ledger.show(_resolve(ledger, request_id))
    finally:
        ledger.close()
    if detail is None:  # expired between the two calls
        raise StateError(f"no evidence for request {request_id}")
    if as_json:
        data = detail.to_json()
        if no_body:
            data.pop("body")
        echo_json(data)
        return
    _print_record(detail.record)
    _print_items(detail)
    if not no_body:
        click.echo("── delivered memory ──")
        click.echo(detail.body if detail.body is not None else "(nothing was delivered)")


def _print_explanation(result: Explanation) -> None:
    record = result.detail.record
    _print_record(record)
    _print_items(result.detail)
    click.echo("")
    click.echo(f"reading: {result.diagnosis.reading} — {result.diagnosis.summary}")
    for note in result.diagnosis.notes:
        click.echo(f"  note: {note}")
    click.echo("")
    click.echo(f"session file: {result.transcript_path or '-'}")
    if result.session_problem:
        click.echo(f"  ({result.session_problem}; the conversation cannot be shown)")
    trace = result.trace
    if trace is not None:
        user = trace.user_entry
        click.echo(f"── user message (entry {user.entry_id if user else '?'}) ──")
        click.echo(user.text if user else "(not found in this session file)")
    click.echo("── delivered memory (as recorded) ──")
    click.echo(result.detail.body if result.detail.body is not None else "(nothing was delivered)")
    if trace is not None and trace.memory_entry is not None:
        verdict = {
            True: "identical to the recorded body",
            False: "DIFFERS from the recorded body",
            None: "no recorded body to compare",
        }[result.body_matches_session]
        click.echo(
            f"── hidden message in the session (entry {trace.memory_entry.entry_id}): {verdict}"
        )
    if trace is not None:
        click.echo("── reply ──")
        if not trace.replies:
            click.echo("(no reply entries after this request)")
        for entry in trace.replies:
            label = entry.role or entry.kind
            click.echo(f"[{label} {entry.entry_id}] {entry.text}")


@evidence.command("explain")
@click.argument("request_id")
@click.option(
    "--session-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Read the conversation from this Pi session file (default: the one recorded).",
)
@state_dir_option
@json_option
def explain_(
    request_id: str, session_file: Path | None, state_dir: Path | None, as_json: bool
) -> None:
    """Put a request's delivered memory next to its conversation in Pi's session file, to tell
    a search miss from a delivery exclusion from an answer that ignored memory (no scoring)."""
    ledger = _open(state_dir)
    if ledger is None:
        _missing(state_dir, as_json)
        return
    try:
        detail = ledger.show(_resolve(ledger, request_id))
    finally:
        ledger.close()
    if detail is None:
        raise StateError(f"no evidence for request {request_id}")
    result = explain(detail, session_file=session_file, agent_dir=pi_agent_dir())
    if as_json:
        echo_json(result.to_json())
    else:
        _print_explanation(result)


def _report_line(report: MigrationReport) -> str:
    totals = report.totals
    parts = [f"imported {report.imported}"]
    if report.duplicates:
        parts.append(f"{report.duplicates} already present")
    if totals.skipped:
        reasons = "; ".join(f"{why}: {n}" for why, n in totals.skipped.items())
        parts.append(f"skipped {sum(totals.skipped.values())} ({reasons})")
    if totals.bad:
        lines = "; ".join(f"line {line}: {why}" for line, why in totals.bad_lines[:10])
        more = ", …" if totals.bad > min(10, len(totals.bad_lines)) else ""
        parts.append(f"bad {totals.bad} ({lines}{more})")
    state = "complete" if report.complete else f"stopped before line {report.next_line + 1}"
    if report.pending_tail:
        state += "; an unfinished last line was left for a later run"
    resumed = f" (resumed at line {report.resumed_at_line + 1})" if report.resumed_at_line else ""
    return f"{report.path}{resumed}: {', '.join(parts)} — {state}"


@evidence.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@state_dir_option
@json_option
def migrate(paths: tuple[Path, ...], state_dir: Path | None, as_json: bool) -> None:
    """Import legacy JSONL evidence (resumable; originals are kept and count against the cap).

    Accepts the documented pi-hindsight v1 line format, abix5/pi-hindsight's log.jsonl and
    luxus/pi-hindsight's last-recall snapshots (see docs/evidence.md). Run it again after an
    interruption: it continues after the last committed line.
    """
    ledger = _ledger(state_dir)
    reports: list[dict[str, Any]] = []
    failed = False

    def progress(source: LegacySource) -> None:
        if not as_json:
            click.echo(f"  … {source.path}: line {source.next_line}", err=True)

    try:
        for path in paths:
            try:
                report = migrate_file(ledger, path, progress=progress)
            except MigrationNoSpace as error:
                reports.append({**error.report.to_json(), "error": error.describe()})
                if not as_json:
                    click.echo(_report_line(error.report))
                    click.echo(f"error: {error.describe()}", err=True)
                failed = True
                break  # the cap is full: the other files would stop as well
            except StateError as error:
                reports.append({"path": str(path), "error": error.describe()})
                if not as_json:
                    click.echo(f"{path}: error: {error.describe()}", err=True)
                failed = True
                continue
            reports.append(report.to_json())
            if not as_json:
                click.echo(_report_line(report))
    finally:
        ledger.close()
    if as_json:
        echo_json({"reports": reports, "ok": not failed})
    if failed:
        raise SystemExit(1)
