"""A process-wide pool that runs background jobs with bounded concurrency, most urgent first.

A thousand channels crossing their threshold at once queue here instead of
firing a thousand LLM calls; the channel with the highest usage goes first.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import structlog

log = structlog.get_logger("tierbot.workers.pool")


@dataclass(order=True)
class _Entry:
    priority: float
    seq: int
    channel: str = field(compare=False)
    run: Callable[[], Awaitable[Any]] = field(compare=False)
    done: Callable[[Any, BaseException | None], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class WorkerPool:
    """Runs submitted jobs, at most ``concurrency`` at a time; an async context manager."""

    def __init__(self, concurrency: int = 4) -> None:
        self._concurrency = concurrency
        self._queue: asyncio.PriorityQueue[_Entry] = asyncio.PriorityQueue()
        self._seq = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._running: dict[int, _Entry] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._pending = 0

    async def __aenter__(self) -> WorkerPool:
        self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def start(self) -> None:
        while len(self._tasks) < self._concurrency:
            self._tasks.append(asyncio.create_task(self._loop(), name="worker-pool"))

    @property
    def concurrency(self) -> int:
        return self._concurrency

    def set_concurrency(self, n: int) -> None:
        """Change the limit live: extra slots start now; surplus ones stop after their job."""
        self._concurrency = n
        self.start()

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    @property
    def running(self) -> int:
        return len(self._running)

    def submit(
        self,
        channel: str,
        run: Callable[[], Awaitable[Any]],
        done: Callable[[Any, BaseException | None], None],
        *,
        urgency: float = 0.0,
    ) -> None:
        """Queue ``run``; ``done(result, error)`` is called when it ends (not if cancelled)."""
        self._pending += 1
        self._idle.clear()
        self._queue.put_nowait(_Entry(-urgency, next(self._seq), channel, run, done))

    def cancel_channel(self, channel: str) -> int:
        """Drop queued jobs of ``channel`` (running ones finish); return how many."""
        n = 0
        # PriorityQueue exposes no iterator; its heap is the documented-in-source _queue.
        for entry in list(self._queue._queue):  # type: ignore[attr-defined]
            if entry.channel == channel and not entry.cancelled:
                entry.cancelled = True
                n += 1
        return n

    async def drain(self) -> None:
        """Wait until no job is queued or running."""
        await self._idle.wait()

    async def _loop(self) -> None:
        me = asyncio.current_task()
        while True:
            if len(self._tasks) > self._concurrency and me in self._tasks:
                self._tasks.remove(me)  # type: ignore[arg-type]
                return
            # Each job in a call of its own: what the last job held (its channel's
            # history, its result) is let go when it ends, not kept in this frame until
            # the next job comes.
            await self._run_one(await self._queue.get(), me)

    async def _run_one(self, entry: _Entry, me: asyncio.Task[Any] | None) -> None:
        if entry.cancelled:
            self._finish_one()
            return
        key = id(entry)
        self._running[key] = entry
        result: Any = None
        error: BaseException | None = None
        try:
            result = await entry.run()
        except asyncio.CancelledError:
            self._running.pop(key, None)
            self._finish_one()
            raise
        except Exception as exc:  # a job's failure is its caller's to handle
            error = exc
        self._running.pop(key, None)
        if me is not None and me.cancelling():
            # The job swallowed our cancellation (Python 3.11's wait_for returns the
            # inner result when both finish at once): stop anyway, or aclose() waits
            # forever and the process never exits.
            self._finish_one()
            raise asyncio.CancelledError
        try:
            entry.done(result, error)
        except Exception:
            log.exception("pool.done_callback_failed", channel=entry.channel)
        self._finish_one()

    def _finish_one(self) -> None:
        self._pending -= 1
        if self._pending <= 0:
            self._pending = 0
            self._idle.set()

    async def aclose(self) -> None:
        """Cancel every worker task; queued jobs are dropped (their messages stay live)."""
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
        self._tasks.clear()
