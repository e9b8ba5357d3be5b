"""Turns at writing one SQLite file, for the connections of one process.

The message store's writer and the memory graph each hold a connection to the same
file, and SQLite lets one connection write at a time.  The other one polls: its busy
handler sleeps 1, 2, 5, ... up to 100 ms between tries.  Under load that costs twice:

* a waiting writer oversleeps the lock by tens of milliseconds, and every message
  whose acknowledgement waits on that commit waits with it;
* a writer that commits and begins again at once (the store's group commit under a
  burst) can win the lock over and over while the other sleeps, so the other
  starves for seconds.

Inside one process the connections take turns here instead: an ``asyncio.Lock`` per
file and event loop, first come first served, handed over the moment the
transaction ends.  Other processes on the file (a CLI beside the bot) still meet
SQLite's own lock and busy timeout.

A turn not had within ``wait_seconds`` raises :class:`StoreError`, as a busy
timeout would: a transaction that waits on a write of the same file would otherwise
wait forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import weakref
from collections.abc import AsyncIterator
from pathlib import Path

from tierbot.errors import StoreError

_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


@functools.lru_cache(maxsize=64)
def _key(path: str | Path) -> str:
    # Cached: realpath asks the file system about every component of the path, and a
    # busy process takes a turn hundreds of times a second.
    return os.path.realpath(os.fspath(path))


def lock_for(path: str | Path) -> asyncio.Lock:
    """The running loop's lock for writing the file at ``path``."""
    by_path = _locks.setdefault(asyncio.get_running_loop(), {})
    key = _key(path)
    lock = by_path.get(key)
    if lock is None:
        lock = by_path[key] = asyncio.Lock()
    return lock


@contextlib.asynccontextmanager
async def write_turn(path: str | Path, wait_seconds: float) -> AsyncIterator[None]:
    """Hold this process's turn at writing ``path`` for the block (one transaction)."""
    lock = lock_for(path)
    try:
        # No task per turn (as wait_for would make): a free lock is taken at once.
        async with asyncio.timeout(max(wait_seconds, 0.0)):
            await lock.acquire()
    except TimeoutError:
        raise StoreError(
            f"cannot write to {path}: database is locked (another write of this process "
            f"held it for more than {wait_seconds:g} s)"
        ) from None
    try:
        yield
    finally:
        lock.release()
