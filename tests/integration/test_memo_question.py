"""The startup memo's question, against the real server: a memo created with an older question
asks the current one from then on (a broad question found no specific fact: see
engine/startup_memo.py)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.engine.scope import Scope
from pi_hindsight.engine.startup_memo import (
    MEMO_SOURCE_QUERY,
    MemoCache,
    create_memo,
    memo_id,
)

pytestmark = pytest.mark.server

TAG = "project:example.com/team/memo-question"


def test_a_memo_made_with_an_older_question_is_moved_to_the_current_one(
    hindsight_server: Any,
) -> None:
    """Bug: the memo's question is stored with the memo on the server, so changing it in the
    code left every existing memo asking the old one, which finds nothing specific."""
    scope = Scope(TAG, "memo-question", f"memo-q-{uuid.uuid4().hex[:10]}", (TAG,))

    async def scenario() -> tuple[str | None, str | None, str | None]:
        backend = HindsightBackend(hindsight_server.base_url)
        try:
            await create_memo(backend, scope, timeout=30, min_refresh_interval_s=0)
            await backend.update_mental_model(
                scope.bank_id, memo_id(scope), source_query="What matters here?", timeout=30
            )
            before = await backend.get_mental_model(scope.bank_id, memo_id(scope), timeout=30)
            state = await MemoCache().get(backend, scope, timeout=30, min_refresh_interval_s=0)
            after = await backend.get_mental_model(scope.bank_id, memo_id(scope), timeout=30)
            return (
                before.source_query if before else None,
                state.status,
                after.source_query if after else None,
            )
        finally:
            await backend.close()

    before, status, after = asyncio.run(scenario())
    assert before == "What matters here?"
    assert status in ("ready", "empty")
    assert after == MEMO_SOURCE_QUERY
