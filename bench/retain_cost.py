"""What retain costs on a realistic session history, before and after ``retain.skipTrivial``
(issue 21). Both run side by side in one run, against one server, each into a fresh bank.

The history: one 50-request coding session as Pi reports it to the sidecar (``turnCompleted``):
work requests with tool calls and a summary, follow-ups ("yes, go ahead") that do work,
acknowledgements ("thanks" / "You're welcome!"), questions answered from the memory tools only,
and aborted requests. Its mix is written out in ``HISTORY`` below; it is this benchmark's
construction, not a measurement of real sessions.

"Before" is retain as of rev 83aa869 (every request with text is sent): the same code with
``retain.skipTrivial`` off, which skips the classification and nothing else. For each: requests
sent (outbox items delivered), characters sent (their retained content), requests skipped, and
the model tokens the server spent on the bank — as Hindsight recorded them (``usage``), after
extraction and consolidation settled, so consolidation's share is included.

Starts a local Hindsight (``--llm offline``: the stand-in, which reports characters / 4 as its
token usage) unless ``PI_HINDSIGHT_BENCH_SERVER_URL`` is set. Run:
``.venv/bin/python bench/retain_cost.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _sidecar import Sidecar  # bench/_sidecar.py (benchmarks run as scripts)

SETTLE_TIMEOUT_S = 900.0

Request = tuple[
    str, list[tuple[str, dict[str, Any], str]], str, bool
]  # user, tools, reply, aborted

WORK = [
    (
        "Add a retry with backoff to the HTTP client in src/net/client.py",
        "edit",
        "src/net/client.py",
        "Added `retry(max_attempts=3, base_delay=0.5)` around `Client.send`; 429 and 5xx retry, "
        "4xx do not.",
    ),
    (
        "Why does test_upload_large fail on CI?",
        "bash",
        "pytest tests/test_upload.py -k large",
        "CI sets TMPDIR to a 64 MB tmpfs; the 100 MB fixture does not fit. Moved it to a streamed "
        "generator.",
    ),
    (
        "Rename the `cfg` module to `settings` everywhere",
        "bash",
        "rg -l 'import cfg'",
        "Renamed src/app/cfg.py to src/app/settings.py and updated 14 imports; the public name "
        "`load()` stays.",
    ),
    (
        "The staging deploy uses which Helm chart?",
        "read",
        "deploy/staging/values.yaml",
        "Staging deploys chart `platform/api` 4.2.1 from the internal registry, values in "
        "deploy/staging.",
    ),
    (
        "Make the linter happy in src/billing",
        "bash",
        "ruff check src/billing",
        "Fixed 9 findings: unused imports, two bare excepts (now `except BillingError`), one "
        "shadowed name.",
    ),
    (
        "Add an index for the orders lookup by customer",
        "edit",
        "migrations/0042_orders_customer.sql",
        "Added migration 0042 creating `orders_customer_created_idx` on (customer_id, created_at "
        "DESC).",
    ),
    (
        "How are feature flags read in the frontend?",
        "read",
        "web/src/flags.ts",
        "Flags come from `/api/flags` at boot, cached in localStorage for 10 minutes; "
        "`useFlag(name)` reads them.",
    ),
    (
        "Bump the Node version to 22 in CI",
        "edit",
        ".github/workflows/ci.yml",
        "CI now uses Node 22.19 via actions/setup-node; the lockfile needed no change.",
    ),
    (
        "Document the release steps",
        "edit",
        "docs/release.md",
        "Wrote docs/release.md: tag vX.Y.Z on main, CI builds and signs, `make publish` pushes to "
        "the registry.",
    ),
    (
        "Find where we swallow the timeout error in the worker",
        "bash",
        "rg -n 'except TimeoutError' src/worker",
        "src/worker/loop.py:88 caught TimeoutError and continued silently; it now logs and counts "
        "a retry.",
    ),
    (
        "Split the 900-line views.py",
        "edit",
        "src/app/views/__init__.py",
        "Split views.py into views/orders.py, views/customers.py and views/admin.py; URLs "
        "unchanged.",
    ),
    (
        "What's our convention for error messages?",
        "read",
        "CONTRIBUTING.md",
        "Errors say what is wrong and how to fix it, start lower-case, and never include secrets.",
    ),
    (
        "Add a healthcheck endpoint",
        "edit",
        "src/app/health.py",
        "Added GET /healthz returning 200 with the DB and cache status; it bypasses auth.",
    ),
    (
        "Speed up the test suite",
        "bash",
        "pytest --durations=10",
        "The slowest tests rebuilt the DB per test; a session-scoped template database cut the "
        "suite from 6 to 2 minutes.",
    ),
]
FOLLOW_UPS = [
    ("yes, go ahead", "bash", "make test", "All 412 tests pass after the change."),
    (
        "ok do it",
        "edit",
        "src/app/settings.py",
        "Applied: settings now read APP_ENV first, then .env.",
    ),
    (
        "continue",
        "bash",
        "git diff --stat",
        "The refactor touches 6 files; the remaining step is the docs.",
    ),
]
ACKS = [
    ("thanks!", "You're welcome!"),
    ("ok", "Understood."),
    ("perfect, thank you", "Glad to help. Let me know if you need anything else."),
    ("👍", ""),
    ("great", "Great!"),
    ("sounds good", "Sure."),
]
MEMORY_QUESTIONS = [
    (
        "what do you remember about the deploy process?",
        "From memory: staging deploys chart platform/api with values in deploy/staging.",
    ),
    (
        "what did we decide about the retry policy?",
        "From memory: retries on 429 and 5xx, three attempts, 0.5 s base delay.",
    ),
]


def history() -> list[Request]:
    """50 requests: 28 work, 6 follow-ups that do work, 10 acknowledgements, 4 questions to the
    memory tools, 2 aborted (one that said something, one that did not)."""
    work: list[Request] = []
    for n in range(28):
        user, tool, arg, reply = WORK[n % len(WORK)]
        suffix = "" if n < len(WORK) else f" (part {n // len(WORK) + 1})"
        work.append((user + suffix, [(tool, {"path": arg}, f"{arg}: ok ({n})")], reply, False))
    requests: list[Request] = []
    follow = iter(FOLLOW_UPS * 2)
    acks = iter(ACKS * 2)
    memory = iter(MEMORY_QUESTIONS * 2)
    for n, request in enumerate(work):
        requests.append(request)
        if n % 3 == 0:
            user, reply = next(acks)
            requests.append((user, [], reply, False))
        if n % 5 == 1:
            user, tool, arg, reply = next(follow)
            requests.append((user, [(tool, {"command": arg}, "ok")], reply, False))
        if n % 7 == 3:
            user, reply = next(memory)
            requests.append(
                (user, [("hindsight_memory", {"action": "recall"}, "records")], reply, False)
            )
    requests.append(("run the whole migration against staging now", [], "", True))
    requests.append(("ok, do it", [], "", True))
    return requests[:50]


def pi_messages(request: Request) -> list[dict[str, Any]]:
    user, tools, reply, _ = request
    messages: list[dict[str, Any]] = [{"role": "user", "content": user, "timestamp": 1}]
    for index, (name, arguments, result) in enumerate(tools):
        call = {"type": "toolCall", "id": f"c{index}", "name": name, "arguments": arguments}
        messages.append({"role": "assistant", "content": [call]})
        messages.append(
            {
                "role": "toolResult",
                "toolCallId": f"c{index}",
                "toolName": name,
                "content": [{"type": "text", "text": result}],
                "isError": False,
            }
        )
    if reply:
        messages.append({"role": "assistant", "content": [{"type": "text", "text": reply}]})
    return messages


def run_variant(base_url: str, work: Path, *, skip_trivial: bool) -> dict[str, Any]:
    from pi_hindsight.stores.outbox import Outbox

    state = Path(tempfile.mkdtemp(dir=work, prefix="state-"))
    repo = Path(tempfile.mkdtemp(dir=work, prefix="repo-"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    bank = f"bench-cost-{'after' if skip_trivial else 'before'}-{uuid.uuid4().hex[:6]}"
    config = {
        "hindsight": {"baseUrl": base_url},
        "banks": {"project": {"bankId": bank}},
        "retain": {"skipTrivial": skip_trivial},
    }
    (state / "config.json").write_text(json.dumps(config))
    env = dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state))
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "scope", "register", str(repo)],
        env=env,
        check=True,
        capture_output=True,
    )
    sidecar = Sidecar(env)
    session = f"cost-{uuid.uuid4().hex[:6]}"
    sidecar.call(
        "initialize", {"protocolVersion": 1, "cwd": str(repo), "sessionId": session, "hasUI": False}
    )
    requests = history()
    try:
        for n, request in enumerate(requests):
            sidecar.call(
                "prepareMemory", {"requestId": f"r{n}", "prompt": request[0], "sessionId": session}
            )
            sidecar.call(
                "turnCompleted",
                {
                    "requestId": f"r{n}",
                    "sessionId": session,
                    "messages": pi_messages(request),
                    "aborted": request[3],
                },
            )
    finally:
        sidecar.close()
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "outbox", "drain", "--timeout", "600"],
        env=env,
        check=True,
        capture_output=True,
    )
    outbox = Outbox(state)
    try:
        sent = outbox.items(states=("done",), limit=10_000)
        skipped = outbox.skipped(limit=10_000)
    finally:
        outbox.close()
    spend = asyncio.run(settled_spend(base_url, bank))
    return {
        "requests": len(requests),
        "sent": len(sent),
        "chars": sum(len(item.retain.content) for item in sent),
        "skipped": len(skipped),
        "skippedReasons": sorted({s.reason for s in skipped}),
        "spend": spend,
    }


async def settled_spend(base_url: str, bank: str) -> dict[str, Any]:
    """The bank's spend once its extraction and consolidation are done (no operation pending
    and the recorded figures unchanged for 10 s)."""
    from pi_hindsight.backend import open_backend
    from pi_hindsight.engine.spend import bank_usage

    backend = open_backend(base_url)
    try:
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        last: Any = None
        stable_since = time.monotonic()
        while time.monotonic() < deadline:
            busy = [
                op
                for state in ("pending", "processing")
                for op in await backend.list_operations(bank, state=state, timeout=30)  # type: ignore[arg-type]
            ]
            usage = await bank_usage(backend, bank, "1d", timeout=30)
            figure = (usage.total.calls, usage.total.total_tokens)
            if figure != last or busy:
                last, stable_since = figure, time.monotonic()
            elif time.monotonic() - stable_since >= 10:
                return usage.to_json()
            await asyncio.sleep(2)
        raise SystemExit(f"bank {bank} did not settle in {SETTLE_TIMEOUT_S:.0f} s")
    finally:
        await backend.close()


def main() -> None:
    from pi_hindsight.launcher import start_server, stop_server

    work = Path(tempfile.mkdtemp(prefix="pi-hindsight-cost-bench-"))
    server_state = work / "server"
    external = os.environ.get("PI_HINDSIGHT_BENCH_SERVER_URL")
    base_url = external or start_server(server_state, llm="offline").base_url
    try:
        before = run_variant(base_url, work, skip_trivial=False)
        after = run_variant(base_url, work, skip_trivial=True)
    finally:
        if not external:
            stop_server(server_state)
        shutil.rmtree(work, ignore_errors=True)

    def row(name: str, key: str, a: float, b: float) -> None:
        share = f"{1 - b / a:6.1%}" if a else "   n/a"
        print(f"  {name:<34} {a:>10,.0f} {b:>10,.0f}   saved {share}")

    print(f"retain cost, one {before['requests']}-request session (stand-in model)")
    print(f"  {'':<34} {'before':>10} {'after':>10}")
    row("requests sent to retain", "sent", before["sent"], after["sent"])
    row("characters sent", "chars", before["chars"], after["chars"])
    total_b, total_a = before["spend"]["total"], after["spend"]["total"]
    row("model calls (all operations)", "calls", total_b["calls"], total_a["calls"])
    if total_b["tokensReported"] and total_a["tokensReported"]:
        row(
            "model tokens (all operations)",
            "tokens",
            total_b["totalTokens"],
            total_a["totalTokens"],
        )
    else:
        print("  model tokens: the server does not report tokens")
    for name in ("retain extraction", "consolidation"):
        ob = next(o for o in before["spend"]["operations"] if o["operation"] == name)
        oa = next(o for o in after["spend"]["operations"] if o["operation"] == name)
        row(f"  {name} tokens", name, ob["totalTokens"] or 0, oa["totalTokens"] or 0)
    print(f"  skipped: {after['skipped']} requests ({', '.join(after['skippedReasons'])})")
    print(json.dumps({"before": before, "after": after}, indent=2))


if __name__ == "__main__":
    main()
