"""Helpers for the retain tests: real sidecar processes driven over stdio (as the shim drives
them) and what Hindsight holds afterwards, read through the official client.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
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


class SidecarGone(Exception):
    """The sidecar process ended (killed) before answering."""


class Sidecar:
    """A real ``pi-hindsight serve`` process; calls are correlated by id, as the shim does."""

    def __init__(self, state_dir: Path, *, extra_env: dict[str, str] | None = None) -> None:
        env = dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state_dir), **(extra_env or {}))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pi_hindsight", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: list[bytes] = []
        self._next_id = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        ready = self._lines.get(timeout=30)
        assert ready is not None and ready.get("method") == "ready", ready

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(json.loads(line))
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def call(self, method: str, params: dict[str, Any], *, timeout: float = 30.0) -> Any:
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            line = json.dumps(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(line.encode() + b"\n")
                self.process.stdin.flush()
            except (BrokenPipeError, OSError) as error:
                raise SidecarGone(str(error)) from error
            deadline = time.monotonic() + timeout
            while True:
                try:
                    message = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
                except queue.Empty:
                    raise TimeoutError(f"{method} not answered in {timeout}s") from None
                if message is None:
                    self._lines.put(None)
                    raise SidecarGone(f"sidecar exited during {method}")
                if message.get("id") == request_id:
                    if "error" in message:
                        raise AssertionError(f"{method} failed: {message['error']}")
                    return message["result"]

    def initialize(self, cwd: Path, session_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.call(
            "initialize",
            {"protocolVersion": 1, "cwd": str(cwd), "sessionId": session_id, "hasUI": False},
        )
        return result

    def turn(self, session_id: str, request_id: str, messages: list[dict[str, Any]]) -> Any:
        return self.call(
            "turnCompleted",
            {"requestId": request_id, "sessionId": session_id, "messages": messages},
            timeout=10,
        )

    def kill(self) -> None:
        """SIGKILL: no flush, no cleanup — a crash."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)

    def shutdown(self) -> Any:
        try:
            result = self.call("shutdown", {"reason": "quit"}, timeout=15)
        except SidecarGone:
            result = None
        self.process.wait(timeout=15)
        return result

    def close(self) -> None:
        self.kill()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:  # stdin of a killed process: its unflushed bytes have nowhere to go
                    continue


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
