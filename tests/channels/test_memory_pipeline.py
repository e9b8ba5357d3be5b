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
    cfg = make_config({"memory": {"enabled": True}, "defaults": {"context_window": 1600}})
    async with Runtime.open(cfg) as rt:
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
    cfg = make_config({"memory": {"enabled": True}, "defaults": {"context_window": 1600}})
    async with Runtime.open(cfg) as rt:
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


async def _search_ids(rt: Runtime, query: str, channel: str) -> list[str]:
    await rt.memory.indexer.flush()
    hits = await rt.memory.search(query, channel=channel, limit=5)
    return [pid for h in hits for pid in h["source_message_ids"]]


async def test_a_message_still_in_the_live_context_is_found_by_memory_search(make_config) -> None:
    """What was said a moment ago is searchable before any compaction archives it."""
    cfg = make_config({"memory": {"enabled": True}})
    async with Runtime.open(cfg) as rt:
        for pid, author, text in FACTS:
            await rt.submit(inbound("live:1", text, pid=pid, author=author))
        await rt.drain()
        assert rt.registry.actors["live:1"].compactor.counters.get("background", 0) == 0
        assert "f2" in await _search_ids(rt, "staging server kestrel", "live:1")


async def test_live_indexing_off_leaves_search_to_compaction(make_config) -> None:
    """index_live_messages = false: a live message is not searchable as a message until it
    is archived (what the bot saved from it as a memory at once is)."""
    cfg = make_config({"memory": {"enabled": True, "index_live_messages": False}})
    async with Runtime.open(cfg) as rt:
        for pid, author, text in FACTS:
            await rt.submit(inbound("live:2", text, pid=pid, author=author))
        await rt.drain()
        hits = await rt.memory.search("staging server kestrel", channel="live:2", limit=5)
        assert not [h for h in hits if h["type"] == "episode"]
        assert [h["type"] for h in hits if "f2" in h["source_message_ids"]] == ["fact"]


async def test_a_restarted_channel_indexes_what_it_had_not_indexed(make_config) -> None:
    """Messages stored while live indexing was off (or before a crash) are indexed on the
    channel's next start."""
    off = make_config({"memory": {"enabled": True, "index_live_messages": False}})
    async with Runtime.open(off) as rt:
        for pid, author, text in FACTS:
            await rt.submit(inbound("live:3", text, pid=pid, author=author))
        await rt.drain()
    async with Runtime.open(make_config({"memory": {"enabled": True}})) as rt:
        await rt.submit(inbound("live:3", "good morning", pid="m1"))
        await rt.drain()
        assert "f2" in await _search_ids(rt, "staging server kestrel", "live:3")


async def test_recall_in_a_turn_leaves_out_what_the_channel_has_live(make_config) -> None:
    """A turn's memory_recall does not hand the model back messages already in its context
    (such as the question being asked), while memory search still finds them."""
    from tierbot.llm.base import Completion, ToolCall
    from tierbot.testing.scripted import ScriptedLLM

    llm = ScriptedLLM()
    cfg = make_config({"memory": {"enabled": True}})
    async with Runtime.open(cfg, llm=llm) as rt:
        await rt.submit(inbound("live:4", "the staging server is kestrel-03", pid="s1"))
        await rt.drain()
        await rt.memory.indexer.flush()
        call = ToolCall("r1", "memory_recall", {"query": "staging server kestrel"})
        llm.push("chat", Completion(text="", tool_calls=(call,)), Completion(text="done"))
        await rt.submit(inbound("live:4", "which staging server?", pid="s2"))
        await rt.drain()
        result = next(m for m in llm.calls[-1].messages if m.role == "tool")
        assert "s1" not in result.content and "kestrel" not in result.content
        assert "s1" in await _search_ids(rt, "staging server kestrel", "live:4")
