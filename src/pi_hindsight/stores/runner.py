"""Every store call from async code runs on one thread of its own, off the event loop.

A store call can block: SQLite waits up to its busy timeout (10 s) for another process's lock, and
a commit with ``synchronous=FULL`` waits for the disk. On the event loop that would stall every
request in flight (and the shim's timeouts). One thread — not a pool — also means each SQLite
connection is only ever used by one thread at a time, so no transaction of one caller can
interleave with another's.

    result = await run_store(outbox.enqueue, request)
    queued = submit_store(ledger.record, row)  # queued now, awaited later (or never)
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def _store_thread() -> ThreadPoolExecutor:
    global _executor  # noqa: PLW0603 - one store thread per process, created on first use
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stores")
            atexit.register(_executor.shutdown, wait=False, cancel_futures=True)
        return _executor


async def run_store(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``function(*args, **kwargs)`` on the store thread and return its result."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_store_thread(), functools.partial(function, *args, **kwargs))


def submit_store(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> asyncio.Future[T]:
    """Queue ``function(*args, **kwargs)`` on the store thread now, without waiting for it: the
    call runs after every store call queued before it and before every one queued after it."""
    loop = asyncio.get_running_loop()
    return loop.run_in_executor(_store_thread(), functools.partial(function, *args, **kwargs))
