"""Compaction workers feed the memory graph; the offline bot answers from it."""

from __future__ import annotations

from bot.runtime import Runtime
from tests.helpers import inbound

FACTS = [
    ("f0", "dana", "Hi all, I'm Dana and I work at Globex as a data engineer."),
    ("f1", "dana", "We decided to migrate the billing service to PostgreSQL 16 next quarter."),
    ("f2", "sam", "The staging server is called kestrel-03."),
]


async def test_compaction_saves_typed_memories_with_their_sources(make_config) -> None:
    """Memories the compaction worker saves carry the platform ids of their messages, and
    archived messages become searchable episodes."""
    cfg = make_config({"memory": {"enabled": True}, "defaults": {"context_window": 600}})
    async with Runtime(cfg) as rt:
        for pid, author, text in FACTS:
            await rt.submit(inbound("mem:1", text, pid=pid, author=author))
        for i in range(60):
            await rt.submit(inbound("mem:1", f"chatter {i} about lunch and weather", pid=f"c{i}"))
        await rt.drain()
        assert await rt.memory.count("mem:1") > 0
        hits = await rt.memory.search("billing service database", channel="mem:1", limit=5)
        decision = next(h for h in hits if h["type"] == "decision")
        assert "PostgreSQL 16" in decision["content"]
        assert decision["source_message_ids"][0] == "f1"
        episodes = await rt.memory.search("staging server name", channel="mem:1", limit=5)
        assert any("f2" in h["source_message_ids"] for h in episodes)


async def test_offline_bot_answers_from_memory_after_compaction(make_config) -> None:
    """A fact compacted out of the live context is still answered, from memory."""
    cfg = make_config({"memory": {"enabled": True}, "defaults": {"context_window": 600}})
    async with Runtime(cfg) as rt:
        for pid, author, text in FACTS:
            await rt.submit(inbound("mem:2", text, pid=pid, author=author))
        for i in range(60):
            await rt.submit(inbound("mem:2", f"chatter {i} about lunch and weather", pid=f"c{i}"))
        await rt.drain()
        actor = rt.registry.actors["mem:2"]
        assert all(m.platform_id != "f2" for m in actor.ctx.items)
        rt.outbox.sent.clear()
        await rt.submit(inbound("mem:2", "what is the staging server called?", pid="q"))
        await rt.drain()
        assert any("kestrel-03" in o.text for o in rt.outbox.sent)
