"""What memory spends: the server's model calls and tokens per bank, as Hindsight recorded them.

The figures are the server's own (``backend/usage.py``): nothing here estimates or fills in a
number. A provider that reports no token usage leaves the server's sums at 0 for calls it made;
that is shown as "the server did not report tokens", never as 0 tokens.

Attribution: Hindsight records calls per bank and per operation. A bank is one scope's (the
``project`` bank rule) or shared by several scopes told apart by tags (``shared``): the figures are
the bank's, and a shared bank's are not split between its scopes (consolidation and memo refresh
work on the bank as a whole; docs/operations.md, "Cost").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import computed_field, field_serializer

from pi_hindsight.backend import MemoryBackend
from pi_hindsight.backend.resources import UsageBucket
from pi_hindsight.errors import BackendError, BankNotFound
from pi_hindsight.serialisation import Record

Period = Literal["1d", "7d", "30d"]
PERIODS: tuple[Period, ...] = ("1d", "7d", "30d")
STATUS_TIMEOUT_S = 3.0  # status never waits long for a figure it can do without
SPEND_CACHE_S = 10.0  # a session's status asks the server at most this often

# Our names for Hindsight's operations (hindsight-api 1.1: ``operation`` of ``llm_requests``).
# What none of these names ("recall", "graph", a call outside any run) counts as "other".
OPERATION_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("retain extraction", ("retain",)),
    ("consolidation", ("consolidation", "consolidation_dedup")),
    ("reflect", ("reflect",)),
    ("memo refresh", ("refresh_mental_model", "mental_model_delta_ops")),
)
OTHER = "other"
CHART_WIDTH = 30


class Spend(Record):
    calls: int = 0
    errors: int = 0
    # None in the JSON form when the server reported no tokens (``tokensReported``): never 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tokens_reported(self) -> bool:
        """False when calls were made and the server holds no token count for any of them."""
        return self.calls == 0 or self.total_tokens > 0

    @field_serializer("input_tokens", "output_tokens", "total_tokens")
    def _tokens(self, tokens: int) -> int | None:
        return tokens if self.tokens_reported else None

    def plus(self, other: Spend) -> Spend:
        return Spend(
            calls=self.calls + other.calls,
            errors=self.errors + other.errors,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )

    def minus(self, other: Spend) -> Spend:
        return Spend(
            calls=max(0, self.calls - other.calls),
            errors=max(0, self.errors - other.errors),
            input_tokens=max(0, self.input_tokens - other.input_tokens),
            output_tokens=max(0, self.output_tokens - other.output_tokens),
            total_tokens=max(0, self.total_tokens - other.total_tokens),
        )

    @classmethod
    def of(cls, buckets: Sequence[UsageBucket]) -> Spend:
        total = cls()
        for bucket in buckets:
            total = total.plus(cls.of_bucket(bucket))
        return total

    @classmethod
    def of_bucket(cls, bucket: UsageBucket) -> Spend:
        return cls(
            calls=bucket.calls,
            errors=bucket.errors,
            input_tokens=bucket.input_tokens,
            output_tokens=bucket.output_tokens,
            total_tokens=bucket.total_tokens,
        )

    def describe(self) -> str:
        calls = "1 model call" if self.calls == 1 else f"{self.calls:,} model calls"
        if self.calls == 0:
            return "no model calls"
        if not self.tokens_reported:
            return f"{calls}, the server does not report tokens"
        return (
            f"{calls}, {self.total_tokens:,} tokens "
            f"({self.input_tokens:,} in, {self.output_tokens:,} out)"
        )


class BankUsage(Record):
    bank_id: str
    period: Period
    total: Spend
    days: tuple[tuple[str, Spend], ...]  # (day, spend), oldest first
    operations: tuple[tuple[str, Spend], ...]  # (our operation name, spend)

    @field_serializer("days")
    def _days(self, days: tuple[tuple[str, Spend], ...]) -> list[dict[str, Any]]:
        return [{"day": day, **spend.to_json()} for day, spend in days]

    @field_serializer("operations")
    def _operations(self, operations: tuple[tuple[str, Spend], ...]) -> list[dict[str, Any]]:
        return [{"operation": name, **spend.to_json()} for name, spend in operations]


class LastDay(Record):
    """The status line's figure: a bank's spend over the last 24 hours, or why it is unknown."""

    bank_id: str
    period: Literal["24h"] = "24h"
    spend: Spend | None
    error: str | None = None

    def describe(self) -> str:
        if self.spend is None:
            return f"last 24 h: unknown ({self.error})"
        return f"last 24 h: {self.spend.describe()}"


def _by_day(buckets: Sequence[UsageBucket]) -> tuple[tuple[str, Spend], ...]:
    days: dict[str, Spend] = {}
    for bucket in buckets:
        days[bucket.day] = days.get(bucket.day, Spend()).plus(Spend.of_bucket(bucket))
    return tuple(sorted(days.items()))


async def operation_spend(
    backend: MemoryBackend,
    bank: str,
    operations: Sequence[str],
    period: Period,
    *,
    timeout: float,
) -> Spend:
    """The bank's spend on these server operations over ``period``."""
    answers = await asyncio.gather(
        *(
            backend.usage_stats(bank, period=period, operation=op, timeout=timeout)
            for op in operations
        )
    )
    return Spend.of([bucket for answer in answers for bucket in answer])


async def bank_usage(
    backend: MemoryBackend, bank: str, period: Period, *, timeout: float
) -> BankUsage:
    """One bank's spend over ``period``: by day, and by operation (one stats call each)."""
    every = await backend.usage_stats(bank, period=period, timeout=timeout)
    total = Spend.of(every)
    groups: list[tuple[str, Spend]] = []
    named = Spend()
    for name, operations in OPERATION_GROUPS:
        spend = await operation_spend(backend, bank, operations, period, timeout=timeout)
        groups.append((name, spend))
        named = named.plus(spend)
    groups.append((OTHER, total.minus(named)))
    return BankUsage(
        bank_id=bank, period=period, total=total, days=_by_day(every), operations=tuple(groups)
    )


async def last_day(backend: MemoryBackend, bank: str, *, timeout: float) -> LastDay:
    """The bank's spend over the last 24 hours (the server's ``1d``: since now minus a day)."""
    try:
        buckets = await backend.usage_stats(bank, period="1d", timeout=timeout)
    except BankNotFound:  # not created yet: nothing spent
        buckets = []
    except BackendError as error:
        return LastDay(bank_id=bank, spend=None, error=str(error))
    return LastDay(bank_id=bank, spend=Spend.of(buckets))


def chart(days: Sequence[tuple[str, Spend]]) -> list[str]:
    """A small bar per day: tokens when the server reports them, else calls."""
    if not days:
        return ["  (no model calls recorded)"]
    by_tokens = all(spend.tokens_reported for _, spend in days)
    values = [spend.total_tokens if by_tokens else spend.calls for _, spend in days]
    top = max(values) or 1
    unit = "tokens" if by_tokens else "calls"
    lines = []
    for (day, _), value in zip(days, values, strict=True):
        bar = "█" * max(1 if value else 0, round(value / top * CHART_WIDTH))
        lines.append(f"  {day} {bar:<{CHART_WIDTH}} {value:,} {unit}")
    return lines


def describe_usage(usages: Sequence[BankUsage]) -> str:
    lines: list[str] = []
    for usage in usages:
        lines.append(f"bank {usage.bank_id}, last {usage.period}: {usage.total.describe()}")
        lines.append(" by day:")
        lines.extend(chart(usage.days))
        lines.append(" by operation:")
        for name, spend in usage.operations:
            lines.append(f"  {name:<18} {spend.describe()}")
    return "\n".join(lines)
