"""Benchmarks for durable retain (issue 4). Everything is measured side by side in one run.

(a) Bytes per request: a real sidecar retains N same-size requests of one session, one after the
    other, through a byte-counting HTTP proxy in front of Hindsight; the bytes sent for request N
    against request 1 (target ≤ 1.2). Reported for the retain call alone (exact) and for
    everything sent while delivering the request (retain + operation polls; medians of the first
    and last ten requests).
(b) Durable enqueue: ``Outbox.enqueue`` items/s, one committed transaction per item, as
    ``complete_turn`` does it — without and with turning Pi messages into the retained text
    (tool policy + redaction) first (target ≥ 2,000 items/s). Medians of five runs.
(c) Drain: a backlog of B items (S sessions, as left by an outage) drained by the outbox worker,
    against the official client sending the same work directly with the same concurrency (2):
    (ii) the *same batches* (per session up to 32 consecutive requests merged into one append,
    sent synchronously) — the same server work without the outbox machinery, the fair baseline
    (target ≥ 0.9) — and (i) one synchronous append per request, what a client without an outbox
    does. Each variant writes to a fresh bank.

Starts a local Hindsight (``--llm offline``) unless ``PI_HINDSIGHT_BENCH_SERVER_URL`` is set.
Sizes: ``BENCH_BYTES_REQUESTS`` (200), ``BENCH_ENQUEUE_ITEMS`` (5000), ``BENCH_BACKLOG`` (2000),
``BENCH_SESSIONS`` (20). Run: ``.venv/bin/python bench/retain_bench.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _sidecar import Sidecar  # bench/_sidecar.py (benchmarks run as scripts)
from pi_hindsight.backend.resources import RetainItem
from pi_hindsight.stores.outbox_items import RetainRequest

BYTES_REQUESTS = int(os.environ.get("BENCH_BYTES_REQUESTS", "200"))
ENQUEUE_ITEMS = int(os.environ.get("BENCH_ENQUEUE_ITEMS", "5000"))
BACKLOG = int(os.environ.get("BENCH_BACKLOG", "2000"))
# Baseline (i) sends one synchronous append per request: slow (~30 min for 2,000 here), so opt-in.
PER_REQUEST_BASELINE = os.environ.get("BENCH_PER_REQUEST_BASELINE") == "1"
SESSIONS = int(os.environ.get("BENCH_SESSIONS", "20"))
CONCURRENCY = 2


def request_text(n: int) -> tuple[str, str]:
    """A same-size request: ~600 characters of user text and ~300 of reply."""
    user = f"Request {n:05d}: " + (
        "we keep the deploy notes in docs/deploy.md and review them. " * 10
    )
    reply = f"Reply {n:05d}: " + ("noted, the deploy notes stay in docs. " * 8)
    return user[:600], reply[:300]


def pi_messages(n: int) -> list[dict[str, Any]]:
    user, reply = request_text(n)
    return [
        {"role": "user", "content": user, "timestamp": 1},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": reply},
                {"type": "toolCall", "id": "c", "name": "bash", "arguments": {"command": "ls"}},
            ],
        },
        {
            "role": "toolResult",
            "toolCallId": "c",
            "toolName": "bash",
            "content": [{"type": "text", "text": "docs\nsrc\ntests"}],
            "isError": False,
        },
    ]


def item(content: str, session: str, n: int) -> RetainItem:
    """What a completed request enqueues (``engine/retaining.py``)."""
    return RetainItem(
        content=content,
        document_id=f"pi-session-{session}",
        tags=("project:bench",),
        timestamp=datetime.now(UTC).isoformat(),
        context="Pi coding session in project bench",
        metadata={"source": "pi", "session_id": session, "request_id": f"r{n}"},
        update_mode="append",
    )


def item_json(retain: RetainItem) -> dict[str, Any]:
    """The same item as the official client takes it."""
    return {
        "content": retain.content,
        "document_id": retain.document_id,
        "tags": list(retain.tags),
        "timestamp": retain.timestamp,
        "context": retain.context,
        "metadata": dict(retain.metadata),
        "update_mode": retain.update_mode,
    }


def plain_content(n: int) -> str:
    user, reply = request_text(n)
    return json.dumps(
        [
            {"role": "user", "content": user},
            {"role": "assistant", "content": reply},
            {"role": "assistant", "content": "(used tool bash)"},
        ]
    )


# -- (a) a byte-counting proxy -------------------------------------------------------------


class CountingProxy:
    """HTTP/1.1 pass-through that records (method, path, bytes) of every request it forwards."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.requests: list[tuple[str, str, int]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)

        async def pipe_back() -> None:
            while data := await upstream_reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()

        back = asyncio.create_task(pipe_back())
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = 0
                for line in lines[1:]:
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append((method, path, len(head) + len(body)))
                upstream_writer.write(head + body)
                await upstream_writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            upstream_writer.close()
            back.cancel()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


def bytes_per_request(base_url: str, work: Path) -> dict[str, float]:
    host, port = base_url.removeprefix("http://").split(":")
    proxy = CountingProxy(host, int(port))
    state, repo = work / "bytes-state", work / "bytes-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    state.mkdir()
    bank = f"bench-bytes-{uuid.uuid4().hex[:8]}"
    (state / "config.json").write_text(
        json.dumps(
            {
                "hindsight": {"baseUrl": f"http://127.0.0.1:{proxy.port}"},
                "banks": {"project": {"bankId": bank}},
            }
        )
    )
    env = dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state))
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "scope", "register", str(repo)],
        env=env,
        check=True,
        capture_output=True,
    )
    sidecar = Sidecar(env)
    session = f"bytes-{uuid.uuid4().hex[:6]}"
    sidecar.call(
        "initialize", {"protocolVersion": 1, "cwd": str(repo), "sessionId": session, "hasUI": False}
    )
    # Warm up (bank check, client import) outside the measured requests.
    sidecar.call("prepareMemory", {"requestId": "w", "prompt": "warm up", "sessionId": session})
    per_request: list[tuple[int, int]] = []  # (retain call bytes, all bytes)
    try:
        for n in range(1, BYTES_REQUESTS + 1):
            mark = len(proxy.requests)
            sidecar.call(
                "turnCompleted",
                {"requestId": f"b{n}", "sessionId": session, "messages": pi_messages(n)},
            )
            while True:
                outbox = sidecar.call("status", {})["outbox"]
                if outbox["pending"] == 0 and outbox["submitted"] == 0:
                    break
                time.sleep(0.02)
            sent = proxy.requests[mark:]
            retain = sum(
                size
                for method, path, size in sent
                if method == "POST" and path.endswith("/memories")
            )
            per_request.append((retain, sum(size for _, _, size in sent)))
    finally:
        sidecar.close()
        proxy.close()
    first, last = per_request[:10], per_request[-10:]
    return {
        "retain_first": per_request[0][0],
        "retain_last": per_request[-1][0],
        "all_first": statistics.median(total for _, total in first),
        "all_last": statistics.median(total for _, total in last),
    }


# -- (b) enqueue throughput ----------------------------------------------------------------


def enqueue_rate(work: Path, *, render: bool) -> float:
    from pi_hindsight.engine.turn_text import ToolPolicy, render_turn
    from pi_hindsight.hosts.pi.messages import turn_messages
    from pi_hindsight.stores.outbox import Outbox

    directory = Path(tempfile.mkdtemp(dir=work, prefix="enqueue-"))
    outbox = Outbox(directory)
    messages = [pi_messages(n) for n in range(ENQUEUE_ITEMS)]
    contents = [plain_content(n) for n in range(ENQUEUE_ITEMS)]
    try:
        started = time.perf_counter()
        for n in range(ENQUEUE_ITEMS):
            if render:
                content = render_turn(turn_messages(messages[n]), ToolPolicy()).content
            else:
                content = contents[n]
            session = f"s{n % 10}"
            outbox.enqueue(RetainRequest(session, "bench", item(content, session, n), f"r{n}"))
        elapsed = time.perf_counter() - started
    finally:
        outbox.close()
    return ENQUEUE_ITEMS / elapsed


def redaction_us(samples: int = 2000) -> float:
    from pi_hindsight.redaction import redact

    text = " ".join(request_text(n)[0] for n in range(3))
    started = time.perf_counter()
    for _ in range(samples):
        redact(text)
    return (time.perf_counter() - started) / samples * 1e6


# -- (c) drain -----------------------------------------------------------------------------


def backlog() -> list[tuple[str, int, str]]:
    sessions = [f"drain-{uuid.uuid4().hex[:6]}" for _ in range(SESSIONS)]
    return [(sessions[n % SESSIONS], n, plain_content(n)) for n in range(BACKLOG)]


async def drain_with_outbox(base_url: str, work: Path, items: list[tuple[str, int, str]]) -> float:
    from pi_hindsight.backend.hindsight import HindsightBackend
    from pi_hindsight.backend.resources import BankMissions
    from pi_hindsight.engine.retain_worker import RetainWorker
    from pi_hindsight.stores.outbox import Outbox

    bank = f"bench-drain-{uuid.uuid4().hex[:8]}"
    outbox = Outbox(Path(tempfile.mkdtemp(dir=work, prefix="drain-")))
    for session, n, content in items:
        outbox.enqueue(RetainRequest(session, bank, item(content, session, n)))
    backend = HindsightBackend(base_url)
    await backend.create_bank(bank, BankMissions(mission="bench"), timeout=30)

    async def provider() -> HindsightBackend:
        return backend

    worker = RetainWorker(outbox, provider, timeout_s=60, concurrency=CONCURRENCY)
    try:
        started = time.perf_counter()
        await worker.run(until_empty=True)
        elapsed = time.perf_counter() - started
        health = outbox.health()
        assert health.done == len(items) and health.dead == 0, health
    finally:
        await backend.close()
        outbox.close()
    return elapsed


def same_batches(items: list[tuple[str, int, str]]) -> dict[str, list[dict[str, Any]]]:
    """The retain items the outbox sends for this backlog, per session, in order."""
    from pi_hindsight.engine.retain_worker import compose
    from pi_hindsight.stores.outbox import BATCH_MAX_ITEMS, Batch, OutboxItem

    per_session: dict[str, list[tuple[int, str]]] = {}
    for session, n, content in items:
        per_session.setdefault(session, []).append((n, content))
    batches: dict[str, list[dict[str, Any]]] = {}
    for session, entries in per_session.items():
        for start in range(0, len(entries), BATCH_MAX_ITEMS):
            members = tuple(
                OutboxItem(
                    str(n),
                    session,
                    None,
                    "b",
                    item(content, session, n),
                    0,
                    "sending",
                    None,
                    None,
                    0.0,
                    0.0,
                )
                for n, content in entries[start : start + BATCH_MAX_ITEMS]
            )
            batch = Batch(str(uuid.uuid4()), session, "b", "sending", 0, 0, 0, None, None, members)
            (composed,) = compose(batch)
            batches.setdefault(session, []).append(item_json(composed))
    return batches


def one_per_request(items: list[tuple[str, int, str]]) -> dict[str, list[dict[str, Any]]]:
    per_session: dict[str, list[dict[str, Any]]] = {}
    for session, n, content in items:
        per_session.setdefault(session, []).append(item_json(item(content, session, n)))
    return per_session


async def drain_direct(base_url: str, work_per_session: dict[str, list[dict[str, Any]]]) -> float:
    """The official client, no outbox: each session's calls in order, CONCURRENCY sessions at a
    time, each call synchronous (it returns when Hindsight has stored the items)."""
    from hindsight_client import Hindsight

    bank = f"bench-direct-{uuid.uuid4().hex[:8]}"
    client = Hindsight(base_url=base_url, timeout=300.0)
    await client.acreate_bank(bank, name=bank, mission="bench")
    queue: asyncio.Queue[str] = asyncio.Queue()
    for session in work_per_session:
        queue.put_nowait(session)

    async def sender() -> None:
        while not queue.empty():
            session = queue.get_nowait()
            for item in work_per_session[session]:
                await client.aretain_batch(bank, [item], retain_async=False)

    try:
        started = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(CONCURRENCY)))
        return time.perf_counter() - started
    finally:
        await client.aclose()


def main() -> None:
    from pi_hindsight.launcher import start_server, stop_server

    work = Path(tempfile.mkdtemp(prefix="pi-hindsight-retain-bench-"))
    server_state = work / "server"
    external = os.environ.get("PI_HINDSIGHT_BENCH_SERVER_URL")
    base_url = external or start_server(server_state, llm="offline").base_url
    try:
        rates: dict[str, list[float]] = {"raw": [], "rendered": []}
        for _ in range(5):
            rates["raw"].append(enqueue_rate(work, render=False))
            rates["rendered"].append(enqueue_rate(work, render=True))
        redact_us = redaction_us()
        sizes = bytes_per_request(base_url, work)
        items = backlog()
        outbox_s = asyncio.run(drain_with_outbox(base_url, work, items))
        same_s = asyncio.run(drain_direct(base_url, same_batches(items)))
        single_s = (
            asyncio.run(drain_direct(base_url, one_per_request(items)))
            if PER_REQUEST_BASELINE
            else None
        )
    finally:
        if not external:
            stop_server(server_state)
        shutil.rmtree(work, ignore_errors=True)

    median: Callable[[list[float]], float] = statistics.median
    retain_ratio = sizes["retain_last"] / sizes["retain_first"]
    all_ratio = sizes["all_last"] / sizes["all_first"]
    print(
        f"(a) bytes sent to Hindsight per request, {BYTES_REQUESTS} same-size requests, 1 session"
    )
    print(
        f"    retain call: request 1 {sizes['retain_first']} B, request {BYTES_REQUESTS} "
        f"{sizes['retain_last']} B, ratio {retain_ratio:.3f}"
    )
    print(
        f"    everything (retain + polls), median of first/last 10: {sizes['all_first']:.0f} B"
        f" / {sizes['all_last']:.0f} B, ratio {all_ratio:.3f}  (target <= 1.2)"
    )
    print(f"(b) durable enqueue, {ENQUEUE_ITEMS} items, one transaction each, median of 5 runs")
    print(f"    enqueue only:                       {median(rates['raw']):8.0f} items/s")
    rendered = median(rates["rendered"])
    print(f"    + Pi messages -> text + redaction:  {rendered:8.0f} items/s  (target >= 2000)")
    print(f"    redact() of a ~1.8 KB request:      {redact_us:8.1f} us")
    print(
        f"(c) drain of a {BACKLOG}-item backlog over {SESSIONS} sessions, concurrency {CONCURRENCY}"
    )
    rows = [("outbox worker", outbox_s), ("official client, same batches (ii)", same_s)]
    if single_s is not None:
        rows.append(("official client, one append per request (i)", single_s))
    for name, seconds in rows:
        print(f"    {name:<45} {seconds:7.1f} s  {BACKLOG / seconds:7.1f} items/s")
    print(f"    ratio outbox / baseline ii: {same_s / outbox_s:.2f}  (target >= 0.9)")
    if single_s is not None:
        print(f"    ratio outbox / baseline i:  {single_s / outbox_s:.2f}")


if __name__ == "__main__":
    main()
