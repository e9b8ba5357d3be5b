"""Under a burst, live indexing comes after storing messages: it waits while messages
wait for their acknowledgement, for at most ``[memory] index_max_lag_seconds``; a flush
or a quiet moment lets it index at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot.runtime import Runtime
from channels.memory import EpisodeIndexer
from channels.registry import to_message
from memory_graph import MemoryGraph
from tests.helpers import inbound, wait_for
from tierbot.config import Config, MemoryConfig
from tierbot.errors import StoreError
from tierbot.store import Store
from tierbot.tokens import get_counter


@asynccontextmanager
async def _indexer(
    tmp_path: Path, busy: list[bool], max_lag: float, delay: float = 0.01
) -> AsyncIterator[tuple[EpisodeIndexer, MemoryGraph]]:
    db = tmp_path / "bot.db"
    async with await Store.open(db) as store:
        m = inbound("discord:1:10", "the staging database moves to the harbour datacenter")
        await store.append_many([to_message(m, get_counter().count_message(m.text))])
        graph = await MemoryGraph.open(db, MemoryConfig())
        indexer = EpisodeIndexer(
            graph, store, delay=delay, busy=lambda: busy[0], max_lag=lambda: max_lag
        )
        try:
            indexer.start()
            yield indexer, graph
        finally:
            await indexer.aclose(5.0)
            await graph.aclose()


async def _found(graph: MemoryGraph) -> bool:
    return bool(await graph.recall("harbour datacenter", channel="discord:1:10"))


async def test_indexing_waits_while_messages_wait_to_be_stored(tmp_path: Path) -> None:
    busy = [True]
    async with _indexer(tmp_path, busy, max_lag=3600.0) as (indexer, graph):
        await wait_for(lambda: indexer.lag > 0)
        await asyncio.sleep(0.3)  # ~30 looks at the burst: still going on
        assert indexer.mark == 0
        assert not await _found(graph)
        busy[0] = False  # the burst is over
        await wait_for(lambda: indexer.mark >= 1, timeout=30.0)
        assert await _found(graph)
        assert indexer.lag == 0


async def test_a_burst_delays_indexing_by_at_most_the_max_lag(tmp_path: Path) -> None:
    """A burst that never ends still gets its messages indexed once the oldest has
    waited ``index_max_lag_seconds``."""
    async with _indexer(tmp_path, [True], max_lag=0.2) as (indexer, graph):
        await wait_for(lambda: indexer.mark >= 1, timeout=30.0)
        assert await _found(graph)


async def test_a_flush_does_not_wait_for_the_burst(tmp_path: Path) -> None:
    async with _indexer(tmp_path, [True], max_lag=3600.0) as (indexer, graph):
        await asyncio.wait_for(indexer.flush(), 30.0)
        assert indexer.mark >= 1
        assert await _found(graph)


async def test_a_flush_or_a_shutdown_does_not_wait_for_a_batch_to_gather(tmp_path: Path) -> None:
    """The indexer lets messages gather for ``delay`` seconds into one batch; someone
    waiting on the backlog (a forget that must see what was just said, a process that is
    stopping) gets it indexed at once, not after the gathering."""
    async with _indexer(tmp_path, [False], max_lag=0.0, delay=600.0) as (indexer, graph):
        await asyncio.wait_for(indexer.flush(), 30.0)
        assert indexer.mark >= 1
        assert await _found(graph)
    db = tmp_path / "bot.db"
    async with await Store.open(db) as store:
        m = inbound("discord:1:10", "the kestrel launch moves to thursday")
        await store.append_many([to_message(m, get_counter().count_message(m.text))])
        graph = await MemoryGraph.open(db, MemoryConfig())
        indexer = EpisodeIndexer(graph, store, delay=600.0)
        indexer.start()
        await wait_for(lambda: indexer.lag > 0)  # gathering its batch
        await asyncio.wait_for(indexer.aclose(30.0), 30.0)
        assert indexer.backlog == 0
        assert await graph.recall("kestrel launch", channel="discord:1:10")
        await graph.aclose()


async def test_the_runtime_counts_submissions_until_they_are_acknowledged_or_refused(
    tmp_path: Path,
) -> None:
    """The indexer's signal: submissions in flight, back to none after a store failure too
    (a count left up would keep indexing waiting for good)."""
    cfg = Config.model_validate(
        {"storage": {"path": str(tmp_path / "bot.db")}, "defaults": {"respond": "listen"}}
    )
    async with Runtime.open(cfg) as rt:
        seen: list[int] = []
        append_many = rt.store.append_many

        async def watched(msgs):  # type: ignore[no-untyped-def]
            seen.append(rt.registry.acking)
            assert rt.memory is not None and rt.memory.indexer.busy()
            if msgs[0].text == "refused":
                raise StoreError("the disk is full")
            return await append_many(msgs)

        # Fault injection: the store fails one append (as a full disk would).
        rt.store.append_many = watched  # type: ignore[method-assign]
        assert rt.memory is not None and rt.memory.indexer.busy() is False
        await rt.submit(inbound("c:1", "hello"))
        with contextlib.suppress(StoreError):
            await rt.submit(inbound("c:1", "refused", pid="p2"))
        assert seen == [1, 1]
        assert rt.registry.acking == 0
        assert rt.memory.indexer.busy() is False


class _Recording:
    """The store as the indexer's source, recording how many messages each batch asked for."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.asked: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def messages_since(self, after: int, limit: int, roles: object) -> object:
        self.asked.append(limit)
        return await self._store.messages_since(after, limit, roles)  # type: ignore[arg-type]


async def test_during_a_burst_indexing_writes_in_quarter_batches(tmp_path: Path) -> None:
    """Each batch is one transaction holding the database file, and the store's commits
    (the acknowledgements) wait behind it: while messages wait to be acknowledged, a
    batch is a quarter as long; a backlog left after the burst goes in whole batches."""
    db = tmp_path / "bot.db"
    busy = [True]
    async with await Store.open(db) as store:
        ms = [inbound("discord:1:10", f"message {i} about the harbour") for i in range(20)]
        await store.append_many([to_message(m, get_counter().count_message(m.text)) for m in ms])
        source = _Recording(store)
        graph = await MemoryGraph.open(db, MemoryConfig())
        indexer = EpisodeIndexer(
            graph, source, batch=8, delay=0.01, busy=lambda: busy[0], max_lag=lambda: 0.0
        )  # type: ignore[arg-type]
        try:
            indexer.start()
            await wait_for(lambda: indexer.mark >= 6, timeout=30.0)
            busy[0] = False
            await asyncio.wait_for(indexer.flush(), 30.0)
        finally:
            await indexer.aclose(5.0)
            await graph.aclose()
    assert indexer.indexed == 20
    assert source.asked[0] == 2
    assert source.asked[-1] == 8
