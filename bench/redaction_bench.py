"""Benchmark of secret redaction (issue 9), everything measured side by side in one run.

(a) Ordinary text, the retain path (redaction runs on every request): medians for ~2 KB of prose
    (the start of docs/architecture.md), ~2 KB of keyword-dense prose ("token", "password" in
    every sentence) and ~20 KB of code (src/pi_hindsight/engine/engine.py), for
    ``pi_hindsight.redaction`` and for the implementation it replaced
    (bench/_redaction_baseline.py), with the ratio new/old.
(b) Adversarial input: each construct a detector starts from (every trigger literal, plus the
    constructs that made the old patterns rescan, e.g. ``"-----BEGIN PRIVATE KEY-----\\n"``)
    repeated to 200 KB and to 1 MB: medians, the 1 MB/200 KB ratio (linear: ~5), and the old
    implementation on the same construct at 20 KB next to the new one (the old one needs 10 s
    for 200 KB of private-key headers, 249 s for 1 MB).

Runs: ``BENCH_RUNS`` (5) per measurement, 3 for 1 MB. Run:
``PYTHONPATH=src .venv/bin/python bench/redaction_bench.py``.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import _redaction_baseline as baseline  # bench/_redaction_baseline.py (benchmarks run as scripts)
from pi_hindsight.redaction import redact, tokens

ROOT = Path(__file__).resolve().parents[1]
RUNS = int(os.environ.get("BENCH_RUNS", "5"))

EXTRA_UNITS = (
    "-----BEGIN PRIVATE KEY-----\n",
    "-----BEGIN ",
    "PuTTY-User-Key-File-2: x\n",
    "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t",
    "kind: Secret\ndata:\n  ",
    "password=",
    "password='",
    "password: ",
    "the password is ",
    '"secret": "',
    "api key ",
    "token: ",
    "--token ",
    "<password>",
    "name: DB_PASSWORD\n",
    "key=",
    "key",
    "://a:",
    "?token=",
    "Authorization: Bearer ",
    "Cookie: a=",
    "-u a:",
    "mysql -p",
    'auth=("a", "',
    "eyJabcdefgh.eyJabcdefgh.",
    "M" * 24 + ".",
    "a1B2c3D4e5F6g7H8 ",
    "[REDACTED:x]",
)
UNITS = sorted(
    {literal for pattern in tokens.PATTERNS for literal, _ in pattern.triggers} | set(EXTRA_UNITS)
)


def repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def median_seconds(function: Callable[[str], object], text: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        function(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ordinary() -> None:
    prose = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")[:2048]
    dense = (
        "We deploy to the Zephyr cluster in Frankfurt; the service listens on port 8080. "
        "The token budget is 800 and the password policy requires 12 characters. "
    ) * 14
    code = (ROOT / "src" / "pi_hindsight" / "engine" / "engine.py").read_text(encoding="utf-8")
    print("(a) ordinary text: median µs per call (new vs the replaced implementation)")
    print(f"    {'text':34} {'new':>9} {'old':>9} {'new/old':>8}")
    for name, text in (
        ("2 KB prose (docs/architecture.md)", prose),
        ("2 KB keyword-dense prose", dense[:2048]),
        ("20 KB code (engine.py)", code[:20480]),
    ):
        new = median_seconds(redact, text, 200)
        old = median_seconds(baseline.redact, text, 200)
        print(f"    {name:34} {new * 1e6:9.1f} {old * 1e6:9.1f} {new / old:8.2f}")


def adversarial() -> None:
    print()
    print("(b) adversarial input: a construct repeated; median ms per call")
    header = f"    {'construct':34} {'200 KB':>8} {'1 MB':>8} {'1MB/200KB':>9}"
    print(header + f" {'old 20KB':>9} {'new 20KB':>9}")
    worst: list[tuple[float, str]] = []
    for unit in UNITS:
        small = median_seconds(redact, repeat(unit, 200_000), RUNS)
        large = median_seconds(redact, repeat(unit, 1_000_000), 3)
        twenty = repeat(unit, 20_000)
        old = median_seconds(baseline.redact, twenty, 1)
        new = median_seconds(redact, twenty, RUNS)
        worst.append((small, unit))
        print(
            f"    {unit[:34]!r:34} {small * 1e3:8.1f} {large * 1e3:8.1f} {large / small:9.1f}"
            f" {old * 1e3:9.1f} {new * 1e3:9.1f}",
            flush=True,
        )
    worst.sort(reverse=True)
    print()
    slowest = ", ".join(f"{unit[:24]!r} {seconds * 1e3:.1f} ms" for seconds, unit in worst[:5])
    print(f"    slowest at 200 KB: {slowest}")
    print(f"    constructs measured: {len(UNITS)}")


def main() -> None:
    print(f"Python {sys.version.split()[0]}; {RUNS} runs per median")
    ordinary()
    adversarial()


if __name__ == "__main__":
    main()
