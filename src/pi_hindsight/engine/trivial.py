"""Requests that carry no knowledge are not sent to retain (``retain.skipTrivial``, on by default).

Every retained request costs the server's model an extraction (and consolidation after it), so a
"thanks" or an empty request is paid for and yields nothing. A request is skipped only when no
sentence in it can state a fact:

- ``empty``: nobody said anything (no user or assistant text, whatever the tools did).
- ``acknowledgement``: every sentence, the user's and the assistant's, is a pleasantry from a
  closed list ("thanks", "ok, go ahead", "you're welcome") and no tool other than the memory tools
  ran. A sentence outside that list — any statement at all — keeps the request.
- ``aborted``: the same, for a request the user aborted (an aborted request whose prompt says
  something is retained: the prompt may carry a fact).
- ``memory tools only``: every tool call was one of our memory tools (``hindsight_*``) and every
  user sentence is a question or a pleasantry. The answer then repeats what memory returned, which
  is stored already; a user who states something in such a request keeps it.

The rules are conservative by construction; ``tests/property/test_trivial_property.py`` checks
over generated turns that no request with a stated project fact is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pi_hindsight.engine.transcript import MEMORY_TOOL_PREFIX, TurnMessage

# Words a pleasantry is made of; a sentence made only of these says nothing about the project.
_PLEASANTRY_WORDS = frozenset(
    """
    ok okay k kk okey yes yeah yep yup sure no nope nah thanks thank you thx ty cheers great
    cool nice perfect good fine awesome excellent lgtm got it sounds go ahead continue proceed
    do please pls that's thats it works worked done alright right welcome you're youre glad
    to help happy anytime let me know if need anything else any more questions just more
    much very so all set sorry my bad np problem hi hello hey bye again lol haha wow amazing
    looks looking that
    """.split()
)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_WORD = re.compile(r"[a-z']+|\d+|\S")
_MAX_PLEASANTRY_WORDS = 12


@dataclass(frozen=True)
class Skip:
    reason: str  # empty | acknowledgement | aborted | memory tools only
    chars: int  # the characters of text the request carried (user and assistant)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def is_pleasantry(sentence: str) -> bool:
    """A sentence made only of pleasantry words (and punctuation or emoji), and short."""
    words = [w for w in _WORD.findall(sentence.lower()) if w[0].isalnum() or w[0] == "'"]
    if len(words) > _MAX_PLEASANTRY_WORDS:
        return False
    return all(word.strip("'") in _PLEASANTRY_WORDS for word in words if word.strip("'"))


def _says_nothing(text: str) -> bool:
    return all(is_pleasantry(sentence) for sentence in _sentences(text))


def _asks_only(text: str) -> bool:
    """Every sentence is a question or a pleasantry: nothing is stated."""
    return all(s.endswith("?") or is_pleasantry(s) for s in _sentences(text))


def classify(messages: Sequence[TurnMessage], *, aborted: bool = False) -> Skip | None:
    """Why this request is not worth retaining, or None to retain it."""
    user = "\n".join(m.text for m in messages if m.role == "user")
    assistant = "\n".join(m.text for m in messages if m.role == "assistant")
    chars = len(user.strip()) + len(assistant.strip())
    tools = [m.tool_name or "" for m in messages if m.role == "tool_call"]
    memory_only = bool(tools) and all(name.startswith(MEMORY_TOOL_PREFIX) for name in tools)
    other_tools = any(not name.startswith(MEMORY_TOOL_PREFIX) for name in tools)
    if not user.strip() and not assistant.strip():
        return Skip("empty", 0)
    if not other_tools and _says_nothing(user) and _says_nothing(assistant):
        return Skip("aborted" if aborted else "acknowledgement", chars)
    if memory_only and _asks_only(user):
        return Skip("memory tools only", chars)
    return None
