"""The SQLite store: durable appends, duplicates, atomic swaps, migrations, group commit."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tierbot.errors import StoreError
from tierbot.messages import Message, Role, State
from tierbot.store import ChannelState, Store


def msg(pid: str, text: str = "hi", channel: str = "c", role: Role = Role.USER) -> Message:
    return Message(channel=channel, platform_id=pid, role=role, text=text, tokens=3, ts=1.0)


async def test_duplicate_platform_id_is_ignored_per_channel(tmp_path: Path) -> None:
    """A redelivered platform id on the same channel is ignored; other channels may reuse it."""
    async with await Store.open(tmp_path / "s.db") as store:
        first = await store.append(msg("p1"))
        again = await store.append(msg("p1", "changed"))
        other = await store.append(msg("p1", channel="d"))
        assert first is not None and first.id > 0
        assert again is None
        assert other is not None
        texts = [m.text async for m in store.export("c")]
        assert texts == ["hi"]


async def test_appends_survive_reopen_in_order(tmp_path: Path) -> None:
    """What append acknowledged is there after closing and reopening, in order."""
    path = tmp_path / "s.db"
    async with await Store.open(path) as store:
        await store.append_many([msg(f"p{i}", f"t{i}") for i in range(50)])
    async with await Store.open(path) as store:
        live = await store.load_live("c")
        assert [m.text for m in live] == [f"t{i}" for i in range(50)]
        nxt = await store.append(msg("new"))
        assert nxt is not None and nxt.id > live[-1].id


async def test_swap_archives_and_links_in_one_step(tmp_path: Path) -> None:
    """A swap archives the covered messages, places the summary first and links them."""
    async with await Store.open(tmp_path / "s.db") as store:
        stored = [m for m in await store.append_many([msg(f"p{i}") for i in range(6)]) if m]
        covered = [m.id for m in stored[:3]]
        summary = msg("sum", "summary", role=Role.SUMMARY).with_(pos=stored[0].pos)
        placed = await store.swap("c", covered, summary, state=ChannelState(handled_upto=6))
        assert placed is not None
        live = await store.load_live("c")
        assert [m.platform_id for m in live] == ["sum", "p3", "p4", "p5"]
        assert await store.covered_by(placed.id) == covered
        exported = [(m.platform_id, m.state) async for m in store.export("c")]
        assert exported[:3] == [(f"p{i}", State.ARCHIVED) for i in range(3)]
        assert (await store.channel_state("c")).handled_upto == 6


async def test_failed_op_does_not_poison_the_batch(tmp_path: Path) -> None:
    """One failing write is rolled back alone; writes batched with it still commit."""
    async with await Store.open(tmp_path / "s.db") as store:

        async def bad(db):
            await db.execute("INSERT INTO nope VALUES (1)")

        results = await asyncio.gather(
            store.append(msg("a")),
            store.write(bad),
            store.append(msg("b")),
            return_exceptions=True,
        )
        assert isinstance(results[1], Exception)
        assert [m.platform_id async for m in store.export("c")] == ["a", "b"]


async def test_concurrent_appends_share_commits(tmp_path: Path) -> None:
    """Many channels appending at once are committed in far fewer transactions."""
    async with await Store.open(tmp_path / "s.db") as store:
        await asyncio.gather(*(store.append(msg("x", channel=f"ch{i}")) for i in range(300)))
        assert store.commits < 100
        assert len(await store.channel_keys()) == 300


async def test_concurrent_appends_each_get_their_own_rows(tmp_path: Path) -> None:
    """Appends from many callers committed together: each caller gets back its own
    messages with their ids; a platform id two of them carry is stored once, for the
    first, and is the other's duplicate."""
    async with await Store.open(tmp_path / "s.db") as store:
        calls = [
            store.append_many([msg("a1", "one", "c1"), msg("a2", "two", "c1")]),
            store.append(msg("b1", "three", "c2")),
            store.append(msg("a2", "two again", "c1")),
            store.append(msg("a2", "not a duplicate", "c3")),
        ]
        ones, three, again, other = await asyncio.gather(*calls)
        assert [(m.platform_id, m.text) for m in ones if m] == [("a1", "one"), ("a2", "two")]
        assert three is not None and (three.channel, three.text) == ("c2", "three")
        assert again is None
        assert other is not None and other.text == "not a duplicate"
        ids = [m.id for m in [*ones, three, other] if m]
        assert len(set(ids)) == 4
        assert [(m.id, m.text) for m in await store.load_live("c1")] == [
            (m.id, m.text) for m in ones if m
        ]


async def test_a_refused_append_among_concurrent_ones_fails_only_its_caller(
    tmp_path: Path,
) -> None:
    """A message SQLite refuses (a NaN timestamp breaks NOT NULL) fails its own caller with
    a StoreError; the appends and channel states committed beside it are all there."""
    async with await Store.open(tmp_path / "s.db") as store:
        bad = msg("bad", channel="c2").with_(ts=float("nan"))
        results = await asyncio.gather(
            store.append(msg("a", channel="c1")),
            store.append(bad),
            store.save_channel_state("c1", ChannelState(handled_upto=7)),
            store.append(msg("b", channel="c3")),
            return_exceptions=True,
        )
        assert isinstance(results[1], StoreError), results[1]
        assert "NOT NULL" in str(results[1])
        assert not isinstance(results[0], BaseException) and results[0] is not None
        assert [m.platform_id for m in await store.load_live("c1")] == ["a"]
        assert [m.platform_id for m in await store.load_live("c3")] == ["b"]
        assert await store.load_live("c2") == []
        assert (await store.channel_state("c1")).handled_upto == 7


async def test_the_last_state_saved_for_a_channel_wins(tmp_path: Path) -> None:
    """Channel states saved at once are committed together; each channel keeps the one
    saved last."""
    async with await Store.open(tmp_path / "s.db") as store:
        await asyncio.gather(
            *(
                store.save_channel_state(f"c{i % 3}", ChannelState(handled_upto=i))
                for i in range(30)
            )
        )
        assert [(await store.channel_state(f"c{i}")).handled_upto for i in range(3)] == [
            27,
            28,
            29,
        ]


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A database from a newer tierbot is refused with an upgrade hint, not corrupted."""
    path = tmp_path / "s.db"
    async with await Store.open(path):
        pass
    with sqlite3.connect(path) as db:
        db.execute("UPDATE tierbot_schema SET version = 99 WHERE component = 'store'")
    with pytest.raises(StoreError, match="upgrade tierbot"):
        await Store.open(path)
    with pytest.raises(StoreError, match="upgrade tierbot"):
        await Store.open(path, read_only=True)


async def test_wal_mode(tmp_path: Path) -> None:
    """The store runs in WAL mode so readers never block the writer."""
    async with await Store.open(tmp_path / "s.db"):
        with sqlite3.connect(tmp_path / "s.db") as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_large_batch_keeps_its_order_and_its_one_redelivery(tmp_path: Path) -> None:
    """A batch of hundreds (stored in several statements) comes back in its order, each
    message with its own id, and a platform id repeated far apart is stored once."""
    async with await Store.open(tmp_path / "s.db", synchronous="normal") as store:
        batch = [msg(f"p{i}", f"text {i}") for i in range(341)]
        batch[300] = msg("p5", "redelivered late in the batch")
        stored = await store.append_many(batch)
        assert stored[300] is None
        kept = [m for m in stored if m is not None]
        assert [m.text for m in kept] == [f"text {i}" for i in range(341) if i != 300]
        assert [m.id for m in kept] == sorted({m.id for m in kept})
        assert [m.text for m in await store.load_live("c")] == [m.text for m in kept]
