"""Benchmark: does every recalled record earn its place in the request (issue 17)?

The labelled set (``bench/data/relevance/corpus.toml``): one repository's history typed into
real Pi 1.x sessions (40 facts over 10 sessions, mixed with the questions, acknowledgements and
requests a session also holds), then 24 questions needing one or two of those facts and 10
prompts needing none, split into a tuning part and a held-out part.

Against the real Hindsight (``PI_HINDSIGHT_BENCH_SERVER_URL``, or a local one started with the
stand-in LLM) and real Pi 1.x (the chat stand-in as its model), in one run:

1. the sessions are typed into Pi and retained through the real path (outbox, Hindsight
   extraction by the stand-in, consolidation);
2. **the curve**: each request's recall (the query the sidecar sends, the same bank, tags and
   budget), every returned record labelled, and the relevance policy's bars swept over it —
   hits against precision on the tuning part, as a table (docs/delivery.md holds it);
3. **before and after**: every request is typed into a fresh Pi 1.x session twice, interleaved —
   once with ``recall.relevance: off`` (today's delivery), once with the defaults — and what the
   model received is read from the provider payload (the chat stand-in's request log) and the
   evidence ledger.

Printed per part (tuning, held-out), before and after: hits (needed facts delivered), precision
(relevant recall bullets / all recall bullets, over the questions), unrelated bullets per prompt
that needs no memory, memory tokens per request, records held back. The startup memo is off in
both worlds: its text is the same before and after, and the stand-in's memo lists every fact,
which would hide what recall delivers.

    .venv/bin/python bench/relevance.py            # ~6 min; --work DIR keeps the seeded bank
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _relevance_corpus import (  # noqa: E402 - bench/ modules run as scripts
    PARTS,
    Corpus,
    Part,
    Request,
    bullets,
    load,
)
from pi_hindsight.backend.hindsight import HindsightBackend  # noqa: E402
from pi_hindsight.backend.resources import MemoryRecord  # noqa: E402
from pi_hindsight.cli.setup_cmd import install_extension  # noqa: E402
from pi_hindsight.engine.memory_block import estimate_tokens  # noqa: E402
from pi_hindsight.engine.scope import SCOPE_TAGS_MATCH  # noqa: E402
from pi_hindsight.relevance import (  # noqa: E402
    DEFAULT_BARS,
    RelevanceBars,
    judge,
)
from tests.agent_models import AgentStandIn  # noqa: E402
from tests.plugins.pi_versions import PI_INSTALLS, PiInstall  # noqa: E402
from tests.plugins.standin import pi_env, write_pi_agent_dir  # noqa: E402

PI_TIMEOUT_S = 180
RECALL_TOKENS = 800  # recall.maxTokens, the default


# -- the worlds ------------------------------------------------------------------------------


@dataclass
class World:
    """One Pi agent dir and one pi-hindsight state dir (its own config), same bank as the other."""

    name: str
    pi: PiInstall
    agent_dir: Path
    state_dir: Path

    def env(self) -> dict[str, str]:
        env = pi_env(self.agent_dir, pi=self.pi)
        env["PI_HINDSIGHT_STATE_DIR"] = str(self.state_dir)
        return env

    def pi_run(self, cwd: Path, *prompts: str) -> None:
        done = subprocess.run(
            self.pi.argv("-p", *prompts),
            cwd=cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=PI_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pi exited {done.returncode}: {done.stderr[-2000:]}")

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pi_hindsight", *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=PI_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pi-hindsight {' '.join(args)}: {done.stderr[-2000:]}")
        return done.stdout


def _pi1() -> PiInstall:
    for pi in PI_INSTALLS:
        if pi.line == "1.x" and not pi.unusable():
            return pi
    raise SystemExit("Pi 1.x is not installed: run `make install` (or set PI1_BIN)")


def _make_repo(path: Path, remote: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if not (path / ".git").exists():
        for args in (
            ["init", "-q", "-b", "main"],
            ["remote", "add", "origin", remote],
        ):
            subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    return path


def _worlds(
    work: Path, standin: AgentStandIn, base_url: str, bank: str, *, retain: bool
) -> tuple[World, World, Path]:
    """The two worlds; ``retain`` only while seeding: the requests measured afterwards must not
    add to the bank (the "before" run of a prompt would feed the "after" one)."""
    pi = _pi1()
    worlds = []
    for name, relevance in (("before", "off"), ("after", None)):
        agent_dir = work / name / "agent"
        state_dir = work / name / "state"
        write_pi_agent_dir(agent_dir, standin)
        install_extension(agent_dir, sys.executable, state_dir)
        recall: dict[str, Any] = {"timeoutMs": 30_000}
        if relevance is not None:
            recall["relevance"] = relevance
        config = {
            "hindsight": {"baseUrl": base_url},
            "banks": {"project": {"bankId": bank}},
            "recall": recall,
            "memo": {"enabled": False},
            "retain": {"enabled": retain},
        }
        state_dir.mkdir(parents=True, exist_ok=True)
        (state_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
        worlds.append(World(name, pi, agent_dir, state_dir))
    return worlds[0], worlds[1], work / "repo"


# -- seeding ---------------------------------------------------------------------------------


async def _settle(base_url: str, bank: str, timeout_s: float = 600) -> None:
    """Until no retain or consolidation is pending or running in ``bank``."""
    backend = HindsightBackend(base_url)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            busy = 0
            for state in ("pending", "processing"):
                busy += len(await backend.list_operations(bank, state=state, timeout=30))
            if not busy:
                return
            await asyncio.sleep(0.5)
        raise RuntimeError(f"operations still pending after {timeout_s:.0f}s in {bank}")
    finally:
        await backend.close()


def seed(corpus: Corpus, world: World, repo: Path, base_url: str, bank: str) -> None:
    for index, session in enumerate(corpus.sessions, start=1):
        started = time.monotonic()
        world.pi_run(repo, *session.prompts)
        print(
            f"  session {index}/{len(corpus.sessions)} ({session.name}): "
            f"{len(session.prompts)} prompts, {time.monotonic() - started:.1f} s",
            file=sys.stderr,
        )
    world.cli("outbox", "drain", "--timeout", "300")
    asyncio.run(_settle(base_url, bank))


# -- the curve: recall's candidates, labelled, the bars swept ------------------------------------


@dataclass
class Candidates:
    request: Request
    records: list[MemoryRecord]
    labels: list[str | None]


async def _recall_all(
    corpus: Corpus, base_url: str, bank: str, requests: Sequence[Request]
) -> list[Candidates]:
    backend = HindsightBackend(base_url)
    tags = (f"project:{corpus.project}",)
    try:
        found = []
        for request in requests:
            records = await backend.recall(
                bank,
                request.prompt,  # what the sidecar sends: the prompt, no earlier turn
                tags=tags,
                tags_match=SCOPE_TAGS_MATCH,
                max_tokens=RECALL_TOKENS,
                budget="mid",
                timeout=60,
            )
            found.append(Candidates(request, records, [corpus.fact_of(r.text) for r in records]))
        return found
    finally:
        await backend.close()


@dataclass
class Score:
    """Hits, precision and noise of one policy over a set of requests."""

    needed: int = 0
    hits: int = 0
    kept: int = 0
    relevant: int = 0
    noise: int = 0  # records kept for prompts needing no memory
    quiet_prompts: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.needed if self.needed else 1.0

    @property
    def precision(self) -> float:
        return self.relevant / self.kept if self.kept else 1.0

    @property
    def noise_per_prompt(self) -> float:
        return self.noise / self.quiet_prompts if self.quiet_prompts else 0.0


def _distinct(records: Sequence[MemoryRecord], labels: Sequence[str | None]) -> list[int]:
    """Indexes of the records delivery would keep as distinct lines (same text: one line)."""
    seen: set[str] = set()
    kept = []
    for index, record in enumerate(records):
        key = " ".join(record.text.split()).casefold()
        if key not in seen:
            seen.add(key)
            kept.append(index)
    return kept


def simulate(candidates: Sequence[Candidates], bars: RelevanceBars | None) -> Score:
    """What delivery would keep of each recall under ``bars`` (None: no policy), within the
    project budget, one line per distinct text."""
    score = Score()
    for item in candidates:
        order = _distinct(item.records, item.labels)
        records = [item.records[i] for i in order]
        labels = [item.labels[i] for i in order]
        kept_ids = (
            {r.id for r in records}
            if bars is None
            else {j.record.id for j in judge(records, bars) if j.kept}
        )
        used = 0
        delivered: list[str | None] = []
        for record, label in zip(records, labels, strict=True):
            if record.id not in kept_ids:
                continue
            cost = estimate_tokens(f"- (2026-12-01) {record.text}") + 1
            if used + cost > RECALL_TOKENS - 5:
                continue
            used += cost
            delivered.append(label)
        if item.request.needs_memory:
            score.needed += len(item.request.needs)
            score.hits += len(set(item.request.needs) & set(delivered))
            score.kept += len(delivered)
            score.relevant += sum(label in item.request.relevant for label in delivered)
        else:
            score.quiet_prompts += 1
            score.noise += len(delivered)
    return score


# -- before and after, through real Pi ---------------------------------------------------------


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def memory_in_payload(standin: AgentStandIn, prompt: str, since: int) -> str | None:
    """The hidden memory message right after ``prompt`` in the provider request Pi sent."""
    for request in standin.requests("pi")[since:]:
        messages = request["body"]["messages"]
        for index, message in enumerate(messages):
            if message.get("role") == "user" and _text(message.get("content")) == prompt:
                following = messages[index + 1] if index + 1 < len(messages) else {}
                text = _text(following.get("content")) if following.get("role") == "user" else ""
                return text if text.startswith("<hindsight-memory") else None
    raise RuntimeError(f"no provider request carried {prompt!r}")


@dataclass
class Tally:
    score: Score = field(default_factory=Score)
    tokens: list[int] = field(default_factory=list)
    held: int = 0
    recalled: int = 0


def _evidence(world: World) -> dict[str, dict[str, Any]]:
    page = json.loads(world.cli("evidence", "list", "--json", "--limit", "1000"))
    return {record["requestId"]: record for record in page.get("records", [])}


def run_requests(
    corpus: Corpus, worlds: Sequence[World], repo: Path, standin: AgentStandIn
) -> dict[tuple[str, Part], Tally]:
    tallies = {(w.name, part): Tally() for w in worlds for part in PARTS}
    known = {w.name: set(_evidence(w)) for w in worlds}
    for request in corpus.requests:
        for world in worlds:
            since = len(standin.requests("pi"))
            world.pi_run(repo, request.prompt)
            block = memory_in_payload(standin, request.prompt, since)
            lines = bullets(block)
            labels = [corpus.fact_of(line) for line in lines]
            tally = tallies[(world.name, request.part)]
            tally.tokens.append(estimate_tokens(block) if block else 0)
            score = tally.score
            if request.needs_memory:
                score.needed += len(request.needs)
                score.hits += len(set(request.needs) & set(labels))
                score.kept += len(lines)
                score.relevant += sum(label in request.relevant for label in labels)
            else:
                score.quiet_prompts += 1
                score.noise += len(lines)
            records = _evidence(world)
            (new,) = set(records) - known[world.name]
            known[world.name].add(new)
            omitted = records[new].get("omittedBy") or {}
            tally.held += int(omitted.get("relevance", 0))
            tally.recalled += int(records[new].get("recordCount", 0)) + sum(
                int(v) for v in omitted.values()
            )
    return tallies


# -- report ------------------------------------------------------------------------------------


def curve_rows(candidates: Sequence[Candidates]) -> list[tuple[str, Score]]:
    rows: list[tuple[str, Score]] = [("off (today)", simulate(candidates, None))]
    for relative in (0.0, 0.5, 0.6, 0.7, 0.8):
        for floor in (0.0, 0.3, 0.4, 0.5, 0.6):
            bars = DEFAULT_BARS.model_copy(update={"relative": relative, "floor": floor})
            rows.append((f"relative {relative:.1f}, floor {floor:.2f}", simulate(candidates, bars)))
    return rows


def print_curve(candidates: Sequence[Candidates]) -> None:
    print("\nThe curve (tuning part, recall's candidates under each pair of bars):")
    print(f"  {'bars':32} {'hits':>6} {'precision':>10} {'noise/prompt':>13}")
    for label, score in curve_rows(candidates):
        print(
            f"  {label:32} {score.hit_rate:6.0%} {score.precision:10.0%} "
            f"{score.noise_per_prompt:13.2f}"
        )


def print_runs(tallies: dict[tuple[str, Part], Tally]) -> None:
    print("\nBefore (recall.relevance: off) and after (the defaults), real Pi 1.x:")
    head = f"  {'':22} {'hits':>12} {'precision':>12} {'unrelated/prompt':>17} "
    print(head + f"{'tokens/request':>15} {'held back':>10}")
    for part in PARTS:
        for name in ("before", "after"):
            tally = tallies[(name, part)]
            s = tally.score
            tokens = sum(tally.tokens) / len(tally.tokens) if tally.tokens else 0.0
            held = f"{tally.held}/{tally.recalled}"
            print(
                f"  {part + ', ' + name:22} {f'{s.hits}/{s.needed} {s.hit_rate:4.0%}':>12} "
                f"{f'{s.relevant}/{s.kept} {s.precision:4.0%}':>12} "
                f"{s.noise_per_prompt:17.2f} {tokens:15.1f} {held:>10}"
            )


# -- main ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def server() -> Iterator[str]:
    external = os.environ.get("PI_HINDSIGHT_BENCH_SERVER_URL")
    if external:
        yield external
        return
    from pi_hindsight.launcher import start_server, stop_server

    with tempfile.TemporaryDirectory(prefix="relevance-server-") as place:
        print("starting a local Hindsight (offline stand-in)…", file=sys.stderr)
        try:
            yield start_server(Path(place), llm="offline").base_url
        finally:
            stop_server(Path(place))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="keep worlds and the seeded bank here")
    parser.add_argument("--dump", type=Path, help="write recall's labelled candidates as JSON")
    parser.add_argument("--curve-only", action="store_true", help="skip the Pi before/after runs")
    args = parser.parse_args()
    corpus = load()
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        work.mkdir(parents=True, exist_ok=True)
        base_url = stack.enter_context(server())
        marker = work / "seeded.json"
        seeded = json.loads(marker.read_text()) if marker.exists() else None
        if seeded is not None and seeded.get("base_url") != base_url:
            seeded = None
        bank = seeded["bank"] if seeded else f"relevance-{uuid.uuid4().hex[:10]}"
        standin = stack.enter_context(AgentStandIn(log_path=work / "pi-requests.jsonl"))
        before, after, repo = _worlds(work, standin, base_url, bank, retain=seeded is None)
        _make_repo(repo, f"https://{corpus.project}.git")
        if seeded is None:
            before.cli("scope", "register", str(repo))
            after.cli("scope", "register", str(repo))
            print(f"seeding bank {bank} through Pi 1.x…", file=sys.stderr)
            seed(corpus, before, repo, base_url, bank)
            marker.write_text(json.dumps({"base_url": base_url, "bank": bank}))
            before, after, repo = _worlds(work, standin, base_url, bank, retain=False)
        candidates = asyncio.run(_recall_all(corpus, base_url, bank, corpus.requests))
        if args.dump:
            args.dump.write_text(json.dumps([_dump(c) for c in candidates], indent=1))
        print(
            f"facts {len(corpus.facts)}, sessions {len(corpus.sessions)}, requests "
            f"{len(corpus.requests)}; bank {bank}"
        )
        tuning = [c for c in candidates if c.request.part == "tuning"]
        print_curve(tuning)
        for part in PARTS:
            chosen = simulate([c for c in candidates if c.request.part == part], DEFAULT_BARS)
            print(
                f"  the defaults on {part}: hits {chosen.hit_rate:.0%}, precision "
                f"{chosen.precision:.0%}, noise {chosen.noise_per_prompt:.2f}/prompt"
            )
        if not args.curve_only:
            print_runs(run_requests(corpus, (before, after), repo, standin))


def _dump(item: Candidates) -> dict[str, Any]:
    return {
        "part": item.request.part,
        "prompt": item.request.prompt,
        "needs": list(item.request.needs),
        "also": list(item.request.also),
        "records": [
            {
                "label": label,
                "type": record.type,
                "text": record.text,
                "scores": None
                if record.scores is None
                else {
                    "final": record.scores.final,
                    "reranker": record.scores.reranker,
                    "semantic": record.scores.semantic,
                    "keyword": record.scores.keyword,
                },
            }
            for record, label in zip(item.records, item.labels, strict=True)
        ],
    }


if __name__ == "__main__":
    main()
