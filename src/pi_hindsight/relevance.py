"""The relevance policy (issue 17): a recalled record is delivered only when it earns its place.

Recall returns whatever clears Hindsight's retrieval floors and fits its token budget: for "Which
tool applies database migrations?" the Alembic fact, and beside it the logger rule, the staging
cluster and the pagination rule, found by one shared word. Memory that is mostly unrelated to
the request distracts the model, so automatic delivery keeps a record only when it clears three
bars, all measured on what Hindsight returns with each record (docs/delivery.md has the curve
they were chosen from):

- **strength** — the evidence that the record matches the request: its ``semantic`` similarity
  plus its ``keyword`` (BM25) score, each 0 when that arm did not find it. A record found only
  through a graph or temporal link has neither and no strength.
- **floor** — the least strength any delivered record needs, whatever else came back: a prompt
  that needs no memory gets nothing from a weak best match.
- **relative** — the least share of the best strength in the same recall (one bank's answer): a
  record far weaker than the best one is merely similar.
- **rerankerFloor** — with Hindsight's cross-encoder reranker, the least relevance it gives
  (0-1); it can only hold back more. With the ``rrf`` passthrough there is no such score.

A fact and its consolidated observation are one delivered line, so records of the same text
are judged together, by the strongest of them. Hindsight's ``final`` score is not used: it ranks
within one answer (with the ``rrf`` reranker it is a rank position) and says nothing absolute.
The record's type is not used either: on the labelled set observations and facts of the same
text scored alike.

Settings: ``recall.relevance`` — ``"off"`` (deliver what recall returns, within the budgets, as
before), ``"on"`` (the defaults), or an object with the bars and per-bank overrides::

    {"recall": {"relevance": {"relative": 0.6, "floor": 0.4, "rerankerFloor": 0.1,
                              "banks": {"pi-user": {"floor": 0.3}, "scratch": "off"}}}}

The explicit recall tool (``hindsight_memory`` recall) is never filtered: the agent asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool

from pi_hindsight.backend.resources import MemoryRecord, RecallScores

#: The reason a held-back record carries in the evidence ledger.
BELOW_RELEVANCE = "below relevance"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


def _switch(value: Any) -> Any:
    """``"off"`` / ``"on"`` (and booleans) as the object they stand for."""
    if isinstance(value, bool):
        return {"enabled": value}
    if isinstance(value, str) and value.strip().lower() in ("off", "on"):
        return {"enabled": value.strip().lower() == "on"}
    return value


class RelevanceBars(_Model):
    """The three bars (the module docstring says what each means; the defaults are the
    choice docs/delivery.md explains)."""

    enabled: StrictBool = True
    relative: float = Field(default=0.6, ge=0, le=1)
    floor: float = Field(default=0.4, ge=0, le=4)
    reranker_floor: float = Field(default=0.1, alias="rerankerFloor", ge=0, le=1)


BankBars = Annotated[RelevanceBars, BeforeValidator(_switch)]


class RelevanceSettings(RelevanceBars):
    """``recall.relevance``: the bars, and per-bank overrides of them (by bank id)."""

    banks: dict[str, BankBars] = Field(default_factory=dict)

    def for_bank(self, bank_id: str) -> RelevanceBars:
        """The bars a bank's recall is judged by: its override (unset keys from these), or
        these; an override cannot turn on a bank when relevance is off altogether."""
        own = RelevanceBars(
            enabled=self.enabled,
            relative=self.relative,
            floor=self.floor,
            reranker_floor=self.reranker_floor,
        )
        override = self.banks.get(bank_id)
        if override is None or not self.enabled:
            return own
        changed = {name: getattr(override, name) for name in override.model_fields_set}
        return own.model_copy(update=changed)


#: ``recall.relevance`` as the settings declare it: ``"off"``, ``"on"`` or an object.
Relevance = Annotated[RelevanceSettings, BeforeValidator(_switch)]


DEFAULT_BARS = RelevanceBars()
OFF = RelevanceBars(enabled=False)


def strength(scores: RecallScores | None) -> float:
    """The evidence that a record matches the request: semantic + keyword (0 when absent)."""
    if scores is None:
        return 0.0
    return (scores.semantic or 0.0) + (scores.keyword or 0.0)


@dataclass(frozen=True)
class Judgement:
    record: MemoryRecord
    kept: bool
    # Why it was held back, with the numbers ("strength 0.31 < floor 0.40"); None when kept.
    detail: str | None = None


def _text_key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _reranker(records: Sequence[MemoryRecord]) -> float | None:
    values = [r.scores.reranker for r in records if r.scores and r.scores.reranker is not None]
    return max(values) if values else None


def judge(records: Sequence[MemoryRecord], bars: RelevanceBars) -> list[Judgement]:
    """Each record of one recall (one bank's answer), kept or held back, in recall's order.

    Pure: the same records and bars always give the same judgements."""
    if not bars.enabled:
        return [Judgement(record, True) for record in records]
    groups: dict[str, list[MemoryRecord]] = {}
    for record in records:
        groups.setdefault(_text_key(record.text), []).append(record)
    strongest = {key: max(strength(r.scores) for r in group) for key, group in groups.items()}
    best = max(strongest.values(), default=0.0)
    needed = max(bars.floor, bars.relative * best)
    judged: dict[str, str | None] = {}
    for key, group in groups.items():
        value = strongest[key]
        reranker = _reranker(group)
        if value < bars.floor:
            judged[key] = f"strength {value:.2f} < floor {bars.floor:.2f}"
        elif value < needed:
            judged[key] = (
                f"strength {value:.2f} < {bars.relative:.2f} x best {best:.2f} of this recall"
            )
        elif reranker is not None and reranker < bars.reranker_floor:
            judged[key] = f"reranker {reranker:.2f} < {bars.reranker_floor:.2f}"
        else:
            judged[key] = None
    return [
        Judgement(record, judged[_text_key(record.text)] is None, judged[_text_key(record.text)])
        for record in records
    ]


def split(
    records: Sequence[MemoryRecord], bars: RelevanceBars
) -> tuple[list[MemoryRecord], list[Judgement]]:
    """(the records to deliver, the judgements of those held back), in recall's order."""
    judged = judge(records, bars)
    return [j.record for j in judged if j.kept], [j for j in judged if not j.kept]


def describe(settings: RelevanceSettings) -> str:
    """One line for status: what the policy does."""
    if not settings.enabled:
        return "off (every recalled record within the budgets)"
    overrides = f"; {len(settings.banks)} bank override(s)" if settings.banks else ""
    return (
        f"on (relative {settings.relative:g}, floor {settings.floor:g}, "
        f"reranker floor {settings.reranker_floor:g}{overrides})"
    )
