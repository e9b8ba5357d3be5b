"""The plumbing both stores' single writers share: draining a batch of queued writes,
and settling each writer's future with its result or error.

A store's write loop is ``while (batch := await next_batch(queue, limit)) is not None``:
it runs the batch in one transaction (how is the backend's business) and ``settle``-s
the results.  ``None`` in the queue asks the loop to stop after the writes before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

__all__ = ["WriteQueue", "WriteResult"]

Op = TypeVar("Op")

#: (the writer's future, its value, its error): one write's result.
WriteResult = tuple["asyncio.Future[Any]", Any, BaseException | None]


class WriteQueue(Generic[Op]):
    """Writes waiting for the next commit, each with the future its caller awaits."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[Op, asyncio.Future[Any]] | None] = asyncio.Queue()
        self._stopping = False

    async def submit(self, op: Op) -> Any:
        """Queue ``op``; return its value once the batch holding it has committed."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._queue.put((op, fut))
        return await fut

    async def stop(self) -> None:
        """Ask the write loop to end after the writes already queued."""
        await self._queue.put(None)

    async def next_batch(self, limit: int) -> list[tuple[Op, asyncio.Future[Any]]] | None:
        """The next batch (waiting for its first write, then up to ``limit`` already
        queued), or None once stop() was reached."""
        if self._stopping:
            return None
        first = await self._queue.get()
        if first is None:
            return None
        batch = [first]
        while len(batch) < limit and not self._queue.empty():
            nxt = self._queue.get_nowait()
            if nxt is None:
                self._stopping = True
                break
            batch.append(nxt)
        return batch

    @staticmethod
    def settle(results: Sequence[WriteResult]) -> None:
        """Hand each writer its value or its error (a cancelled writer is skipped)."""
        for fut, value, error in results:
            if fut.done():
                continue
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(value)
