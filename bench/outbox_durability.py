"""Outbox durability options, side by side in one run (issue 9, ADR 0006).

Every variant is the real ``Outbox`` (schema, SQL, indexes) with its connection switched to the
variant's journal settings:

    wal-normal          WAL + synchronous=NORMAL, no commit mark (the outbox before issue 9)
    wal-normal+mark     WAL + synchronous=NORMAL + the commit mark (what ships)
    wal-full            WAL + synchronous=FULL
    wal+checkpoint      WAL + synchronous=NORMAL, a PASSIVE checkpoint after every commit
    truncate-full       rollback journal (TRUNCATE) + synchronous=FULL
    persist-full        rollback journal (PERSIST) + synchronous=FULL
    delete-full         rollback journal (DELETE) + synchronous=FULL

(a) durable enqueue, one process: items/s, one committed transaction per item (target >= 5,000).
(b) durable enqueue, P processes at once into one file (the outbox is shared by every Pi), and
    how many enqueues gave up after the 10 s busy timeout (over all runs).
(c) the claim path: claim -> mark_submitted -> mark_done for a backlog, items/s.
(d) damage: a child process commits N items and is killed (SIGKILL, nothing checkpointed at
    close); then the -wal or the main file is cut in half, overwritten in the middle, or has its
    header zeroed; the file is reopened through ``Outbox``. Each cell says whether every
    committed item is there ("all"), the damage was detected and the file set aside
    ("detected"), or items are silently missing ("SILENT -k").

Sizes: ``BENCH_ITEMS`` (2000), ``BENCH_RUNS`` (3, medians), ``BENCH_PROCESSES`` (4),
``BENCH_DAMAGE_ITEMS`` (80: all still in the log, before an automatic checkpoint).
Run: ``.venv/bin/python bench/outbox_durability.py``.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pi_hindsight.backend.resources import RetainItem
from pi_hindsight.stores.outbox_items import RetainRequest

ITEMS = int(os.environ.get("BENCH_ITEMS", "2000"))
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
PROCESSES = int(os.environ.get("BENCH_PROCESSES", "4"))
DAMAGE_ITEMS = int(os.environ.get("BENCH_DAMAGE_ITEMS", "80"))

# name -> (journal_mode, synchronous, commit mark, checkpoint after each commit)
VARIANTS: dict[str, tuple[str, str, bool, bool]] = {
    "wal-normal": ("WAL", "NORMAL", False, False),
    "wal-normal+mark": ("WAL", "NORMAL", True, False),
    "wal-full": ("WAL", "FULL", False, False),
    "wal+checkpoint": ("WAL", "NORMAL", False, True),
    "truncate-full": ("TRUNCATE", "FULL", False, False),
    "persist-full": ("PERSIST", "FULL", False, False),
    "delete-full": ("DELETE", "FULL", False, False),
}
CHOSEN = "wal-normal+mark"


def open_variant(directory: Path, variant: str) -> Any:
    """The real Outbox, its connection switched to ``variant``."""
    import dataclasses

    from pi_hindsight.stores import outbox as outbox_module
    from pi_hindsight.stores.outbox_schema import SCHEMA

    journal, synchronous, mark, checkpoint = VARIANTS[variant]
    # Rollback variants open the file in rollback mode, so no process switches it back to WAL.
    outbox_module.SCHEMA = dataclasses.replace(  # type: ignore[misc]
        SCHEMA, journal="wal" if journal == "WAL" else "delete"
    )
    outbox = outbox_module.Outbox(directory)
    connection = outbox._connection  # the benchmark reconfigures the real store
    connection.execute(f"PRAGMA journal_mode = {journal}").fetchall()
    connection.execute(f"PRAGMA synchronous = {synchronous}")
    if not mark and connection.commit_mark is not None:
        connection.commit_mark.close()
        connection.commit_mark = None
    if checkpoint:
        enqueue = outbox.enqueue

        def enqueue_and_checkpoint(**kwargs: Any) -> str:
            item_id: str = enqueue(**kwargs)
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            return item_id

        outbox.enqueue = enqueue_and_checkpoint
    return outbox


def request(session: str, n: int) -> RetainRequest:
    """About what a completed ~900-character request enqueues."""
    item = RetainItem(
        content=f"[request {n}] " + "we keep the deploy notes in docs/deploy.md. " * 20,
        document_id=f"pi-session-{session}",
        tags=("project:bench",),
        context="Pi coding session in project bench",
        metadata={"source": "pi", "session_id": session, "request_id": f"r{n}"},
        update_mode="append",
    )
    return RetainRequest(session, "b", item, f"r{n}")


def enqueue_many(directory: Path, variant: str, start: int, count: int) -> float:
    outbox = open_variant(directory, variant)
    requests = [request(f"s{n % 20}", n) for n in range(start, start + count)]
    try:
        began = time.perf_counter()
        for each in requests:
            outbox.enqueue(each)
        return time.perf_counter() - began
    finally:
        outbox.close()


# -- (a) one process -----------------------------------------------------------------------


def single_rate(work: Path, variant: str) -> float:
    directory = Path(tempfile.mkdtemp(dir=work))
    return ITEMS / enqueue_many(directory, variant, 0, ITEMS)


# -- (b) several processes -----------------------------------------------------------------


def _worker(
    directory: str, variant: str, start: int, count: int, barrier: Any, failures: Any
) -> None:
    from pi_hindsight.errors import StateError

    outbox = open_variant(Path(directory), variant)  # opened before the start line
    requests = [request(f"s{n % 20}", n) for n in range(start, start + count)]
    failed = 0
    barrier.wait(timeout=120)
    for each in requests:
        try:
            outbox.enqueue(each)
        except StateError:  # "database is locked" after the 10 s busy timeout: a lost request
            failed += 1
    outbox.close()
    failures.put(failed)


def concurrent_rate(work: Path, variant: str) -> tuple[float, int]:
    """Items/s committed by all writers together, and how many enqueues failed."""
    directory = Path(tempfile.mkdtemp(dir=work))
    open_variant(directory, variant).close()
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES + 1)
    failures = context.Queue()
    share = ITEMS // PROCESSES
    workers = [
        context.Process(
            target=_worker, args=(str(directory), variant, i * share, share, barrier, failures)
        )
        for i in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    barrier.wait(timeout=120)
    began = time.perf_counter()
    for worker in workers:
        worker.join(timeout=600)
    elapsed = time.perf_counter() - began
    if any(worker.exitcode != 0 for worker in workers):
        raise RuntimeError(f"{variant}: a writer crashed")
    failed = sum(failures.get(timeout=10) for _ in workers)
    return (share * PROCESSES - failed) / elapsed, failed


# -- (c) the claim path --------------------------------------------------------------------


def claim_rate(work: Path, variant: str) -> float:
    directory = Path(tempfile.mkdtemp(dir=work))
    enqueue_many(directory, variant, 0, ITEMS)
    outbox = open_variant(directory, variant)
    delivered = 0
    try:
        began = time.perf_counter()
        while batches := outbox.claim("bench", limit=2):
            for batch in batches:
                outbox.mark_submitted(batch.batch_id, "bench", f"op-{batch.batch_id}")
                outbox.mark_done(batch.batch_id, "bench")
                delivered += len(batch.items)
        elapsed = time.perf_counter() - began
    finally:
        outbox.close()
    assert delivered == ITEMS, delivered
    return delivered / elapsed


# -- (d) damage after a crash --------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[4])
    from outbox_durability import open_variant, request
    outbox = open_variant(Path(sys.argv[1]), sys.argv[2])
    for n in range(int(sys.argv[3])):
        outbox.enqueue(request("s", n))
    print("committed", flush=True)
    sys.stdin.read()
    """
)


def _cut(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _overwrite(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        handle.write(b"\xa5" * 1024)


def _zero_header(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.write(b"\0" * 100)


DAMAGES: dict[str, Callable[[Path], None]] = {
    "cut": _cut,
    "overwrite": _overwrite,
    "zero-header": _zero_header,
}


def damage_outcome(work: Path, variant: str, target: str, damage: str) -> str:
    directory = Path(tempfile.mkdtemp(dir=work)) / "state"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            str(directory),
            variant,
            str(DAMAGE_ITEMS),
            str(Path(__file__).parent),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "committed"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    for stream in (child.stdin, child.stdout):
        if stream is not None:
            stream.close()
    path = directory / target
    if not path.exists() or path.stat().st_size == 0:
        return "no file"  # a rollback journal leaves no log after a commit: nothing to damage
    DAMAGES[damage](path)
    outbox = open_variant(directory, variant)  # reopened as that variant's Outbox
    try:
        if outbox.set_aside is not None:
            return "detected"
        found = outbox.unfinished_count()
    finally:
        outbox.close()
    return "all" if found == DAMAGE_ITEMS else f"SILENT -{DAMAGE_ITEMS - found}"


def main() -> None:
    import logging

    logging.disable(logging.WARNING)  # set-aside warnings are expected in (d)
    work = Path(tempfile.mkdtemp(prefix="pi-hindsight-durability-bench-"))
    median: Callable[[list[float]], float] = statistics.median
    try:
        # Runs go round the variants (a, then b, then c), so a change of machine load during
        # the bench falls on every variant alike.
        singles: dict[str, list[float]] = {v: [] for v in VARIANTS}
        concurrent: dict[str, list[tuple[float, int]]] = {v: [] for v in VARIANTS}
        claimed: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(RUNS):
            for v in VARIANTS:
                singles[v].append(single_rate(work, v))
                concurrent[v].append(concurrent_rate(work, v))
                claimed[v].append(claim_rate(work, v))
        single = {v: median(runs) for v, runs in singles.items()}
        many = {v: median([rate for rate, _ in runs]) for v, runs in concurrent.items()}
        failed = {v: sum(count for _, count in runs) for v, runs in concurrent.items()}
        claims = {v: median(runs) for v, runs in claimed.items()}
        targets = [(t, d) for t in ("outbox.sqlite-wal", "outbox.sqlite") for d in DAMAGES]
        damage = {v: [damage_outcome(work, v, t, d) for t, d in targets] for v in VARIANTS}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base = single["wal-normal"]
    print(
        f"outbox durability, {ITEMS} items per run, medians of {RUNS} runs "
        f"(sqlite {__import__('sqlite3').sqlite_version}, {os.cpu_count()} cores, "
        f"load average at the end {os.getloadavg()[0]:.1f})"
    )
    print(
        f"{'variant':<18} {'(a) 1 proc/s':>13} {'vs today':>9} {f'(b) {PROCESSES} procs/s':>14} "
        f"{'failed (b)':>11} {'(c) claim items/s':>18}"
    )
    for variant in VARIANTS:
        chosen = "  <- ships" if variant == CHOSEN else ""
        print(
            f"{variant:<18} {single[variant]:13.0f} {single[variant] / base:9.2f} "
            f"{many[variant]:14.0f} {failed[variant]:11d} {claims[variant]:18.0f}{chosen}"
        )
    print("target (a) >= 5000 items/s; failed (b): enqueues that gave up (database is locked)")
    print(f"(d) damage after SIGKILL with {DAMAGE_ITEMS} committed items, reopened by Outbox")
    header = " ".join(f"{t.split('.')[-1]}:{d:<11}" for t, d in targets)
    print(f"{'variant':<18} {header}")
    for variant, cells in damage.items():
        print(f"{variant:<18} " + " ".join(f"{cell:<16}" for cell in cells))


if __name__ == "__main__":
    main()
