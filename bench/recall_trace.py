"""What asking Hindsight's recall for its trace (``RecallRequest.trace=True``) costs.

Retains a fixed set of facts into a fresh bank (the real server: ``PI_HINDSIGHT_BENCH_SERVER_URL``,
or one started with the launcher and the offline LLM), then recalls the same queries with and
without the trace, alternating so both see the same load, and prints side by side: the median
wall time of a recall (HTTP and parse), the median response size, and what a delivery would keep
of it per record (type, scores, and with the trace the rank each retrieval arm gave it). Two bank
sizes by default: the trace grows with the candidates.

Run: ``python bench/recall_trace.py [--rounds N] [--facts N ...]``. The figures decided that
automatic recall does not ask for the trace (docs/evidence.md, "Why a record came").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FACTS = [
    f"{subject} {fact}"
    for subject, fact in [
        ("Production deploys", "go to the Zephyr cluster in Frankfurt."),
        ("The deploy pipeline", "needs approval from Alice before a release."),
        ("CI", "runs on GitHub Actions with a 20 minute timeout."),
        ("The billing service", "is owned by the payments team."),
        ("Releases", "are tagged vX.Y.Z on main."),
        ("Python 3.9 support", "was dropped in March."),
        ("The database", "is PostgreSQL 16 with logical replication."),
        ("Feature flags", "live in the flags.yaml file at the repository root."),
        ("The frontend", "is built with Vite and served from a CDN."),
        ("Integration tests", "need a running Redis on port 6380."),
        ("The API gateway", "rate-limits clients to 100 requests per second."),
        ("Error reports", "go to the on-call channel in chat."),
        ("Secrets", "are stored in the vault, never in environment files."),
        ("The mobile app", "releases every second Thursday."),
        ("Code review", "needs two approvals for changes to the payment code."),
        ("Logs", "are kept for 30 days in the observability stack."),
    ]
]
QUERIES = [
    "where do production deploys go",
    "who approves a release",
    "how long may CI take",
    "which database do we use",
    "what does a code review need",
    "how are secrets kept",
]


@contextlib.contextmanager
def server() -> Iterator[str]:
    external = os.environ.get("PI_HINDSIGHT_BENCH_SERVER_URL")
    if external:
        yield external
        return
    from pi_hindsight.launcher import start_server, stop_server

    place = Path(tempfile.mkdtemp(prefix="pi-hindsight-bench-server-"))
    try:
        yield start_server(place, llm="offline").base_url
    finally:
        stop_server(place)


def facts(count: int) -> list[str]:
    """``count`` distinct facts: the fixed ones, then variants of them for other services."""
    out = list(FACTS[:count])
    service = 2
    while len(out) < count:
        out.extend(f"In service {service}: {fact}" for fact in FACTS[: count - len(out)])
        service += 1
    return out


async def measure(base_url: str, rounds: int, count: int) -> dict[bool, dict[str, list[float]]]:
    from hindsight_client_api import ApiClient, Configuration
    from hindsight_client_api.api.memory_api import MemoryApi
    from hindsight_client_api.models.recall_request import RecallRequest
    from hindsight_client_api.models.recall_response import RecallResponse
    from hindsight_client_api.models.retain_request import RetainRequest

    bank = f"bench-trace-{uuid.uuid4().hex[:8]}"
    tags = ["bench"]
    figures: dict[bool, dict[str, list[float]]] = {
        trace: {"ms": [], "bytes": [], "kept": []} for trace in (False, True)
    }
    async with ApiClient(Configuration(host=base_url)) as client:
        api = MemoryApi(client)
        items = [
            {"content": fact, "tags": tags, "document_id": f"fact-{index}"}
            for index, fact in enumerate(facts(count))
        ]
        await api.retain_memories(bank, RetainRequest.from_dict({"items": items, "async": False}))
        try:
            for round_ in range(rounds):
                query = QUERIES[round_ % len(QUERIES)]
                # Alternate which goes first, so neither always meets a warm cache.
                for trace in (False, True) if round_ % 2 == 0 else (True, False):
                    request = RecallRequest(
                        query=query, trace=trace, tags=tags, tags_match="exact", max_tokens=800
                    )
                    started = time.perf_counter()
                    raw = await api.recall_memories_without_preload_content(bank, request)
                    body = await raw.read()
                    RecallResponse.from_json(body.decode())  # the parse is part of the cost
                    figures[trace]["ms"].append((time.perf_counter() - started) * 1000)
                    figures[trace]["bytes"].append(len(body))
                    figures[trace]["kept"].append(len(json.dumps(_kept(json.loads(body)))))
        finally:
            with contextlib.suppress(Exception):
                from hindsight_client_api.api.banks_api import BanksApi

                await BanksApi(client).delete_bank(bank)
    return figures


def _kept(answer: dict[str, Any]) -> dict[str, Any]:
    """What a delivery keeps of an answer: per record its type, scores and arm ranks."""
    ranks = {
        entry.get("node_id"): entry.get("source_ranks")
        for entry in (answer.get("trace") or {}).get("rrf_merged") or ()
    }
    return {
        item["id"]: {
            "type": item.get("type"),
            "scores": item.get("scores"),
            "ranks": ranks.get(item["id"]),
        }
        for item in answer.get("results") or ()
    }


def report(count: int, figures: dict[bool, dict[str, list[float]]]) -> None:
    off, on = figures[False], figures[True]
    print(f"\n{count} facts: recall with and without trace, {len(off['ms'])} recalls each")
    print(f"{'':28}{'trace=False':>14}{'trace=True':>14}{'ratio':>9}")
    for label, key in (("median ms per recall", "ms"), ("median response bytes", "bytes")):
        a, b = statistics.median(off[key]), statistics.median(on[key])
        print(f"{label:28}{a:>14.1f}{b:>14.1f}{b / a:>9.2f}")
    print(
        f"{'median bytes kept per recall':28}{statistics.median(off['kept']):>14.1f}"
        f"{statistics.median(on['kept']):>14.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--facts", type=int, nargs="+", default=[16, 96])
    options = parser.parse_args()
    with server() as base_url:
        runs = {
            count: asyncio.run(measure(base_url, options.rounds, count)) for count in options.facts
        }
    for count, figures in runs.items():
        report(count, figures)


if __name__ == "__main__":
    main()
