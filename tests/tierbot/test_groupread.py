"""Group reads: channels starting at once share the store's reads, and no reader is left
waiting when a read fails or is cancelled."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from tierbot.errors import StoreError
from tierbot.groupread import GroupRead
from tierbot.messages import Message, Role
from tierbot.storage import ChannelState
from tierbot.store import Store


def msg(pid: str, text: str, channel: str) -> Message:
    return Message(channel, pid, Role.USER, text, author_id="u1", author_name="ann", tokens=3)


async def test_channels_starting_together_each_get_their_own_history(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "s.db", synchronous="normal") as store:
        for i in range(60):
            await store.append_many(
                [msg(f"{i}-a", f"first {i}", f"c{i}"), msg(f"{i}-b", f"second {i}", f"c{i}")]
            )
            await store.save_channel_state(f"c{i}", ChannelState(handled_upto=i, counters={"n": i}))
        keys = [f"c{i}" for i in range(60)] + ["never-seen"]
        lives = await asyncio.gather(*(store.load_live(k) for k in keys))
        states = await asyncio.gather(*(store.channel_state(k) for k in keys))
        for i in range(60):
            assert [m.text for m in lives[i]] == [f"first {i}", f"second {i}"]
            assert states[i] == ChannelState(handled_upto=i, counters={"n": i})
        assert lives[60] == [] and states[60] == ChannelState()
        # Sixty channels asked at once: a handful of reads, not one each.
        assert 0 < store._live.reads <= 3 and 0 < store._states.reads <= 3


async def test_one_channel_asked_twice_gets_two_values(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "s.db", synchronous="normal") as store:
        await store.append(msg("a", "hello", "c"))
        await store.save_channel_state("c", ChannelState(handled_upto=1, counters={"n": 1}))
        one, two = await asyncio.gather(store.load_live("c"), store.load_live("c"))
        s1, s2 = await asyncio.gather(store.channel_state("c"), store.channel_state("c"))
        one.clear()
        s1.counters["n"] = 99
        assert [m.text for m in two] == ["hello"]
        assert s2.counters == {"n": 1}


async def test_a_failed_read_fails_every_waiting_caller_and_the_next_read_works() -> None:
    calls: list[list[str]] = []

    async def read_many(keys: Sequence[str]) -> dict[str, str]:
        calls.append(list(keys))
        await asyncio.sleep(0)
        if len(calls) == 1:
            raise OSError("disk I/O error")
        return {k: k.upper() for k in keys}

    group: GroupRead[str, str] = GroupRead(read_many, copy=str)
    results = await asyncio.wait_for(
        asyncio.gather(*(group.get(k) for k in "abc"), return_exceptions=True), 5
    )
    assert all(isinstance(r, OSError) and "disk I/O error" in str(r) for r in results)
    assert await asyncio.gather(group.get("x"), group.get("y")) == ["X", "Y"]


async def test_a_caller_that_gives_up_leaves_the_others_their_values() -> None:
    release = asyncio.Event()

    async def read_many(keys: Sequence[str]) -> dict[str, str]:
        await release.wait()
        return {k: k.upper() for k in keys}

    group: GroupRead[str, str] = GroupRead(read_many, copy=str)
    first = asyncio.create_task(group.get("a"))
    await asyncio.sleep(0.01)  # the first read is under way
    waiting = [asyncio.create_task(group.get(k)) for k in "bc"]
    await asyncio.sleep(0)
    waiting[0].cancel()
    release.set()
    assert await first == "A"
    assert await waiting[1] == "C"
    with pytest.raises(asyncio.CancelledError):
        await waiting[0]


async def test_a_cancelled_read_leaves_nobody_waiting() -> None:
    async def read_many(keys: Sequence[str]) -> dict[str, str]:
        await asyncio.Event().wait()  # never returns
        return {}

    group: GroupRead[str, str] = GroupRead(read_many, copy=str)
    under_way = asyncio.create_task(group.get("a"))
    await asyncio.sleep(0.01)
    queued = asyncio.create_task(group.get("b"))
    await asyncio.sleep(0)
    assert group._pump is not None
    group._pump.cancel()
    for task in (under_way, queued):
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)


async def test_a_corrupt_channel_does_not_stop_others_starting_with_it(tmp_path: Path) -> None:
    """A row the store cannot read fails its own channel's start, naming it; the channels
    read in the same query start as usual."""
    path = tmp_path / "s.db"
    async with await Store.open(path, synchronous="normal") as store:
        for key in ("good", "bad", "also-good"):
            await store.append(msg(f"{key}-1", f"hello from {key}", key))
            await store.save_channel_state(key, ChannelState(handled_upto=1))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE messages SET role='bogus' WHERE channel='bad'")
        db.execute("INSERT INTO channels (key, counters) VALUES ('also-bad', 'not json')")
    async with await Store.open(path, synchronous="normal") as store:
        lives = await asyncio.gather(
            *(store.load_live(k) for k in ("good", "bad", "also-good")), return_exceptions=True
        )
        assert [m.text for m in lives[0]] == ["hello from good"]
        assert isinstance(lives[1], StoreError) and "bad" in str(lives[1])
        assert "bogus" in str(lives[1])
        assert [m.text for m in lives[2]] == ["hello from also-good"]
        states = await asyncio.gather(
            *(store.channel_state(k) for k in ("good", "also-bad")), return_exceptions=True
        )
        assert states[0] == ChannelState(handled_upto=1)
        assert isinstance(states[1], StoreError) and "also-bad" in str(states[1])
