"""The message store and the memory graph write one SQLite file through two connections:
inside one process they take turns, so neither starves the other of the file lock, and a
turn that never comes fails loudly, naming the file, as SQLite's busy timeout does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memory_graph.sqlite_storage import SQLiteMemoryStorage
from tierbot.errors import StoreError
from tierbot.messages import Message, Role
from tierbot.store import Store
from tierbot.writeturns import write_turn


def _msg(pid: str) -> Message:
    return Message(channel="c", platform_id=pid, role=Role.USER, text="hi", tokens=3, ts=1.0)


async def test_messages_are_stored_while_the_memory_graph_writes_back_to_back(
    tmp_path: Path,
) -> None:
    """The memory graph writing long transactions one after another (a backlog being
    indexed) used to leave the store's writer polling SQLite's lock: it slept up to 100 ms
    between tries, nearly always woke while the next memory transaction held the file, and
    after its busy timeout every message of the batch failed with 'database is locked'."""
    path = tmp_path / "bot.db"
    async with await Store.open(path, busy_timeout=1.0, synchronous="normal") as store:
        memory = await SQLiteMemoryStorage.open(path)
        stop = asyncio.Event()
        began = asyncio.Event()

        async def index_backlog() -> int:
            done = 0
            while not stop.is_set():
                async with memory.transaction():
                    await memory.set_meta("indexed", str(done))
                    began.set()
                    await asyncio.sleep(0.05)  # a long batch: embedding, FTS, edges
                done += 1
            return done

        writer = asyncio.create_task(index_backlog())
        try:
            await began.wait()
            stored = [await store.append(_msg(f"p{i}")) for i in range(5)]
        finally:
            stop.set()
            transactions = await writer
            await memory.close()
        assert all(m is not None for m in stored)
        assert [m.platform_id for m in await store.load_live("c")] == [f"p{i}" for i in range(5)]
        assert transactions >= 2  # the memory graph kept writing meanwhile
        assert await store.count("c") == 5


async def test_a_turn_that_never_comes_fails_naming_the_file_and_the_store_recovers(
    tmp_path: Path,
) -> None:
    """A write of this process holding the file past the busy timeout (a stuck memory
    transaction) makes the store's batch fail with an error that names the file; the
    message is not acknowledged, and the next one is stored once the file is free."""
    path = tmp_path / "bot.db"
    async with await Store.open(path, busy_timeout=0.2, synchronous="normal") as store:
        async with write_turn(path, 1.0):
            with pytest.raises(StoreError, match=r"bot\.db.*database is locked"):
                await store.append(_msg("held"))
        assert await store.append(_msg("after")) is not None
        assert [m.platform_id for m in await store.load_live("c")] == ["after"]


async def test_turns_are_per_file(tmp_path: Path) -> None:
    """Holding one file's turn does not hold up a store on another file."""
    async with await Store.open(tmp_path / "other.db", busy_timeout=0.2) as store:
        async with write_turn(tmp_path / "bot.db", 1.0):
            assert await store.append(_msg("p1")) is not None
