"""Memory graph writes leave no transaction open behind them, whatever interrupts them."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from memory_graph import MemoryGraph
from tierbot.config import MemoryConfig
from tierbot.messages import Message, Role


def _msg(pid: str, text: str) -> Message:
    return Message(
        channel="c:1",
        platform_id=pid,
        role=Role.USER,
        text=text,
        author_id="u1",
        author_name="Alice",
        ts=1e9,
    )


async def test_regression_a_write_cancelled_while_waiting_for_the_file_lock_leaves_no_transaction(
    tmp_path: Path,
) -> None:
    """An indexing write cancelled (shutdown, a job's timeout) while its BEGIN waits for
    another program's write lock used to begin anyway once the lock freed, and every later
    write failed with 'cannot start a transaction within a transaction'."""
    db_path = tmp_path / "tierbot.db"
    async with await MemoryGraph.open(db_path, MemoryConfig.model_validate({})) as g:
        other = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another program holds the write lock
        try:
            task = asyncio.create_task(g.add_episodes([_msg("p1", "the kestrel server")]))
            # Wait until the write is blocked inside SQLite on the lock, then cancel it.
            for _ in range(400):
                await asyncio.sleep(0.005)
                if g.lock.locked() and g.storage.connection.in_transaction is False:
                    break
            await asyncio.sleep(0.2)
            task.cancel()
            await asyncio.sleep(0.05)
        finally:
            other.execute("ROLLBACK")  # the lock frees: the cancelled BEGIN would now succeed
            other.close()
        try:
            await task
        except asyncio.CancelledError:
            pass
        # The next writes work and are found.
        assert await g.add_episodes([_msg("p2", "the heron database runs on kestrel")]) == 1
        hits = await g.recall("heron database", channel="c:1", limit=3)
        assert any("heron" in h.content for h in hits)
        assert not g.storage.connection.in_transaction
