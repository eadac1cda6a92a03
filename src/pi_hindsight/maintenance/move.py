"""Move or re-tag a scope's memories (R-SCOPE-10): split and merge, dry run first, resumable.

A scope is (bank, exact tag set). A move takes a scope's documents — all of them (merge), or a
subset chosen by document ids or an id prefix (split) — to another (bank', tags'):

- **Same bank** (re-tag): each document is re-tagged in place (``PATCH …/documents/{id}``). Its
  facts keep their ids and text and take the new tags in the same transaction.
- **Another bank** (transfer): the documents are exported and imported into the target bank
  (merge mode, an id that exists there is never overwritten), re-tagged there, checked (same
  content hash, same number of facts, the target tags), and only then deleted in the source.
  Facts are copied verbatim and re-embedded, never re-extracted; document ids, text, metadata and
  creation times are kept.

Either way the source scope's observations built from moved facts are deleted and their other
sources re-consolidated (Hindsight does this when a document is re-tagged or deleted), and the
target scope's observations are derived again from the moved facts by Hindsight's consolidation,
asynchronously. Mental models are not moved: they are readings of memory, so the source scope's
models (its startup memo included) are cleared and rebuilt after the move from what it still
holds (a Hindsight refresh that finds no memories keeps the old content, hence the clear). The
plan lists all of this.

Resumable: the plan is recomputed from the server's state on every run, each step is
idempotent (re-tagging to the same tags is a no-op; a document already copied with the same
content hash is only finished — re-tagged, checked, deleted at the source), so running the same
move again after a failure completes it without duplicates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pi_hindsight.backend.interface import MemoryBackend
from pi_hindsight.backend.resources import DocumentInfo, MemoryRecord
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH
from pi_hindsight.errors import BackendServerError, ConfigError, ScopeError
from pi_hindsight.maintenance.common import require_bank

DocumentState = Literal["move", "finish", "done"]
_EXPORT_CHUNK = 50  # document ids per export (they travel in the query string)


@dataclass(frozen=True)
class ScopeRef:
    bank: str
    tags: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.bank} [{', '.join(self.tags)}]"

    def same_as(self, other: ScopeRef) -> bool:
        return self.bank == other.bank and set(self.tags) == set(other.tags)


@dataclass(frozen=True)
class MoveSelection:
    """Which documents: explicit ids, an id prefix, or (neither) all of the scope's."""

    document_ids: tuple[str, ...] = ()
    document_prefix: str | None = None

    @property
    def everything(self) -> bool:
        return not self.document_ids and self.document_prefix is None

    def matches(self, document_id: str) -> bool:
        if self.document_ids and document_id in self.document_ids:
            return True
        return self.document_prefix is not None and document_id.startswith(self.document_prefix)


@dataclass(frozen=True)
class DocumentMove:
    """One document of the move. ``move``: to do; ``finish``: already copied to the target bank
    (an earlier run stopped), still to re-tag/check there and delete at the source; ``done``:
    named in the selection and already in the target scope."""

    document_id: str
    state: DocumentState
    fact_ids: tuple[str, ...]  # its facts in the source scope (empty when done)
    memory_unit_count: int
    content_hash: str | None


@dataclass(frozen=True)
class MovePlan:
    json_properties: ClassVar[tuple[str, ...]] = ("can_apply", "document_count", "fact_count")

    source: ScopeRef
    target: ScopeRef
    selection: MoveSelection
    method: Literal["retag", "transfer"]
    documents: tuple[DocumentMove, ...]
    observations: tuple[str, ...]  # source observations built from moved facts: deleted
    mental_models: tuple[str, ...]  # the source scope's mental models: not moved
    blockers: tuple[str, ...]  # why it cannot be applied as is
    notes: tuple[str, ...]

    @property
    def pending(self) -> tuple[DocumentMove, ...]:
        return tuple(doc for doc in self.documents if doc.state != "done")

    @property
    def can_apply(self) -> bool:
        return not self.blockers

    @property
    def document_count(self) -> int:
        return len(self.pending)

    @property
    def fact_count(self) -> int:
        return sum(len(doc.fact_ids) for doc in self.pending)


@dataclass(frozen=True)
class MoveResult:
    plan: MovePlan  # the plan this run computed (and, when applied, carried out)
    applied: bool
    copied: tuple[str, ...] = ()  # documents imported into the target bank
    retagged: tuple[str, ...] = ()  # documents given the target tags (in place or in the target)
    deleted: tuple[str, ...] = ()  # source documents deleted after the target was checked
    facts_in_target: int = 0  # facts of the moved documents now in the target scope
    observations_invalidated: tuple[str, ...] = ()  # planned observations gone from the source
    operation_ids: tuple[str, ...] = ()  # export and import operations
    refreshes: tuple[str, ...] = ()  # refresh operations of the source scope's mental models


def _check_scopes(source: ScopeRef, target: ScopeRef) -> None:
    if not source.tags or not target.tags:
        raise ConfigError(
            "both scopes need tags: untagged memories belong to no scope",
            hint="give the target scope's exact tags",
        )
    if "{session}" in source.bank or "{session}" in target.bank:
        raise ConfigError("per-session banks cannot be moved by scope", hint="name the bank")
    if source.same_as(target):
        raise ConfigError(
            f"source and target are the same scope ({source.describe()})",
            hint="give another target bank or other target tags",
        )


def _group(units: Sequence[MemoryRecord]) -> tuple[dict[str, list[str]], list[MemoryRecord]]:
    facts: dict[str, list[str]] = {}
    observations: list[MemoryRecord] = []
    for unit in units:
        if unit.type == "observation":
            observations.append(unit)
        elif unit.document_id is not None:
            facts.setdefault(unit.document_id, []).append(unit.id)
    return facts, observations


async def plan_move(
    backend: MemoryBackend,
    source: ScopeRef,
    target: ScopeRef,
    selection: MoveSelection = MoveSelection(),
    *,
    timeout: float,
) -> MovePlan:
    """The dry run: exactly what :func:`move_scope` would do now. Changes nothing."""
    _check_scopes(source, target)
    await require_bank(backend, source.bank, timeout=timeout)
    method: Literal["retag", "transfer"] = "retag" if source.bank == target.bank else "transfer"
    blockers: list[str] = []
    if method == "transfer" and not await backend.bank_exists(target.bank, timeout=timeout):
        blockers.append(
            f"the target bank {target.bank!r} does not exist; pi-hindsight never creates banks "
            "silently: register a location that uses it first"
        )
    listed = await backend.list_documents(
        source.bank, tags=source.tags, tags_match=SCOPE_TAGS_MATCH, timeout=timeout
    )
    chosen = [doc for doc in listed if selection.everything or selection.matches(doc.id)]
    units = await backend.list_memories(
        source.bank, tags=source.tags, tags_match=SCOPE_TAGS_MATCH, timeout=timeout, limit=None
    )
    facts, observations = _group(units)
    notes: list[str] = []
    documents: list[DocumentMove] = []
    for doc in chosen:
        state: DocumentState = "move"
        if method == "transfer" and not blockers:
            copy = await backend.get_document(target.bank, doc.id, timeout=timeout)
            ours = copy is not None and set(copy.tags) in (set(source.tags), set(target.tags))
            if copy is not None and ours and copy.content_hash == doc.content_hash:
                state = "finish"  # an earlier run copied it
            elif copy is not None:
                blockers.append(
                    f"document {doc.id!r} already exists in bank {target.bank} with other "
                    "content or another scope's tags; it would not be copied, so it is not moved"
                )
        fact_ids = tuple(sorted(facts.get(doc.id, ())))
        if doc.memory_unit_count != len(fact_ids):
            notes.append(
                f"document {doc.id!r} has {doc.memory_unit_count} memory units, "
                f"{len(fact_ids)} of them with exactly the source tags; all of them move"
            )
        documents.append(
            DocumentMove(doc.id, state, fact_ids, doc.memory_unit_count, doc.content_hash)
        )
    present = {doc.id for doc in chosen}
    for document_id in selection.document_ids:
        if document_id in present:
            continue
        found = await backend.get_document(target.bank, document_id, timeout=timeout)
        if found is not None and set(found.tags) == set(target.tags):
            documents.append(
                DocumentMove(document_id, "done", (), found.memory_unit_count, found.content_hash)
            )
        else:
            blockers.append(f"document {document_id!r} is not in the source scope")
    moved = {fact for doc in documents for fact in doc.fact_ids}
    invalidated = tuple(sorted(o.id for o in observations if moved & set(o.source_memory_ids)))
    models = await backend.list_mental_models(
        source.bank, tags=source.tags, tags_match=SCOPE_TAGS_MATCH, timeout=timeout
    )
    if not any(doc.state != "done" for doc in documents):
        notes.append("nothing to move: no document of the selection is in the source scope")
    return MovePlan(
        source=source,
        target=target,
        selection=selection,
        method=method,
        documents=tuple(documents),
        observations=invalidated,
        mental_models=tuple(sorted(model.id for model in models)),
        blockers=tuple(blockers),
        notes=(*notes, *_standing_notes(method, bool(models))),
    )


def _standing_notes(method: str, has_models: bool) -> tuple[str, ...]:
    notes = [
        "the target scope's observations are derived again from the moved facts by "
        "Hindsight's consolidation, asynchronously (it uses the server's LLM)",
    ]
    if method == "transfer":
        notes.append(
            "facts are copied without re-extraction and re-embedded in the target bank; each "
            "source document is deleted only after the target holds it, checked"
        )
    if has_models:
        notes.append(
            "mental models are not moved: the source scope's models (its startup memo too) are "
            "cleared and rebuilt after the move from what it still holds; create the ones you "
            "need in the target scope"
        )
    notes.append(
        "move while no agent session uses the source scope and its outbox is drained: later "
        "retains of a session go to the scope that session started in"
    )
    return tuple(notes)


async def move_scope(
    backend: MemoryBackend,
    source: ScopeRef,
    target: ScopeRef,
    selection: MoveSelection = MoveSelection(),
    *,
    apply: bool,
    timeout: float,
    operation_timeout: float = 300.0,
) -> MoveResult:
    """Plan the move and, with ``apply=True``, carry it out. Safe to run again after a failure."""
    plan = await plan_move(backend, source, target, selection, timeout=timeout)
    if not apply:
        return MoveResult(plan=plan, applied=False)
    if plan.blockers:
        raise ScopeError(
            "the move cannot be applied: " + "; ".join(plan.blockers),
            hint="see the dry run (`pi-hindsight bank move` without --apply)",
        )
    pending = plan.pending
    copied: list[str] = []
    operations: list[str] = []
    retagged: list[str] = []
    deleted: list[str] = []
    if plan.method == "retag":
        for doc in pending:
            await backend.retag_document(source.bank, doc.document_id, target.tags, timeout=timeout)
            retagged.append(doc.document_id)
    else:
        to_copy = [doc.document_id for doc in pending if doc.state == "move"]
        for start in range(0, len(to_copy), _EXPORT_CHUNK):
            chunk = to_copy[start : start + _EXPORT_CHUNK]
            imported = await _copy(
                backend,
                source.bank,
                target.bank,
                chunk,
                operations,
                timeout=timeout,
                operation_timeout=operation_timeout,
            )
            copied.extend(imported)
        for doc in pending:
            if await _finish_in_target(backend, doc, target, timeout):
                retagged.append(doc.document_id)
            await backend.delete_document(source.bank, doc.document_id, timeout=timeout)
            deleted.append(doc.document_id)
    # The source scope's models (its memo too) still describe what moved: rebuild them from
    # what it still holds. Cleared first: a refresh that finds nothing keeps the old content.
    refreshes = []
    for model_id in plan.mental_models:
        await backend.clear_mental_model(source.bank, model_id, timeout=timeout)
        refreshes.append(
            await backend.refresh_mental_model(source.bank, model_id, full=True, timeout=timeout)
        )
    return MoveResult(
        plan=plan,
        applied=True,
        refreshes=tuple(refreshes),
        copied=tuple(copied),
        retagged=tuple(retagged),
        deleted=tuple(deleted),
        facts_in_target=await _facts_in(backend, target, {d.document_id for d in pending}, timeout),
        observations_invalidated=await _gone(backend, source, plan.observations, timeout),
        operation_ids=tuple(operations),
    )


async def _copy(
    backend: MemoryBackend,
    source_bank: str,
    target_bank: str,
    document_ids: list[str],
    operations: list[str],
    *,
    timeout: float,
    operation_timeout: float,
) -> list[str]:
    """Export ``document_ids`` from the source bank and merge them into the target bank."""
    export_id = await backend.export_documents(source_bank, document_ids, timeout=timeout)
    operations.append(export_id)
    export = await backend.wait_operation(
        source_bank, export_id, timeout=operation_timeout, call_timeout=timeout
    )
    key = export.result_metadata.get("storage_key")
    if not isinstance(key, str):
        raise BackendServerError(
            f"export {export_id} (bank {source_bank}) completed without an archive",
            hint="run the same command again: it resumes where it stopped",
        )
    archive = await backend.download_archive(source_bank, key, timeout=operation_timeout)
    import_id = await backend.import_documents(target_bank, archive, timeout=operation_timeout)
    operations.append(import_id)
    done = await backend.wait_operation(
        target_bank, import_id, timeout=operation_timeout, call_timeout=timeout
    )
    skipped = set(done.result_metadata.get("skipped_document_ids") or ())
    return [document_id for document_id in document_ids if document_id not in skipped]


async def _finish_in_target(
    backend: MemoryBackend, doc: DocumentMove, target: ScopeRef, timeout: float
) -> bool:
    """Give the copy the target tags and check it; True when it had to be re-tagged.

    Raises (and the source stays) unless the target holds the same content with as many facts.
    """
    copy = _checked(doc, await backend.get_document(target.bank, doc.document_id, timeout=timeout))
    if set(copy.tags) == set(target.tags):
        return False
    await backend.retag_document(target.bank, doc.document_id, target.tags, timeout=timeout)
    return True


def _checked(doc: DocumentMove, copy: DocumentInfo | None) -> DocumentInfo:
    """The target's copy of ``doc``, if it holds the same content with as many memory units."""
    if copy is None:
        problem = "is missing"
    elif copy.content_hash != doc.content_hash:
        problem = "has other content"
    elif copy.memory_unit_count != doc.memory_unit_count:
        problem = f"holds {copy.memory_unit_count} memory units, the source {doc.memory_unit_count}"
    else:
        return copy
    raise BackendServerError(
        f"the copy of document {doc.document_id!r} in the target bank {problem}; "
        "the source document is kept",
        hint="run the same command again; if this persists, check the target bank",
    )


async def _facts_in(
    backend: MemoryBackend, scope: ScopeRef, document_ids: set[str], timeout: float
) -> int:
    units = await backend.list_memories(
        scope.bank, tags=scope.tags, tags_match=SCOPE_TAGS_MATCH, timeout=timeout, limit=None
    )
    return sum(
        1 for unit in units if unit.type != "observation" and unit.document_id in document_ids
    )


async def _gone(
    backend: MemoryBackend, scope: ScopeRef, observation_ids: tuple[str, ...], timeout: float
) -> tuple[str, ...]:
    if not observation_ids:
        return ()
    units = await backend.list_memories(
        scope.bank,
        tags=scope.tags,
        tags_match=SCOPE_TAGS_MATCH,
        fact_type="observation",
        timeout=timeout,
        limit=None,
    )
    remaining = {unit.id for unit in units}
    return tuple(oid for oid in observation_ids if oid not in remaining)
