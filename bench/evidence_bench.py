"""Evidence ledger benchmarks, measured side by side in one run.

- evidence write p50: ``record_prepared`` (a ~2 kB delivered body, 8 record ids), then
  ``mark_attached`` and ``mark_confirmed`` — target ≤ 1 ms each.
- ``evidence list`` over 1,000,000 records: the query the CLI runs for its first page
  (``EvidenceLedger.list(limit=20)``), unfiltered and by scope / session — target ≤ 50 ms.
  The records are generated with ``executemany`` straight into the ledger's tables.
- the cap under a flood: records are written until three times the cap has gone in, and the file
  (main + WAL + shm) is measured after every write — target: never more than 2 % over the cap.

Run: ``.venv/bin/python bench/evidence_bench.py`` (``--records 100000`` for a quicker run).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pi_hindsight.stores.evidence import EVIDENCE_FILE_NAME, EvidenceLedger, PreparedRecord
from pi_hindsight.stores.evidence.tables import format_bytes

BODY = "<hindsight-memory>\n" + "".join(
    f"- (2025-01-{n:02d}) a remembered engineering decision number {n} and its reason\n"
    for n in range(1, 27)
)
RECORD_IDS = [f"0190{n:04x}-aaaa-bbbb-cccc-ddddeeeeffff" for n in range(8)]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def _percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def bench_writes(directory: Path, count: int) -> dict[str, list[float]]:
    ledger = EvidenceLedger(directory, retention_days=30, cap_bytes=50_000_000)
    timings: dict[str, list[float]] = {
        "record_prepared": [],
        "mark_attached": [],
        "mark_confirmed": [],
    }
    try:
        for n in range(count):
            started = time.perf_counter()
            ledger.record_prepared(
                PreparedRecord(
                    f"req-{n:07d}",
                    outcome="delivered",
                    session_id=f"session-{n // 20}",
                    scope_id="project:alpha",
                    bank_ids=["pi-coding"],
                    session_file="/home/u/.pi/agent/sessions/--w--/x.jsonl",
                    body=BODY,
                    record_ids=RECORD_IDS,
                    tokens=420,
                    recall_ms=85.0,
                    total_ms=91.0,
                )
            )
            timings["record_prepared"].append(time.perf_counter() - started)
        for name, call in (
            ("mark_attached", lambda n: ledger.mark_attached(f"req-{n:07d}", entry_id="b8a32b24")),
            ("mark_confirmed", lambda n: ledger.mark_confirmed(f"req-{n:07d}", True, 48_000)),
        ):
            for n in range(count):
                started = time.perf_counter()
                call(n)
                timings[name].append(time.perf_counter() - started)
    finally:
        ledger.close()
    return timings


def generate(directory: Path, records: int) -> float:
    """Fill a ledger with ``records`` rows (60 % delivered with a small body) via executemany."""
    EvidenceLedger(directory, retention_days=3_650, cap_bytes=10**11).close()
    connection = sqlite3.connect(directory / EVIDENCE_FILE_NAME, isolation_level=None)
    connection.execute("PRAGMA synchronous = OFF")
    rng = random.Random(7)
    now = time.time()
    started = time.perf_counter()
    chunk = 50_000
    body = BODY[:200]
    ids = json.dumps(RECORD_IDS[:3])
    for base in range(0, records, chunk):
        rows = []
        bodies = []
        for n in range(base, min(records, base + chunk)):
            delivered = rng.random() < 0.6
            rows.append(
                (
                    n + 1,
                    f"gen-{n:08d}",
                    now - (records - n) * 2.0,  # one request every 2 s, oldest first
                    "delivered" if delivered else "nothing_found",
                    f"project:{n % 40}",
                    '["pi-coding"]',
                    f"session-{n // 25}",
                    ids if delivered else "[]",
                    3 if delivered else 0,
                    1 if delivered else None,
                    1 if delivered else None,
                )
            )
            if delivered:
                bodies.append((n + 1, body))
        connection.execute("BEGIN")
        connection.executemany(
            "INSERT INTO requests (seq, request_id, prepared_at, outcome, scope_id, bank_ids, "
            "session_id, record_ids, record_count, attached, confirmed) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        connection.executemany("INSERT INTO bodies (seq, body) VALUES (?, ?)", bodies)
        connection.execute("COMMIT")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return time.perf_counter() - started


def time_calls(call: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def bench_list(directory: Path, records: int) -> dict[str, float]:
    results: dict[str, float] = {"generate_s": generate(directory, records)}
    started = time.perf_counter()
    ledger = EvidenceLedger(directory, retention_days=3_650, cap_bytes=10**11)
    results["open_s"] = time.perf_counter() - started
    try:
        started = time.perf_counter()
        first = ledger.list(limit=20)
        results["list_cold"] = time.perf_counter() - started
        assert len(first.records) == 20 and first.next_cursor
        cursor = first.next_cursor
        results["list"] = statistics.median(time_calls(lambda: ledger.list(limit=20), 50))
        results["list_scope"] = statistics.median(
            time_calls(lambda: ledger.list(scope="project:7", limit=20), 50)
        )
        results["list_session"] = statistics.median(
            time_calls(lambda: ledger.list(session="session-1234", limit=20), 50)
        )
        results["list_next_page"] = statistics.median(
            time_calls(lambda: ledger.list(limit=20, before=cursor), 50)
        )
        results["show"] = statistics.median(
            time_calls(lambda: ledger.show(f"gen-{records // 2:08d}"), 50)
        )
        started = time.perf_counter()
        stats = ledger.stats()
        results["stats_s"] = time.perf_counter() - started
        results["records"] = stats.records
        results["disk_bytes"] = stats.disk_bytes
    finally:
        ledger.close()
    return results


def bench_cap(directory: Path, cap: int) -> dict[str, float | str]:
    ledger = EvidenceLedger(directory, retention_days=30, cap_bytes=cap)
    path = ledger.path
    written = 0
    peak = 0
    samples: list[float] = []
    n = 0
    try:
        now = time.time()
        while written < 3 * cap:
            started = time.perf_counter()
            ledger.record_prepared(
                PreparedRecord(
                    f"flood-{n:07d}",
                    outcome="delivered",
                    session_id=f"s{n // 20}",
                    scope_id="project:alpha",
                    body=BODY,
                    record_ids=RECORD_IDS,
                    prepared_at=now - 86_400 + n * 0.5,
                )
            )
            samples.append(time.perf_counter() - started)
            written += len(BODY)
            size = sum(
                p.stat().st_size
                for p in (
                    path,
                    path.with_name(path.name + "-wal"),
                    path.with_name(path.name + "-shm"),
                )
                if p.exists()
            )
            peak = max(peak, size)
            n += 1
        stats = ledger.stats()
    finally:
        ledger.close()
    return {
        "peak_ratio": peak / cap,
        "final_ratio": stats.disk_bytes / cap,
        "written": written,
        "records_written": n,
        "records_kept": stats.records,
        "evicted": stats.cap_evicted,
        "note": stats.retention_note,
        "p50": statistics.median(samples),
        "p99": _percentile(samples, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="rows for the list bench")
    parser.add_argument("--writes", type=int, default=3_000, help="writes for the write bench")
    parser.add_argument("--flood-cap", type=int, default=20_000_000, help="cap for the flood")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evidence-bench-") as tmp:
        root = Path(tmp)
        writes = bench_writes(root / "writes", args.writes)
        listing = bench_list(root / "list", args.records)
        cap = bench_cap(root / "cap", args.flood_cap)

    rows: list[tuple[str, str, str, bool | None]] = []
    for name, samples in writes.items():
        p50 = statistics.median(samples)
        rows.append((f"evidence write p50 ({name})", "<= 1 ms", _ms(p50), p50 <= 0.001))
        rows.append((f"  p99 ({name})", "", _ms(_percentile(samples, 0.99)), None))
    records = int(listing["records"])
    for key, label in (
        ("list", "first page"),
        ("list_scope", "first page, --scope"),
        ("list_session", "first page, --session"),
        ("list_next_page", "second page (--before)"),
    ):
        value = listing[key]
        rows.append((f"evidence list p50, {label}", "<= 50 ms", _ms(value), value <= 0.05))
    rows.append(("evidence list, first call on a cold open", "", _ms(listing["list_cold"]), None))
    rows.append(("evidence show p50 (with body)", "", _ms(listing["show"]), None))
    rows.append(
        (
            f"open the ledger ({records:,} records, quick_check)",
            "",
            f"{listing['open_s']:.2f} s",
            None,
        )
    )
    rows.append(("stats over all records", "", f"{listing['stats_s']:.2f} s", None))
    peak = float(cap["peak_ratio"])
    rows.append(
        (
            f"cap held under a flood (peak / cap, {format_bytes(args.flood_cap)})",
            "<= 1.02",
            f"{peak:.4f}",
            peak <= 1.02,
        )
    )
    rows.append(("  final size / cap", "", f"{float(cap['final_ratio']):.4f}", None))
    rows.append(
        (
            "  flood write p50 / p99",
            "",
            f"{_ms(float(cap['p50']))} / {_ms(float(cap['p99']))}",
            None,
        )
    )

    width = max(len(row[0]) for row in rows) + 2
    print(f"{'metric':<{width}}{'target':<10}{'measured':<16}ok")
    for name, target, measured, ok in rows:
        mark = "" if ok is None else ("yes" if ok else "NO")
        print(f"{name:<{width}}{target:<10}{measured:<16}{mark}")
    print()
    print(
        f"list data: {records:,} records, {format_bytes(float(listing['disk_bytes']))} on disk, "
        f"generated in {listing['generate_s']:.1f} s"
    )
    print(
        f"flood: {int(cap['records_written']):,} records ({format_bytes(float(cap['written']))}) "
        f"into a {format_bytes(args.flood_cap)} cap; kept {int(cap['records_kept']):,}, "
        f"evicted {int(cap['evicted']):,}; {cap['note']}"
    )


if __name__ == "__main__":
    main()
