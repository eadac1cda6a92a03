"""The recall query: the user's prompt plus a bounded slice of the recent conversation.

Trivial prompts ("ok", "thanks", "continue") may skip recall; the evidence records that they did
and why. Nothing here talks to a server.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

TRIVIAL_PROMPTS = frozenset(
    {
        "ok",
        "okay",
        "k",
        "thanks",
        "thank you",
        "thx",
        "ty",
        "yes",
        "no",
        "y",
        "n",
        "yep",
        "nope",
        "sure",
        "great",
        "nice",
        "cool",
        "good",
        "perfect",
        "done",
        "next",
        "continue",
        "go on",
        "go ahead",
        "proceed",
        "lgtm",
        "sounds good",
        "do it",
        "please continue",
    }
)
_PUNCTUATION = re.compile(r"[^\w\s']+")


def normalise(text: str) -> str:
    return " ".join(_PUNCTUATION.sub(" ", text.casefold()).split())


def is_trivial(prompt: str) -> bool:
    """A prompt that carries nothing to search for: an acknowledgement or a bare go-ahead."""
    normalised = normalise(prompt)
    return not normalised or normalised in TRIVIAL_PROMPTS


def build_query(
    prompt: str, recent: Sequence[tuple[str, str]], *, max_chars: int, context_turns: int
) -> str:
    """The prompt first (it matters most), then the last ``context_turns`` turns as context,
    all within ``max_chars``."""
    query = " ".join(prompt.split())[:max_chars]
    if context_turns <= 0 or not recent:
        return query
    context: list[str] = []
    room = max_chars - len(query) - len(" Context: ")
    for role, text in reversed(recent[-context_turns:]):
        snippet = " ".join(text.split())
        piece = f"{role}: {snippet}"
        if room <= 40:
            break
        piece = piece[:room]
        context.insert(0, piece)
        room -= len(piece) + 1
    return f"{query} Context: {' '.join(context)}" if context else query
