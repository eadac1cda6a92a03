"""Benchmark of secret redaction (issue 9), everything measured side by side in one run.

(a) Ordinary text, the retain path (redaction runs on every request): medians for ~2 KB of prose
    (the start of docs/architecture.md), ~2 KB of keyword-dense prose ("token", "password" in
    every sentence) and ~20 KB of code (src/pi_hindsight/engine/engine.py), for
    ``pi_hindsight.redaction`` and for the implementation it replaced
    (bench/_redaction_baseline.py), with the ratio new/old.
(b) Adversarial input: each construct a detector starts from (every trigger literal, plus the
    constructs that made the old patterns rescan, e.g. ``"-----BEGIN PRIVATE KEY-----\\n"``)
    repeated to 200 KB and to 1 MB: medians, the 1 MB/200 KB ratio (linear: ~5), and the old
    implementation on the same construct at 20 KB next to the new one, in CPU time (the old one
    needs 10 s for 200 KB of private-key headers, 249 s for 1 MB).

Every figure is a median of wall-clock time with the median CPU time of the same runs beside it:
on a machine shared with other work the CPU figure is the one to compare.

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


def median_seconds(function: Callable[[str], object], text: str, runs: int) -> tuple[float, float]:
    """Median wall-clock and median CPU seconds of ``runs`` calls (CPU time is the fairer figure
    on a machine shared with other work; the event loop waits for the wall-clock one)."""
    wall, cpu = [], []
    for _ in range(runs):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        function(text)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def ordinary() -> None:
    prose = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")[:2048]
    dense = (
        "We deploy to the Zephyr cluster in Frankfurt; the service listens on port 8080. "
        "The token budget is 800 and the password policy requires 12 characters. "
    ) * 14
    code = (ROOT / "src" / "pi_hindsight" / "engine" / "engine.py").read_text(encoding="utf-8")
    print("(a) ordinary text: median µs per call, wall clock (CPU), new vs the replaced one")
    print(f"    {'text':34} {'new':>16} {'old':>16} {'new/old':>8}")
    for name, text in (
        ("2 KB prose (docs/architecture.md)", prose),
        ("2 KB keyword-dense prose", dense[:2048]),
        ("20 KB code (engine.py)", code[:20480]),
    ):
        new, new_cpu = median_seconds(redact, text, 200)
        old, old_cpu = median_seconds(baseline.redact, text, 200)
        print(
            f"    {name:34} {new * 1e6:8.1f} ({new_cpu * 1e6:5.1f}) {old * 1e6:8.1f}"
            f" ({old_cpu * 1e6:5.1f}) {new_cpu / old_cpu:8.2f}"
        )


def adversarial() -> None:
    print()
    print("(b) adversarial input: a construct repeated; median ms per call, wall clock (CPU)")
    header = f"    {'construct':34} {'200 KB':>15} {'1 MB':>15} {'1MB/200KB':>9}"
    print(header + f" {'old 20KB':>9} {'new 20KB':>9}")
    worst: list[tuple[float, float, str]] = []
    for unit in UNITS:
        small, small_cpu = median_seconds(redact, repeat(unit, 200_000), RUNS)
        large, large_cpu = median_seconds(redact, repeat(unit, 1_000_000), 3)
        twenty = repeat(unit, 20_000)
        _, old_cpu = median_seconds(baseline.redact, twenty, 1)
        _, new_cpu = median_seconds(redact, twenty, RUNS)
        worst.append((small_cpu, small, unit))
        print(
            f"    {unit[:34]!r:34} {small * 1e3:7.1f} ({small_cpu * 1e3:5.1f})"
            f" {large * 1e3:7.1f} ({large_cpu * 1e3:5.1f}) {large_cpu / small_cpu:9.1f}"
            f" {old_cpu * 1e3:9.1f} {new_cpu * 1e3:9.1f}",
            flush=True,
        )
    worst.sort(reverse=True)
    print()
    slowest = ", ".join(f"{unit[:24]!r} {cpu * 1e3:.1f} ms" for cpu, _, unit in worst[:5])
    print(f"    slowest at 200 KB (CPU): {slowest}")
    print(f"    constructs measured: {len(UNITS)}")


def main() -> None:
    print(f"Python {sys.version.split()[0]}; {RUNS} runs per median")
    ordinary()
    adversarial()


if __name__ == "__main__":
    main()
