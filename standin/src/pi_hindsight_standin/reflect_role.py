"""Answers for Hindsight's reflect agent and mental-model refresh (``engine/reflect``).

The agent drives a tool loop. Each turn's request is read here the way a model would read
it, but deterministically:

* a *forced* retrieval step offers exactly one of ``search_mental_models``,
  ``search_observations``, ``recall`` (a named tool choice, sent as that one tool with
  ``tool_choice: "required"``): call it with ``{reason, query}``;
* a *free* turn offers the whole set: stop with ``answer_ready`` (or ``done`` when that is
  not offered), or search first if nothing has been searched yet;
* the *closing* turn offers ``done`` alone: answer from the tool results in the
  conversation. The ids cited are only those the results actually carried, in the short
  alias form the agent's presenter showed (``f1``, ``o1``, ``p1``), which the agent maps
  back to real ids. A refresh's ``done`` takes a structured ``document`` instead of an
  ``answer``; it is built from the same results, so the page holds the retained facts.

Also here: the tool-less synthesis paths the agent falls back to (final answer, split
synthesis map/reduce, the decision-mode search-query rewrite) and the structured-delta
calls of a delta refresh (``mental_model_delta_ops`` / ``mental_model_retraction_ops``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pi_hindsight_standin import schemas
from pi_hindsight_standin.roles import JsonObject
from pi_hindsight_standin.text import bullet_list, normalize, statements
from pi_hindsight_standin.wire import (
    Reply,
    ToolCall,
    content_text,
    json_reply,
    message_texts,
    messages_of,
    text_reply,
    tool_call_id,
    tool_names,
    tool_parameters,
)

logger = logging.getLogger(__name__)

RETRIEVAL_TOOLS = ("search_mental_models", "search_observations", "recall")
DONE_TOOL = "done"
READY_TOOL = "answer_ready"
#: What ``build_agent_user_prompt`` appends after the question.
_QUERY_SUFFIXES = ("\n\n## Bank mission", "\n\nIMPORTANT: Respond exclusively in")
#: Longest search query the stand-in sends to a retrieval tool.
MAX_QUERY_CHARS = 500
#: Most facts listed in one answer or document.
MAX_LISTED = 50
NO_ANSWER = "No relevant memories were found for this question."
NO_DOCUMENT = "No memories about this topic have been recorded yet."

_HISTORY_BLOCK = re.compile(r"### From ([\w-]+):\n```json\n(.*?)\n```", re.DOTALL)
_FACT_LINE = re.compile(r"^- \[([^\]:]*)(?::[^\]]*)?\] (.+)$", re.MULTILINE)
#: Supporting-fact types a document may state (other mental models are not facts).
_FACT_TYPES = frozenset({"world", "experience", "observation", "opinion", ""})
_PROVENANCE = re.compile(r"\s*\(mentioned_at:[^()]*\)\s*$")


@dataclass
class Evidence:
    """What the retrieval tools returned in this conversation, by alias, in order."""

    memories: dict[str, str] = field(default_factory=dict)
    observations: dict[str, str] = field(default_factory=dict)
    pages: dict[str, str] = field(default_factory=dict)
    searched: bool = False
    dates: dict[str, str] = field(default_factory=dict)

    @property
    def found(self) -> bool:
        return bool(self.memories or self.observations or self.pages)

    def add(self, tool: str, output: Any) -> None:
        """Record one tool's (presented) output."""
        if not isinstance(output, Mapping) or "error" in output:
            return
        if tool in RETRIEVAL_TOOLS or tool == "read_mental_models":
            self.searched = True
        if tool == "recall":
            self._collect(output.get("memories"), self.memories)
        if tool == "search_observations":
            self._collect(output.get("observations"), self.observations)
        if tool in ("search_mental_models", "read_mental_models"):
            self._collect(output.get("mental_models"), self.pages, text_keys=("content", "snippet"))

    def _collect(
        self, items: Any, into: dict[str, str], *, text_keys: tuple[str, ...] = ("text",)
    ) -> None:
        if not isinstance(items, list):
            return
        for item in items:
            if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
                continue
            text = next((str(item[k]) for k in text_keys if isinstance(item.get(k), str)), "")
            into.setdefault(item["id"], text.strip())
            when = item.get("mentioned_at") or item.get("occurred_start")
            if isinstance(when, str):
                self.dates.setdefault(item["id"], when)

    def page_statements(self) -> list[str]:
        """The statements of the mental-model pages read (a page can answer on its own)."""
        found = [s for text in self.pages.values() for s in statements(text)]
        return [s for s in found if s != NO_DOCUMENT]

    def texts(self) -> list[str]:
        """Memory texts, observation texts, then page statements, without repeats."""
        return _unique(
            [*self.memories.values(), *self.observations.values(), *self.page_statements()]
        )


def _unique(texts: list[str], *, exclude: list[str] | None = None) -> list[str]:
    """``texts`` without blanks, repeats (by normalized form) or members of ``exclude``."""
    seen = {normalize(text) for text in exclude or []}
    found: list[str] = []
    for text in texts:
        key = normalize(text)
        if key and key not in seen:
            seen.add(key)
            found.append(text)
    return found[:MAX_LISTED]


def question(body: Mapping[str, Any]) -> str:
    """The question the reflect is answering: the agent's first user message, unadorned."""
    users = message_texts(body, "user")
    text = users[0] if users else ""
    for suffix in _QUERY_SUFFIXES:
        cut = text.find(suffix)
        if cut >= 0:
            text = text[:cut]
    return text.strip()


def _search_query(body: Mapping[str, Any]) -> str:
    return question(body)[:MAX_QUERY_CHARS] or "memories"


#: Where a question with several parts splits into its topics (a sentence, a ``;`` list item).
_TOPIC_BREAK = re.compile(r"(?<=[?!.;])\s+")
#: Most topic searches one conversation makes beyond the first search (the agent's turns are few).
MAX_TOPIC_SEARCHES = 6


def topics(text: str) -> list[str]:
    """The parts of a question with several (its sentences and ``;``-separated items): what a
    model searches for one by one, since one embedding of a long, broad question is close to
    none of the specific facts it asks about. A question of one part has none."""
    parts = [part.strip(" ;.") for part in _TOPIC_BREAK.split(text.strip())]
    found = [part for part in parts if len(part.split()) >= 2]
    return found if len(found) > 1 else []


def _recalled_queries(body: Mapping[str, Any]) -> set[str]:
    """The queries this conversation already sent to ``recall``."""
    sent: set[str] = set()
    for message in messages_of(body):
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping) or function.get("name") != "recall":
                continue
            try:
                arguments = json.loads(str(function.get("arguments") or "{}"))
            except ValueError:
                continue
            if isinstance(arguments, Mapping) and isinstance(arguments.get("query"), str):
                sent.add(arguments["query"])
    return sent


def _next_topic(body: Mapping[str, Any]) -> str | None:
    """The first topic of the question not searched yet (within MAX_TOPIC_SEARCHES)."""
    sent = _recalled_queries(body)
    for topic in topics(question(body))[:MAX_TOPIC_SEARCHES]:
        query = topic[:MAX_QUERY_CHARS]
        if query not in sent:
            return query
    return None


def evidence_from_conversation(body: Mapping[str, Any]) -> Evidence:
    """The evidence in the tool results of the agent's conversation."""
    evidence = Evidence()
    names_by_call: dict[str, str] = {}
    for message in messages_of(body):
        for call in message.get("tool_calls") or []:
            if isinstance(call, Mapping):
                function = call.get("function")
                if isinstance(function, Mapping) and isinstance(call.get("id"), str):
                    names_by_call[call["id"]] = str(function.get("name", ""))
        if message.get("role") != "tool":
            continue
        tool = names_by_call.get(str(message.get("tool_call_id")), "")
        try:
            output = json.loads(content_text(message.get("content")))
        except ValueError:
            continue  # a compacted result, or prose: nothing citable in it
        evidence.add(tool, output)
    return evidence


def evidence_from_history(prompt: str) -> Evidence:
    """The evidence in a synthesis prompt's rendered ``### From <tool>:`` blocks."""
    evidence = Evidence()
    for tool, raw in _HISTORY_BLOCK.findall(prompt):
        try:
            evidence.add(tool, json.loads(raw))
        except ValueError:
            continue
    return evidence


def _answer_text(evidence: Evidence) -> str:
    facts = evidence.texts()
    if not facts:
        return NO_ANSWER
    return "Based on the retrieved memories:\n\n" + bullet_list(facts)


def _document(evidence: Evidence) -> JsonObject:
    facts = _unique([*evidence.memories.values(), *evidence.page_statements()])
    observations = _unique(list(evidence.observations.values()), exclude=facts)
    sections: list[JsonObject] = []
    if facts:
        sections.append({"heading": "Facts", "level": 2, "blocks": [bullet_list(facts)]})
    if observations:
        sections.append(
            {"heading": "Observations", "level": 2, "blocks": [bullet_list(observations)]}
        )
    if not sections:
        sections.append({"heading": "Facts", "level": 2, "blocks": [NO_DOCUMENT]})
    return {"sections": sections}


def done_arguments(body: Mapping[str, Any], evidence: Evidence) -> JsonObject:
    """``done``'s arguments for this request's ``done`` schema, grounded in ``evidence``."""
    params = tool_parameters(body, DONE_TOOL)
    props = schemas.properties(params, params)
    args: JsonObject = {}
    if "document" in props:
        args["document"] = _document(evidence)
    else:
        args["answer"] = _answer_text(evidence)
    args["answer_found"] = evidence.found
    args["memory_ids"] = list(evidence.memories)
    args["observation_ids"] = list(evidence.observations)
    args["mental_model_ids"] = list(evidence.pages)
    for name in schemas.required(params, params):
        if name not in args:
            args[name] = schemas.instance(
                props.get(name, {}), params, text="The answer follows every directive given."
            )
    return args


def _call(body: Mapping[str, Any], name: str, arguments: JsonObject) -> Reply:
    call_id = tool_call_id(name, len(messages_of(body)), arguments)
    return Reply(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments),))


def _named_choice(body: Mapping[str, Any]) -> str | None:
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        function = choice.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
    return None


def _generic_arguments(body: Mapping[str, Any], name: str) -> JsonObject:
    params = tool_parameters(body, name)
    props = schemas.properties(params, params)
    args: JsonObject = {}
    for prop in schemas.required(params, params):
        if prop == "query":
            args[prop] = _search_query(body)
        elif prop == "reason":
            args[prop] = "Looking for memories relevant to the question."
        else:
            args[prop] = schemas.instance(props.get(prop, {}), params)
    return args


def _free_search(body: Mapping[str, Any], offered: list[str], evidence: Evidence) -> Reply | None:
    """A free turn's search, if one is due: the first search, or the next part of a question
    of several parts (each searched in turn)."""
    if not evidence.searched:
        search = next((tool for tool in RETRIEVAL_TOOLS if tool in offered), None)
        if search is not None:
            return _call(body, search, _generic_arguments(body, search))
    topic = _next_topic(body) if "recall" in offered else None
    if topic is None:
        return None
    return _call(body, "recall", {**_generic_arguments(body, "recall"), "query": topic})


def tool_turn(body: Mapping[str, Any]) -> Reply:
    """One turn of the reflect tool loop (forced step, free turn or closing ``done``)."""
    names = tool_names(body)
    named = _named_choice(body)
    offered = [named] if named in names else names
    evidence = evidence_from_conversation(body)
    if offered == [DONE_TOOL]:
        return _call(body, DONE_TOOL, done_arguments(body, evidence))
    if len(offered) == 1:
        return _call(body, offered[0], _generic_arguments(body, offered[0]))
    search = _free_search(body, offered, evidence)
    if search is not None:
        return search
    if READY_TOOL in offered:
        return _call(body, READY_TOOL, {"answer_found": evidence.found})
    if DONE_TOOL in offered:
        return _call(body, DONE_TOOL, done_arguments(body, evidence))
    logger.warning("tool request offers no tool the stand-in knows (%s); calling the first", names)
    first = offered[0] if offered else ""
    return _call(body, first, _generic_arguments(body, first)) if first else text_reply("OK.")


# -- tool-less synthesis paths ---------------------------------------------------------


def final_answer(body: Mapping[str, Any]) -> Reply:
    """The forced final synthesis (``build_final_prompt``): answer from the rendered results."""
    prompt = "\n".join(message_texts(body, "user"))
    return text_reply(_answer_text(evidence_from_history(prompt)))


def claims(body: Mapping[str, Any]) -> Reply:
    """A split-synthesis map call (``build_chunk_claims_prompt``): cited claims per fact."""
    prompt = "\n".join(message_texts(body, "user"))
    evidence = evidence_from_history(prompt)
    lines = []
    for alias, text in [*evidence.memories.items(), *evidence.observations.items()]:
        when = evidence.dates.get(alias, "unknown")
        lines.append(f"- {text} (mentioned_at: {when}; occurred: unknown; memory_ids: {alias})")
    return text_reply("\n".join(lines) if lines else "(no relevant evidence)")


def reduce(body: Mapping[str, Any]) -> Reply:
    """The split-synthesis reduce call (``build_reduce_prompt``): the claims, as the answer."""
    prompt = "\n".join(message_texts(body, "user"))
    facts: list[str] = []
    for line in prompt.splitlines():
        if line.startswith("- ") and "(mentioned_at:" in line:
            fact = _PROVENANCE.sub("", line[2:]).strip()
            if fact and fact not in facts:
                facts.append(fact)
    if not facts:
        return text_reply(NO_ANSWER)
    return text_reply("Based on the retrieved memories:\n\n" + bullet_list(facts[:MAX_LISTED]))


def round_query(body: Mapping[str, Any]) -> Reply:
    """The decision-mode search-query rewrite: the request's first line, at most 12 words."""
    users = message_texts(body, "user")
    first_line = next(
        (ln.strip() for ln in (users[0] if users else "").splitlines() if ln.strip()), ""
    )
    words = first_line.strip("\"'").split()[:12]
    return text_reply(" ".join(words) or "memories")


# -- structured-delta refresh --------------------------------------------------------


def _fenced_json_after(text: str, heading: str) -> Any:
    start = text.find(heading)
    if start < 0:
        return None
    fence = text.find("```json\n", start)
    end = text.find("\n```", fence + 8)
    if fence < 0 or end < 0:
        return None
    try:
        return json.loads(text[fence + 8 : end])
    except ValueError:
        return None


def _fact_lines_after(text: str, heading: str) -> list[str]:
    start = text.find(heading)
    if start < 0:
        return []
    section = text[start + len(heading) :]
    end = section.find("\n\n## ")
    lines = _FACT_LINE.findall(section if end < 0 else section[:end])
    return [fact.strip() for kind, fact in lines if kind in _FACT_TYPES]


def _sections(document: Any) -> list[Mapping[str, Any]]:
    raw = document.get("sections") if isinstance(document, Mapping) else None
    return [s for s in raw if isinstance(s, Mapping)] if isinstance(raw, list) else []


def _blocks(section: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = section.get("blocks")
    return [b for b in raw if isinstance(b, Mapping)] if isinstance(raw, list) else []


def _is_bullets(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(line.lstrip().startswith("- ") for line in lines)


def delta_operations(body: Mapping[str, Any]) -> Reply:
    """``mental_model_delta_ops``: add the new supporting facts the document lacks."""
    prompt = "\n".join(message_texts(body, "user"))
    document = _fenced_json_after(prompt, "## CURRENT DOCUMENT")
    facts = _fact_lines_after(prompt, "## SUPPORTING FACTS")
    sections = _sections(document)
    known = normalize(" ".join(str(b.get("text", "")) for s in sections for b in _blocks(s)))
    new = [f for f in dict.fromkeys(facts) if normalize(f) and normalize(f) not in known]
    operations: list[JsonObject] = []
    if new and not sections:
        operations.append(
            {"op": "add_section", "heading": "Facts", "level": 2, "blocks": [bullet_list(new)]}
        )
    elif new:
        target = next((s for s in sections if s.get("heading") == "Facts"), sections[-1])
        blocks = _blocks(target)
        last = blocks[-1] if blocks else None
        if last is not None and str(last.get("text", "")).strip() == NO_DOCUMENT:
            operations.append(
                {
                    "op": "replace_block",
                    "section_id": target.get("id"),
                    "block_id": last.get("id"),
                    "text": bullet_list(new),
                }
            )
        elif last is not None and _is_bullets(str(last.get("text", ""))):
            operations.append(
                {
                    "op": "replace_block",
                    "section_id": target.get("id"),
                    "block_id": last.get("id"),
                    "text": f"{last.get('text')}\n{bullet_list(new)}",
                }
            )
        else:
            operations.append(
                {"op": "append_block", "section_id": target.get("id"), "text": bullet_list(new)}
            )
    return json_reply({"operations": operations})


def retraction_operations(body: Mapping[str, Any]) -> Reply:
    """``mental_model_retraction_ops``: drop the lines that state a retracted fact."""
    prompt = "\n".join(message_texts(body, "user"))
    document = _fenced_json_after(prompt, "## CURRENT DOCUMENT")
    retracted = [normalize(f) for f in _fact_lines_after(prompt, "## RETRACTED FACTS")]
    retracted = [key for key in retracted if key]
    operations: list[JsonObject] = []
    for section in _sections(document):
        for block in _blocks(section):
            lines = str(block.get("text", "")).split("\n")
            kept = [ln for ln in lines if not any(key in normalize(ln) for key in retracted)]
            if len(kept) == len(lines):
                continue
            ref = {"section_id": section.get("id"), "block_id": block.get("id")}
            if any(line.strip() for line in kept):
                operations.append({"op": "replace_block", **ref, "text": "\n".join(kept)})
            else:
                operations.append({"op": "remove_block", **ref})
    return json_reply({"operations": operations})
