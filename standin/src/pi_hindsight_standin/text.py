"""Deterministic text analysis for the stand-in: statements, entities, comparison keys.

This is the whole of the stand-in's "understanding": split text into sentences and
clauses, pick out names that look like entities, and normalize text so two wordings of
the same statement compare equal. No model, no randomness.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: Fewest words a sentence needs to count as a statement worth remembering.
MIN_STATEMENT_WORDS = 3
#: Most statements taken from one chunk of text.
MAX_STATEMENTS = 100
#: Most entities named for one statement.
MAX_ENTITIES = 10

_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|;\s+")
_LIST_MARK = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+")
_HEADING_MARK = re.compile(r"^\s*#{1,6}\s+")
_QUOTE_MARK = re.compile(r"^\s*>\s?")
_WORD = re.compile(r"[A-Za-z0-9_][\w.+#/'-]*")
_LETTERS = re.compile(r"[A-Za-z]")
_SPACES = re.compile(r"\s+")
_NON_KEY = re.compile(r"[^\w\s]")
_SPEAKER_ROLES_ASSISTANT = frozenset({"assistant", "ai", "agent", "model", "bot"})

# Capitalised words that start sentences rather than name things.
# (A word list reads better as one string than as 120 one-word lines.)
_NOT_ENTITIES = frozenset(
    """a about after all also always an and any are as at be because been before both but by
    can could did do does done each even every for from had has have he her here his how i if
    in into is it its just let lets let's like may me might more most must my never no not now
    of ok okay on once only or our please she should so some such than thank thanks that the
    their them then there these they this those though to today tomorrow too up us use used
    using was we were what when where which while who why will with without would yes yesterday
    you your""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class Segment:
    """A piece of source text and who said it (``None`` when unknown)."""

    text: str
    role: str | None = None

    @property
    def by_assistant(self) -> bool:
        return (self.role or "").lower() in _SPEAKER_ROLES_ASSISTANT


def normalize(text: str) -> str:
    """A comparison key: lower case, punctuation dropped, whitespace collapsed."""
    return _SPACES.sub(" ", _NON_KEY.sub(" ", text.lower())).strip()


def _turn_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part) for part in value
        )
    return ""


def _turn(obj: Mapping[str, Any]) -> Segment | None:
    for key in ("content", "text", "message", "body"):
        text = _turn_text(obj.get(key))
        if text.strip():
            role = obj.get("role") or obj.get("speaker") or obj.get("author")
            return Segment(text=text, role=role if isinstance(role, str) else None)
    return None


def segments(chunk: str) -> list[Segment]:
    """The spoken parts of a retained chunk.

    Hindsight hands the extractor plain text, a JSON array of conversation turns, a single
    JSON object, or JSON lines. Structured chunks yield the text of each turn (so JSON
    punctuation never becomes a fact) with the turn's role; anything else is one segment.
    """
    stripped = chunk.strip()
    if stripped[:1] in ("[", "{"):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            parsed = None
        if isinstance(parsed, Mapping):
            parsed = [parsed]
        if isinstance(parsed, list) and all(isinstance(item, Mapping) for item in parsed):
            turns = [_turn(item) for item in parsed]
            return [t for t in turns if t is not None]
    lines = [line for line in stripped.splitlines() if line.strip()]
    if len(lines) >= 2 and all(line.lstrip().startswith("{") for line in lines):
        turns = []
        for line in lines:
            try:
                obj = json.loads(line)
            except ValueError:
                return [Segment(text=chunk)]
            if not isinstance(obj, Mapping):
                return [Segment(text=chunk)]
            turns.append(_turn(obj))
        return [t for t in turns if t is not None]
    return [Segment(text=chunk)]


def _clean(sentence: str) -> str:
    sentence = _HEADING_MARK.sub("", sentence)
    sentence = _LIST_MARK.sub("", sentence)
    sentence = _QUOTE_MARK.sub("", sentence)
    sentence = sentence.replace("**", "").replace("__", "").strip(" \t\"'`")
    return _SPACES.sub(" ", sentence).strip()


def _is_statement(sentence: str) -> bool:
    words = [w for w in _WORD.findall(sentence) if _LETTERS.search(w)]
    return len(words) >= MIN_STATEMENT_WORDS


def statements(text: str) -> list[str]:
    """The sentences and clauses of ``text`` that say something.

    Lines are split at sentence ends and semicolons; list markers, heading marks and
    quote marks are removed; fenced code is skipped; fragments of fewer than
    :data:`MIN_STATEMENT_WORDS` words are dropped, as are repeats.
    """
    found: list[str] = []
    seen: set[str] = set()
    in_fence = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or not line.strip():
            continue
        for piece in _SENTENCE_BREAK.split(line):
            sentence = _clean(piece)
            key = normalize(sentence)
            if not key or key in seen or not _is_statement(sentence):
                continue
            seen.add(key)
            found.append(sentence)
            if len(found) >= MAX_STATEMENTS:
                return found
    return found


def _looks_like_entity(word: str) -> bool:
    if len(word) < 2 or not _LETTERS.search(word) or word.lower() in _NOT_ENTITIES:
        return False
    if "'" in word:  # a contraction (I'm, don't); possessives were trimmed already
        return False
    if word[0].isupper():
        return True
    inner_capital = any(ch.isupper() for ch in word[1:])
    path_like = ("." in word or "/" in word) and not word.startswith(".")
    return inner_capital or path_like


def _entity_words(text: str) -> list[tuple[str, int, int]]:
    """Entity-like words of ``text`` with their spans, possessives and trailing dots dropped."""
    words = []
    for match in _WORD.finditer(text):
        word = match.group(0).rstrip(".,'-/")
        if word.endswith("'s"):
            word = word[:-2]
        if _looks_like_entity(word):
            words.append((word, match.start(), match.start() + len(word)))
    return words


def entities(text: str) -> list[str]:
    """Names, products, paths and identifiers mentioned in ``text``, in order, unique.

    Adjacent capitalised words form one name ("Acme Corp", "New York").
    """
    names: list[str] = []
    previous_end = -2
    for word, start, end in _entity_words(text):
        joins = names and start == previous_end + 1 and text[previous_end] == " "
        if joins and word[0].isupper() and names[-1][0].isupper():
            names[-1] = f"{names[-1]} {word}"
        else:
            names.append(word)
        previous_end = end
    first_by_key: dict[str, str] = {}
    for name in names:
        first_by_key.setdefault(name.lower(), name)
    return list(first_by_key.values())[:MAX_ENTITIES]


def bullet_list(items: Iterable[str]) -> str:
    """A markdown bullet list, one item per line."""
    return "\n".join(f"- {item}" for item in items)
