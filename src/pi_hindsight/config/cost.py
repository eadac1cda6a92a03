"""The retain settings that bound what memory spends (docs/operations.md, "Cost"): one concern
of its own; ``schema.RetainSettings`` inherits them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool


class RetainCostSettings(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    # Requests that carry no knowledge are not sent to retain (engine/trivial.py).
    skip_trivial: StrictBool = Field(default=True, alias="skipTrivial")
    # Over this many model tokens of the bank in 24 h, automatic retain pauses (engine/budget.py);
    # None: no ceiling.
    daily_token_budget: int | None = Field(
        default=None, alias="dailyTokenBudget", ge=1, le=10_000_000_000
    )
