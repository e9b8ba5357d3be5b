"""Channel actors: ordering, coalescing, respond modes, eviction, restart recovery."""

from __future__ import annotations

import asyncio

from bot.runtime import Runtime
from tests.helpers import export_ids, inbound, wait_for
from tierbot.testing.scripted import ScriptedLLM


async def test_message_is_stored_before_the_reply(runtime: Runtime, llm: ScriptedLLM) -> None:
    """An inbound message is durable on return from submit, and gets one reply."""
    llm.chat_reply = "pong"
    delivery = await runtime.submit(inbound(text="ping", pid="p1"))
    assert delivery.accepted
    assert "p1" in await export_ids(runtime, "test:1")
    await runtime.drain()
    assert [o.text for o in runtime.outbox.sent] == ["pong"]
    assert runtime.outbox.sent[0].reply_to == "p1"


async def test_redelivered_message_is_answered_once(runtime: Runtime, llm: ScriptedLLM) -> None:
    """A platform redelivery (same id) is ignored: one stored message, one reply."""
    first = await runtime.submit(inbound(pid="dup"))
    second = await runtime.submit(inbound(pid="dup"))
    await runtime.drain()
    assert first.accepted and not second.accepted and second.reason == "duplicate"
    assert len(runtime.outbox.sent) == 1
    assert (await export_ids(runtime, "test:1")).count("dup") == 1


async def test_burst_during_a_turn_is_answered_in_one_next_turn(
    runtime: Runtime, llm: ScriptedLLM
) -> None:
    """Messages arriving while a turn runs are coalesced into a single next turn."""
    gate = asyncio.Event()
    llm.gate["chat"] = gate
    await runtime.submit(inbound(text="first"))
    await wait_for(lambda: llm.count("chat") == 1)
    for i in range(5):
        await runtime.submit(inbound(text=f"burst {i}"))
    gate.set()
    await runtime.drain()
    assert llm.count("chat") == 2
    last_prompt = [m.content for m in llm.calls[-1].messages if m.role == "user"]
    assert last_prompt[-5:] == [f"burst {i}" for i in range(5)]
    assert len(runtime.outbox.sent) == 2


async def test_turns_keep_arrival_order(runtime: Runtime, llm: ScriptedLLM) -> None:
    """The history keeps messages in the order they arrived, replies after what they answer."""
    for i in range(3):
        await runtime.submit(inbound(text=f"m{i}", pid=f"p{i}"))
        await runtime.drain()
    roles = [m.role.value async for m in runtime.store.export("test:1")]
    assert roles == ["user", "assistant"] * 3


async def test_respond_modes(make_config, llm: ScriptedLLM) -> None:
    """`mention` answers only when addressed or in a DM; `listen` records and never answers."""
    cfg = make_config(
        {
            "channels": [
                {"match": "mention:*", "respond": "mention"},
                {"match": "listen:*", "respond": "listen"},
            ]
        }
    )
    async with Runtime.open(cfg, llm=llm) as rt:
        await rt.submit(inbound("mention:1", "chatter", addressed=False))
        await rt.drain()
        assert rt.outbox.sent == []
        await rt.submit(inbound("mention:1", "hey bot", addressed=True))
        await rt.submit(inbound("mention:2", "private", addressed=False, dm=True))
        await rt.submit(inbound("listen:1", "hey bot", addressed=True))
        await rt.drain()
        assert sorted(o.channel for o in rt.outbox.sent) == ["mention:1", "mention:2"]
        assert len(await export_ids(rt, "listen:1")) == 1


async def test_idle_channel_is_evicted_and_rehydrated(runtime: Runtime, llm: ScriptedLLM) -> None:
    """An evicted channel comes back from SQLite with the same context on its next message."""
    await runtime.submit(inbound(text="remember me"))
    await runtime.drain()
    before = runtime.registry.actors["test:1"].ctx.total
    assert await runtime.registry.evict_idle(0.0) == ["test:1"]
    assert "test:1" not in runtime.registry.actors
    await runtime.submit(inbound(text="again"))
    await runtime.drain()
    actor = runtime.registry.actors["test:1"]
    texts = [m.content for m in llm.calls[-1].messages if m.role == "user"]
    assert texts == ["remember me", "again"]
    assert actor.ctx.total > before


async def test_restart_answers_messages_received_before_a_crash(make_config) -> None:
    """A message stored but never answered (crash mid-turn) is answered after restart."""
    cfg = make_config()
    hung = ScriptedLLM()
    hung.gate["chat"] = asyncio.Event()  # never set: the turn never completes
    rt = await Runtime.open(cfg, llm=hung)
    await rt.submit(inbound(text="are you there?", pid="q1"))
    await wait_for(lambda: hung.count("chat") == 1)
    # Simulate the crash: drop the runtime without letting the turn finish.
    rt.registry.actors["test:1"]._task.cancel()
    await rt.pool.aclose()
    await rt.store.aclose()

    fresh = ScriptedLLM(chat_reply="yes")
    async with Runtime.open(cfg, llm=fresh) as rt2:
        await rt2.registry.actor("test:1")
        await rt2.drain()
        assert [(o.text, o.reply_to) for o in rt2.outbox.sent] == [("yes", "q1")]


async def test_llm_failure_gets_a_clear_reply_and_loses_nothing(
    runtime: Runtime, llm: ScriptedLLM
) -> None:
    """A provider failure is answered with an apology; the user's message stays stored."""
    from tierbot.errors import FatalLLMError

    llm.push("chat", FatalLLMError("bad key", provider="x"))
    await runtime.submit(inbound(text="hi", pid="h1"))
    await runtime.drain()
    assert "could not reach the model" in runtime.outbox.sent[0].text
    assert "h1" in await export_ids(runtime, "test:1")
