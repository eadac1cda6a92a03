"""Benchmark seed: what the sidecar adds to a request, and how fast it starts.

(a) Added latency per request: the ``prepareMemory`` RPC round trip measured by a client on the
    sidecar's pipes, minus the Hindsight recall call itself (timed inside the sidecar around the
    HTTP call and reported in the message details as ``recallMs``). Side by side, a direct recall
    with the official client from a warm process shows what the recall alone costs.
(b) Cold start: spawn → ``ready`` line, against a bare ``python -c pass`` start in the same run;
    and spawn → ``initialize`` answered in the registered repository, which is what a Pi session
    waits for before its first prompt (the shim awaits both, docs/shim.md).

Targets (issue 2): added latency p50 ≤ 3 ms, ready ≤ 300 ms. Runs against a local Hindsight it
starts itself (``--llm offline``), or ``PI_HINDSIGHT_BENCH_SERVER_URL`` if set. Prints medians.

``--baseline REV`` also runs the sidecar of git revision REV (checked out into a temporary
worktree), interleaved request by request with the current one against the same server and bank,
and prints both and their ratio: a before/after comparison in one run (issue 11: a redesign must
not make ``prepareMemory`` slower).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from _sidecar import Sidecar  # bench/_sidecar.py (benchmarks run as scripts)

ROOT = Path(__file__).resolve().parents[1]

REQUESTS = int(os.environ.get("BENCH_REQUESTS", "200"))
COLD_STARTS = int(os.environ.get("BENCH_COLD_STARTS", "15"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class ColdStarts:
    ready: list[float]
    initialized: list[float]
    bare: list[float]


def cold_starts(envs: list[dict[str, str]], repo: Path) -> list[ColdStarts]:
    """Each environment's cold starts, interleaved start by start (the same load for all)."""
    figures = [ColdStarts([], [], []) for _ in envs]
    for index in range(COLD_STARTS):
        for env, cold in zip(envs, figures, strict=True):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            cold.bare.append(time.perf_counter() - started)
            started = time.perf_counter()
            process = subprocess.Popen(
                [sys.executable, "-m", "pi_hindsight", "serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            assert process.stdout is not None and process.stdin is not None
            process.stdout.readline()
            cold.ready.append(time.perf_counter() - started)
            params = {"protocolVersion": 1, "cwd": str(repo), "sessionId": f"cold-{index}"}
            request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
            line = json.dumps({**request, "params": {**params, "hasUI": False}})
            process.stdin.write(line.encode() + b"\n")
            process.stdin.flush()
            while json.loads(process.stdout.readline()).get("id") != 1:
                pass
            cold.initialized.append(time.perf_counter() - started)
            process.stdin.close()
            process.wait(timeout=30)
            process.stdout.close()
    return figures


async def direct_recalls(
    base_url: str, bank: str, tags: list[str], queries: list[str]
) -> list[float]:
    from pi_hindsight.backend.hindsight import HindsightBackend

    backend = HindsightBackend(base_url)
    timings = []
    try:
        for query in queries:
            started = time.perf_counter()
            await backend.recall(
                bank, query, tags=tags, tags_match="exact", max_tokens=800, timeout=10
            )
            timings.append(time.perf_counter() - started)
    finally:
        await backend.close()
    return timings


@contextlib.contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """``revision``'s ``src`` directory, in a temporary git worktree removed afterwards."""
    place = Path(tempfile.mkdtemp(prefix="pi-hindsight-baseline-")) / "tree"
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-q", str(place), revision], cwd=ROOT, check=True
    )
    try:
        yield place / "src"
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(place)], cwd=ROOT, check=False)


class Measured:
    """One sidecar's timings: round trips and what it added beyond its recall."""

    def __init__(self, name: str, sidecar: Sidecar) -> None:
        self.name, self.sidecar = name, sidecar
        self.round_trips: list[float] = []
        self.added: list[float] = []
        self.delivered = 0

    def request(self, repo: Path, index: int, query: str) -> None:
        # A fresh session each time (not timed): its first request delivers, so the whole
        # delivery path (render, redaction, evidence) is measured, not an already-seen skip.
        session = f"{self.name}-{index}"
        self.sidecar.call(
            "initialize",
            {"protocolVersion": 1, "cwd": str(repo), "sessionId": session, "hasUI": False},
        )
        started = time.perf_counter()
        result = self.sidecar.call(
            "prepareMemory", {"requestId": f"{session}-r", "prompt": query, "sessionId": session}
        )
        elapsed = time.perf_counter() - started
        self.round_trips.append(elapsed)
        if result["message"] is not None:
            self.delivered += 1
        if result.get("recallMs") is not None:
            self.added.append(elapsed - result["recallMs"] / 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", metavar="REV", help="also measure this git revision")
    options = parser.parse_args()
    with contextlib.ExitStack() as stack:
        baseline = (
            None if options.baseline is None else stack.enter_context(checkout(options.baseline))
        )
        run(baseline, options.baseline)


def _cli(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", *args], env=env, check=True, capture_output=True
    )


def _prepare(work: Path, base_url: str) -> tuple[Path, str, dict[str, str]]:
    """A registered repository and a state dir for a fresh bank: (repo, bank, env)."""
    state = work / "state"
    repo = work / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", "https://example.com/bench/repo.git"],
        cwd=repo,
        check=True,
    )
    bank = f"bench-{uuid.uuid4().hex[:8]}"
    state.mkdir()
    (state / "config.json").write_text(
        json.dumps({"hindsight": {"baseUrl": base_url}, "banks": {"project": {"bankId": bank}}})
    )
    env = dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state))
    # Start-up as on a user's machine: with the bytecode cache (a test environment may turn it
    # off, and then every start compiles every module it imports, the more code the worse).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    _cli(env, "scope", "register", str(repo))
    return repo, bank, env


def _seed(sidecar: Sidecar, repo: Path, env: dict[str, str]) -> None:
    """Give the bank some memories to find, and wait until Hindsight holds them."""
    sidecar.call(
        "initialize",
        {"protocolVersion": 1, "cwd": str(repo), "sessionId": "bench", "hasUI": False},
    )
    for n in range(20):
        sidecar.call(
            "turnCompleted",
            {
                "requestId": f"seed-{n}",
                "sessionId": "bench",
                "messages": [
                    {
                        "role": "user",
                        "content": f"Service {n} runs on port {8000 + n} in cluster c{n % 3}.",
                    },
                    {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
                ],
            },
        )
    _cli(env, "outbox", "drain", "--timeout", "180")


def _baseline(work: Path, env: dict[str, str], repo: Path, src: Path, name: str) -> Measured:
    """The baseline's sidecar, seeded as the current one was: each side's state dir then holds
    the same history (the seed session, its turns in the outbox and the ledger), so neither
    starts or answers from emptier stores. The bank is shared: both recall the same records."""
    # Its own state dir: an older version cannot open a newer version's stores.
    state = Path(env["PI_HINDSIGHT_STATE_DIR"])
    old_state = work / "state-baseline"
    old_state.mkdir()
    (old_state / "config.json").write_text((state / "config.json").read_text())
    old_env = dict(env, PI_HINDSIGHT_STATE_DIR=str(old_state), PYTHONPATH=str(src))
    _cli(old_env, "scope", "register", str(repo))
    sidecar = Sidecar(old_env)
    _seed(sidecar, repo, old_env)
    return Measured(f"baseline {name}", sidecar)


def _measure(measured: list[Measured], repo: Path, queries: list[str]) -> None:
    for each in measured:
        for query in queries[:10]:  # warm up: client import, bank check, connections
            each.sidecar.call(
                "initialize",
                {"protocolVersion": 1, "cwd": str(repo), "sessionId": "w", "hasUI": False},
            )
            each.sidecar.call(
                "prepareMemory", {"requestId": "warm", "prompt": query, "sessionId": "w"}
            )
    for index, query in enumerate(queries):
        for each in measured:  # interleaved: both see the same server at the same moment
            each.request(repo, index, query)
    for each in measured:
        each.sidecar.close()


@dataclass
class Figures:
    measured: list[Measured]
    direct: list[float]
    cold: ColdStarts
    old_cold: ColdStarts | None


def run(baseline_src: Path | None, baseline_name: str | None) -> None:
    from pi_hindsight.launcher import start_server, stop_server

    work = Path(tempfile.mkdtemp(prefix="pi-hindsight-bench-"))
    server_state = work / "server"
    external = os.environ.get("PI_HINDSIGHT_BENCH_SERVER_URL")
    base_url = external or start_server(server_state, llm="offline").base_url
    try:
        repo, bank, env = _prepare(work, base_url)
        sidecar = Sidecar(env)
        _seed(sidecar, repo, env)
        queries = [f"Which port does service {n % 20} use?" for n in range(REQUESTS)]
        measured = [Measured("current", sidecar)]
        if baseline_src is not None:
            measured.append(_baseline(work, env, repo, baseline_src, str(baseline_name)))
        _measure(measured, repo, queries)
        scope_tags = ["project:example.com/bench/repo"]
        direct = asyncio.run(direct_recalls(base_url, bank, scope_tags, queries))
        envs = [env]
        if baseline_src is not None:
            old_state = str(work / "state-baseline")
            envs.append(dict(env, PYTHONPATH=str(baseline_src), PI_HINDSIGHT_STATE_DIR=old_state))
        cold, *old = cold_starts(envs, repo)
        old_cold = old[0] if old else None
    finally:
        if not external:
            stop_server(server_state)
    report(Figures(measured, direct, cold, old_cold), baseline_name)


def report(figures: Figures, baseline_name: str | None) -> None:
    measured, direct = figures.measured, figures.direct
    ready, bare, initialized = figures.cold.ready, figures.cold.bare, figures.cold.initialized
    ms = 1000.0
    print(f"requests: {REQUESTS} per sidecar (each the first of a fresh session)")
    for each in measured:
        print(
            f"[{each.name}] delivered {each.delivered}; prepareMemory round trip p50 "
            f"{statistics.median(each.round_trips) * ms:7.2f} ms  p90 "
            f"{percentile(each.round_trips, 0.9) * ms:7.2f} ms"
        )
        if each.added:
            print(
                f"[{each.name}] added by the sidecar        p50 "
                f"{statistics.median(each.added) * ms:7.2f} ms  p90 "
                f"{percentile(each.added, 0.9) * ms:7.2f} ms   (target p50 <= 3 ms)"
            )
    if len(measured) == 2 and measured[0].added and measured[1].added:
        ratio = statistics.median(measured[0].added) / statistics.median(measured[1].added)
        print(f"added latency, current / baseline (p50): {ratio:.2f}")
    print(
        f"direct recall (warm client) p50 {statistics.median(direct) * ms:7.2f} ms  "
        f"p90 {percentile(direct, 0.9) * ms:7.2f} ms"
    )
    print(
        f"cold start to ready         p50 {statistics.median(ready) * ms:7.1f} ms  "
        f"(bare python start p50 {statistics.median(bare) * ms:.1f} ms, "
        f"ratio {statistics.median(ready) / statistics.median(bare):.1f}x)   (target <= 300 ms)"
    )
    print(f"cold start to initialized   p50 {statistics.median(initialized) * ms:7.1f} ms")
    if figures.old_cold:
        old = statistics.median(figures.old_cold.ready)
        print(
            f"cold start, baseline {baseline_name} p50 {old * ms:7.1f} ms"
            f"  (current / baseline {statistics.median(ready) / old:.2f})"
        )
        old_init = statistics.median(figures.old_cold.initialized)
        print(
            f"to initialized, baseline {baseline_name} p50 {old_init * ms:7.1f} ms"
            f"  (current / baseline {statistics.median(initialized) / old_init:.2f})"
        )


if __name__ == "__main__":
    main()
