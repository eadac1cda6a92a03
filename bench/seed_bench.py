"""Seeding a repository with 100 Pi sessions and 300 commits: how long it takes and what it costs
the server (bench for issue 13).

Generates a git repository (300 commits with subjects and bodies) and a Pi agent dir with 100
session files (tests/support/pi_sessions.py, both Pi formats, 3-8 requests each, some tool calls),
registers the repository, then measures with the real command line:

- the dry run (median of 3 runs): sessions, requests, commits, characters, estimated tokens;
- the apply: queueing everything into the outbox, then delivery until Hindsight confirms it;
- the server's LLM cost: every call Hindsight made to the LLM stand-in during the apply, from the
  stand-in's request log (calls by kind, characters sent, tokens at 4 characters per token), next
  to the dry run's estimate (their ratio).

It starts its own Hindsight (offline stand-in) in a temporary directory, so the stand-in's log
holds this run's calls only; ``--server-url URL --standin-log FILE`` reuses a running one (other
traffic on it then counts too).

    python bench/seed_bench.py [--sessions 100] [--commits 300]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.pi_sessions import Exchange, write_session  # noqa: E402

WORDS = [
    "deploy",
    "cluster",
    "staging",
    "database",
    "migration",
    "lint",
    "ruff",
    "pytest",
    "cache",
    "queue",
    "worker",
    "retry",
    "timeout",
    "schema",
    "index",
    "replica",
    "backup",
    "token",
    "config",
    "launcher",
    "sidecar",
    "outbox",
    "ledger",
    "memo",
]


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return f"We use {' '.join(words)} for the {rng.choice(WORDS)} service."


def make_repo(path: Path, commits: int, rng: random.Random) -> None:
    path.mkdir(parents=True)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=path, check=True)
    subprocess.run(
        [*git, "remote", "add", "origin", "https://example.com/bench/seed.git"],
        cwd=path,
        check=True,
    )
    for number in range(commits):
        message = (
            f"Change {number}: {_sentence(rng, 4)}\n\n{_sentence(rng, 8)}\n{_sentence(rng, 6)}"
        )
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], cwd=path, check=True)


def make_sessions(agent: Path, repo: Path, count: int, rng: random.Random) -> int:
    requests = 0
    for number in range(count):
        exchanges = []
        for turn in range(rng.randint(3, 8)):
            tool = (
                ("bash", {"command": f"ls {rng.choice(WORDS)}"}, "a.py b.py")
                if turn % 3 == 1
                else None
            )
            exchanges.append(Exchange(_sentence(rng, 10), _sentence(rng, 12), tool=tool))
        write_session(agent, repo, exchanges, version="1.x" if number % 3 == 0 else "0.73",
                      session_id=str(uuid.UUID(int=rng.getrandbits(128))))  # fmt: skip
        requests += len(exchanges)
    return requests


def cli(env: dict[str, str], *args: str) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pi_hindsight", *args, "--json"], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{args} failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout), elapsed


def llm_calls(log: Path, offset: int) -> tuple[Counter[str], int]:
    kinds: Counter[str] = Counter()
    characters = 0
    with log.open("rb") as handle:
        handle.seek(offset)
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("role") != "hindsight":
                continue
            kinds[str(record.get("kind"))] += 1
            for message in (record.get("body") or {}).get("messages") or []:
                content = message.get("content")
                characters += len(content) if isinstance(content, str) else len(json.dumps(content))
    return kinds, characters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--server-url", default=None)
    parser.add_argument("--standin-log", type=Path, default=None)
    options = parser.parse_args()
    rng = random.Random(13)
    work = Path(tempfile.mkdtemp(prefix="seed-bench-"))
    server_state = work / "server-state"
    base_url, log = options.server_url, options.standin_log
    started_server = False
    if base_url is None:
        from pi_hindsight.launcher import start_server

        print("starting a Hindsight server with the offline stand-in ...", flush=True)
        info = start_server(server_state, llm="offline")
        base_url, log, started_server = (
            info.base_url,
            server_state / "server" / "logs" / "standin.jsonl",
            True,
        )
    try:
        repo, agent, state = work / "repo", work / "agent", work / "state"
        make_repo(repo, options.commits, rng)
        requests = make_sessions(agent, repo, options.sessions, rng)
        state.mkdir()
        bank = f"seed-bench-{uuid.uuid4().hex[:8]}"
        config = {"hindsight": {"baseUrl": base_url}, "banks": {"project": {"bankId": bank}}}
        (state / "config.json").write_text(json.dumps(config))
        env = dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state), PI_CODING_AGENT_DIR=str(agent))
        subprocess.run([sys.executable, "-m", "pi_hindsight", "scope", "register", str(repo)],
                       env=env, check=True, capture_output=True)  # fmt: skip
        dry_times = []
        plan: dict[str, Any] = {}
        for _ in range(3):
            plan, elapsed = cli(env, "scope", "seed", str(repo), "--dry-run")
            dry_times.append(elapsed)
        offset = log.stat().st_size if log is not None and log.exists() else 0
        applied, apply_s = cli(env, "scope", "seed", str(repo), "--yes", "--timeout", "3600")
        # Consolidation follows retain on the server: let it settle before counting its calls.
        time.sleep(20)
        kinds, characters = llm_calls(log, offset) if log is not None else (Counter(), 0)
        measured_tokens = characters // 4
        ratio = plan["estimatedTokens"] / measured_tokens if measured_tokens else float("nan")
        calls = ", ".join(f"{kind} {count}" for kind, count in kinds.most_common())
        lines = [
            f"seeding {options.sessions} sessions ({requests} requests written) and "
            f"{options.commits} commits",
            f"  dry run:   median {statistics.median(dry_times):.2f} s of 3 (sessions "
            f"{plan['sessions']}, requests {plan['requests']}, commits {plan['commits']}, "
            f"items {plan['items']})",
            f"  sent:      {applied['queued']} items, {applied['queuedCharacters']:,} characters "
            f"(dry run: {plan['items']} items, {plan['characters']:,} characters)",
            f"  apply:     {apply_s:.1f} s to queue and deliver ({applied['delivery']})",
            f"  LLM calls: {sum(kinds.values())} ({calls})",
            f"  LLM input: {characters:,} characters = ~{measured_tokens:,} tokens (4 chars/token)",
            f"  estimate:  {plan['estimatedTokens']:,} tokens; estimate / measured = {ratio:.2f}",
            f"  estimate rule: {plan['estimate']}",
        ]
        print("\n" + "\n".join(lines))
    finally:
        if started_server:
            from pi_hindsight.launcher import stop_server

            stop_server(server_state)


if __name__ == "__main__":
    main()
