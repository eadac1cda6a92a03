"""A wrong memory, fixed: ``forget`` (delete its source document in Hindsight, dry run first) and
``correct`` (retain a correction note and keep the wrong record out of this scope's deliveries),
and ``corrections`` (the rules in force). Every forget and correct is logged in the catalogue
(who, when, which ids) and counted by ``status``.

Only inside the current scope: a record of another bank, or of this bank with other tags than the
scope's exact set, is refused exactly like an id that does not exist, so nothing about other
scopes leaks. Hindsight has no per-fact delete: its unit of deletion is the document a fact was
extracted from, which can hold much more (a whole session). The dry run therefore names the
document and what else was extracted from it; docs/lifecycle.md says what a delete removes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pi_hindsight.backend import MemoryBackend, MemoryRecord
from pi_hindsight.backend.records import DocumentInfo
from pi_hindsight.engine.memory_block import record_key
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH, Scope
from pi_hindsight.engine.startup_memo import memo_id
from pi_hindsight.errors import BackendError
from pi_hindsight.redacting import redact
from pi_hindsight.stores.corrections import CorrectionRecord
from pi_hindsight.tools import status_memo
from pi_hindsight.tools.context import ToolContext, require_scope
from pi_hindsight.tools.specs import MemoryArgs, ToolInputError, ToolResult, bounded

SHOWN_UNITS = 8  # units listed per document in a dry run
LISTED_UNITS = 200  # units read per document to list them
TEXT_MAX = 300


@dataclass(frozen=True)
class DocumentPlan:
    document_id: str
    info: DocumentInfo | None
    units: tuple[MemoryRecord, ...]

    @property
    def unit_count(self) -> int:
        return max(len(self.units), self.info.memory_unit_count if self.info else 0)


@dataclass(frozen=True)
class ForgetPlan:
    record: MemoryRecord
    documents: tuple[DocumentPlan, ...]


def _short(text: str, limit: int = TEXT_MAX) -> str:
    line = " ".join(redact(text).text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _unknown(record_id: str, scope: Scope) -> ToolInputError:
    return ToolInputError(
        f"{record_id!r} is not a memory of this scope ({scope.scope_id}); use a record id from "
        "recall, a delivered memory block's details or `pi-hindsight evidence show`"
    )


def _in_scope(tags: tuple[str, ...], scope: Scope) -> bool:
    return set(tags) == set(scope.tags)


async def find_record(
    backend: MemoryBackend, scope: Scope, record_id: str, *, timeout: float
) -> MemoryRecord:
    """The record, if it is this scope's (its bank, exactly its tags); else "unknown"."""
    record = await backend.get_memory(scope.bank_id, record_id, timeout=timeout)
    if record is None or not _in_scope(record.tags, scope):
        raise _unknown(record_id, scope)
    return record


async def _source_documents(
    backend: MemoryBackend, scope: Scope, record: MemoryRecord, *, timeout: float
) -> list[str]:
    """The documents a record came from: its own, or (an observation) its sources' documents."""
    if record.document_id:
        return [record.document_id]
    found: list[str] = []
    for source_id in record.source_memory_ids:
        source = await backend.get_memory(scope.bank_id, source_id, timeout=timeout)
        if (
            source is not None
            and _in_scope(source.tags, scope)
            and source.document_id
            and source.document_id not in found
        ):
            found.append(source.document_id)
    return found


async def plan_forget(context: ToolContext, scope: Scope, record_id: str) -> ForgetPlan:
    backend = await context.backend()
    timeout = context.settings.timeout_ms / 1000
    record = await find_record(backend, scope, record_id, timeout=timeout)
    documents: list[DocumentPlan] = []
    for document_id in await _source_documents(backend, scope, record, timeout=timeout):
        info = await backend.get_document(scope.bank_id, document_id, timeout=timeout)
        if info is not None and not _in_scope(info.tags, scope):
            raise _unknown(record_id, scope)  # a document shared with another scope: not ours
        units = await backend.list_memories(
            scope.bank_id,
            tags=scope.tags,
            tags_match=SCOPE_TAGS_MATCH,
            timeout=timeout,
            document_id=document_id,
            limit=LISTED_UNITS,
        )
        documents.append(DocumentPlan(document_id, info, tuple(units)))
    if not documents:
        raise ToolInputError(
            f"record {record_id} has no source document Hindsight could delete (an observation "
            "whose facts are gone); correct it instead: action 'correct'"
        )
    return ForgetPlan(record, tuple(documents))


def describe_forget(plan: ForgetPlan, scope: Scope) -> str:
    record = plan.record
    kind = record.type or "memory"
    lines = [
        f'Forget {kind} {record.id} ("{_short(record.text)}") in scope {scope.scope_id} '
        f"(bank {scope.bank_id})?",
        "Hindsight forgets by source document: this deletes "
        + ("1 document" if len(plan.documents) == 1 else f"{len(plan.documents)} documents")
        + " and everything extracted from it:",
    ]
    for document in plan.documents:
        created = (
            f", created {document.info.created_at[:10]}"
            if document.info and document.info.created_at
            else ""
        )
        lines.append(
            f"- document {document.document_id} ({document.unit_count} memory units{created})"
        )
        for unit in document.units[:SHOWN_UNITS]:
            mark = " ← this one" if unit.id == record.id else ""
            lines.append(f"    - [{unit.type or '?'}] {_short(unit.text, 160)}{mark}")
        if document.unit_count > SHOWN_UNITS:
            lines.append(f"    - … and {document.unit_count - SHOWN_UNITS} more")
    lines.append(
        "Observations built on these facts are deleted with them (Hindsight re-consolidates the "
        "facts that remain); the startup memo is refreshed afterwards. To keep the rest of the "
        "document and only hide this record, use action 'correct' instead."
    )
    return "\n".join(lines)


async def forget(context: ToolContext, args: MemoryArgs) -> ToolResult:
    scope = require_scope(context)
    record_id = args.record_id or ""
    plan = await plan_forget(context, scope, record_id)
    text = describe_forget(plan, scope)
    details: dict[str, object] = {
        "recordId": record_id,
        "scope": scope.scope_id,
        "bankId": scope.bank_id,
        "documents": [
            {"documentId": document.document_id, "memoryUnits": document.unit_count}
            for document in plan.documents
        ],
    }
    if not args.confirm:
        how = f'{{"action": "forget", "recordId": "{record_id}", "confirm": true}}'
        return ToolResult(
            bounded(
                f"{text}\nDRY RUN: nothing was deleted. Show this to the user; if they agree, "
                f"call {how} (command line: `pi-hindsight memory forget {record_id} --apply`)."
            ),
            {**details, "applied": False},
        )
    backend = await context.backend()
    timeout = context.settings.timeout_ms / 1000
    deleted: dict[str, int] = {}
    for document in plan.documents:
        deleted[document.document_id] = await backend.delete_document(
            scope.bank_id, document.document_id, timeout=timeout
        )
    catalog = await context.open_catalog()
    await catalog.log_forget(
        scope.scope_id,
        scope.bank_id,
        record_ids=(record_id,),
        document_ids=tuple(deleted),
        actor=context.host.name,
        detail=f"{sum(deleted.values())} memory units",
    )
    # A refresh that finds no memories keeps the content it has (Hindsight 1.1.0), so the memo
    # is emptied first: it then states only what the refresh finds.
    try:
        await backend.clear_mental_model(scope.bank_id, memo_id(scope), timeout=timeout)
    except BackendError as error:
        if error.status != 404:  # no memo yet: nothing to clear
            raise
    refreshed, operation = await _refresh_memo(context, args, full=True)
    units = sum(deleted.values())
    return ToolResult(
        bounded(
            f"Forgotten: deleted {len(deleted)} document(s) ({', '.join(deleted)}) and their "
            f"{units} memory unit(s) from {scope.scope_id}. {refreshed}"
        ),
        {**details, "applied": True, "deletedUnits": deleted, "memoOperationId": operation},
    )


async def _refresh_memo(
    context: ToolContext, args: MemoryArgs, *, full: bool = False
) -> tuple[str, str | None]:
    """Refresh the startup memo (tools/status_memo.py's path): (what to say, the operation id). A
    failure is said, never fatal. After a forget the refresh is full: a delta refresh only adds
    what is new and could keep stating what was deleted."""
    try:
        result = await status_memo.refresh_memo(context, args, full=full)
    except (BackendError, ToolInputError) as error:
        return (
            f"The startup memo could not be refreshed now ({error}); it may still state it.",
            None,
        )
    operation = result.details.get("operationId")
    return f"Startup memo refresh requested (operation {operation}).", str(operation)


def correction_note(wrong: str, right: str) -> str:
    return (
        f"Correction: {right.strip()}\n"
        f'This corrects an earlier memory that was wrong and is no longer used: "{wrong}"'
    )


async def correct(context: ToolContext, args: MemoryArgs) -> ToolResult:
    scope = require_scope(context)
    record_id = args.record_id or ""
    right = (args.content or "").strip()
    backend = await context.backend()
    timeout = context.settings.timeout_ms / 1000
    record = await find_record(backend, scope, record_id, timeout=timeout)
    wrong = _short(record.text)
    note_id = await context.enqueue_note(
        bank_id=scope.bank_id,
        tags=scope.tags,
        content=correction_note(wrong, right),
        context="a correction of a wrong memory",
        kind="correction",
    )
    catalog = await context.open_catalog()
    await catalog.add_correction(
        CorrectionRecord(
            scope_id=scope.scope_id,
            record_id=record.id,
            text_key=record_key(record.text),
            record_text=wrong,
            correction=_short(right, 2_000),
            note_id=note_id,
            actor=context.host.name,
            created_at=time.time(),
        ),
        bank_id=scope.bank_id,
    )
    refreshed, operation = await _refresh_memo(context, args)
    return ToolResult(
        bounded(
            f'Corrected: record {record.id} ("{wrong}") is no longer delivered in '
            f"{scope.scope_id}; the correction is queued for memory (note {note_id}). "
            f"{refreshed} Lift it with `pi-hindsight memory corrections --remove {record.id}`."
        ),
        {
            "recordId": record.id,
            "noteId": note_id,
            "scope": scope.scope_id,
            "memoOperationId": operation,
        },
    )


async def corrections(context: ToolContext, args: MemoryArgs) -> ToolResult:
    scope = require_scope(context)
    catalog = await context.open_catalog()
    found = await catalog.corrections(scope.scope_id)
    if not found:
        return ToolResult(f"No corrections in force in {scope.scope_id}.", {"corrections": []})
    lines = [f"{len(found)} correction(s) in force in {scope.scope_id}:"]
    for item in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(item.created_at))
        lines.append(
            f'- {item.record_id} ("{item.record_text}") → "{_short(item.correction, 160)}" '
            f"({when}, by {item.actor})"
        )
    return ToolResult(
        bounded("\n".join(lines)),
        {
            "corrections": [
                {
                    "recordId": item.record_id,
                    "recordText": item.record_text,
                    "correction": item.correction,
                    "noteId": item.note_id,
                    "actor": item.actor,
                    "createdAt": item.created_at,
                }
                for item in found
            ]
        },
    )


async def remove_correction(context: ToolContext, record_id: str) -> bool:
    """Lift a correction (the command line's ``corrections --remove``); logged."""
    scope = require_scope(context)
    catalog = await context.open_catalog()
    return await catalog.remove_correction(
        scope.scope_id,
        record_id,
        bank_id=scope.bank_id,
        actor=context.host.name,
    )
