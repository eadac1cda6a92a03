"""Benchmark of secret redaction (issue 9), everything measured in one run.

(a) Ordinary text, the retain path (redaction runs on every request): medians for ~2 KB of prose
    (the start of docs/architecture.md), ~2 KB of keyword-dense prose ("token", "password" in
    every sentence) and ~20 KB of code (src/pi_hindsight/engine/engine.py), for
    ``pi_hindsight.redaction`` and for the implementation issue 9 replaced
    (bench/_redaction_baseline.py), with the ratio new/old.
(b) Adversarial input: each construct a detector starts from (every trigger literal, and the
    constructs of the growth test in tests/unit/test_redaction_properties.py: those that made
    earlier patterns rescan, e.g. ``"-----BEGIN PRIVATE KEY-----\\n"``, or that hold a secret
    word or a finding every few characters) repeated to 200 KB and to 1 MB: per construct the
    input size and the median CPU and wall-clock time, and the 1 MB/200 KB ratio (linear: ~5).
    The last lines name the slowest construct at 200 KB against the 50 ms target (issue 9).
    Beside the listed constructs, a generated family (a secret word or a service's name, a
    separator, another name-like word, a trailer: ``token_url ``) is screened at 20 KB and its
    slowest ``BENCH_SCREEN_TOP`` (12) are measured the same way.
(c) Enormous input: the slowest constructs of (b) repeated past ``redaction.CAP`` (4 MB), which
    is redacted in segments: median CPU time and the ratio to 1 MB (linear: ~4.5).

CPU time is the figure to compare on a machine shared with other work; the sidecar's event loop
waits for the wall-clock one (it redacts large inputs off the loop).

Runs: ``BENCH_RUNS`` (5) per 200 KB median, 3 per 1 MB, 3 per 4.5 MB. Run:
``PYTHONPATH=src .venv/bin/python bench/redaction_bench.py`` (``BENCH_ONLY=text`` measures only
the constructs whose repr contains ``text``).
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import _redaction_baseline as baseline  # bench/_redaction_baseline.py (benchmarks run as scripts)
from pi_hindsight import redaction
from pi_hindsight.redaction import redact, tokens

ROOT = Path(__file__).resolve().parents[1]
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
TARGET_MS = 50.0

# The constructs of the growth test (tests/unit/test_redaction_properties.py), beside every
# trigger literal of the token patterns.
EXTRA_UNITS = (
    "-----BEGIN PRIVATE KEY-----\n",
    "-----BEGIN ",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n",
    "-----END PRIVATE KEY-----\n",
    "PuTTY-User-Key-File-2: x\n",
    "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t",
    "kind: Secret\ndata:\n  ",
    "  data:\n",
    "password=",
    "password='",
    'password="',
    "password: ",
    "password ",
    "the password is ",
    "PASSWORD=x ",
    "PASSWORD=x" + " " * 64,
    '"secret": "',
    "api_key",
    "api key ",
    "token: ",
    "token token ",
    "--token ",
    "<password>",
    "name: DB_PASSWORD\n",
    "name: password value: x ",
    "abcdefghijklmnopqrstuvwxyz\tkey ",
    "key=",
    "key",
    "auth",
    "://",
    "://a:",
    "://a:b",
    "redis://:",
    "?token=",
    "&key=a",
    " key=a",
    "Key=a1B2c3D4e5F6g7H8i9 ",
    "Bearer ",
    "Authorization: Bearer ",
    "Authorization: ",
    "Cookie: a=",
    "curl -u a:",
    "-u a:",
    "mysql -p",
    "docker login -p ",
    'auth=("a", "',
    "IDENTIFIED BY '",
    "eyJ",
    "eyJa.",
    "eyJabcdefgh.eyJabcdefgh.",
    "M" * 24 + ".",
    "1234567890:AA",
    "0123456789abcdef" * 2 + "-us1",
    "abc1Q~",
    "x" * 14 + ".atlasv1.",
    "AKIA",
    "AC" + "0123456789abcdef" * 2 + " ",
    "a1B2c3D4e5F6g7H8 ",
    "[REDACTED:x]",
    " ",
    "\n",
    "=",
    ":",
    "-",
    "'",
    '"',
    "\\n",
    # issue 18: comparisons, setter calls, Facebook app tokens, placeholders after a prefix
    '=="abcdef12"',
    '"x1y2z3w4" == password ',
    'setPassword("x1y2z3w4") ',
    '"api_token", "x1y2z3w4", ',
    '"a", "b", ',
    "==",
    '("',
    "|",
    "1308742762612587|",
    "ghp_" + "x" * 36 + " ",
    "token1=",
    # service names have key shapes (service_names.py); a secret word before a metadata word
    "token_url ",
    "mailgun_url ",
    "metabase_url ",
    "password_url ",
    "api_token ",
    "_key ",
    "_secret ",
)
try:  # issue 18's vendor formats (absent before it)
    from pi_hindsight.redaction import vendors

    _VENDOR_TRIGGERS = {literal for pattern in vendors.PATTERNS for literal, _ in pattern.triggers}
except ImportError:
    _VENDOR_TRIGGERS = set()
UNITS = sorted(
    {literal for pattern in tokens.PATTERNS for literal, _ in pattern.triggers}
    | _VENDOR_TRIGGERS
    | set(EXTRA_UNITS)
)


def _split(words: str) -> tuple[str, ...]:
    return tuple(words.split())


# A family the fixed list cannot cover (issue 18): a secret word, a vendor's or a service's name
# or a key qualifier, a separator, a second name-like word, a trailer; repeated, each makes the
# detectors that read names look at a run of name characters every few characters. Every
# combination is screened at _SCREEN_SIZE (one call each: time is linear in the size), and the
# slowest _SCREEN_TOP are measured in full beside the list above.
_FAMILY_FIRST = (
    *_split("password passwd passphrase pass pwd secret token key credential creds auth"),
    *_split("mailgun twilio datadog heroku sendgrid algolia cloudflare login"),
    *_split("metabase instamojo jira cloudsmith zendesk"),  # service names (service_names.py)
    *_split("api access client private"),  # key qualifiers
)
_FAMILY_SEPARATORS = ("_", ".", "-", "")
_FAMILY_SECOND = _split("url key secret token name id type header password api file value")
_FAMILY_TRAILERS = (" ", "=", ": ", "\n", '" ')
FAMILY = tuple(
    first + separator + second + trailer
    for first in _FAMILY_FIRST
    for separator in _FAMILY_SEPARATORS
    for second in _FAMILY_SECOND
    for trailer in _FAMILY_TRAILERS
)
_SCREEN_SIZE = 20_000
_SCREEN_TOP = int(os.environ.get("BENCH_SCREEN_TOP", "12"))
ONLY = os.environ.get("BENCH_ONLY")
# BENCH_BASELINE=<git rev>: also measure that revision's redaction package at 200 KB, in the same
# run (loaded as bench/redaction_external.py does), for a before/after per construct.
BASELINE_REV = os.environ.get("BENCH_BASELINE")
if ONLY:
    UNITS = [unit for unit in UNITS if ONLY in repr(unit)]
    FAMILY = tuple(unit for unit in FAMILY if ONLY in repr(unit))


def repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def median_seconds(function: Callable[[str], object], text: str, runs: int) -> tuple[float, float]:
    """Median wall-clock and median CPU seconds of ``runs`` calls."""
    wall, cpu = [], []
    for _ in range(runs):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        function(text)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def size_label(size: int) -> str:
    return f"{size / 1e6:.3g} MB" if size >= 1_000_000 else f"{size // 1000} KB"


def ordinary(before: Callable[[str], object] | None) -> None:
    prose = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")[:2048]
    dense = (
        "We deploy to the Zephyr cluster in Frankfurt; the service listens on port 8080. "
        "The token budget is 800 and the password policy requires 12 characters. "
    ) * 14
    code = (ROOT / "src" / "pi_hindsight" / "engine" / "engine.py").read_text(encoding="utf-8")
    print("(a) ordinary text: median µs per call, CPU (wall clock), new vs issue 9's baseline")
    print(f"    {'text':34} {'new':>16} {'old':>16} {'new/old':>8}")
    for name, text in (
        ("2 KB prose (docs/architecture.md)", prose),
        ("2 KB keyword-dense prose", dense[:2048]),
        ("20 KB code (engine.py)", code[:20480]),
    ):
        new, new_cpu = median_seconds(redact, text, 200)
        old, old_cpu = median_seconds(baseline.redact, text, 200)
        rev = ""
        if before is not None:
            _, rev_cpu = median_seconds(before, text, 200)
            rev = f"  {BASELINE_REV}: {rev_cpu * 1e6:8.1f}"
            rev += f", new/{BASELINE_REV} {new_cpu / rev_cpu:5.2f}"
        print(
            f"    {name:34} {new_cpu * 1e6:8.1f} ({new * 1e6:5.1f}) {old_cpu * 1e6:8.1f}"
            f" ({old * 1e6:5.1f}) {new_cpu / old_cpu:8.2f}{rev}"
        )


def screen() -> list[str]:
    """The slowest _SCREEN_TOP of FAMILY not already listed, by one call at _SCREEN_SIZE."""
    timed = []
    for unit in FAMILY:
        if unit not in UNITS:
            _, cpu = median_seconds(redact, repeat(unit, _SCREEN_SIZE), 1)
            timed.append((cpu, unit))
    timed.sort(reverse=True)
    print()
    print(
        f"    screened {len(timed)} generated constructs at {size_label(_SCREEN_SIZE)};"
        f" slowest {_SCREEN_TOP} measured below (CPU ms at {size_label(_SCREEN_SIZE)}):"
    )
    print("    " + ", ".join(f"{unit!r} {cpu * 1e3:.1f}" for cpu, unit in timed[:_SCREEN_TOP]))
    return [unit for _, unit in timed[:_SCREEN_TOP]]


def adversarial(before: Callable[[str], object] | None) -> list[tuple[float, float, str]]:
    """Per construct: 200 KB and 1 MB medians; returns (200 KB CPU, 1 MB CPU, construct)."""
    units = [*UNITS, *screen()]
    print()
    print("(b) adversarial input: a construct repeated; median ms per call, CPU (wall clock)")
    print(
        f"    {'construct':36} {'size':>6} {'CPU':>7} {'(wall)':>8}  {'size':>6} {'CPU':>7}", end=""
    )
    print(f" {'(wall)':>8} {'1MB/200KB':>9}")
    if before is not None:
        print(f"    (last column: 200 KB CPU ms of {BASELINE_REV})")
    measured, measured_before = [], []
    for unit in units:
        row = []
        for size, runs in ((200_000, RUNS), (1_000_000, 3)):
            wall, cpu = median_seconds(redact, repeat(unit, size), runs)
            row.append((size, cpu, wall))
        (small, small_cpu, small_wall), (large, large_cpu, large_wall) = row
        measured.append((small_cpu, large_cpu, unit))
        old = ""
        if before is not None:
            _, old_cpu = median_seconds(before, repeat(unit, 200_000), RUNS)
            measured_before.append((old_cpu, unit))
            old = f" {old_cpu * 1e3:9.1f}"
        print(
            f"    {unit[:34]!r:36} {size_label(small):>6} {small_cpu * 1e3:7.1f}"
            f" ({small_wall * 1e3:6.1f})  {size_label(large):>6} {large_cpu * 1e3:7.1f}"
            f" ({large_wall * 1e3:6.1f}) {large_cpu / small_cpu:9.1f}{old}",
            flush=True,
        )
    by_small = sorted(measured, reverse=True)
    by_large = sorted(measured, key=lambda row: row[1], reverse=True)
    print()
    print(f"    constructs measured: {len(units)}")
    slowest = ", ".join(f"{unit[:24]!r} {cpu * 1e3:.1f}" for cpu, _, unit in by_small[:5])
    print(f"    slowest five at 200 KB (CPU ms): {slowest}")
    cpu, large_cpu, unit = by_small[0]
    print(f"    slowest 1 MB construct: {by_large[0][2]!r} {by_large[0][1] * 1e3:.1f} ms")
    print(f"    slowest 200 KB construct: {unit!r} {cpu * 1e3:.1f} ms (target {TARGET_MS:g} ms)")
    over = ", ".join(f"{unit[:24]!r} {cpu * 1e3:.1f}" for cpu, _, unit in by_small if cpu > 0.04)
    print(f"    over 40 ms at 200 KB: {over or 'none'}")
    if measured_before:
        old_cpu, old_unit = max(measured_before)
        print(
            f"    slowest 200 KB construct of {BASELINE_REV}: {old_unit!r} {old_cpu * 1e3:.1f} ms"
        )
    return by_large


def enormous(by_large: list[tuple[float, float, str]]) -> None:
    size = getattr(redaction, "CAP", 4 << 20) + 500_000  # (CAP: none before this change)
    print()
    print("(c) enormous input, past the cap (4 MiB: redacted in segments)")
    print(f"    {'construct':36} {'size':>6} {'CPU ms':>8} {'(wall)':>8} {'÷ 1 MB':>7}")
    for _, large_cpu, unit in by_large[:3]:
        wall, cpu = median_seconds(redact, repeat(unit, size), 3)
        print(
            f"    {unit[:34]!r:36} {size_label(size):>6} {cpu * 1e3:8.1f} ({wall * 1e3:6.1f})"
            f" {cpu / large_cpu:7.1f}",
            flush=True,
        )


def main() -> None:
    print(f"Python {sys.version.split()[0]}; {RUNS} runs per 200 KB median")
    with tempfile.TemporaryDirectory() as tmp:
        before = None
        if BASELINE_REV:
            from redaction_external import baseline as load_revision  # bench/, run as a script

            before = load_revision(BASELINE_REV, Path(tmp))
        ordinary(before)
        by_large = adversarial(before)
    enormous(by_large)


if __name__ == "__main__":
    main()
