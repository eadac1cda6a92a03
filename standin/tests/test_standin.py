"""The deterministic LLM stand-in: every Hindsight call kind, the Pi role, the wire, the CLI.

Hindsight's requests are made by hindsight_api's own code — its prompt builders, and its real
OpenAI-compatible provider pointed at the stand-in — so a change in Hindsight's prompts breaks a
test here instead of silently turning a request into ``unknown``. Pi's are made by the real Pi.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx
import openai
import pytest
from hindsight_api.config import HindsightConfig, get_config
from hindsight_api.engine.consolidation import consolidator
from hindsight_api.engine.llm_wrapper import LLMProvider
from hindsight_api.engine.reflect import agent, delta_ops, prompts, structured_doc
from hindsight_api.engine.response_models import MemoryFact
from hindsight_api.engine.retain import bank_utils
from hindsight_api.engine.retain import fact_extraction as fe
from hindsight_api.engine.search import think_utils

from pi_hindsight_standin import ScriptError
from pi_hindsight_standin import reflect_role as rr
from pi_hindsight_standin.facts import not_a_fact
from tests.agent_models import AgentStandIn
from tests.plugins.pi_versions import PiInstall

PROJECT_ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def _llm(standin: AgentStandIn) -> LLMProvider:
    """Hindsight's own provider, configured exactly as ``--llm offline`` configures it."""
    return LLMProvider(
        provider="openai",
        api_key="standin",
        base_url=standin.hindsight_base_url,
        model="standin-hindsight",
        max_retries=0,
    )


def _with_llm(standin: AgentStandIn, use: Callable[[LLMProvider], Awaitable[T]]) -> T:
    """Run ``use(llm)`` in a fresh event loop, closing the provider's HTTP client in it."""

    async def main() -> T:
        llm = _llm(standin)
        try:
            return await use(llm)
        finally:
            await llm.cleanup()

    return asyncio.run(main())


def _config(**changes: Any) -> HindsightConfig:
    """Hindsight's resolved default config (what a bank with no overrides gets)."""
    base: HindsightConfig = object.__getattribute__(get_config(), "_config")
    return dataclasses.replace(base, **changes)


def _kinds(standin: AgentStandIn) -> list[str]:
    return [entry["kind"] for entry in standin.requests("hindsight")]


def _http() -> httpx.Client:
    return httpx.Client(timeout=30, trust_env=False)


# -- retain: fact extraction -------------------------------------------------------------


def _extract(
    standin: AgentStandIn, chunk: str, config: HindsightConfig, **kwargs: Any
) -> list[fe.Fact]:
    """Hindsight's per-chunk extraction, run against the stand-in."""
    facts, _usage = _with_llm(
        standin,
        lambda llm: fe._extract_facts_from_chunk(
            chunk=chunk,
            chunk_index=0,
            total_chunks=1,
            event_date=None,
            llm_config=llm,
            config=config,
            **{"context": "", **kwargs},
        ),
    )
    return cast(list[fe.Fact], facts)  # annotated as dicts upstream; they are Fact models


CHUNK = (
    "Alice moved to Berlin in 2021. She works at Acme Corp as a data engineer; "
    "her team deploys with Kubernetes.\n\nThanks!"
)
EXPECTED = [
    "Alice moved to Berlin in 2021.",
    "She works at Acme Corp as a data engineer",
    "her team deploys with Kubernetes.",
]
SCAFFOLDING = [
    "Extract",
    "Chunk:",
    "Event Date",
    "Context",
    "quarterly planning call",
    "Metadata",
    "slack",
    "Narrator",
    "Athena",
    "FOCUS",
    "track infrastructure",
]


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"llm_strict_schema_retain": True},
        {"retain_optional_fact_dimensions": True},
        {"retain_extract_causal_links": False},
    ],
    ids=["soft-schema", "strict-schema", "optional-dimensions", "no-causal-links"],
)
def test_extraction_takes_clean_facts_from_the_content_only(
    chat_standin: AgentStandIn, changes: dict[str, Any]
) -> None:
    """Regression: Hindsight's own mock turns prompt scaffolding into facts; this must not."""
    config = _config(retain_mission="Always track infrastructure choices.", **changes)
    facts = _extract(
        chat_standin,
        CHUNK,
        config,
        context="quarterly planning call",
        agent_name="Athena",
        metadata={"source": "slack"},
    )
    assert [f.fact for f in facts] == EXPECTED
    for fact in facts:
        assert not any(word in fact.fact for word in SCAFFOLDING), fact.fact
        assert fact.fact_type == "world"
    assert facts[0].entities == ["Alice", "Berlin"]
    assert "Acme Corp" in (facts[1].entities or [])
    assert _kinds(chat_standin) == ["retain_extract_facts"]
    body = chat_standin.requests("hindsight")[0]["body"]
    expected_format = "json_schema" if changes.get("llm_strict_schema_retain") else "json_object"
    assert body["response_format"]["type"] == expected_format


def test_extraction_of_a_conversation_reads_turn_text_and_speaker(
    chat_standin: AgentStandIn,
) -> None:
    turns = [
        {"role": "user", "content": "Please always run ruff format before committing."},
        {"role": "assistant", "content": "I configured the launcher to bind 127.0.0.1 only."},
    ]
    facts = _extract(chat_standin, json.dumps(turns), _config())
    assert [(f.fact, f.fact_type) for f in facts] == [
        ("Please always run ruff format before committing.", "world"),
        ("I configured the launcher to bind 127.0.0.1 only.", "experience"),
    ]


NOT_FACTS = {
    "Which tool do we use to apply database migrations?": "question",
    "Where do production deploys go": "question",
    "How do I run the integration tests": "question",
    "Is the staging database reset every night": "question",
    "Can you explain mutex vs semaphore?": "question",
    "What should I know before I start working on this project": "question",
    "Hello there!": "greeting",
    "Good morning, hope you are well.": "greeting",
    "Thanks, that works.": "acknowledgement",
    "OK, go ahead": "acknowledgement",
    "Thanks, that is all for now.": "acknowledgement",
    "Sounds good to me.": "acknowledgement",
    "Please add a retry to the uploader.": "request",
    "Could you rename the helper to parse_date.": "question",
    "Kindly rename the helper to parse_date.": "request",
    "Explain mutex vs semaphore in two sentences.": "request",
    "Fix the flaky test in test_upload.py.": "request",
    "Let's look at the failing build first.": "request",
}
FACTS = (
    "We apply database migrations with Alembic.",
    "Please always run ruff format before committing.",
    "Write a regression test for every bug fix.",
    "OK, we deploy on Fridays now.",
    "No, the staging cluster is in Dublin.",
    "Do not push directly to main.",
    "Let's use uv for dependency management from now on.",
    "When a test is flaky we quarantine it within a day.",
    "Which is why the CI images ship Python 3.12 only.",
    "Fine-grained tokens are required for the release bot.",
    "It's the Payments team that owns the billing service.",
)


@pytest.mark.parametrize("sentence", sorted(NOT_FACTS))
def test_questions_greetings_acks_and_requests_are_not_facts(sentence: str) -> None:
    assert not_a_fact(sentence) == NOT_FACTS[sentence]


@pytest.mark.parametrize("sentence", FACTS)
def test_statements_and_standing_rules_are_facts(sentence: str) -> None:
    assert not_a_fact(sentence) is None


def test_extraction_keeps_statements_and_logs_what_it_drops(
    chat_standin: AgentStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    turns = [
        {"role": "user", "content": "Hi! Which tool do we use to apply database migrations?"},
        {"role": "assistant", "content": "We apply migrations with Alembic. Anything else?"},
        {"role": "user", "content": "Thanks, that works. Please add a retry to the uploader."},
        {"role": "user", "content": "Releases ship on Thursdays after the freeze."},
    ]
    with caplog.at_level(logging.INFO, logger="pi_hindsight_standin.hindsight_role"):
        facts = _extract(chat_standin, json.dumps(turns), _config())
        again = _extract(chat_standin, json.dumps(turns), _config())
    assert [(f.fact, f.fact_type) for f in facts] == [
        ("We apply migrations with Alembic.", "experience"),
        ("Releases ship on Thursdays after the freeze.", "world"),
    ]
    assert [f.fact for f in again] == [f.fact for f in facts]  # deterministic
    dropped = [r.getMessage() for r in caplog.records if "not a fact" in r.getMessage()]
    assert any("(question): Which tool do we use" in line for line in dropped)
    assert any("(acknowledgement): Thanks, that works" in line for line in dropped)
    assert any("(request): Please add a retry" in line for line in dropped)


def test_verbatim_extraction_returns_one_metadata_entry(chat_standin: AgentStandIn) -> None:
    facts = _extract(chat_standin, CHUNK, _config(retain_extraction_mode="verbatim"))
    assert len(facts) == 1
    assert "Alice" in (facts[0].entities or [])


# -- consolidation -------------------------------------------------------------------------


def _fact_rows(*texts: str) -> list[dict[str, Any]]:
    return [
        {"id": str(uuid.UUID(int=i + 1)), "text": text, "mentioned_at": "2026-03-07T12:00:00Z"}
        for i, text in enumerate(texts)
    ]


def test_consolidation_creates_observations_and_updates_restated_ones(
    chat_standin: AgentStandIn,
) -> None:
    rows = _fact_rows(
        "Alice moved to Berlin in 2021. | When: 2021",
        "Alice lives in Berlin.",
        "Alice moved to Berlin in 2021.",
    )
    existing = MemoryFact.model_validate(
        {"id": str(uuid.UUID(int=99)), "text": "Alice lives in Berlin.", "fact_type": "observation"}
    )
    result = _with_llm(
        chat_standin,
        lambda llm: consolidator._consolidate_batch_with_llm(llm, rows, [existing], {}, _config()),
    )
    assert not result.failed
    assert [(c.text, c.source_fact_ids) for c in result.creates] == [
        ("Alice moved to Berlin in 2021.", [rows[0]["id"], rows[2]["id"]])
    ]
    assert [(u.observation_id, u.source_fact_ids) for u in result.updates] == [
        (existing.id, [rows[1]["id"]])
    ]
    assert _kinds(chat_standin) == ["consolidation"]


def test_consolidation_respects_the_observation_limit(chat_standin: AgentStandIn) -> None:
    result = _with_llm(
        chat_standin,
        lambda llm: consolidator._consolidate_batch_with_llm(
            llm,
            _fact_rows("Bob owns a red bicycle."),
            [],
            {},
            _config(),
            remaining_observation_slots=0,
            max_observations_per_scope=3,
        ),
    )
    assert not result.failed
    assert result.creates == []


@pytest.mark.parametrize(
    ("new", "existing", "action"),
    [
        ("Alice lives in Berlin.", "alice lives in Berlin", "merge"),
        ("Alice lives in Berlin.", "Alice lives in Munich.", "keep"),
    ],
)
def test_dedup_merges_only_the_same_statement(
    chat_standin: AgentStandIn, new: str, existing: str, action: str
) -> None:
    prompt = consolidator._DEDUP_PROMPT.format(new=new, existing=existing)
    result = _with_llm(
        chat_standin,
        lambda llm: llm.call(
            messages=[{"role": "user", "content": prompt}],
            response_format=consolidator._DedupDecision,
            scope="consolidation_dedup",
        ),
    )
    decision = consolidator._dedup_decision_from_response(result.content)
    assert decision.action == action
    assert _kinds(chat_standin) == ["consolidation_dedup"]


# -- reflect and mental-model refresh ----------------------------------------------------

MEMORIES = [
    {"id": str(uuid.UUID(int=1)), "text": "Alice moved to Berlin in 2021.", "fact_type": "world"},
    {"id": str(uuid.UUID(int=2)), "text": "Alice works at Acme Corp.", "fact_type": "world"},
]
OBSERVATIONS = [{"id": str(uuid.UUID(int=50)), "text": "Alice lives in Berlin."}]
PAGE = {
    "id": "mm-alice",
    "name": "About Alice",
    "content": "## Facts\n\n- Alice has a dog named Rex.",
    "is_stale": True,
}


def _tools(
    *, memories: list[dict[str, Any]], pages: list[dict[str, Any]] | None = None
) -> dict[str, Callable[..., Awaitable[dict[str, Any]]]]:
    """The agent's tool callbacks (its database side), returning fixed results."""

    async def search_pages(query: str, limit: int) -> dict[str, Any]:
        return {"query": query, "count": len(pages or []), "mental_models": pages or []}

    async def read_pages(ids: list[str], limit: int) -> dict[str, Any]:
        return {"mental_models": [p for p in pages or [] if p["id"] in ids]}

    async def search_observations(query: str, limit: int) -> dict[str, Any]:
        found = OBSERVATIONS if memories else []
        return {"query": query, "count": len(found), "observations": found, "source_facts": {}}

    async def recall(query: str, max_tokens: int, chunk_tokens: int = 1000) -> dict[str, Any]:
        return {"query": query, "memories": memories, "chunks": {}}

    async def expand(ids: list[str], depth: str) -> dict[str, Any]:
        return {"results": [], "count": 0}

    return {
        "search_mental_models_fn": search_pages,
        "read_mental_models_fn": read_pages,
        "search_observations_fn": search_observations,
        "recall_fn": recall,
        "expand_fn": expand,
    }


def _reflect(standin: AgentStandIn, question: str, **kwargs: Any) -> Any:
    memories = kwargs.pop("memories", MEMORIES)
    pages = kwargs.pop("pages", None)
    tools = _tools(memories=memories, pages=pages)
    return _with_llm(
        standin,
        lambda llm: agent.run_reflect_agent(
            llm,
            "bank-1",
            question,
            {"name": "Test bank", "mission": ""},
            search_mental_models_fn=tools["search_mental_models_fn"],
            read_mental_models_fn=tools["read_mental_models_fn"],
            search_observations_fn=tools["search_observations_fn"],
            recall_fn=tools["recall_fn"],
            expand_fn=tools["expand_fn"],
            has_mental_models=pages is not None,
            **kwargs,
        ),
    )


def test_reflect_cites_only_ids_the_tools_returned(chat_standin: AgentStandIn) -> None:
    result = _reflect(chat_standin, "Where does Alice live?", pages=[PAGE])
    assert result.used_memory_ids == [m["id"] for m in MEMORIES]
    assert result.used_observation_ids == [o["id"] for o in OBSERVATIONS]
    assert result.used_mental_model_ids == [PAGE["id"]]
    for text in ["Alice moved to Berlin in 2021.", "Alice lives in Berlin.", "dog named Rex"]:
        assert text in result.text
    assert _kinds(chat_standin) == [
        "reflect_search",  # search_mental_models, forced
        "reflect_search",  # search_observations, forced
        "reflect_search",  # recall, forced
        "reflect_tool_call",  # free turn: answer_ready
        "reflect_done",
    ]
    # Every id the done call cited is an alias the tool results in its own request carried.
    done = chat_standin.requests("hindsight")[-1]["body"]
    shown = " ".join(m["content"] for m in done["messages"] if m["role"] == "tool")
    reply = rr.done_arguments(done, rr.evidence_from_conversation(done))
    cited = reply["memory_ids"] + reply["observation_ids"] + reply["mental_model_ids"]
    assert cited == ["f1", "f2", "o1", "p1"]
    assert all(f'"id": "{alias}"' in shown for alias in cited)


def test_a_question_of_several_parts_is_searched_part_by_part(
    chat_standin: AgentStandIn,
) -> None:
    """Bug: the startup memo's question (several topics in one) went whole into every search;
    one embedding of it is close to no specific fact (0.11 against a deploy fact, under
    Hindsight's 0.3 floor), so the memo stayed empty. A model searches the parts in turn."""
    deploy = {
        "id": str(uuid.UUID(int=7)),
        "text": "Production runs on Zephyr.",
        "fact_type": "world",
    }
    asked: list[str] = []
    tools = _tools(memories=[])

    async def recall(query: str, max_tokens: int, chunk_tokens: int = 1000) -> dict[str, Any]:
        asked.append(query)
        found = [deploy] if query == "Where production is deployed" else []
        return {"query": query, "memories": found, "chunks": {}}

    question = "What should I know first? Where production is deployed; how it is tested."
    result = _with_llm(
        chat_standin,
        lambda llm: agent.run_reflect_agent(
            llm,
            "bank-1",
            question,
            {"name": "Test bank", "mission": ""},
            search_mental_models_fn=tools["search_mental_models_fn"],
            read_mental_models_fn=tools["read_mental_models_fn"],
            search_observations_fn=tools["search_observations_fn"],
            recall_fn=recall,
            expand_fn=tools["expand_fn"],
            has_mental_models=False,
        ),
    )
    assert asked[0] == question  # the forced step: the whole question
    assert asked[1:] == [
        "What should I know first?",
        "Where production is deployed",
        "how it is tested",
    ]
    assert "Production runs on Zephyr." in result.text
    assert rr.topics("Where does Alice live?") == []  # one part: searched once, whole


def test_reflect_with_nothing_found_says_so_and_cites_nothing(chat_standin: AgentStandIn) -> None:
    result = _reflect(chat_standin, "What is Bob's favourite colour?", memories=[])
    assert result.text == rr.NO_ANSWER
    assert result.used_memory_ids == result.used_observation_ids == []


def test_reflect_with_directives_confirms_compliance(chat_standin: AgentStandIn) -> None:
    directives = [{"name": "English", "content": "Always answer in English."}]
    result = _reflect(chat_standin, "Where does Alice live?", directives=directives)
    assert "Alice lives in Berlin." in result.text
    done = chat_standin.requests("hindsight")[-1]["body"]
    assert "directive_compliance" in json.dumps(done["tools"])


def test_refresh_document_holds_the_recalled_facts(chat_standin: AgentStandIn) -> None:
    result = _reflect(chat_standin, "What do we know about Alice?", answer_as_document=True)
    assert result.document is not None
    assert [s.heading for s in result.document.sections] == ["Facts", "Observations"]
    for memory in MEMORIES:
        assert f"- {memory['text']}" in result.text
    assert result.used_memory_ids == [m["id"] for m in MEMORIES]


def test_a_fresh_page_answers_a_refresh_on_its_own(chat_standin: AgentStandIn) -> None:
    fresh = {**PAGE, "is_stale": False}
    result = _reflect(chat_standin, "About Alice", pages=[fresh], answer_as_document=True)
    assert "- Alice has a dog named Rex." in result.text
    assert result.used_mental_model_ids == [PAGE["id"]]
    assert "reflect_tool_call" in _kinds(chat_standin)


def test_synthesis_paths_answer_from_the_rendered_results(chat_standin: AgentStandIn) -> None:
    history = [
        {"tool": "recall", "input": {}, "output": {"memories": [{**MEMORIES[0], "id": "f1"}]}}
    ]
    profile = {"name": "Test bank"}
    question = "Where does Alice live?"
    calls = [
        (
            prompts.build_final_system_prompt(),
            prompts.build_final_prompt(question, history, profile),
        ),
        (prompts.CLAIMS_SYSTEM_PROMPT, prompts.build_chunk_claims_prompt(question, history)),
        (
            prompts.build_final_system_prompt(),
            prompts.build_reduce_prompt(
                question,
                [
                    "- Alice moved to Berlin in 2021. (mentioned_at: unknown; occurred: unknown; "
                    "memory_ids: f1)"
                ],
                profile,
            ),
        ),
        (prompts.ROUND_SEARCH_QUERY_SYSTEM_PROMPT, question),
    ]

    async def ask_each(llm: LLMProvider) -> list[str]:
        return [
            (
                await llm.call(
                    messages=[
                        {"role": "system", "content": system},
                        {"role": "user", "content": user},
                    ],
                    scope="reflect",
                )
            ).content
            for system, user in calls
        ]

    answers = _with_llm(chat_standin, ask_each)
    assert "- Alice moved to Berlin in 2021." in answers[0]
    assert answers[1].startswith("- Alice moved to Berlin in 2021. (mentioned_at:")
    assert "memory_ids: f1" in answers[1]
    assert answers[2].endswith("- Alice moved to Berlin in 2021.")
    assert answers[3] == question
    assert _kinds(chat_standin) == [
        "reflect_final",
        "reflect_final_map",
        "reflect_final_reduce",
        "reflect_round_query",
    ]


def test_structured_output_fills_the_callers_schema(chat_standin: AgentStandIn) -> None:
    schema = {
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "places": {"type": "array", "items": {"type": "string"}},
            "confident": {"type": "boolean"},
        },
        "required": ["summary", "places"],
    }
    answer = "Alice:\n- Alice moved to Berlin in 2021.\n- Alice works at Acme Corp."
    result = _with_llm(
        chat_standin, lambda llm: agent._generate_structured_output(answer, schema, llm, "r1")
    )
    assert result.error is None
    assert result.structured_output == {
        "summary": answer,
        "places": ["Alice moved to Berlin in 2021.", "Alice works at Acme Corp."],
        "confident": False,
    }
    assert _kinds(chat_standin) == ["reflect_structured"]


def test_length_rewrite_keeps_facts_within_the_budget(chat_standin: AgentStandIn) -> None:
    answer = "Based on the retrieved memories:\n\n- Alice moved to Berlin.\n- " + "x " * 400
    text = _with_llm(
        chat_standin, lambda llm: agent._rewrite_to_length_budget(answer, None, 10, llm)
    )
    assert text.applied
    assert text.markdown == "- Alice moved to Berlin."
    document = structured_doc.document_from_sections(
        {"sections": [{"heading": "Facts", "level": 2, "blocks": ["- Alice moved.", "y " * 500]}]}
    )
    rendered = structured_doc.render_document(document)
    shortened = _with_llm(
        chat_standin, lambda llm: agent._rewrite_to_length_budget(rendered, document, 20, llm)
    )
    assert shortened.structure is not None
    assert shortened.markdown == "## Facts\n\n- Alice moved."
    assert _kinds(chat_standin) == ["reflect_rewrite", "reflect_rewrite_document"]


def test_delta_refresh_adds_new_facts_and_retraction_removes_old_ones(
    chat_standin: AgentStandIn,
) -> None:
    document = structured_doc.document_from_sections(
        {"sections": [{"heading": "Facts", "level": 2, "blocks": ["- Alice lives in Berlin."]}]}
    )
    new = [
        {"id": "1", "type": "world", "text": "Alice adopted a dog named Rex."},
        {"id": "2", "type": "world", "text": "Alice lives in Berlin."},
        {"id": "mm-x", "type": "mental-models", "text": "Another page: ## Facts"},
    ]
    ops = _with_llm(
        chat_standin,
        lambda llm: delta_ops.request_delta_operations(
            cast(Any, llm),  # the engine passes its configured wrapper; same call interface
            system_prompt=prompts.STRUCTURED_DELTA_SYSTEM_PROMPT,
            user_prompt=prompts.build_structured_delta_prompt(
                current_document_json=document.model_dump_json(),
                supporting_facts=new,
                source_query="About Alice",
            ),
            scope="mental_model_delta_ops",
            document=document,
            response_format=delta_ops.DeltaOperationList,
            skip_validation=True,
        ),
    )
    updated = delta_ops.apply_operations(document, ops.operations).document
    assert structured_doc.render_document(updated).strip() == (
        "## Facts\n\n- Alice lives in Berlin.\n- Alice adopted a dog named Rex."
    )
    retracted = [{"id": "1", "type": "world", "text": "Alice lives in Berlin."}]
    ops = _with_llm(
        chat_standin,
        lambda llm: delta_ops.request_delta_operations(
            cast(Any, llm),  # the engine passes its configured wrapper; same call interface
            system_prompt=prompts.STRUCTURED_RETRACTION_SYSTEM_PROMPT,
            user_prompt=prompts.build_structured_retraction_prompt(
                current_document_json=updated.model_dump_json(),
                retracted_facts=retracted,
                surviving_facts=[],
                source_query="About Alice",
            ),
            scope="mental_model_retraction_ops",
        ),
    )
    pruned = delta_ops.apply_operations(updated, ops.operations).document
    assert structured_doc.render_document(pruned).strip() == (
        "## Facts\n\n- Alice adopted a dog named Rex."
    )
    assert _kinds(chat_standin) == ["mental_model_delta_ops", "mental_model_retraction_ops"]


def test_small_calls_startup_check_mission_and_think(chat_standin: AgentStandIn) -> None:

    async def calls(llm: LLMProvider) -> tuple[dict[str, str], str]:
        await llm.verify_connection()
        merged = await bank_utils._llm_merge_mission(llm, "I review code.", "I also write docs.")
        return merged, await think_utils.reflect(llm, "Is Berlin nice?", world_facts=["It is."])

    merged, thought = _with_llm(chat_standin, calls)
    assert merged == {"mission": "I review code. I also write docs."}
    assert "Is Berlin nice?" in thought
    assert set(_kinds(chat_standin)) == {"verification", "bank_mission", "memory_think"}


def test_unknown_requests_get_a_harmless_answer_and_a_warning(
    chat_standin: AgentStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"{chat_standin.hindsight_base_url}/chat/completions"
    bodies = [
        {"model": "m", "messages": [{"role": "user", "content": "Tell me a joke."}]},
        {
            "model": "m",
            "messages": [{"role": "user", "content": "Reply in JSON."}],
            "response_format": {"type": "json_object"},
        },
        {
            "model": "m",
            "messages": [{"role": "user", "content": "Call something."}],
            "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {}}}],
        },
    ]
    with caplog.at_level(logging.WARNING, logger="pi_hindsight_standin"), _http() as client:
        replies = [client.post(url, json=body) for body in bodies]
    assert [r.status_code for r in replies] == [200, 200, 200]
    messages = [r.json()["choices"][0]["message"] for r in replies]
    assert messages[0]["content"] == "OK."
    assert json.loads(messages[1]["content"]) == {}
    assert messages[2]["tool_calls"][0]["function"]["name"] == "lookup"
    assert _kinds(chat_standin) == ["unknown"] * 3
    assert sum("unrecognised Hindsight request" in r.message for r in caplog.records) == 3


def test_a_malformed_body_is_refused_and_logged(chat_standin: AgentStandIn) -> None:
    with _http() as client:
        reply = client.post(f"{chat_standin.pi_base_url}/chat/completions", content=b"{nope")
    assert reply.status_code == 400
    assert chat_standin.requests("pi")[0]["kind"] == "invalid"


# -- the Pi role and the wire ----------------------------------------------------------------

SCRIPT = {
    "rules": [
        {"match": "HELLO", "reply": "Hello from the stand-in."},
        {
            "match": "list files",
            "tool_calls": [{"name": "bash", "arguments": {"command": "ls -1"}}],
            "then_reply": "Files: {tool_result}",
        },
        {
            "match": "two steps",
            "steps": [
                [{"name": "read", "arguments": {"path": "a.txt"}}],
                [
                    {"name": "bash", "arguments": {"command": "wc -l a.txt"}},
                    {"name": "bash", "arguments": {"command": "true"}},
                ],
            ],
            "then_reply": "Both steps done.",
        },
    ],
    "default_reply": "Noted.",
}


def _stream(standin: AgentStandIn, messages: list[dict[str, Any]]) -> tuple[str, list[Any], Any]:
    """Stream one Pi-style request through the OpenAI SDK; return text, tool calls, usage."""
    client = openai.OpenAI(base_url=standin.pi_base_url, api_key="x", max_retries=0)
    with client:
        stream = client.chat.completions.create(
            model="local-model",
            messages=cast(Any, messages),
            stream=True,
            stream_options={"include_usage": True},
        )
        text, usage, finish = "", None, None
        calls: dict[int, dict[str, Any]] = {}
        for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                text += choice.delta.content or ""
                for call in choice.delta.tool_calls or []:
                    entry = calls.setdefault(call.index, {"id": None, "name": "", "args": ""})
                    entry["id"] = call.id or entry["id"]
                    if call.function is not None:
                        entry["name"] += call.function.name or ""
                        entry["args"] += call.function.arguments or ""
    parsed = [{**c, "args": json.loads(c["args"])} for _, c in sorted(calls.items())]
    assert finish == ("tool_calls" if parsed else "stop")
    return text, parsed, usage


def test_pi_stream_parses_as_text_then_usage(chat_standin: AgentStandIn) -> None:
    chat_standin.set_script(SCRIPT)
    text, calls, usage = _stream(chat_standin, [{"role": "user", "content": "hello there"}])
    assert (text, calls) == ("Hello from the stand-in.", [])
    assert usage is not None and usage.total_tokens > 0


def test_pi_stream_framing_is_sse_ending_in_done(chat_standin: AgentStandIn) -> None:
    body = {"model": "local-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with _http() as client:
        reply = client.post(f"{chat_standin.pi_base_url}/chat/completions", json=body)
    assert reply.headers["content-type"] == "text/event-stream"
    events = reply.text.split("\n\n")
    assert events[-1] == ""
    assert events[-2] == "data: [DONE]"
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-2]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "Understood."


def test_pi_tool_rules_run_round_by_round(chat_standin: AgentStandIn) -> None:
    chat_standin.set_script(SCRIPT)
    prompt = {"role": "user", "content": [{"type": "text", "text": "Do it in TWO STEPS please"}]}
    memory = {"role": "user", "content": "<hindsight-memory>\nlist files is a past request\n"}
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, prompt, memory]
    _, first, _ = _stream(chat_standin, messages)
    assert [(c["name"], c["args"]) for c in first] == [("read", {"path": "a.txt"})]
    messages += _tool_round(first, "one line")
    _, second, _ = _stream(chat_standin, messages)
    assert [c["args"]["command"] for c in second] == ["wc -l a.txt", "true"]
    assert len({c["id"] for c in first + second}) == 3
    messages += _tool_round(second, "1 a.txt")
    text, calls, _ = _stream(chat_standin, messages)
    assert (text, calls) == ("Both steps done.", [])
    assert [e["kind"] for e in chat_standin.requests("pi")] == [
        "prompt",
        "tool_result",
        "tool_result",
    ]


def _tool_round(calls: list[dict[str, Any]], output: str) -> list[dict[str, Any]]:
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": "{}"}}
            for c in calls
        ],
    }
    results = [{"role": "tool", "tool_call_id": c["id"], "content": output} for c in calls]
    return [assistant, *results]


def test_pi_then_reply_quotes_the_tool_result_and_memory_is_not_a_prompt(
    chat_standin: AgentStandIn,
) -> None:
    chat_standin.set_script(SCRIPT)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "please list files"}]
    _, calls, _ = _stream(chat_standin, messages)
    messages += _tool_round(calls, "a.txt\nb.txt")
    assert _stream(chat_standin, messages)[0] == "Files: a.txt\nb.txt"
    only_memory = [{"role": "user", "content": "  <hindsight-memory>hello</hindsight-memory>"}]
    assert _stream(chat_standin, only_memory)[0] == "Noted."


def test_script_is_replaced_at_run_time_and_bad_scripts_are_refused(
    chat_standin: AgentStandIn, tmp_path: Path
) -> None:
    url = f"{chat_standin.base_url}/_standin/script"
    with _http() as client:
        assert client.put(url, json=SCRIPT).status_code == 200
        refused = client.put(url, json={"rules": [{"match": "x"}]})
        assert refused.status_code == 400
        assert "exactly one of 'reply' or tool calls" in refused.json()["error"]["message"]
        assert client.get(f"{chat_standin.base_url}/_standin/health").json()["status"] == "ok"
    assert _stream(chat_standin, [{"role": "user", "content": "hello"}])[0].startswith("Hello")
    with pytest.raises(ScriptError, match="unknown key"):
        chat_standin.set_script({"rules": [], "colour": "blue"})


def test_every_request_is_logged_for_tests_to_read(chat_standin: AgentStandIn) -> None:
    _stream(chat_standin, [{"role": "user", "content": "first"}])
    _with_llm(chat_standin, lambda llm: llm.verify_connection())
    with _http() as client:
        logged = client.get(f"{chat_standin.base_url}/_standin/requests", params={"role": "pi"})
    assert [e["body"]["messages"][0]["content"] for e in logged.json()] == ["first"]
    assert chat_standin.log.path is not None
    assert chat_standin.log.path.stat().st_mode & 0o077 == 0  # conversations: owner-only
    lines = chat_standin.log.path.read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines]
    keys = {"ts", "role", "path", "kind", "body", "usage"}
    assert [set(e) for e in entries] == [keys] * len(entries)
    assert (entries[0]["role"], entries[0]["path"]) == ("pi", "/pi/v1/chat/completions")
    # The usage each answer reported, as characters / 4 of the messages (deterministic).
    usage = entries[0]["usage"]
    assert usage["prompt_tokens"] == len(json.dumps(entries[0]["body"]["messages"])) // 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert {e["role"] for e in entries} == {"pi", "hindsight"}


def test_same_request_same_bytes(chat_standin: AgentStandIn) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "Say 'ok'"}]}
    with _http() as client:
        for role_url in (chat_standin.hindsight_base_url, chat_standin.pi_base_url):
            url = f"{role_url}/chat/completions"
            first, second = client.post(url, json=body), client.post(url, json=body)
            assert first.content == second.content
            streamed = [client.post(url, json={**body, "stream": True}).content for _ in range(2)]
            assert streamed[0] == streamed[1]


# -- the command line ----------------------------------------------------------------------


#: The stand-in package's own command, and pi-hindsight's thin command that runs it.
STANDIN_COMMAND = ("-m", "pi_hindsight_standin")
CORE_COMMAND = ("-m", "pi_hindsight", "standin")
#: The Pi role, plugged into the stand-in process from outside the package.
PI_ROLE = ("--role", "pi=tests.agent_models.pi_role:PiRole")


def _run_cli(*args: str, command: tuple[str, ...] = STANDIN_COMMAND) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, *command, *PI_ROLE, *args],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize("command", [STANDIN_COMMAND, CORE_COMMAND], ids=["package", "core"])
@pytest.mark.parametrize("stop_with", [signal.SIGTERM, signal.SIGINT])
def test_cli_announces_itself_serves_and_exits_cleanly(
    tmp_path: Path, stop_with: signal.Signals, command: tuple[str, ...]
) -> None:
    ready = tmp_path / "run" / "standin.ready.json"
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    process = _run_cli(
        "--log",
        str(tmp_path / "log.jsonl"),
        "--script",
        str(script),
        "--ready-file",
        str(ready),
        command=command,
    )
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the stand-in did not become ready"
            time.sleep(0.02)
        info = json.loads(ready.read_text(encoding="utf-8"))
        assert info["pid"] == process.pid
        assert info["base_url"].startswith("http://127.0.0.1:")
        body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        with _http() as client:
            reply = client.post(f"{info['base_url']}/pi/v1/chat/completions", json=body)
        assert reply.json()["choices"][0]["message"]["content"] == "Hello from the stand-in."
    finally:
        process.send_signal(stop_with)
        stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert stdout == b""
    assert not ready.exists()
    assert len((tmp_path / "log.jsonl").read_text(encoding="utf-8").splitlines()) == 1


def test_cli_refuses_a_bad_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text('{"rules": [{"match": 3, "reply": "x"}]}', encoding="utf-8")
    process = _run_cli("--script", str(script))
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == 2
    assert b"'match' must be a string" in stderr


# -- the real Pi ------------------------------------------------------------------------------


def _pi(pi_binary: PiInstall, agent_dir: Path, cwd: Path, prompt: str) -> str:
    from tests.plugins.standin import pi_env

    result = subprocess.run(
        pi_binary.argv("-p", prompt),
        cwd=cwd,
        env=pi_env(agent_dir, pi=pi_binary),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _agent_dir(tmp_path: Path, standin: AgentStandIn) -> Path:
    from tests.plugins.standin import write_pi_agent_dir

    return write_pi_agent_dir(tmp_path / "agent", standin)


@pytest.mark.pi
def test_real_pi_prints_a_scripted_reply(
    chat_standin: AgentStandIn, pi_binary: PiInstall, tmp_path: Path
) -> None:
    chat_standin.set_script(SCRIPT)
    agent_dir = _agent_dir(tmp_path, chat_standin)
    assert _pi(pi_binary, agent_dir, tmp_path, "hello").strip() == "Hello from the stand-in."
    (request,) = chat_standin.requests("pi")
    assert request["body"]["stream"] is True
    assert request["body"]["stream_options"] == {"include_usage": True}


@pytest.mark.pi
def test_real_pi_runs_a_tool_call_and_gets_the_follow_up(
    chat_standin: AgentStandIn, pi_binary: PiInstall, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("standin-tool-ok\n", encoding="utf-8")
    chat_standin.set_script(
        {
            "rules": [
                {
                    "match": "show the notes",
                    "tool_calls": [{"name": "bash", "arguments": {"command": "cat notes.txt"}}],
                    "then_reply": "The notes say: {tool_result}",
                }
            ]
        }
    )
    agent_dir = _agent_dir(tmp_path, chat_standin)
    output = _pi(pi_binary, agent_dir, tmp_path, "please show the notes")
    assert output.strip() == "The notes say: standin-tool-ok"
    first, follow_up = chat_standin.requests("pi")
    assert (first["kind"], follow_up["kind"]) == ("prompt", "tool_result")
    tool_message = follow_up["body"]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "standin-tool-ok" in tool_message["content"]
