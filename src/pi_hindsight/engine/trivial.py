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
- ``memory tools only``: every tool call was one of our memory tools (``hindsight_*``) and the
  user only asked memory something: every word of the user's text is a pleasantry or a word of
  asking ("what do you remember about …"), but for at most one topic word ("the cache"). A fact
  needs at least two words of its own (a subject and what is said of it), so a user who states
  something in such a request keeps it. The answer then repeats what memory returned, which is
  stored already.

The rules are conservative by construction; ``tests/property/test_trivial_property.py`` checks
over generated turns that no request with a stated project fact is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pi_hindsight.engine.turn_text import MEMORY_TOOL_PREFIX, TurnMessage

# Words a pleasantry is made of; a sentence made only of these says nothing about the project.
_PLEASANTRIES = """
    ok okay k kk okey yes yeah yep yup sure no nope nah thanks thank you thx ty cheers great
    cool nice perfect good fine awesome excellent lgtm got it sounds go ahead continue proceed
    do please pls that's thats it works worked done alright right welcome you're youre glad to
    help happy anytime let me know if need anything else any more questions just more much
    very so all set sorry my bad np problem hi hello hey bye again lol haha wow amazing looks
    looking that understood noted will
"""
_PLEASANTRY_WORDS = frozenset(_PLEASANTRIES.split())
# Words of asking memory something; with the pleasantries, what a recall question is made of.
_ASKING = """
    what what's whats why how when where who which whose do does did is are was were can could
    should would will you we i me us our my your the a an of in on for about any anything
    something there remember recall know knew memory memories say said says stored notes note
    decide decided tell show find search look up from with this it its have has had be been
    last time before previously earlier check see whether or
"""
_ASKING_WORDS = _PLEASANTRY_WORDS | frozenset(_ASKING.split())
_MAX_TOPIC_WORDS = 1
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
    words = _words(sentence)
    return len(words) <= _MAX_PLEASANTRY_WORDS and all(w in _PLEASANTRY_WORDS for w in words)


def _says_nothing(text: str) -> bool:
    return all(is_pleasantry(sentence) for sentence in _sentences(text))


def _words(text: str) -> list[str]:
    found = (w.strip("'") for w in _WORD.findall(text.lower()) if w[0].isalnum() or w[0] == "'")
    return [w for w in found if w]


def _asks_only(text: str) -> bool:
    """Only asks memory something: asking words and at most one topic word; nothing stated."""
    topic = [word for word in _words(text) if word not in _ASKING_WORDS]
    return len(topic) <= _MAX_TOPIC_WORDS


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
