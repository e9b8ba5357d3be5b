"""Group reads: the same read for many keys, asked for at once, made as one.

When thousands of channels start together (a burst after a restart), each asks the store
for its live context and its state. One by one they queue on the store's reader, each a
trip to its thread and back through a busy event loop: the reader becomes the slowest
part of a submission. A :class:`GroupRead` runs one read at a time; everything asked for
while it runs is read next, all keys in one query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class GroupRead(Generic[K, V]):
    """``get(key)`` through ``read_many(keys) -> {key: value}``, keys asked for while a
    read runs batched into the next one.

    Every key asked for must be in the mapping ``read_many`` returns (its "nothing"
    value included), or an exception for that key alone (raised to its callers). A
    failed ``read_many`` is every waiting caller's; a caller that gives up (cancelled)
    leaves the others waiting as before.
    """

    def __init__(
        self,
        read_many: Callable[[Sequence[K]], Awaitable[dict[K, V | Exception]]],
        copy: Callable[[V], V],
    ) -> None:
        self._read_many = read_many
        #: Two callers asking for one key each get their own value (the values are mutable).
        self._copy = copy
        self._waiting: dict[K, list[asyncio.Future[V]]] = {}
        self._pump: asyncio.Task[None] | None = None
        #: How many reads were made (a test sees that requests were batched).
        self.reads = 0

    async def get(self, key: K) -> V:
        fut: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(fut)
        if self._pump is None:
            self._pump = asyncio.create_task(self._run(), name="group-read")
        return await fut

    async def _run(self) -> None:
        batch: dict[K, list[asyncio.Future[V]]] = {}
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, {}
                self.reads += 1
                try:
                    found = await self._read_many(list(batch))
                except Exception as exc:
                    for fut in _futures(batch):
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                for key, futs in batch.items():
                    value = found[key]
                    for i, fut in enumerate(futs):
                        if fut.done():
                            continue
                        if isinstance(value, Exception):
                            fut.set_exception(value)
                        else:
                            fut.set_result(value if i == 0 else self._copy(value))
        except BaseException:
            # Cancelled (the loop shutting down): nobody may be left waiting for good.
            for fut in [*_futures(batch), *_futures(self._waiting)]:
                fut.cancel()
            self._waiting = {}
            raise
        finally:
            self._pump = None


def _futures(waiting: dict[K, list[asyncio.Future[V]]]) -> list[asyncio.Future[V]]:
    return [fut for futs in waiting.values() for fut in futs]


__all__ = ["GroupRead"]
