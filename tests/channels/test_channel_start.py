"""A channel's start: its first message is acknowledged once stored, without waiting for
the channel's history to load, and every message is entered and answered once."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from bot.runtime import Runtime
from tests.helpers import inbound
from tierbot.config import Config
from tierbot.messages import Message, Role
from tierbot.retry import Backoff
from tierbot.storage import MessageStore
from tierbot.testing.scripted import ScriptedLLM

CH = "chat:start"


class _GatedLoads:
    """The runtime's store, whose channel-history loads wait for the test: ``before``
    the read (the load sees every message stored meanwhile) or ``after`` it (it sees
    none of them).  Everything else goes to the real store."""

    def __init__(self, store: MessageStore, where: str) -> None:
        self._store = store
        self.where = where
        self.gate = asyncio.Event()
        self.loading = asyncio.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def load_live(self, channel: str) -> list[Message]:
        self.loading.set()
        if self.where == "before":
            await self.gate.wait()
        try:
            return await self._store.load_live(channel)
        finally:  # a read that failed waits too
            if self.where == "after":
                await self.gate.wait()


def _set_role(db: Path, role: str) -> None:
    """Write the role of the channel's first message ("p1") straight into the file."""
    with sqlite3.connect(db) as con:
        con.execute("UPDATE messages SET role = ? WHERE platform_id = 'p1'", (role,))


async def _answered_then_damaged(cfg: Config, db: Path) -> None:
    """A channel with one answered message, whose row is then damaged (a role tierbot
    does not know): the channel's history can no longer be read."""
    async with Runtime.open(cfg, llm=ScriptedLLM()) as rt:
        await rt.submit(inbound(CH, "hello", pid="p1"))
        await rt.drain()
    _set_role(db, "bogus")


@pytest.mark.parametrize("where", ["before", "after"])
async def test_messages_stored_while_a_channel_loads_are_answered_once(
    make_config: Callable[..., Config], where: str
) -> None:
    """The first message is acknowledged while its channel's history is still loading; a
    second message stored meanwhile (found by the load or not) enters the history once
    and is answered once."""
    llm = ScriptedLLM(chat_reply="ok")
    async with Runtime.open(make_config(), llm=llm) as rt:
        # The registry's dependencies are the runtime's: the actors it starts read
        # through this wrapper (no module is patched).
        gated = _GatedLoads(rt.store, where)
        rt.registry.deps = dataclasses.replace(rt.registry.deps, store=gated)  # type: ignore[arg-type]
        # The load is held, yet the submission returns: nothing waits for it.
        first = await asyncio.wait_for(rt.submit(inbound(CH, "one", pid="p1")), 30)
        assert first.accepted
        await asyncio.wait_for(gated.loading.wait(), 30)
        second = await asyncio.wait_for(rt.submit(inbound(CH, "two", pid="p2")), 30)
        assert second.accepted and not gated.gate.is_set()
        gated.gate.set()
        await rt.drain()
        actor = rt.registry.actors[CH]
        users = [m.platform_id for m in actor.ctx.items if m.role is Role.USER]
        assert users == ["p1", "p2"]
        asked = [
            [m.content for m in call.messages if m.content in ("one", "two")]
            for call in llm.calls
            if call.purpose == "chat"
        ]
        # Never in a prompt twice, and one turn (the last) has it as the newest message.
        assert all(said.count("two") <= 1 for said in asked)
        assert [said[-1] for said in asked].count("two") == 1 and asked[-1][-1] == "two"
        if where == "before":  # the load found both: one turn answers them together
            assert len(asked) == 1
        else:  # it found only the first: a turn of its own, or one with the second
            assert len(asked) in (1, 2) and asked[0][0] == "one"
        handled = (await rt.store.channel_state(CH)).handled_upto
        assert handled == max(m.id for m in actor.ctx.items if m.role is Role.USER)


async def test_a_channel_that_cannot_load_keeps_its_messages_and_answers_them_once_repaired(
    make_config: Callable[..., Config], tmp_path: Path
) -> None:
    """A corrupt row in a channel's history: its next message is still stored and
    acknowledged, the failure is logged naming the channel and the row, the other
    channels are answered, and once the row is repaired the stored message is answered
    with the next one."""
    cfg = make_config()
    await _answered_then_damaged(cfg, tmp_path / "tierbot.db")
    llm = ScriptedLLM(chat_reply="ok")
    async with Runtime.open(cfg, llm=llm) as rt:
        gated = _GatedLoads(rt.store, "after")
        rt.registry.deps = dataclasses.replace(rt.registry.deps, store=gated)  # type: ignore[arg-type]
        with capture_logs() as logs:
            d = await rt.submit(inbound(CH, "are you there?", pid="p2"))
            assert d.accepted
            await asyncio.wait_for(gated.loading.wait(), 30)
            # Handed to the actor while its load fails: stored, waiting in its mailbox.
            assert (await rt.submit(inbound(CH, "hello?", pid="p2b"))).accepted
            gated.gate.set()
            await rt.submit(inbound("chat:other", "hi", pid="o1"))
            await asyncio.wait_for(rt.drain(), 30)  # a channel that cannot start is idle
        failed = [e for e in logs if e["event"] == "channel.start_failed"]
        assert len(failed) == 1 and failed[0]["channel"] == CH
        assert "bogus" in failed[0]["error"] and "message" in failed[0]["error"]
        assert [o.channel for o in rt.outbox.sent] == ["chat:other"]
        with sqlite3.connect(tmp_path / "tierbot.db") as db:
            stored = db.execute("SELECT platform_id FROM messages WHERE channel = ?", (CH,))
            assert {"p2", "p2b"} <= {row[0] for row in stored}
        _set_role(tmp_path / "tierbot.db", "user")  # repaired
        await rt.submit(inbound(CH, "hello again", pid="p3"))
        await rt.drain()
        assert [o.channel for o in rt.outbox.sent] == ["chat:other", CH]
        turn = [c for c in llm.calls if c.purpose == "chat"][-1]
        said = " ".join(m.content for m in turn.messages)
        assert all(text in said for text in ("are you there?", "hello?", "hello again"))
        state = await rt.store.channel_state(CH)
        p3 = [m for m in await rt.store.messages_after(CH, 0) if m.platform_id == "p3"]
        assert state.handled_upto == p3[0].id


async def test_a_channel_that_could_not_start_starts_again_by_itself(
    make_config: Callable[..., Config], tmp_path: Path
) -> None:
    """While a channel's history cannot be read, the channel tries again with a growing
    delay (and is not evicted meanwhile); once the row is repaired it starts without
    waiting for a new message, and answers what was stored."""
    cfg = make_config()
    await _answered_then_damaged(cfg, tmp_path / "tierbot.db")
    llm = ScriptedLLM(chat_reply="ok")
    async with Runtime.open(cfg, llm=llm) as rt:
        rt.registry.start_retry = Backoff(base=0.05, cap=0.2, jitter=0.0)

        async def until(done: Callable[[], bool]) -> None:
            for _ in range(3000):  # 30 s at most
                if done():
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("not within 30 s")

        with capture_logs() as logs:
            assert (await rt.submit(inbound(CH, "are you there?", pid="p2"))).accepted
            await until(lambda: sum(e["event"] == "channel.start_failed" for e in logs) >= 3)
            assert await rt.registry.evict_idle(0.0) == []
            _set_role(tmp_path / "tierbot.db", "user")  # repaired
            await until(lambda: any(o.channel == CH for o in rt.outbox.sent))
        retries = [e for e in logs if e["event"] == "channel.start_retry"]
        assert [e["attempt"] for e in retries[:3]] == [1, 2, 3]
        waits = [e["seconds"] for e in retries[:3]]
        assert waits == sorted(waits) and waits[-1] > waits[0]  # the delay grows
        await rt.drain()
        assert [o.channel for o in rt.outbox.sent] == [CH]
        said = " ".join(m.content for m in llm.calls[-1].messages)
        assert "hello" in said and "are you there?" in said
