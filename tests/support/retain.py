"""Helpers for the retain tests: what a sidecar is given (config, registrations, exchanges), its
outbox, and what Hindsight holds afterwards, read through the official client.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hindsight_client_api.api.documents_api import DocumentsApi
from hindsight_client_api.api.memory_api import MemoryApi
from hindsight_client_api.api_client import ApiClient
from hindsight_client_api.configuration import Configuration
from hindsight_client_api.exceptions import ApiException

from tests.support.sidecar import Sidecar


def exchange(text: str, reply: str = "Noted.") -> list[dict[str, Any]]:
    """One Pi request as ``agent_end`` delivers it: the user message and the reply."""
    return [
        {"role": "user", "content": text, "timestamp": 1},
        {"role": "assistant", "content": [{"type": "text", "text": reply}]},
    ]


def marker() -> str:
    return f"mk{uuid.uuid4().hex[:10]}"


def write_config(state_dir: Path, base_url: str, bank_id: str, **extra: Any) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    config = {"hindsight": {"baseUrl": base_url}, "banks": {"project": {"bankId": bank_id}}}
    config.update(extra)
    (state_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")


def register(state_dir: Path, location: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "scope", "register", str(location)],
        env=dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state_dir)),
        check=True,
        capture_output=True,
        timeout=60,
    )


def outbox_status(state_dir: Path) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "outbox", "status", "--json"],
        env=dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state_dir)),
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    status: dict[str, Any] = json.loads(completed.stdout)
    return status


def wait_until_delivered(sidecar: Sidecar, *, timeout: float = 180.0) -> dict[str, Any]:
    """Until the sidecar's outbox has nothing pending or awaiting confirmation."""
    deadline = time.monotonic() + timeout
    while True:
        outbox = sidecar.call("status", {})["outbox"]
        if outbox["pending"] == 0 and outbox["submitted"] == 0:
            return dict(outbox)
        if time.monotonic() > deadline:
            raise AssertionError(f"outbox not drained after {timeout}s: {outbox}")
        time.sleep(0.5)


@dataclass
class BankView:
    """What one bank holds, read with the official client's generated API."""

    base_url: str
    bank_id: str
    documents: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    api_key: str | None = None  # a team's server refuses every request without it

    def _client(self) -> ApiClient:
        if self.api_key is None:
            return ApiClient(Configuration(host=self.base_url))
        return ApiClient(
            Configuration(host=self.base_url),
            header_name="Authorization",
            header_value=f"Bearer {self.api_key}",
        )

    def document_turns(self, document_id: str) -> list[dict[str, Any]]:
        async def fetch() -> list[dict[str, Any]]:
            async with self._client() as client:
                try:
                    document = await DocumentsApi(client).get_document(self.bank_id, document_id)
                except ApiException as error:
                    if error.status == 404:
                        return []
                    raise
            turns: list[dict[str, Any]] = json.loads(document.original_text or "[]")
            return turns

        return asyncio.run(fetch())

    def memories(self) -> list[dict[str, Any]]:
        """Every memory unit of the bank (facts and observations): text, context, type, doc."""

        async def fetch() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = []
            async with self._client() as client:
                api = MemoryApi(client)
                offset = 0
                while True:
                    page = await api.list_memories(self.bank_id, limit=500, offset=offset)
                    found.extend(
                        {
                            "text": item.text or "",
                            "context": item.context or "",
                            "fact_type": item.fact_type,
                            "document_id": item.document_id,
                        }
                        for item in page.items
                    )
                    offset += len(page.items)
                    if not page.items or offset >= page.total:
                        return found

        return asyncio.run(fetch())

    def everything(self, document_ids: list[str]) -> str:
        """All text Hindsight holds for these documents and the bank's memories, in one string."""
        parts = [json.dumps(self.document_turns(doc), ensure_ascii=False) for doc in document_ids]
        memories = [f"{m['text']} {m['context']}" for m in self.memories()]
        return "\n".join([*parts, *memories])
