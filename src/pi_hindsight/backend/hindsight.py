"""``HindsightBackend``: the :class:`~pi_hindsight.backend.interface.MemoryBackend` over the
official ``hindsight-client`` (its generated async API), composed of the resource modules.

Why the low-level generated API and not the ``Hindsight`` convenience class (ADR 0002): the
convenience class has one client-wide timeout, while we need a short one for recall and a long one
for reflect, and its sync wrappers run their own event loop (unsafe inside the sidecar's loop). The
generated API takes ``_request_timeout`` per call and runs on our loop, so cancellation (the
user's Esc) works.

Importing this module costs ~0.8 s (the client), so it is imported lazily: by the sidecar after
it has answered ``ready`` (``rpc/sidecar.py``), elsewhere through
``pi_hindsight.backend.open_backend``.
Each resource is a class over the one shared client (``_client.Client``, which also owns the one
translation of foreign failures into our errors); this class only composes them.
"""

from __future__ import annotations

from pi_hindsight.backend._client import Client, KeyProvider
from pi_hindsight.backend.banks import Banks
from pi_hindsight.backend.documents import Documents
from pi_hindsight.backend.memories import Memories
from pi_hindsight.backend.mental_models import MentalModels
from pi_hindsight.backend.operations import Operations
from pi_hindsight.backend.templates import Templates
from pi_hindsight.backend.usage import Usage


class HindsightBackend(Banks, Memories, Operations, MentalModels, Templates, Documents, Usage):
    """Async access to one Hindsight server. One instance per sidecar; call :meth:`close`."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | KeyProvider | None = None,
        ca_file: str | None = None,
    ) -> None:
        super().__init__(Client(base_url, api_key=api_key, ca_file=ca_file))
        self.base_url = self._client.base_url

    async def close(self) -> None:
        await self._client.close()
