"""What the server's model spent for a bank (``LlmTracesApi``, Hindsight 1.1).

Hindsight records every model call it makes per bank (``llm_requests``) with its operation
(``retain``, ``consolidation``, ``reflect``, ``refresh_mental_model``, …) and the token counts the
provider reported. ``GET …/llm-requests/stats?period=1d|7d|30d`` sums them per day; it filters by
one ``operation`` and one ``call_type`` (``llm``, ``embedding``, ``rerank``, ``decision``), so a
breakdown by operation is one call per operation. The sums are ``COALESCE(SUM(…), 0)``: a call
whose provider reported no tokens counts as a call with 0 tokens (``engine/spend.py`` says so
rather than showing 0 as a figure).
"""

from __future__ import annotations

from typing import Any

from hindsight_client_api.api.llm_traces_api import LLMTracesApi

from pi_hindsight.backend._client import Resource
from pi_hindsight.backend.resources import UsageBucket


def _bucket(raw: Any) -> UsageBucket:
    tokens = raw.tokens
    return UsageBucket(
        day=str(raw.time)[:10],
        calls=int(raw.total),
        errors=sum(int(n) for status, n in dict(raw.statuses).items() if status != "success"),
        input_tokens=int(tokens.input),
        output_tokens=int(tokens.output),
        total_tokens=int(tokens.total),
    )


class Usage(Resource):
    async def usage_stats(
        self,
        bank: str,
        *,
        period: str,
        operation: str | None = None,
        call_type: str | None = "llm",
        timeout: float,
    ) -> list[UsageBucket]:
        """The per-day model calls and token sums of ``bank`` over ``period`` (1d, 7d, 30d)."""
        api = self._client.api(LLMTracesApi)
        async with self._client.call("model usage", bank, timeout):
            response = await api.llm_request_stats(
                bank,
                operation=operation,
                call_type=call_type,
                period=period,
                _request_timeout=timeout,
            )
            return [_bucket(raw) for raw in response.buckets]
