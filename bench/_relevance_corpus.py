"""The labelled set of ``bench/relevance.py``: loaded, checked, and used to label what recall
returned and what a request delivered (``bench/data/relevance/corpus.toml`` says what it holds).

A recalled record or a delivered bullet is labelled by its text: the stand-in stores each fact
sentence as it was typed (a consolidated observation has the same text), so a normalised
comparison names the fact; anything else is a record of no fact of the set.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

CORPUS = Path(__file__).resolve().parent / "data" / "relevance" / "corpus.toml"
Part = Literal["tuning", "held-out"]
PARTS: tuple[Part, ...] = ("tuning", "held-out")

_NON_WORD = re.compile(r"[^\w]+")
# A delivered bullet: "- (2026-12-03) text", optionally followed by an origin line.
_BULLET = re.compile(r"^- (?:\(\d{4}-\d{2}-\d{2}\) )?(?P<text>.+)$")


def normalise(text: str) -> str:
    return _NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


@dataclass(frozen=True)
class Session:
    name: str
    prompts: tuple[str, ...]


@dataclass(frozen=True)
class Request:
    """A request after the sessions: a question (``needs`` facts) or one needing no memory."""

    part: Part
    prompt: str
    needs: tuple[str, ...] = ()
    also: tuple[str, ...] = ()  # relevant without being needed
    paraphrase_of: str | None = None

    @property
    def needs_memory(self) -> bool:
        return bool(self.needs)

    @property
    def relevant(self) -> frozenset[str]:
        return frozenset((*self.needs, *self.also))


@dataclass(frozen=True)
class Corpus:
    project: str
    facts: dict[str, str]  # id -> text
    sessions: tuple[Session, ...]
    requests: tuple[Request, ...]

    def fact_of(self, text: str) -> str | None:
        """The id of the fact ``text`` states (None: no fact of the set)."""
        return self._by_text.get(normalise(text))

    @property
    def _by_text(self) -> dict[str, str]:
        return {normalise(text): fact_id for fact_id, text in self.facts.items()}

    def part(self, part: Part, *, questions: bool) -> list[Request]:
        return [r for r in self.requests if r.part == part and r.needs_memory == questions]


def _strs(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{where}: expected a list of strings")
    return tuple(value)


def load(path: Path = CORPUS) -> Corpus:
    """The corpus, checked: every fact is typed in exactly one session prompt, every question
    names known facts, every request has a known part."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    facts = {str(k): str(v) for k, v in data["facts"].items()}
    sessions = tuple(
        Session(str(s["name"]), _strs(s["prompts"], f"session {s['name']}"))
        for s in data["sessions"]
    )
    requests: list[Request] = []
    for kind in ("questions", "no_memory"):
        for item in data.get(kind, []):
            request = Request(
                part=item["part"],
                prompt=str(item["prompt"]),
                needs=_strs(item.get("needs", []), item["prompt"]),
                also=_strs(item.get("also", []), item["prompt"]),
                paraphrase_of=item.get("paraphrase_of"),
            )
            if request.part not in PARTS:
                raise ValueError(f"{request.prompt!r}: part must be one of {PARTS}")
            if (kind == "questions") != request.needs_memory:
                raise ValueError(f"{request.prompt!r}: a question needs facts, others none")
            unknown = request.relevant - facts.keys()
            if unknown:
                raise ValueError(f"{request.prompt!r}: unknown facts {sorted(unknown)}")
            requests.append(request)
    typed = [prompt for session in sessions for prompt in session.prompts]
    for fact_id, text in facts.items():
        count = sum(text in prompt for prompt in typed)
        if count != 1:
            raise ValueError(f"fact {fact_id} is typed in {count} session prompts, not 1")
    return Corpus(str(data["project"]), facts, sessions, tuple(requests))


def bullets(block: str | None) -> list[str]:
    """The recall bullets of a delivered block (the startup memo's lines are not recall)."""
    if not block:
        return []
    found: list[str] = []
    in_recall = False
    for line in block.splitlines():
        if line.startswith("## "):
            in_recall = not line.startswith("## Startup memo")
            continue
        match = _BULLET.match(line) if in_recall else None
        if match:
            found.append(match["text"])
    return found


def labels(corpus: Corpus, texts: Iterable[str]) -> list[str | None]:
    return [corpus.fact_of(text) for text in texts]
