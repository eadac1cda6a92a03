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

from pydantic import Field

from pi_hindsight.backend import MemoryBackend, MemoryRecord
from pi_hindsight.backend.resources import DocumentInfo
from pi_hindsight.engine.memory_block import record_key
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH, Scope
from pi_hindsight.engine.startup_memo import memo_id
from pi_hindsight.errors import BackendError
from pi_hindsight.operations.base import (
    Operation,
    OperationArgs,
    OperationContext,
    OperationInputError,
    OperationResult,
    require_scope,
)
from pi_hindsight.operations.memory_status import refresh_memo
from pi_hindsight.redacting import redact
from pi_hindsight.stores.corrections import CorrectionRecord

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


def _unknown(record_id: str, scope: Scope) -> OperationInputError:
    return OperationInputError(
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


async def plan_forget(context: OperationContext, scope: Scope, record_id: str) -> ForgetPlan:
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
        raise OperationInputError(
            f"record {record_id} has no source document Hindsight could delete (an observation "
            "whose facts are gone); correct it instead: action 'correct'"
        )
    return ForgetPlan(record, tuple(documents))


class ForgetArgs(OperationArgs):
    record_id: str = Field(
        min_length=1,
        max_length=200,
        description="a memory record id (from recall, delivered memory or evidence)",
    )
    confirm: bool = Field(
        default=False, description="really delete, after the user saw the dry run"
    )


class ForgetUnit(OperationResult):
    id: str
    type: str | None
    text: str


class ForgetDocument(OperationResult):
    document_id: str
    memory_units: int
    created_at: str | None
    units: list[ForgetUnit] = Field(description=f"the first {SHOWN_UNITS} units")


class ForgetResult(OperationResult):
    record_id: str
    record_type: str | None
    record_text: str
    scope: str
    bank_id: str
    documents: list[ForgetDocument]
    applied: bool
    deleted_units: dict[str, int] | None = None
    memo_operation_id: str | None = None
    memo_note: str | None = None

    def render(self) -> str:
        if self.applied:
            units = sum((self.deleted_units or {}).values())
            deleted = list(self.deleted_units or {})
            return (
                f"Forgotten: deleted {len(deleted)} document(s) ({', '.join(deleted)}) and their "
                f"{units} memory unit(s) from {self.scope}. {self.memo_note}"
            )
        how = f'{{"action": "forget", "recordId": "{self.record_id}", "confirm": true}}'
        return (
            f"{self._plan()}\nDRY RUN: nothing was deleted. Show this to the user; if they agree, "
            f"call {how} (command line: `pi-hindsight memory forget {self.record_id} --apply`)."
        )

    def _plan(self) -> str:
        count = len(self.documents)
        lines = [
            f'Forget {self.record_type or "memory"} {self.record_id} ("{self.record_text}") in '
            f"scope {self.scope} (bank {self.bank_id})?",
            "Hindsight forgets by source document: this deletes "
            + ("1 document" if count == 1 else f"{count} documents")
            + " and everything extracted from it:",
        ]
        for document in self.documents:
            created = f", created {document.created_at[:10]}" if document.created_at else ""
            lines.append(
                f"- document {document.document_id} ({document.memory_units} memory units{created})"
            )
            for unit in document.units:
                mark = " ← this one" if unit.id == self.record_id else ""
                lines.append(f"    - [{unit.type or '?'}] {unit.text}{mark}")
            if document.memory_units > SHOWN_UNITS:
                lines.append(f"    - … and {document.memory_units - SHOWN_UNITS} more")
        lines.append(
            "Observations built on these facts are deleted with them (Hindsight re-consolidates "
            "the facts that remain); the startup memo is refreshed afterwards. To keep the rest "
            "of the document and only hide this record, use action 'correct' instead."
        )
        return "\n".join(lines)


def _planned(plan: ForgetPlan, scope: Scope, record_id: str) -> ForgetResult:
    return ForgetResult(
        record_id=record_id,
        record_type=plan.record.type,
        record_text=_short(plan.record.text),
        scope=scope.scope_id,
        bank_id=scope.bank_id,
        documents=[
            ForgetDocument(
                document_id=document.document_id,
                memory_units=document.unit_count,
                created_at=document.info.created_at if document.info else None,
                units=[
                    ForgetUnit(id=unit.id, type=unit.type, text=_short(unit.text, 160))
                    for unit in document.units[:SHOWN_UNITS]
                ],
            )
            for document in plan.documents
        ],
        applied=False,
    )


async def forget(context: OperationContext, args: ForgetArgs) -> ForgetResult:
    scope = require_scope(context)
    plan = await plan_forget(context, scope, args.record_id)
    planned = _planned(plan, scope, args.record_id)
    if not args.confirm:
        return planned
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
        record_ids=(args.record_id,),
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
    note, operation = await _refresh_memo(context, full=True)
    return planned.model_copy(
        update={
            "applied": True,
            "deleted_units": deleted,
            "memo_operation_id": operation,
            "memo_note": note,
        }
    )


async def _refresh_memo(context: OperationContext, *, full: bool = False) -> tuple[str, str | None]:
    """Refresh the startup memo (memory_status's path): (what to say, the operation id). A
    failure is said, never fatal. After a forget the refresh is full: a delta refresh only adds
    what is new and could keep stating what was deleted."""
    try:
        result = await refresh_memo(context, full=full)
    except (BackendError, OperationInputError) as error:
        return (
            f"The startup memo could not be refreshed now ({error}); it may still state it.",
            None,
        )
    return f"Startup memo refresh requested (operation {result.operation_id}).", result.operation_id


def correction_note(wrong: str, right: str) -> str:
    return (
        f"Correction: {right.strip()}\n"
        f'This corrects an earlier memory that was wrong and is no longer used: "{wrong}"'
    )


class CorrectArgs(OperationArgs):
    record_id: str = Field(
        min_length=1,
        max_length=200,
        description="a memory record id (from recall, delivered memory or evidence)",
    )
    content: str = Field(min_length=1, max_length=8_000, description="what is right instead")


class CorrectResult(OperationResult):
    record_id: str
    record_text: str
    note_id: str
    scope: str
    memo_operation_id: str | None
    memo_note: str

    def render(self) -> str:
        return (
            f'Corrected: record {self.record_id} ("{self.record_text}") is no longer delivered '
            f"in {self.scope}; the correction is queued for memory (note {self.note_id}). "
            f"{self.memo_note} Lift it with "
            f"`pi-hindsight memory corrections --remove {self.record_id}`."
        )


async def correct(context: OperationContext, args: CorrectArgs) -> CorrectResult:
    scope = require_scope(context)
    right = args.content.strip()
    if not right:
        raise OperationInputError("action 'correct' needs 'content': what is right instead")
    backend = await context.backend()
    timeout = context.settings.timeout_ms / 1000
    record = await find_record(backend, scope, args.record_id, timeout=timeout)
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
    note, operation = await _refresh_memo(context)
    return CorrectResult(
        record_id=record.id,
        record_text=wrong,
        note_id=note_id,
        scope=scope.scope_id,
        memo_operation_id=operation,
        memo_note=note,
    )


class CorrectionsArgs(OperationArgs):
    pass


class CorrectionItem(OperationResult):
    record_id: str
    record_text: str
    correction: str
    note_id: str | None
    actor: str
    created_at: float


class CorrectionsResult(OperationResult):
    scope: str
    corrections: list[CorrectionItem]

    def render(self) -> str:
        if not self.corrections:
            return f"No corrections in force in {self.scope}."
        lines = [f"{len(self.corrections)} correction(s) in force in {self.scope}:"]
        for item in self.corrections:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(item.created_at))
            lines.append(
                f'- {item.record_id} ("{item.record_text}") → "{_short(item.correction, 160)}" '
                f"({when}, by {item.actor})"
            )
        return "\n".join(lines)


async def corrections(context: OperationContext, args: CorrectionsArgs) -> CorrectionsResult:
    scope = require_scope(context)
    catalog = await context.open_catalog()
    found = await catalog.corrections(scope.scope_id)
    return CorrectionsResult(
        scope=scope.scope_id,
        corrections=[
            CorrectionItem(
                record_id=item.record_id,
                record_text=item.record_text,
                correction=item.correction,
                note_id=item.note_id,
                actor=item.actor,
                created_at=item.created_at,
            )
            for item in found
        ],
    )


class LiftCorrectionArgs(OperationArgs):
    record_id: str = Field(min_length=1, max_length=200, description="the corrected record's id")


class LiftCorrectionResult(OperationResult):
    record_id: str
    removed: bool

    def render(self) -> str:
        return f"correction of {self.record_id} lifted; it may be delivered again"


async def lift_correction(
    context: OperationContext, args: LiftCorrectionArgs
) -> LiftCorrectionResult:
    """Lift a correction (the command line's ``corrections --remove``); logged."""
    scope = require_scope(context)
    catalog = await context.open_catalog()
    removed = await catalog.remove_correction(
        scope.scope_id, args.record_id, bank_id=scope.bank_id, actor=context.host.name
    )
    if not removed:
        raise OperationInputError(f"no correction of {args.record_id} in this scope")
    return LiftCorrectionResult(record_id=args.record_id, removed=True)


FORGET = Operation(
    "forget",
    "delete the source document of a wrong memory (recordId; a dry run unless confirm is true "
    "— show it to the user first)",
    ForgetArgs,
    ForgetResult,
    forget,
)
CORRECT = Operation(
    "correct",
    "keep a wrong memory (recordId) out of this project's memory and store what is right (content)",
    CorrectArgs,
    CorrectResult,
    correct,
)
CORRECTIONS = Operation(
    "corrections", "the corrections in force", CorrectionsArgs, CorrectionsResult, corrections
)
LIFT_CORRECTION = Operation(
    "lift_correction",
    "lift a correction: the record may be delivered again",
    LiftCorrectionArgs,
    LiftCorrectionResult,
    lift_correction,
)
