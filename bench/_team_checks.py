"""The invariants of ``bench/team_load.py``, checked from real data: the server's documents (read
with the official client), each person's evidence ledger and outbox, and what each person saw.

- **exactly once**: each session is one document on the server holding each of its requests'
  tokens exactly once and nothing else; each personal preference is in its owner's User bank
  once; no outbox holds anything pending, awaiting confirmation or dead;
- **nothing crosses**: no delivered text (live, and every evidence body) holds a token of
  another scope or of another person's User bank;
- **outages show**: every request that met an outage failed visibly — its evidence record says
  ``backend_unavailable`` with a reason, a Pi session's status right after says unhealthy with
  the error, the refused person's reason names the refused key, a Claude Code session's first
  failure of an outage shows a system message — each outage was met by at least one request,
  and nobody but the refused person was refused.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hindsight_client_api.api.documents_api import DocumentsApi
from hindsight_client_api.api_client import ApiClient
from hindsight_client_api.configuration import Configuration
from hindsight_client_api.exceptions import ApiException

from _team_drivers import Sent
from _team_world import TOKEN, Ledger, Person
from pi_hindsight.errors import BackendAuthRejected
from pi_hindsight.stores.evidence import EvidenceLedger
from pi_hindsight.stores.evidence.tables import EvidenceDetail


@dataclass
class Check:
    name: str
    problems: list[str] = field(default_factory=list)
    checked: int = 0  # how many items the check looked at (a check of nothing proves nothing)
    passed: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems and self.checked > 0

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checked": self.checked, "problems": self.problems[:20]}


@dataclass(frozen=True)
class Window:
    """An outage: from ``start`` to ``end`` (monotonic), for ``who`` (None: everyone)."""

    kind: str  # "refused key" or "server restart"
    start: float
    end: float
    who: str | None = None

    def covers(self, one: Sent) -> bool:
        mine = self.who is None or self.who == one.person
        return mine and one.started < self.end and one.ended > self.start


async def _bank_documents(base_url: str, key: str, bank: str) -> dict[str, str]:
    """Every document of ``bank``: id -> its original text (empty: no such bank)."""
    configuration = Configuration(host=base_url)
    async with ApiClient(
        configuration, header_name="Authorization", header_value=f"Bearer {key}"
    ) as client:
        api = DocumentsApi(client)
        ids: list[str] = []
        try:
            while True:
                page = await api.list_documents(bank, limit=200, offset=len(ids))
                ids.extend(item.id for item in page.items)
                if not page.items or len(ids) >= page.total:
                    break
        except ApiException as error:
            if error.status == 404:
                return {}
            raise
        found = {}
        for document_id in ids:
            document = await api.get_document(bank, document_id)
            found[document_id] = document.original_text or ""
        return found


def bank_documents(base_url: str, key: str, bank: str) -> dict[str, str]:
    return asyncio.run(_bank_documents(base_url, key, bank))


def evidence(person: Person) -> dict[str, EvidenceDetail]:
    """Every evidence record of ``person`` with its body, by request id."""
    ledger = EvidenceLedger(person.state_dir, retention_days=30.0, cap_bytes=50_000_000)
    try:
        found: dict[str, EvidenceDetail] = {}
        before = None
        while True:
            page = ledger.list(limit=10_000, before=before)
            for record in page.records:
                detail = ledger.show(record.request_id)
                if detail is not None:
                    found[record.request_id] = detail
            if page.next_cursor is None:
                return found
            before = page.next_cursor
    finally:
        ledger.close()


def exactly_once(
    sent: list[Sent],
    project_docs: dict[str, str],
    personal: dict[str, tuple[str, dict[str, str]]],
    outboxes: dict[str, dict[str, Any]],
    ledger: Ledger,
) -> Check:
    """``personal``: person -> (their User bank, its documents)."""
    check = Check("every request retained exactly once")
    by_document: dict[str, list[Sent]] = {}
    for one in sent:
        prefix = "pi-session" if one.host == "pi" else "claude-code-session"
        by_document.setdefault(f"{prefix}-{one.session}", []).append(one)
    for document_id, requests in by_document.items():
        held = Counter(TOKEN.findall(project_docs.get(document_id, "")))
        for one in requests:
            check.checked += 1
            check.passed += held[one.token] == 1
            if held[one.token] != 1:
                check.problems.append(
                    f"{one.request_id} ({one.person}): its token is in {document_id} "
                    f"{held[one.token]} times"
                )
        extra = set(held) - {one.token for one in requests}
        if extra:
            check.problems.append(f"{document_id} holds tokens of other sessions: {sorted(extra)}")
    for document_id in set(project_docs) - set(by_document):
        check.problems.append(f"an unexpected document on the server: {document_id}")
    personal_tokens = {
        value: owner.person for value, owner in ledger.owners.items() if owner.person
    }
    for person, (bank, documents) in personal.items():
        held = Counter(TOKEN.findall("\n".join(documents.values())))
        for value, owner in personal_tokens.items():
            check.checked += owner == person
            expected = 1 if owner == person else 0
            if held[value] != expected:
                check.problems.append(
                    f"the personal preference {value} of {owner} is in {person}'s User bank "
                    f"{bank} {held[value]} times (expected {expected})"
                )
    for person, outbox in outboxes.items():
        if outbox.get("pending") or outbox.get("submitted") or outbox.get("dead"):
            check.problems.append(f"{person}'s outbox is not empty: {outbox}")
    return check


def nothing_crosses(
    sent: list[Sent],
    ledgers: dict[str, dict[str, EvidenceDetail]],
    scope_of: dict[tuple[str, str], str],
    ledger: Ledger,
) -> tuple[Check, int]:
    """``scope_of``: (person, session) -> project id. Returns the check and how many delivered
    texts held at least one token (that the check saw something to refuse)."""
    check = Check("nothing of one person's User bank or one scope delivered to another")
    with_tokens = 0
    texts = [(one.person, one.scope, f"{one.request_id} (live)", one.delivered) for one in sent]
    for person, records in ledgers.items():
        for request_id, detail in records.items():
            session = detail.record.session_id or ""
            scope = scope_of.get((person, session))
            if scope is not None:
                texts.append((person, scope, f"{request_id} (evidence)", detail.body or ""))
    for person, scope, where, text in texts:
        if not text:
            continue
        check.checked += 1
        with_tokens += bool(TOKEN.search(text))
        foreign = ledger.foreign(text, scope, person)
        if foreign:
            check.problems.append(f"{person} in {scope}, {where}: {', '.join(foreign)}")
    return check, with_tokens


def _failed(one: Sent, records: dict[str, EvidenceDetail]) -> bool:
    detail = records.get(one.request_id)
    outcome = one.outcome or (detail.record.outcome if detail else None)
    return outcome == "backend_unavailable"


def outages_show(
    sent: list[Sent], ledgers: dict[str, dict[str, EvidenceDetail]], windows: list[Window]
) -> tuple[Check, dict[str, int]]:
    """Returns the check and, per outage, how many requests met it."""
    check = Check("every outage visible in status and evidence")
    met = {window.kind: 0 for window in windows}
    last_failed: dict[str, bool] = {}
    for one in sorted(sent, key=lambda s: s.started):
        records = ledgers.get(one.person, {})
        detail = records.get(one.request_id)
        failed = _failed(one, records)
        inside = [w for w in windows if w.covers(one)]
        refused = BackendAuthRejected.REFUSED in (one.reason or "") or (
            detail is not None and BackendAuthRejected.REFUSED in (detail.record.reason or "")
        )
        for window in inside:  # a refusal meets the refusal window; anything else the restart
            met[window.kind] += failed and refused == (window.who is not None)
        if refused and not any(w.who == one.person for w in inside):
            check.problems.append(f"{one.request_id}: {one.person} was refused outside the window")
        if not failed:
            last_failed[one.person] = False
            continue
        check.checked += 1
        only_refusal = any(w.who for w in inside) and all(w.who for w in inside)
        problem = _visible(one, detail, refused, only_refusal)
        if one.host == "claude-code" and not last_failed.get(one.person) and not one.notices:
            problem = problem or "the first failure of an outage showed no system message"
        if problem:
            check.problems.append(f"{one.request_id} ({one.person}): {problem}")
        last_failed[one.person] = True
    for kind, count in met.items():
        if count == 0:
            check.problems.append(f"the {kind} was met by no request: nothing was shown of it")
    return check, met


def _visible(one: Sent, detail: EvidenceDetail | None, refused: bool, in_refusal: bool) -> str:
    if detail is None:
        return "no evidence record"
    if detail.record.outcome != "backend_unavailable" or not detail.record.reason:
        return f"evidence says {detail.record.outcome} ({detail.record.reason})"
    if in_refusal and not refused:
        return f"in the refusal window, but the reason does not say so: {detail.record.reason}"
    if one.host == "pi":
        backend = one.backend_after or {}
        if backend.get("healthy") is not False or not backend.get("lastError"):
            return f"the status right after does not show it: {json.dumps(backend)}"
    return ""
