"""One memory graph, several processes: two runtimes on one PostgreSQL, memory on.

Each process keeps in-RAM state for recall (scope arrays, names, its vector index)
and used to count node rowids itself: the second process's saves failed on the
primary key, and neither found what the other saved.  Now rowids come from one
sequence, episode indexing takes a cluster-wide lock, and each process picks up the
others' nodes (and channels marked private) every second.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.runtime import Runtime
from tests.helpers import inbound
from tierbot.config import Config
from tierbot.llm.offline import OfflineProvider

A, B = "slack:T1:C1", "slack:T1:C2"


@pytest.fixture
def two(
    make_config: Callable[..., Config],
    pg_dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[], Any]:
    monkeypatch.setenv("TIERBOT_DATABASE_URL", pg_dsn)

    def cfg(name: str) -> Config:
        return make_config(
            {
                "storage": {"backend": "postgres"},
                "defaults": {"respond": "always"},
                "memory": {"enabled": True, "index_dir": str(tmp_path / f"index-{name}")},
            }
        )

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[tuple[Runtime, Runtime]]:
        async with (
            Runtime.open(cfg("a"), llm=OfflineProvider()) as a,
            Runtime.open(cfg("b"), llm=OfflineProvider()) as b,
        ):
            yield a, b

    return opened


async def ask(rt: Runtime, channel: str, text: str, pid: str, author: str) -> str:
    await rt.submit(inbound(channel, text, pid=pid, author=author))
    await rt.drain()
    return rt.outbox.sent[-1].text


async def sync(*rts: Runtime) -> None:
    for rt in rts:
        assert rt.memory is not None
        await rt.memory.graph.sync_others()


async def test_two_processes_save_memories_and_recall_each_others(two: Any) -> None:
    async with two() as (a, b):
        said_a = await ask(a, A, "Remember that my locker code is 4411.", "a1", "dana")
        said_b = await ask(b, B, "Remember that the deploy window is Friday at 5pm.", "b1", "eli")
        assert said_a == "Noted: your locker code is 4411."
        assert said_b == "Noted: the deploy window is Friday at 5pm."
        await sync(a, b)
        assert "4411" in await ask(b, B, "What is my locker code?", "b2", "dana")
        assert "Friday at 5pm" in await ask(a, A, "When is the deploy window?", "a2", "eli")
        assert a.memory is not None and b.memory is not None
        # Both processes' live indexers read the one log at once.
        await asyncio.gather(a.memory.indexer.flush(), b.memory.indexer.flush())
        rows = await a.store.pool.fetch(
            "SELECT channel, platform_id, count(*) AS n FROM memory_nodes "
            "WHERE type = 'episode' GROUP BY channel, platform_id"
        )
        # Still one episode per message, every message of both channels indexed.
        assert len(rows) == 8 and all(r["n"] == 1 for r in rows), [dict(r) for r in rows]
        assert a.memory.indexer.failures == 0 and b.memory.indexer.failures == 0


async def test_a_channel_marked_private_in_one_process_stays_private_in_the_other(
    two: Any,
) -> None:
    async with two() as (a, b):
        dm = "slack:T1:D9"
        msg = inbound(dm, "Remember that my salary is 91000.", pid="d1", author="dana", dm=True)
        await a.submit(msg)
        await a.drain()
        assert a.outbox.sent[-1].text == "Noted: your salary is 91000."
        await sync(b)
        assert b.memory is not None
        hits = await b.memory.graph.recall("salary", channel=B)
        assert hits == []  # the workspace's channel does not see the DM's memory
        hits = await b.memory.graph.recall("salary", channel=dm)
        assert any("91000" in h.content for h in hits)


async def test_rowids_drawn_after_open_are_above_every_stored_one(
    make_config: Callable[..., Config], pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose rows were copied in (db migrate) or written before the sequence
    existed: the sequence is raised past them at open, a single row included, and never
    lowered by a process that opens later with an older view."""
    from memory_graph.backends import open_graph

    monkeypatch.setenv("TIERBOT_DATABASE_URL", pg_dsn)
    cfg = make_config({"storage": {"backend": "postgres"}, "memory": {"enabled": True}})
    async with await open_graph(cfg) as graph:
        storage = graph.storage
        await storage.raise_rowid_floor(1)  # one row, rowid 1, on a fresh sequence
        assert await storage.take_rowids(2) == [2, 3]
        await storage.raise_rowid_floor(1)  # a process opening with an older view
        assert await storage.take_rowids(1) == [4]
        await storage.raise_rowid_floor(40)
        assert await storage.take_rowids(1) == [41]
