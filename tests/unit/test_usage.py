"""How spend is shown (engine/spend.py): never an invented number."""

from __future__ import annotations

from pi_hindsight.engine.spend import BankUsage, LastDay, Spend, chart, describe_usage


def test_calls_without_token_counts_are_said_so_never_zero_tokens() -> None:
    spend = Spend(calls=4)
    assert spend.describe() == "4 model calls, the server does not report tokens"
    assert spend.to_json()["totalTokens"] is None and spend.to_json()["tokensReported"] is False
    assert Spend().describe() == "no model calls"
    counted = Spend(calls=1, input_tokens=30, output_tokens=12, total_tokens=42)
    assert counted.describe() == "1 model call, 42 tokens (30 in, 12 out)"


def test_the_chart_draws_tokens_or_calls_and_other_is_what_no_group_names() -> None:
    days = (
        ("2026-12-03", Spend(calls=2, total_tokens=100)),
        ("2026-12-04", Spend(calls=1, total_tokens=50)),
    )
    lines = chart(days)
    assert lines[0].endswith("100 tokens") and lines[1].endswith("50 tokens")
    assert lines[0].count("█") == 30 and lines[1].count("█") == 15
    unreported = chart((("2026-12-04", Spend(calls=3)),))
    assert unreported[0].endswith("3 calls")
    total = Spend(calls=5, total_tokens=10)
    assert total.minus(Spend(calls=3, total_tokens=4)) == Spend(calls=2, total_tokens=6)
    usage = BankUsage(
        bank_id="b",
        period="1d",
        total=total,
        days=days,
        operations=(("retain extraction", Spend(calls=3, total_tokens=4)),),
    )
    assert "bank b, last 1d: 5 model calls, 10 tokens" in describe_usage([usage])


def test_an_unknown_day_says_why() -> None:
    assert LastDay(bank_id="b", spend=None, error="cannot reach Hindsight").describe() == (
        "last 24 h: unknown (cannot reach Hindsight)"
    )
