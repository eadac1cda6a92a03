"""The Hindsight role: every LLM call ``hindsight-api`` 1.1.0 makes, recognised and answered.

Hindsight talks to the stand-in as ``HINDSIGHT_API_LLM_PROVIDER=openai``: plain,
non-streaming ``chat.completions`` requests (``OpenAICompatibleLLM``). A request is
classified by the fixed text of the prompt that built it (see :class:`Kind`; the markers
below are copied from ``hindsight_api`` and ``tests/test_standin.py`` checks they still
appear in its prompt builders), then answered by a deterministic handler. A request no
handler recognises gets a harmless answer of the right shape and a warning in the log.

Registered in every stand-in as the role ``hindsight`` (:data:`handle`, served under
``/hindsight/v1``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from pi_hindsight_standin import reflect_role, schemas
from pi_hindsight_standin.facts import not_a_fact
from pi_hindsight_standin.openai_chat import openai_chat_role
from pi_hindsight_standin.roles import JsonObject
from pi_hindsight_standin.text import Segment, entities, normalize, segments, statements
from pi_hindsight_standin.wire import (
    Reply,
    content_text,
    json_reply,
    message_texts,
    messages_of,
    text_reply,
    tool_names,
)

logger = logging.getLogger(__name__)

#: The role's name (its base path) and the model it answers as (what ``--llm offline`` sets).
ROLE = "hindsight"
MODEL = "standin-hindsight"


class Kind(StrEnum):
    """What a Hindsight request is for (its ``scope`` in hindsight_api, mostly)."""

    VERIFICATION = "verification"
    EXTRACT_FACTS = "retain_extract_facts"
    CONSOLIDATION = "consolidation"
    CONSOLIDATION_DEDUP = "consolidation_dedup"
    REFLECT_SEARCH = "reflect_search"
    REFLECT_TOOL_CALL = "reflect_tool_call"
    REFLECT_DONE = "reflect_done"
    REFLECT_FINAL = "reflect_final"
    REFLECT_FINAL_MAP = "reflect_final_map"
    REFLECT_FINAL_REDUCE = "reflect_final_reduce"
    REFLECT_ROUND_QUERY = "reflect_round_query"
    REFLECT_STRUCTURED = "reflect_structured"
    REFLECT_REWRITE = "reflect_rewrite"
    REFLECT_REWRITE_DOCUMENT = "reflect_rewrite_document"
    MENTAL_MODEL_DELTA_OPS = "mental_model_delta_ops"
    MENTAL_MODEL_RETRACTION_OPS = "mental_model_retraction_ops"
    BANK_MISSION = "bank_mission"
    MEMORY_THINK = "memory_think"
    UNKNOWN = "unknown"


# Fixed prompt text that identifies each request (copied from hindsight_api 1.1.0).
VERIFICATION_PROMPT = "Say 'ok'"
EXTRACTION_MARKER = "Extract facts from the following chunk."
CONTENT_MARKER = "\n\nContent:\n"
CONSOLIDATION_MARKER = "You are a memory consolidation system."
NEW_FACTS_HEADING = "### New facts\n\n"
OBSERVATIONS_HEADING = "\n\n### Existing observations\n\n"
DEDUP_MARKER = "You reconcile long-term memory observations."
STRUCTURED_MARKER = "You are a precise data extraction assistant."
STRUCTURED_ANSWER_OPEN = 'ANSWER TO EXTRACT FROM:\n"""\n'
STRUCTURED_ANSWER_CLOSE = '\n"""\n'
REWRITE_TEXT_MARKER = "Rewrite the user's text so it fits within the requested token budget."
REWRITE_DOCUMENT_MARKER = (
    "Shorten the user's document so it fits within the requested token budget."
)
ROUND_QUERY_MARKER = "You write search queries for a memory bank."
CLAIMS_MARKER = "You extract evidence from retrieved memory data."
FINAL_MARKER = "CRITICAL: You MUST ONLY use information from retrieved tool results."
REDUCE_MARKER = "## Retrieved Evidence (synthesize and reason from these claims)"
DELTA_MARKER = "You are integrating *new information* into an existing structured document."
RETRACTION_MARKER = "You are removing *retracted information* from an existing structured document."
MISSION_MARKER = "You are helping maintain an agent's mission statement."
THINK_MARKER = "Here's what I know and have experienced:"

#: What fact dimensions the text does not state are set to (Hindsight reads it as absent).
NOT_STATED = "N/A"
_FACT_LINE = re.compile(r"^\[([^\]\s]+)\]\s+(.+)$")
_TEMPORAL_SUFFIX = re.compile(r"\s*\((?:occurred_start|occurred_end|mentioned_at)=[^()]*\)\s*$")
_SLOTS_LEFT = re.compile(r"has (\d+) observation slot\(s\) remaining")
_DEDUP_PAIR = re.compile(r"\[NEW\] (.*?)\n\[EXISTING\] (.*?)\n\n", re.DOTALL)
_MISSION = re.compile(
    r"Current mission: (.*?)\n\nNew information to add: (.*?)\n\nInstructions:", re.DOTALL
)
_BUDGET = re.compile(r"Target budget: (\d+) tokens\.")
_MARKDOWN_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


def _system_text(body: Mapping[str, Any]) -> str:
    messages = messages_of(body)
    if messages and messages[0].get("role") == "system":
        return content_text(messages[0].get("content"))
    return ""


def _user_text(body: Mapping[str, Any]) -> str:
    return "\n".join(message_texts(body, "user"))


def _classify_tool_request(body: Mapping[str, Any]) -> Kind:
    names = tool_names(body)
    if names == [reflect_role.DONE_TOOL]:
        return Kind.REFLECT_DONE
    if len(names) == 1 and names[0] in reflect_role.RETRIEVAL_TOOLS:
        return Kind.REFLECT_SEARCH
    if set(names) & {*reflect_role.RETRIEVAL_TOOLS, reflect_role.DONE_TOOL}:
        return Kind.REFLECT_TOOL_CALL
    return Kind.UNKNOWN


# (system prompt prefix, kind): checked first, the system prompt is Hindsight's own text.
_BY_SYSTEM_PREFIX = (
    (CONSOLIDATION_MARKER, Kind.CONSOLIDATION),
    (STRUCTURED_MARKER, Kind.REFLECT_STRUCTURED),
    (REWRITE_TEXT_MARKER, Kind.REFLECT_REWRITE),
    (REWRITE_DOCUMENT_MARKER, Kind.REFLECT_REWRITE_DOCUMENT),
    (ROUND_QUERY_MARKER, Kind.REFLECT_ROUND_QUERY),
    (CLAIMS_MARKER, Kind.REFLECT_FINAL_MAP),
    (DELTA_MARKER, Kind.MENTAL_MODEL_DELTA_OPS),
    (RETRACTION_MARKER, Kind.MENTAL_MODEL_RETRACTION_OPS),
)
# (user text marker, kind): calls that send their prompt as a single user message.
_BY_USER_TEXT = (
    (DEDUP_MARKER, Kind.CONSOLIDATION_DEDUP),
    (MISSION_MARKER, Kind.BANK_MISSION),
    (THINK_MARKER, Kind.MEMORY_THINK),
)


def classify(body: Mapping[str, Any]) -> Kind:
    """Which Hindsight call ``body`` is."""
    if body.get("tools"):
        return _classify_tool_request(body)
    system = _system_text(body)
    user = _user_text(body)
    kind = next((k for marker, k in _BY_SYSTEM_PREFIX if system.startswith(marker)), None)
    if kind is None and system.startswith("Extract") and EXTRACTION_MARKER in user:
        kind = Kind.EXTRACT_FACTS if CONTENT_MARKER in user else None
    if kind is None and FINAL_MARKER in system:
        kind = Kind.REFLECT_FINAL_REDUCE if REDUCE_MARKER in user else Kind.REFLECT_FINAL
    if kind is None:
        kind = next((k for marker, k in _BY_USER_TEXT if marker in user), None)
    if kind is None and user.strip() == VERIFICATION_PROMPT and len(messages_of(body)) == 1:
        kind = Kind.VERIFICATION
    return kind or Kind.UNKNOWN


def answer(body: Mapping[str, Any]) -> tuple[Kind, Reply]:
    """Classify ``body`` and build the reply Hindsight expects for it."""
    kind = classify(body)
    if kind is Kind.UNKNOWN:
        logger.warning(
            "unrecognised Hindsight request (model=%r, %d messages, tools=%s); "
            "answering with a harmless default",
            body.get("model"),
            len(messages_of(body)),
            tool_names(body),
        )
    return kind, _HANDLERS[kind](body)


# -- retain: fact extraction ------------------------------------------------------------


def extraction_content(body: Mapping[str, Any]) -> str:
    """The text to extract from: what follows ``Content:`` in the extraction user message.

    Everything before it (mission preamble, chunk numbering, event date, context,
    metadata, narrator note) is prompt scaffolding and is never read as content.
    """
    for text in message_texts(body, "user"):
        marker = text.find(EXTRACTION_MARKER)
        if marker < 0:
            continue
        start = text.find(CONTENT_MARKER, marker)
        if start >= 0:
            return text[start + len(CONTENT_MARKER) :]
    return ""


def _fact_item_schema(
    body: Mapping[str, Any],
) -> tuple[dict[str, JsonObject], list[str], JsonObject]:
    schema = schemas.requested_schema(body) or {}
    facts = schemas.properties(schema, schema).get("facts", {})
    item = schemas.array_items(facts, schema)
    return schemas.properties(item, schema), schemas.required(item, schema), schema


def _fact(
    values: JsonObject, props: dict[str, JsonObject], required: list[str], root: JsonObject
) -> JsonObject:
    if not props:
        return values
    fact: JsonObject = {}
    for name, prop in props.items():
        if name in values:
            value = values[name]
            if value == NOT_STATED and schemas.allows_null(prop, root):
                value = None
            allowed = schemas.enum_values(prop, root)
            fact[name] = value if not allowed or value in allowed else allowed[0]
        elif name in required:
            fact[name] = schemas.instance(prop, root)
    return fact


def _fact_values(statement: str, segment: Segment, found_entities: list[str]) -> JsonObject:
    return {
        "what": statement,
        "when": NOT_STATED,
        "where": NOT_STATED,
        "who": NOT_STATED,
        "why": NOT_STATED,
        "fact_kind": "conversation",
        "fact_type": "assistant" if segment.by_assistant else "world",
        "entities": found_entities,
    }


def extract_facts(body: Mapping[str, Any]) -> Reply:
    """One fact per statement of the content — not a question, greeting, acknowledgement or
    request to the agent (``facts.py``); in verbatim mode, one metadata entry."""
    content = extraction_content(body)
    props, required, root = _fact_item_schema(body)
    parts = segments(content)
    if props and "what" not in props:  # verbatim mode: Hindsight keeps the chunk text itself
        first = parts[0] if parts else Segment(text=content)
        values = _fact_values("", first, entities(content))
        return json_reply(
            {"facts": [_fact(values, props, required, root)] if content.strip() else []}
        )
    facts = [
        _fact(_fact_values(statement, part, entities(statement)), props, required, root)
        for part in parts
        for statement in statements(part.text)
        if _is_fact(statement)
    ]
    return json_reply({"facts": facts})


def _is_fact(statement: str) -> bool:
    """A statement a model would store (``facts.not_a_fact``); what is dropped is logged."""
    why = not_a_fact(statement)
    if why is not None:
        logger.info("extraction: not a fact (%s): %.120s", why, statement)
    return why is None


# -- consolidation ----------------------------------------------------------------------


def _observation_text(fact_text: str) -> str:
    """A fact line's statement without its temporal suffix and ``| When:``-style labels."""
    return _TEMPORAL_SUFFIX.sub("", fact_text).split(" | ")[0].strip()


def _existing_observations(user: str) -> list[Mapping[str, Any]]:
    start = user.find(OBSERVATIONS_HEADING)
    if start < 0:
        return []
    try:
        parsed, _ = json.JSONDecoder().raw_decode(user[start + len(OBSERVATIONS_HEADING) :])
    except ValueError:
        return []
    return [o for o in parsed if isinstance(o, Mapping)] if isinstance(parsed, list) else []


def _create_cap(user: str) -> int | None:
    if "OBSERVATION LIMIT REACHED" in user:
        return 0
    match = _SLOTS_LEFT.search(user)
    return int(match.group(1)) if match else None


def consolidate(body: Mapping[str, Any]) -> Reply:
    """One observation per distinct new fact; a fact an observation already states updates it."""
    user = _user_text(body)
    start = user.find(NEW_FACTS_HEADING)
    end = user.find(OBSERVATIONS_HEADING, start)
    block = user[start + len(NEW_FACTS_HEADING) : end if end >= 0 else None] if start >= 0 else ""
    existing = {normalize(str(o.get("text", ""))): o for o in _existing_observations(user)}
    creates: dict[str, JsonObject] = {}
    updates: dict[str, JsonObject] = {}
    for line in block.splitlines():
        match = _FACT_LINE.match(line.strip())
        if not match:
            continue
        fact_id, text = match.group(1), _observation_text(match.group(2))
        key = normalize(text)
        if not key:
            continue
        observation = existing.get(key)
        if observation is not None and isinstance(observation.get("id"), str):
            update = updates.setdefault(
                observation["id"],
                {
                    "observation_id": observation["id"],
                    "current_text": observation.get("text", ""),
                    "text": observation.get("text", ""),
                    "source_fact_ids": [],
                    "reason": "The new fact restates this observation; added as evidence.",
                },
            )
            update["source_fact_ids"].append(fact_id)
            continue
        create = creates.setdefault(
            key,
            {
                "text": text,
                "source_fact_ids": [],
                "reason": "No existing observation covers this fact, so it is created.",
            },
        )
        create["source_fact_ids"].append(fact_id)
    cap = _create_cap(user)
    create_list = list(creates.values())
    if cap is not None:
        create_list = create_list[:cap]
    return json_reply({"creates": create_list, "updates": list(updates.values()), "deletes": []})


def dedup(body: Mapping[str, Any]) -> Reply:
    """Merge two observations only when they say the same thing word for word."""
    match = _DEDUP_PAIR.search(_user_text(body))
    if match and normalize(match.group(1)) == normalize(match.group(2)):
        new = match.group(1).strip()
        return json_reply({"action": "merge", "text": new, "reason": "Both state the same fact."})
    return json_reply({"action": "keep", "text": "", "reason": "They differ in wording or detail."})


# -- smaller calls ------------------------------------------------------------------------


def verification(body: Mapping[str, Any]) -> Reply:
    return text_reply("ok")


def structured_output(body: Mapping[str, Any]) -> Reply:
    """``reflect_structured``: fill the caller's response schema from the answer text."""
    user = _user_text(body)
    start = user.find(STRUCTURED_ANSWER_OPEN)
    end = user.find(STRUCTURED_ANSWER_CLOSE, start + len(STRUCTURED_ANSWER_OPEN))
    answer_text = (
        user[start + len(STRUCTURED_ANSWER_OPEN) : end] if start >= 0 and end >= 0 else ""
    ).strip()
    schema = schemas.requested_schema(body) or {}
    items = [ln[2:].strip() for ln in answer_text.splitlines() if ln.startswith("- ")]
    result: JsonObject = {}
    for name, prop in schemas.properties(schema, schema).items():
        item_schema = schemas.array_items(prop, schema)
        kind = schemas.resolve(prop, schema).get("type")
        if kind == "array" and item_schema.get("type", "string") == "string":
            result[name] = items or ([answer_text] if answer_text else [])
        else:
            result[name] = schemas.instance(prop, schema, text=answer_text)
    return json_reply(result)


def _budget_chars(user: str) -> int:
    match = _BUDGET.search(user)
    return int(match.group(1)) * 4 if match else 4000


def rewrite_text(body: Mapping[str, Any]) -> Reply:
    """``final_rewrite``: keep whole statement lines while they fit the token budget.

    Lead-in lines ("Based on ...:") go first, so a tight budget keeps facts, not framing;
    when not even one line fits, the first is cut at a word boundary.
    """
    user = _user_text(body)
    marker = "Text to rewrite:\n"
    text = user[user.find(marker) + len(marker) :] if marker in user else user
    budget = _budget_chars(user)
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.rstrip().endswith(":")]
    kept: list[str] = []
    for line in lines:
        if len("\n".join([*kept, line])) > budget:
            break
        kept.append(line)
    if not kept and lines:
        kept = [lines[0][:budget].rsplit(" ", 1)[0]]
    return text_reply("\n".join(kept).strip() or text.strip()[:budget] or "(empty)")


def rewrite_document(body: Mapping[str, Any]) -> Reply:
    """The document-mode length rewrite: the markdown back as sections, cut to the budget."""
    user = _user_text(body)
    marker = "Document to shorten:\n"
    markdown = user[user.find(marker) + len(marker) :] if marker in user else user
    budget = _budget_chars(user)
    sections: list[JsonObject] = []
    used = 0
    for raw_paragraph in markdown.split("\n\n"):
        paragraph = raw_paragraph.strip()
        heading = _MARKDOWN_HEADING.match(paragraph)
        if heading and "\n" not in paragraph:
            sections.append(
                {"heading": heading.group(2), "level": len(heading.group(1)), "blocks": []}
            )
            continue
        if not paragraph or used + len(paragraph) > budget:
            continue
        if not sections:
            sections.append({"heading": "", "level": 2, "blocks": []})
        sections[-1]["blocks"].append(paragraph)
        used += len(paragraph)
    return json_reply({"sections": [s for s in sections if s["blocks"]]})


def bank_mission(body: Mapping[str, Any]) -> Reply:
    """``bank_mission``: the current mission followed by the new information."""
    match = _MISSION.search(_user_text(body))
    if not match:
        return text_reply("(empty)")
    current = match.group(1).strip()
    new = match.group(2).strip()
    current = "" if current == "(empty)" else current
    return text_reply(f"{current} {new}".strip() or "(empty)")


def memory_think(body: Mapping[str, Any]) -> Reply:
    """``memory_think`` (a static helper, unused by the server): restate the question."""
    question = _user_text(body).partition("QUESTION: ")[2].partition("\n")[0].strip()
    return text_reply(f"I have no recorded view on this question: {question or 'unknown'}")


def unknown(body: Mapping[str, Any]) -> Reply:
    """A valid, harmless reply of whatever shape the request asked for."""
    if body.get("tools"):
        return reflect_role.tool_turn(body)
    if schemas.wants_json(body):
        schema = schemas.requested_schema(body)
        return json_reply(schemas.instance(schema, schema) if schema else {})
    return text_reply("OK.")


_HANDLERS: dict[Kind, Callable[[Mapping[str, Any]], Reply]] = {
    Kind.VERIFICATION: verification,
    Kind.EXTRACT_FACTS: extract_facts,
    Kind.CONSOLIDATION: consolidate,
    Kind.CONSOLIDATION_DEDUP: dedup,
    Kind.REFLECT_SEARCH: reflect_role.tool_turn,
    Kind.REFLECT_TOOL_CALL: reflect_role.tool_turn,
    Kind.REFLECT_DONE: reflect_role.tool_turn,
    Kind.REFLECT_FINAL: reflect_role.final_answer,
    Kind.REFLECT_FINAL_MAP: reflect_role.claims,
    Kind.REFLECT_FINAL_REDUCE: reflect_role.reduce,
    Kind.REFLECT_ROUND_QUERY: reflect_role.round_query,
    Kind.REFLECT_STRUCTURED: structured_output,
    Kind.REFLECT_REWRITE: rewrite_text,
    Kind.REFLECT_REWRITE_DOCUMENT: rewrite_document,
    Kind.MENTAL_MODEL_DELTA_OPS: reflect_role.delta_operations,
    Kind.MENTAL_MODEL_RETRACTION_OPS: reflect_role.retraction_operations,
    Kind.BANK_MISSION: bank_mission,
    Kind.MEMORY_THINK: memory_think,
    Kind.UNKNOWN: unknown,
}


def _decide(body: Mapping[str, Any]) -> tuple[str, Reply]:
    kind, reply = answer(body)
    return kind.value, reply


#: The role's handler: OpenAI chat completions answered by :func:`answer`.
handle = openai_chat_role(_decide, model=MODEL)
