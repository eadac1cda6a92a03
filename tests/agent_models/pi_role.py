"""The Pi role: a scripted coding-agent model for Pi's ``openai-completions`` provider.

Test infrastructure, not product: :class:`PiRole` is registered into the stand-in server
(``pi_hindsight_standin``) as the role ``pi`` by ``tests/agent_models`` (``AgentStandIn``) and
``scripts/demo.py``, and can be loaded into a stand-in process with
``--role pi=tests.agent_models.pi_role:PiRole``.

Pi streams every request. What it says is decided by a *script*::

    {
      "rules": [
        {"match": "hello", "reply": "Hi there."},
        {"match": "list files",
         "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}],
         "then_reply": "Listed: {tool_result}"},
        {"match": "two steps",
         "steps": [[{"name": "read", "arguments": {"path": "a.txt"}}],
                   [{"name": "bash", "arguments": {"command": "wc -l a.txt"}}]],
         "then_reply": "Done."}
      ],
      "default_reply": "Understood."
    }

A rule may also script trouble: ``"fail_first": N`` answers its first N requests with HTTP
``fail_status`` (default 503, a transient error Pi retries) and ``fail_message``;
``"overflow_first": N`` answers its first N with Pi's context-overflow error (400 "Your input
exceeds the context window of this model"), which makes Pi 1.x compact and retry; ``"delay_ms":
D`` waits D ms before each streamed chunk (time to abort, or to queue a follow-up, meanwhile).

A rule matches when ``match`` is a case-insensitive substring of the latest *real* user
prompt: the last ``role: user`` message whose text does not start with
``<hindsight-memory`` (the fence of the memory messages pi-hindsight injects, which Pi
sends as user-role messages). The first matching rule wins; no match gets
``default_reply``. A tool rule answers with its rounds of tool calls, one round per model
turn, counting the assistant tool-call turns since that prompt, then with ``then_reply``
(in which ``{tool_result}`` becomes the text of the last tool result). ``tool_calls`` is
shorthand for a single round.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pi_hindsight_standin import Answer, RoleRequest, ScriptError, SseEvent, openai_chat_role
from pi_hindsight_standin.roles import JsonObject
from pi_hindsight_standin.wire import (
    Reply,
    ToolCall,
    content_text,
    messages_of,
    text_reply,
    tool_call_id,
)

ROLE = "pi"
#: The model named in replies to requests that name none (and listed by ``/pi/v1/models``).
MODEL = "local-model"
MEMORY_FENCE = "<hindsight-memory"
DEFAULT_REPLY = "Understood."
TOOL_RESULT_PLACEHOLDER = "{tool_result}"
#: Longest tool result substituted into a ``then_reply``.
MAX_TOOL_RESULT_CHARS = 2000


@dataclass(frozen=True)
class ScriptedCall:
    name: str
    arguments: JsonObject


@dataclass(frozen=True)
class Rule:
    match: str
    reply: str | None = None
    steps: tuple[tuple[ScriptedCall, ...], ...] = ()
    then_reply: str = DEFAULT_REPLY
    fail_first: int = 0
    fail_status: int = 503
    fail_message: str = "upstream overloaded, try again"
    overflow_first: int = 0
    delay_ms: int = 0


@dataclass(frozen=True)
class PiScript:
    """A validated Pi script (see the module docstring for the format)."""

    rules: tuple[Rule, ...] = ()
    default_reply: str = DEFAULT_REPLY

    @classmethod
    def from_json(cls, data: Any, *, source: str = "script") -> PiScript:
        """Validate a script; raise ``ScriptError`` naming the bad key."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ScriptError(f"{source}: the script must be a JSON object", hint=_HINT)
        unknown = set(data) - {"rules", "default_reply"}
        if unknown:
            raise ScriptError(f"{source}: unknown key(s) {sorted(unknown)}", hint=_HINT)
        default = data.get("default_reply", DEFAULT_REPLY)
        if not isinstance(default, str):
            raise ScriptError(f"{source}: default_reply must be a string", hint=_HINT)
        raw_rules = data.get("rules", [])
        if not isinstance(raw_rules, list):
            raise ScriptError(f"{source}: rules must be a list", hint=_HINT)
        rules = tuple(_rule(r, f"{source}: rules[{i}]") for i, r in enumerate(raw_rules))
        return cls(rules=rules, default_reply=default)


_HINT = (
    'expected {"rules": [{"match", "reply" | "tool_calls"/"steps" + "then_reply"}], '
    '"default_reply"}'
)
_RULE_KEYS = {
    "match",
    "reply",
    "tool_calls",
    "steps",
    "then_reply",
    "fail_first",
    "fail_status",
    "fail_message",
    "overflow_first",
    "delay_ms",
}
OVERFLOW_MESSAGE = "Your input exceeds the context window of this model"


def _calls(raw: Any, where: str) -> tuple[ScriptedCall, ...]:
    if not isinstance(raw, list) or not raw:
        raise ScriptError(f"{where}: a round of tool calls must be a non-empty list", hint=_HINT)
    calls = []
    for i, call in enumerate(raw):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise ScriptError(f"{where}[{i}]: each tool call needs a string 'name'", hint=_HINT)
        arguments = call.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise ScriptError(f"{where}[{i}]: 'arguments' must be an object", hint=_HINT)
        calls.append(ScriptedCall(name=call["name"], arguments=dict(arguments)))
    return tuple(calls)


def _rule(raw: Any, where: str) -> Rule:
    if not isinstance(raw, Mapping):
        raise ScriptError(f"{where}: each rule must be an object", hint=_HINT)
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown key(s) {sorted(unknown)}", hint=_HINT)
    match = raw.get("match", "")
    if not isinstance(match, str):
        raise ScriptError(f"{where}: 'match' must be a string", hint=_HINT)
    if "tool_calls" in raw and "steps" in raw:
        raise ScriptError(f"{where}: give 'tool_calls' or 'steps', not both", hint=_HINT)
    steps: tuple[tuple[ScriptedCall, ...], ...] = ()
    if "tool_calls" in raw:
        steps = (_calls(raw["tool_calls"], f"{where}.tool_calls"),)
    elif "steps" in raw:
        if not isinstance(raw["steps"], list) or not raw["steps"]:
            raise ScriptError(f"{where}: 'steps' must be a non-empty list of rounds", hint=_HINT)
        steps = tuple(_calls(step, f"{where}.steps[{i}]") for i, step in enumerate(raw["steps"]))
    reply = raw.get("reply")
    then_reply = raw.get("then_reply", DEFAULT_REPLY)
    if reply is not None and not isinstance(reply, str):
        raise ScriptError(f"{where}: 'reply' must be a string", hint=_HINT)
    if not isinstance(then_reply, str):
        raise ScriptError(f"{where}: 'then_reply' must be a string", hint=_HINT)
    if (reply is None) == (not steps):
        raise ScriptError(f"{where}: give exactly one of 'reply' or tool calls", hint=_HINT)
    return Rule(
        match=match, reply=reply, steps=steps, then_reply=then_reply, **_trouble(raw, where)
    )


def _trouble(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A rule's scripted failures and delay, validated."""
    trouble: dict[str, Any] = {}
    for key in ("fail_first", "fail_status", "overflow_first", "delay_ms"):
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ScriptError(f"{where}: '{key}' must be a non-negative integer", hint=_HINT)
            trouble[key] = value
    if "fail_message" in raw:
        if not isinstance(raw["fail_message"], str):
            raise ScriptError(f"{where}: 'fail_message' must be a string", hint=_HINT)
        trouble["fail_message"] = raw["fail_message"]
    return trouble


def _is_memory(text: str) -> bool:
    return text.lstrip().startswith(MEMORY_FENCE)


def latest_prompt_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the last real user prompt (memory messages are not prompts)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and not _is_memory(content_text(message.get("content"))):
            return index
    return None


def latest_prompt(body: Mapping[str, Any]) -> str:
    """The text of the latest real user prompt ("" when there is none)."""
    messages = messages_of(body)
    index = latest_prompt_index(messages)
    return "" if index is None else content_text(messages[index].get("content"))


def classify(body: Mapping[str, Any]) -> str:
    """The kind of Pi request: a new prompt, a tool result to follow up, or other."""
    messages = messages_of(body)
    last = messages[-1].get("role") if messages else None
    if last == "tool":
        return "tool_result"
    if last == "user":
        return "prompt"
    return "other"


def _last_tool_result(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "tool":
            return content_text(message.get("content"))[:MAX_TOOL_RESULT_CHARS]
    return ""


def matching_rule(script: PiScript, body: Mapping[str, Any]) -> tuple[int, Rule] | None:
    """The first rule matching the latest real prompt, with its index."""
    messages = messages_of(body)
    index = latest_prompt_index(messages)
    prompt = "" if index is None else content_text(messages[index].get("content")).lower()
    return next(
        ((n, rule) for n, rule in enumerate(script.rules) if rule.match.lower() in prompt), None
    )


def answer(script: PiScript, body: Mapping[str, Any]) -> Reply:
    """What the scripted model says next in this conversation."""
    messages = messages_of(body)
    index = latest_prompt_index(messages)
    prompt = "" if index is None else content_text(messages[index].get("content")).lower()
    rule = next((r for r in script.rules if r.match.lower() in prompt), None)
    if rule is None:
        return text_reply(script.default_reply)
    if rule.reply is not None:
        return text_reply(rule.reply)
    since_prompt = messages[index + 1 :] if index is not None else messages
    rounds_done = sum(
        1 for m in since_prompt if m.get("role") == "assistant" and m.get("tool_calls")
    )
    if rounds_done < len(rule.steps):
        calls = tuple(
            ToolCall(
                id=tool_call_id(index, prompt, rounds_done, position, call.name),
                name=call.name,
                arguments=call.arguments,
            )
            for position, call in enumerate(rule.steps[rounds_done])
        )
        return Reply(tool_calls=calls)
    return text_reply(rule.then_reply.replace(TOOL_RESULT_PLACEHOLDER, _last_tool_result(messages)))


class PiRole:
    """The ``pi`` role's handler: OpenAI chat completions answered from a script (Scripted).

    ``PiRole(script)``; ``set_script`` replaces the script (``ScriptError``, and the old one
    kept, when it is invalid).
    """

    def __init__(self, script: Any = None) -> None:
        self._script = PiScript.from_json(script)
        self._lock = threading.Lock()
        self._handle = openai_chat_role(self._decide, model=MODEL)
        self._troubled: dict[tuple[int, str], int] = {}  # (rule, kind) -> requests so answered

    @property
    def script(self) -> PiScript:
        with self._lock:
            return self._script

    def set_script(self, script: Any) -> None:
        parsed = PiScript.from_json(script)
        with self._lock:
            self._script = parsed
            self._troubled.clear()

    def _decide(self, body: JsonObject) -> tuple[str, Reply]:
        return classify(body), answer(self.script, body)

    def _trouble(self, body: JsonObject) -> tuple[Answer | None, int]:
        """A scripted failure for this request (counted per rule), and the chunk delay."""
        found = matching_rule(self.script, body)
        if found is None:
            return None, 0
        number, rule = found
        with self._lock:
            for kind, first, status, message in (
                ("overflow", rule.overflow_first, 400, OVERFLOW_MESSAGE),
                ("failure", rule.fail_first, rule.fail_status, rule.fail_message),
            ):
                done = self._troubled.get((number, kind), 0)
                if done < first:
                    self._troubled[(number, kind)] = done + 1
                    payload = {"error": {"message": message, "type": kind, "code": status}}
                    return Answer(kind, status=status, payload=payload), rule.delay_ms
        return None, rule.delay_ms

    def __call__(self, request: RoleRequest) -> Answer:
        body = request.body
        if body is None or request.method != "POST":
            return self._handle(request)
        failure, delay_ms = self._trouble(body)
        if failure is not None:
            return failure
        answer = self._handle(request)
        if delay_ms and answer.events is not None:
            return dataclasses.replace(answer, events=_slowly(answer.events, delay_ms / 1000))
        return answer


def _slowly(events: Iterable[SseEvent], delay_s: float) -> Iterator[SseEvent]:
    for event in events:
        time.sleep(delay_s)
        yield event
