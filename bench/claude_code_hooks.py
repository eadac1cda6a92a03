"""Benchmark: what a Claude Code hook adds to a prompt (issue 14).

Claude Code starts a process per hook event. Ours is a tiny client of the per-user daemon
(``hosts/claude_code/hook.py``, standard library only); the older plugins' way is a fresh Python
process that imports the official client and recalls once. Measured side by side, interleaved
prompt by prompt against the same server and bank:

- **ours**: wall time of the real hook process for a ``UserPromptSubmit`` payload (a warm
  daemon), minus the recall's own time, read afterwards from the request's evidence record
  (``recallMs``, timed inside the daemon around the Hindsight call);
- **fresh process**: wall time of ``python -c 'import hindsight_client; …recall(…)'`` minus the
  recall call's own time, timed inside that process;
- for reference, a bare ``python -c pass`` and the hook module's import.

Goal: ours ≤ 30 ms p50 added per hook. Runs against a local Hindsight it starts itself
(``--llm offline``), or ``PI_HINDSIGHT_BENCH_SERVER_URL`` if set. The bank is seeded with a few
memories so recalls find something. Prints medians (p50) and p90, and the ratio.

    .venv/bin/python bench/claude_code_hooks.py        # BENCH_HOOKS=40 by default

``--baseline REV`` instead runs the hooks of git revision REV (checked out into a temporary
worktree, with a daemon of its own) interleaved prompt by prompt with the current ones against
the same server and bank, and prints both and their ratio: before and after in one run (the
fresh-process reference is left out then).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOOKS = int(os.environ.get("BENCH_HOOKS", "40"))
HOOK = [sys.executable, "-m", "pi_hindsight.hosts.claude_code.hook", "UserPromptSubmit"]
QUERIES = [
    "Where do we deploy to production?",
    "Which database does staging use?",
    "How are releases tagged?",
    "What is the code review rule?",
]
FACTS = [
    "We deploy production to the Zephyr cluster.",
    "The staging database is called Quasar.",
    "Releases are tagged vYYYY.MM.N by the release bot.",
    "Every change needs one approving review before merge.",
]
FRESH = """
import sys, time
from hindsight_client import Hindsight
client = Hindsight(sys.argv[1], timeout=30)
started = time.perf_counter()
client.recall(bank_id=sys.argv[2], query=sys.argv[3], max_tokens=800)
print((time.perf_counter() - started) * 1000)
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.stdout


def _prepare(work: Path, base_url: str) -> tuple[Path, str, dict[str, str]]:
    """A registered repository, a state dir for a fresh bank, a private socket dir."""
    state, repo, run_dir = work / "state", work / "repo", work / "run"
    repo.mkdir()
    run_dir.mkdir(mode=0o700)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", "https://example.com/bench/repo.git"],
        cwd=repo,
        check=True,
    )
    bank = f"bench-{uuid.uuid4().hex[:8]}"
    state.mkdir()
    (state / "config.json").write_text(
        json.dumps(
            {
                "hindsight": {"baseUrl": base_url},
                "banks": {"project": {"bankId": bank}},
                "recall": {"timeoutMs": 30_000},
            }
        )
    )
    env = dict(os.environ, PI_HINDSIGHT_STATE_DIR=str(state), XDG_RUNTIME_DIR=str(run_dir))
    env["PI_HINDSIGHT_DAEMON_IDLE_S"] = "600"
    # As on a user's machine: with the bytecode cache (a test environment may turn it off).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    _cli(env, "scope", "register", str(repo))
    return repo, bank, env


def _hook(env: dict[str, str], repo: Path, session: str, prompt_id: str, query: str) -> float:
    payload = {
        "session_id": session,
        "transcript_path": str(repo / ".no-transcript" / f"{session}.jsonl"),
        "cwd": str(repo),
        "hook_event_name": "UserPromptSubmit",
        "prompt_id": prompt_id,
        "permission_mode": "default",
        "prompt": query,
    }
    started = time.perf_counter()
    done = subprocess.run(
        HOOK,
        input=json.dumps(payload).encode(),
        cwd=repo,
        env=env,
        capture_output=True,
        check=False,
    )
    wall = (time.perf_counter() - started) * 1000
    if done.returncode != 0 or b"systemMessage" in done.stdout:
        raise SystemExit(f"the hook failed: {done.stdout!r} {done.stderr!r}")
    return wall


def _seed(env: dict[str, str], repo: Path, session: str) -> None:
    """A few memories in the bank (the daemon's own retain path), then wait for Hindsight."""
    transcript = repo.parent / "transcripts" / f"{session}.jsonl"
    transcript.parent.mkdir(exist_ok=True)
    rows = []
    parent = None
    for index, fact in enumerate(FACTS):
        for role, text in (("user", fact), ("assistant", "Noted.")):
            uid = str(uuid.uuid4())
            content = text if role == "user" else [{"type": "text", "text": text}]
            row = {
                "type": role,
                "uuid": uid,
                "parentUuid": parent,
                "sessionId": session,
                "isSidechain": False,
                "message": {"role": role, "content": content},
            }
            if role == "user":
                row["promptId"] = f"seed-{index}"
            rows.append(row)
            parent = uid
    transcript.write_text("".join(json.dumps(r) + "\n" for r in rows))
    payload = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": str(repo),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    subprocess.run(
        [*HOOK[:-1], "Stop"], input=json.dumps(payload).encode(), cwd=repo, env=env, check=True
    )
    _cli(env, "outbox", "drain", "--timeout", "240")


def _recall_ms(env: dict[str, str], prompt_id: str) -> float:
    shown = json.loads(_cli(env, "evidence", "show", prompt_id, "--json"))
    value = shown.get("recallMs", shown.get("record", {}).get("recallMs"))
    if value is None:
        raise SystemExit(f"no recall time recorded for {prompt_id}: {shown}")
    return float(value)


def _fresh(base_url: str, bank: str, query: str) -> tuple[float, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", FRESH, base_url, bank, query],
        capture_output=True,
        text=True,
        check=True,
    )
    return (time.perf_counter() - started) * 1000, float(done.stdout.strip())


def _bare(code: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    return (time.perf_counter() - started) * 1000


def _stop_daemon(env: dict[str, str]) -> None:
    from pi_hindsight.hosts.claude_code import runtime

    try:
        pid = int(runtime.address(env).pid_file.read_text())
    except (OSError, ValueError):
        return
    subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "claude-code", "daemon", "--stop"],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, 9)


def run() -> None:
    from pi_hindsight.launcher import start_server, stop_server

    work = Path(tempfile.mkdtemp(prefix="cc-hooks-bench-"))
    server_state = work / "server"
    external = os.environ.get("PI_HINDSIGHT_BENCH_SERVER_URL")
    base_url = external or start_server(server_state, llm="offline").base_url
    env: dict[str, str] = {}
    try:
        repo, bank, env = _prepare(work, base_url)
        session = str(uuid.uuid4())
        _seed(env, repo, session)
        for index in range(5):  # warm up: daemon start, client import, bank check
            _hook(env, repo, session, f"warm-{index}", QUERIES[index % len(QUERIES)])
        ours: list[float] = []
        ours_recall: list[float] = []
        fresh: list[float] = []
        fresh_recall: list[float] = []
        ids: list[tuple[str, float]] = []
        for index in range(HOOKS):
            query = QUERIES[index % len(QUERIES)]
            prompt_id = f"bench-{index}-{uuid.uuid4().hex[:8]}"
            ids.append((prompt_id, _hook(env, repo, session, prompt_id, query)))
            wall, recall = _fresh(base_url, bank, query)
            fresh.append(wall - recall)
            fresh_recall.append(recall)
        for prompt_id, wall in ids:
            recall = _recall_ms(env, prompt_id)
            ours.append(wall - recall)
            ours_recall.append(recall)
        bare = [_bare("pass", env) for _ in range(15)]
        hook_import = [_bare("import pi_hindsight.hosts.claude_code.hook", env) for _ in range(15)]
        report(ours, ours_recall, fresh, fresh_recall, bare, hook_import)
    finally:
        if env:
            _stop_daemon(env)
        if not external:
            stop_server(server_state)


def _added(env: dict[str, str], ids: list[tuple[str, float]]) -> tuple[list[float], list[float]]:
    """Each hook's wall time minus its recall (from its evidence record), and the recalls."""
    added: list[float] = []
    recalls: list[float] = []
    for prompt_id, wall in ids:
        recall = _recall_ms(env, prompt_id)
        added.append(wall - recall)
        recalls.append(recall)
    return added, recalls


def run_against(baseline: Path, name: str) -> None:
    """The current hooks and ``baseline``'s (its ``src``), interleaved (module doc)."""
    from pi_hindsight.launcher import start_server, stop_server

    work = Path(tempfile.mkdtemp(prefix="cc-hooks-bench-"))
    server_state = work / "server"
    external = os.environ.get("PI_HINDSIGHT_BENCH_SERVER_URL")
    base_url = external or start_server(server_state, llm="offline").base_url
    envs: list[dict[str, str]] = []
    try:
        repo, _bank, env = _prepare(work, base_url)
        envs.append(env)
        old_state, old_run = work / "state-baseline", work / "run-baseline"
        old_state.mkdir()
        old_run.mkdir(mode=0o700)
        (old_state / "config.json").write_text((work / "state" / "config.json").read_text())
        old_env = dict(
            env,
            PI_HINDSIGHT_STATE_DIR=str(old_state),
            XDG_RUNTIME_DIR=str(old_run),
            PYTHONPATH=str(baseline),
        )
        _cli(old_env, "scope", "register", str(repo))
        envs.append(old_env)
        session = str(uuid.uuid4())
        _seed(env, repo, session)  # one bank: seeded once, recalled by both
        for each in envs:
            for index in range(5):  # warm up: daemon start, client import, bank check
                _hook(each, repo, session, f"warm-{index}", QUERIES[index % len(QUERIES)])
        ids: list[list[tuple[str, float]]] = [[], []]
        for index in range(HOOKS):
            query = QUERIES[index % len(QUERIES)]
            for each, taken in zip(envs, ids, strict=True):
                prompt_id = f"bench-{index}-{uuid.uuid4().hex[:8]}"
                taken.append((prompt_id, _hook(each, repo, session, prompt_id, query)))
        figures = [_added(each, taken) for each, taken in zip(envs, ids, strict=True)]
    finally:
        for each in envs:
            _stop_daemon(each)
        if not external:
            stop_server(server_state)
    print(f"Claude Code UserPromptSubmit hook, {HOOKS} prompts each, interleaved")
    for label, (added, recalls) in zip(("current", f"baseline {name}"), figures, strict=True):
        print(
            f"  [{label}] added p50 {statistics.median(added):.1f} ms, p90 "
            f"{percentile(added, 0.9):.1f} ms "
            f"(recall itself p50 {statistics.median(recalls):.1f} ms)"
        )
    ratio = statistics.median(figures[0][0]) / statistics.median(figures[1][0])
    print(f"  added, current / baseline (p50): {ratio:.2f}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"  load average during the run: {load} on {os.cpu_count()} cores")


def report(
    ours: list[float],
    ours_recall: list[float],
    fresh: list[float],
    fresh_recall: list[float],
    bare: list[float],
    hook_import: list[float],
) -> None:
    p50_ours, p50_fresh = statistics.median(ours), statistics.median(fresh)
    print(f"Claude Code UserPromptSubmit hook, {len(ours)} prompts each, interleaved")
    print(
        f"  ours (hook client -> warm daemon): added p50 {p50_ours:.1f} ms, "
        f"p90 {percentile(ours, 0.9):.1f} ms (recall itself p50 "
        f"{statistics.median(ours_recall):.1f} ms)"
    )
    print(
        f"  fresh process + official client:   added p50 {p50_fresh:.1f} ms, "
        f"p90 {percentile(fresh, 0.9):.1f} ms (recall itself p50 "
        f"{statistics.median(fresh_recall):.1f} ms)"
    )
    print(f"  ratio fresh/ours (added, p50): {p50_fresh / p50_ours:.1f}x")
    print(
        f"  reference: python -c pass p50 {statistics.median(bare):.1f} ms; "
        f"import of the hook module p50 {statistics.median(hook_import):.1f} ms"
    )
    start = statistics.median(bare)
    print(
        f"  ours minus a bare interpreter start: p50 {p50_ours - start:.1f} ms "
        f"(the rest is the imports and the daemon's own work)"
    )
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"  load average during the run: {load} on {os.cpu_count()} cores")
    verdict = "meets" if p50_ours <= 30 else "MISSES"
    print(f"  goal <= 30 ms p50 added: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", metavar="REV", help="also measure this git revision")
    options = parser.parse_args()
    if options.baseline is None:
        run()
        return
    from sidecar_latency import checkout  # bench/sidecar_latency.py: a temporary worktree

    with contextlib.ExitStack() as stack:
        run_against(stack.enter_context(checkout(options.baseline)), options.baseline)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
