from __future__ import annotations

import json
from pathlib import Path

from pi_hindsight import redaction_rules
from pi_hindsight.backend.resources import MemoryRecord, RecallScores
from pi_hindsight.engine.memory_block import MessageBuilder, estimate_tokens, record_key
from pi_hindsight.engine.query import build_query, is_trivial
from pi_hindsight.engine.scope import Scope
from pi_hindsight.engine.startup_memo import memo_id
from pi_hindsight.engine.types import (
    DeliveredRecord,
    DeliveryDetails,
    HeldRecord,
    MemoUse,
    Omitted,
)
from pi_hindsight.hosts.pi.session_file import (
    delivered_record_ids,
    memo_delivered,
    read_session_file,
    recent_turns,
    visible_entries,
)
from pi_hindsight.redacting import redact, redact_recalled


def test_trivial_prompts_are_recognised() -> None:
    assert is_trivial("OK!") and is_trivial("  thanks ") and is_trivial("go ahead.")
    assert not is_trivial("ok, now fix the deploy script")


def test_query_puts_the_prompt_first_and_stays_bounded() -> None:
    recent = [("user", "We use Zephyr for prod " * 20), ("assistant", "Noted, Zephyr it is.")]
    query = build_query("How do I deploy?", recent, max_chars=200, context_turns=2)
    assert query.startswith("How do I deploy? Context: ")
    assert len(query) <= 200
    assert (
        build_query("How do I deploy?", recent, max_chars=200, context_turns=0)
        == "How do I deploy?"
    )


def test_memo_ids_are_valid_and_stable() -> None:
    scope = Scope("project:x", "x", "pi-coding", ("project:x",))
    assert memo_id(scope) == memo_id(scope)
    assert memo_id(scope).startswith("pi-memo-") and memo_id(scope) == memo_id(scope).lower()
    assert memo_id(scope) != memo_id(Scope("project:y", "y", "pi-coding", ("project:y",)))


def _record(n: int, text: str) -> MemoryRecord:
    return MemoryRecord(id=f"m{n}", text=text)


def test_sections_respect_their_budgets_and_the_request_ceiling() -> None:
    builder = MessageBuilder(recalled_at="t", ceiling_tokens=700)
    memo = builder.add_memo(
        "memo line. " * 400, refreshed="2026-11-29T10:00:00Z", budget_tokens=200
    )
    project = builder.add_records(
        "Project memory",
        [_record(n, f"project fact {n} " * 6) for n in range(80)],
        kind="project",
        budget_tokens=800,
    )
    user = builder.add_records(
        "User bank",
        [_record(100 + n, f"preference {n} " * 6) for n in range(40)],
        kind="user",
        budget_tokens=400,
    )
    block = builder.build()
    assert block is not None
    assert block.tokens <= 700
    assert memo.trimmed and memo.tokens <= 200
    assert project.omitted_budget > 0
    assert user.tokens == 0 or user.tokens <= 400
    assert estimate_tokens(block.text) == block.tokens
    assert "refreshed 2026-11-29T10:00Z" in block.text


def test_already_delivered_and_duplicate_records_are_left_out_and_counted() -> None:
    builder = MessageBuilder(recalled_at="t", ceiling_tokens=2000)
    report = builder.add_records(
        "Project memory",
        [_record(1, "A fact."), _record(2, "Another fact."), _record(3, "a  FACT.")],
        kind="project",
        budget_tokens=800,
        already_delivered={"m2"},
    )
    assert report.record_ids == ["m1"]
    assert report.omitted_already_delivered == 1 and report.omitted_duplicate == 1


def test_secrets_are_redacted_in_records_and_memo() -> None:
    builder = MessageBuilder(
        recalled_at="t",
        ceiling_tokens=2000,
        redact=lambda text: text.replace("hunter2", "[REDACTED]"),
    )
    builder.add_memo("password hunter2", refreshed=None, budget_tokens=200)
    builder.add_records(
        "Project memory", [_record(1, "the password is hunter2")], kind="project", budget_tokens=400
    )
    block = builder.build()
    assert block is not None and "hunter2" not in block.text and block.text.count("[REDACTED]") == 2


def test_remembered_redaction_follows_the_rules_in_force() -> None:
    """Recalled text is redacted once and remembered, but never under rules no longer in
    force: a config loaded with other rules redacts it anew."""
    text = "ticket TCK-4821 and key sk-ant-api03-" + "Zq8" * 30
    before = redaction_rules.current()
    try:
        assert redact_recalled(text) == redact(text).text == redact_recalled(text)
        assert "TCK-4821" in redact_recalled(text)
        redaction_rules.use(redaction_rules.compile_rules({"ticket": "TCK-[0-9]+"}, []))
        assert redact_recalled(text) == redact(text).text
        assert "[REDACTED:ticket]" in redact_recalled(text) and "TCK-4821" not in redact(text).text
        redaction_rules.use(redaction_rules.compile_rules({}, ["TCK-4821"]))
        assert "TCK-4821" in redact_recalled(text)
        long_text = text + " filler" * 1_000  # too long to remember: redacted every time
        assert redact_recalled(long_text) == redact(long_text).text
    finally:
        redaction_rules.use(before)


def test_delivered_records_are_what_validation_would_make_of_them() -> None:
    """The block builds its records unvalidated (issue 19); each must still be the record that
    validating its values gives, every field set (a field added later must be given too)."""
    fact = MemoryRecord(
        id="f1",
        text="Deploys go to Zephyr.",
        type="world",
        context="release checklist",
        occurred_start="2026-11-29T10:00:00Z",
        document_id="docs/deploy.md",
        chunk_id="c1",
        scores=RecallScores(final=0.9, reranker=0.8, semantic=0.7, keyword=0.2),
    )
    observation = MemoryRecord(id="o1", text="deploys  go to zephyr.", type="observation")
    builder = MessageBuilder(recalled_at="t", ceiling_tokens=2000)
    builder.add_records("Project memory", [observation, fact], kind="project", budget_tokens=400)
    block = builder.build()
    assert block is not None and len(block.records) == 1
    for record in block.records:
        assert record == DeliveredRecord.model_validate(record.model_dump())
        assert record.model_fields_set == set(DeliveredRecord.model_fields)
    assert block.records[0].duplicate_ids == ("f1",) and block.records[0].context == (
        "release checklist"
    )


def test_record_keys_are_the_same_remembered_or_not() -> None:
    """A remembered key is the SHA-256 key the corrections table and session records hold
    (the value pinned here is what every earlier version computed)."""
    short, long_text = "Deploys  go to ZEPHYR.", "Deploys go to Zephyr. " * 400
    assert record_key(short) == record_key("deploys go to zephyr.") == "f501be3ae2524cb8"
    assert record_key(long_text) == record_key(long_text.upper())


def _entry(kind: str, entry_id: str, parent: str | None, **fields: object) -> dict[str, object]:
    return {"type": kind, "id": entry_id, "parentId": parent, **fields}


def test_visible_context_follows_the_leaf_and_the_latest_compaction(tmp_path: Path) -> None:
    memory = {"customType": "hindsight-memory", "content": "x", "display": False}
    entries = [
        _entry("message", "a", None, message={"role": "user", "content": "one"}),
        _entry("custom_message", "b", "a", details={"recordIds": ["m1"]}, **memory),
        _entry(
            "message",
            "c",
            "b",
            message={"role": "assistant", "content": [{"type": "text", "text": "two"}]},
        ),
        _entry("message", "d", "c", message={"role": "user", "content": "three"}),
        _entry(
            "custom_message", "e", "d", details={"recordIds": ["m2"], "memoVersion": "v1"}, **memory
        ),
        _entry("compaction", "f", "e", summary="...", firstKeptEntryId="d"),
        # an abandoned branch from "c"
        _entry("message", "x", "c", message={"role": "user", "content": "branch"}),
        _entry("custom_message", "y", "x", details={"recordIds": ["m9"]}, **memory),
        _entry("message", "g", "f", message={"role": "user", "content": "four\u2028still four"}),
    ]
    path = tmp_path / "session.jsonl"
    header = {"type": "session", "version": 3, "id": "s", "cwd": str(tmp_path)}
    path.write_text(
        "\n".join(json.dumps(item, ensure_ascii=False) for item in [header, *entries]) + "\n"
    )
    session = read_session_file(path)
    assert session is not None and session.cwd == str(tmp_path)
    visible = visible_entries(session.entries)
    assert [entry.entry_id for entry in visible] == ["d", "e", "g"]
    assert delivered_record_ids(visible) == {"m2"}  # m1 was compacted away; m9 is on another branch
    assert memo_delivered(visible) == "v1"
    assert recent_turns(visible, 5) == [("user", "three"), ("user", "four\u2028still four")]


def test_recalled_and_delivered_details_are_what_validation_would_make_of_them() -> None:
    """The details' two steps copy typed values without validating them again (issue 19): the
    result must be the record that validating the same values gives."""
    record = DeliveredRecord(id="m1", key="k1", section="project", scores=RecallScores(final=0.5))
    held = HeldRecord(id="h1", key="k2", section="project", text="t", reason="below")
    details = (
        DeliveryDetails(request_id="r", scope_id="s", bank_id="b")
        .recalled(
            recall_ms=12.5,
            total_ms=14.0,
            bank_ids=("b", "u"),
            memo_status="ready",
            omitted=Omitted(budget=2, relevance=1),
            held=(held,),
        )
        .delivered(
            records=(record,),
            framed=True,
            tokens=42,
            memo=MemoUse("memo-1", "2026-11-29T10:00:00Z"),
            memo_version="v1",
        )
    )
    assert details == DeliveryDetails.model_validate(dict(details.__dict__))
    assert details.record_ids == ("m1",) and details.record_keys == ("k1",)
    assert details.memo == MemoUse("memo-1", "2026-11-29T10:00:00Z")
    assert details.held == (held,) and "held" not in details.to_json()
