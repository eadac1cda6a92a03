"""Which statements a model would store as facts: not questions, greetings, acknowledgements or
requests to the agent.

A real extraction model keeps "We apply migrations with Alembic." and drops "Which tool applies
database migrations?", "hi", "Thanks, that works" and "Please fix the flaky test": a question
asked in an earlier session is not a fact about the project. The stand-in used to keep every
sentence, so questions came back from recall as "facts" and every quality figure measured
offline was distorted. These rules are deterministic and small; every sentence they drop is
logged with the reason (``hindsight_role.extract_facts``).

A request phrased as a standing rule is a fact all the same: "Please always run ruff before
committing", "Write a test for every fix" state how the project works, and a model keeps them.
"""

from __future__ import annotations

import re
from typing import Literal

NotAFact = Literal["question", "greeting", "acknowledgement", "request"]

_WORDS = re.compile(r"[a-z0-9][a-z0-9']*")
_CLOSERS = " \t\"'`)]}*_"

_WH_ALWAYS = frozenset({"which", "what", "who", "whom", "whose"})
_WH_WITH_AUX = frozenset({"how", "when", "where", "why"})
_AUX = frozenset(
    """am is are was were do does did can could should would will shall may might must have
    has had isn't aren't wasn't weren't don't doesn't didn't can't couldn't shouldn't wouldn't
    won't""".split()  # noqa: SIM905
)
# After an auxiliary opening a question: "Is the…", "Do we…", "Can you…"; not "Do not push".
_SUBJECTS = frozenset(
    """i we you they it he she this that these those there the a an our my your their its
    any anyone anything someone something everyone everything""".split()  # noqa: SIM905
)
# Sentence-openers that continue a statement rather than ask: "Which is why we moved".
_WH_STATEMENTS = ("which is why", "which means", "what we call")


def _phrases(text: str) -> tuple[str, ...]:
    """Phrases written one after another, separated by ``|``."""
    return tuple(phrase.strip() for phrase in text.split("|") if phrase.strip())


_GREETINGS = _phrases(
    """good morning|good afternoon|good evening|hi|hello|hey|bye|goodbye|cheers|see you|
    morning|evening|howdy|greetings"""
)
_ACKS = _phrases(
    """thank you|thanks|thx|ty|ok|okay|sure|great|cool|nice|perfect|awesome|excellent|got it|
    sounds good|looks good|lgtm|makes sense|understood|noted|yes|yep|yeah|no|nope|right|
    alright|all right|fine|good|brilliant|wonderful|that works|that helps|that's it|
    that is it|that is all|that's all|will do|go ahead|no problem|never mind|all good|
    well done|good job"""
)
# What follows an acknowledgement when the sentence is still about the conversation:
# "Thanks, that works", "OK, go ahead", "Great, you fixed it".
_ABOUT_THE_TALK = frozenset(
    """that that's this it it's you you're for all go glad hope much again see looks sounds
    works""".split()  # noqa: SIM905
)

_REQUEST_OPENERS = (
    "please",
    "kindly",
    "can you",
    "could you",
    "would you",
    "will you",
    "can we",
    "could we",
    "help me",
    "i want you to",
    "i need you to",
    "i'd like you to",
    "i would like you to",
)
# "Let's look at the failing test" asks for work now; "Let's use uv" states a decision.
_LETS = ("let's", "let us")
_LETS_VERBS = frozenset(["look", "see", "start", "check", "try", "go", "do", "begin", "work"])
_TASK_VERBS = frozenset(
    """explain describe summarize summarise show tell give list write draft fix implement
    refactor review debug investigate compare generate create translate rewrite find open
    continue try rerun retry add rename remove delete convert calculate compute""".split()  # noqa: SIM905
)
# Words that make a request a standing rule, which a model keeps.
_STANDING = frozenset(["always", "never", "every", "each", "whenever", "must", "should"])
_STANDING_PHRASES = ("by default", "from now on", "in future", "in the future", "going forward")


def _words(sentence: str) -> list[str]:
    return _WORDS.findall(sentence.casefold().replace("\u2019", "'"))


def _opens_with(words: list[str], phrases: tuple[str, ...]) -> int:
    """How many words of the longest phrase ``words`` opens with (0: none)."""
    best = 0
    for phrase in phrases:
        parts = phrase.split()
        if words[: len(parts)] == parts:
            best = max(best, len(parts))
    return best


def _standing(words: list[str]) -> bool:
    text = " ".join(words)
    return any(word in _STANDING for word in words) or any(
        phrase in text for phrase in _STANDING_PHRASES
    )


def _question(sentence: str, words: list[str]) -> bool:
    if sentence.rstrip(_CLOSERS).endswith("?"):
        return True
    if not words or " ".join(words[:3]).startswith(_WH_STATEMENTS):
        return False
    first, second = words[0], words[1] if len(words) > 1 else ""
    if first in _WH_ALWAYS:
        return True
    if first in _WH_WITH_AUX:
        return second in _AUX
    return first in _AUX and second in _SUBJECTS


def _acknowledgement(words: list[str]) -> NotAFact | None:
    greeting = _opens_with(words, _GREETINGS)
    ack = _opens_with(words, _ACKS)
    opener = max(greeting, ack)
    if not opener:
        return None
    rest = words[opener:]
    # "Thanks!", "Hi there", "OK, that works", "Great, you fixed it": about the talk itself.
    if len(rest) <= 2 or rest[0] in _ABOUT_THE_TALK:
        return "greeting" if greeting >= ack else "acknowledgement"
    return None


def _request(words: list[str]) -> bool:
    if _standing(words):
        return False
    if _opens_with(words, _REQUEST_OPENERS):
        return True
    lets = _opens_with(words, _LETS)
    if lets:
        verb = words[lets] if len(words) > lets else ""
        return verb in _TASK_VERBS or verb in _LETS_VERBS
    return bool(words) and words[0] in _TASK_VERBS


def not_a_fact(sentence: str) -> NotAFact | None:
    """Why ``sentence`` is not a fact a model would store (None: it is one)."""
    words = _words(sentence)
    if _question(sentence, words):
        return "question"
    acknowledged = _acknowledgement(words)
    if acknowledged is not None:
        return acknowledged
    if _request(words):
        return "request"
    return None
