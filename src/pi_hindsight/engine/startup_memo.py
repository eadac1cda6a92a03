"""The startup memo (R-MEMO-1..3): the scope's Hindsight mental model.

Hindsight generates and refreshes it (created with the scope's exact tags, refreshed after
consolidation); the layer only fetches it, delivers it with the first request of a session and
again only after it changed, and never lets a missing, stale or failing memo block recall.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Literal

from pi_hindsight.backend import MemoryBackend, MentalModel
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH, Scope
from pi_hindsight.errors import BackendError

logger = logging.getLogger(__name__)

# One topic per sentence or ``;`` item: a reflect agent searches them one by one, and each
# names concrete knowledge (one embedding of a broad question is close to no specific fact:
# with the local embeddings, "what should an engineer know" scores 0.11 against "our
# production deploy target is the Zephyr cluster", under Hindsight's 0.3 floor).
MEMO_SOURCE_QUERY = (
    "What should an engineer know before working on this project? "
    "Where production is deployed and how releases ship; how it is built and tested; "
    "the conventions and rules in force; the premises and architecture; "
    "recent decisions and the reasons for them; open problems; how the user likes to work here."
)
MEMO_MAX_TOKENS = 1024
CACHE_SECONDS = 30.0

MemoStatus = Literal["ready", "empty", "created", "failed", "disabled"]


def memo_id(scope: Scope) -> str:
    """A stable id per bank and scope (mental model ids: lowercase letters, digits, hyphens)."""
    digest = hashlib.sha256(f"{scope.bank_id}\0{scope.scope_id}".encode()).hexdigest()[:24]
    return f"pi-memo-{digest}"


def memo_trigger(min_refresh_interval_s: int) -> dict[str, object]:
    """Refresh after consolidation, in delta mode, over exactly the scope's tags."""
    return {
        "refresh_after_consolidation": True,
        "mode": "delta",
        "tags_match": SCOPE_TAGS_MATCH,
        "min_refresh_interval_seconds": min_refresh_interval_s,
    }


async def create_memo(
    backend: MemoryBackend, scope: Scope, *, timeout: float, min_refresh_interval_s: int
) -> str | None:
    """Create the scope's memo (its first refresh starts at once); returns that operation id."""
    return await backend.create_mental_model(
        scope.bank_id,
        model_id=memo_id(scope),
        name=f"Startup memo: {scope.scope_id}",
        source_query=MEMO_SOURCE_QUERY,
        tags=scope.tags,
        max_tokens=MEMO_MAX_TOKENS,
        trigger=memo_trigger(min_refresh_interval_s),
        timeout=timeout,
    )


@dataclass(frozen=True)
class MemoState:
    status: MemoStatus
    model: MentalModel | None = None
    operation_id: str | None = None  # when this call created it
    error: str | None = None

    @property
    def version(self) -> str | None:
        """What identifies the memo's content: its refresh time (backend metadata)."""
        if self.model is None or not self.model.content:
            return None
        return self.model.last_refreshed_at or "unknown"


class MemoCache:
    """Fetches the memo, creating it once for a registered scope; caches it briefly."""

    def __init__(self) -> None:
        self._cached: dict[str, tuple[float, MemoState]] = {}

    def forget(self, scope: Scope) -> None:
        self._cached.pop(memo_id(scope), None)

    async def get(
        self, backend: MemoryBackend, scope: Scope, *, timeout: float, min_refresh_interval_s: int
    ) -> MemoState:
        key = memo_id(scope)
        cached = self._cached.get(key)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1]
        model = await backend.get_mental_model(scope.bank_id, key, timeout=timeout)
        if model is None:
            operation_id = await create_memo(
                backend, scope, timeout=timeout, min_refresh_interval_s=min_refresh_interval_s
            )
            state = MemoState("created", operation_id=operation_id)
        else:
            await _current_question(backend, scope, model, timeout=timeout)
            state = MemoState("ready" if model.content else "empty", model=model)
        self._cached[key] = (time.monotonic(), state)
        return state


async def _current_question(
    backend: MemoryBackend, scope: Scope, model: MentalModel, *, timeout: float
) -> None:
    """A memo created with an older question asks the current one from its next refresh on
    (best effort: the memo is delivered as it is either way)."""
    if model.source_query is None or model.source_query == MEMO_SOURCE_QUERY:
        return
    try:
        await backend.update_mental_model(
            scope.bank_id, model.id, source_query=MEMO_SOURCE_QUERY, timeout=timeout
        )
    except BackendError as error:
        logger.warning("the startup memo's question was not updated: %s", error)
