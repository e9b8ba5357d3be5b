"""A small window: the system prompt and tool specs take most of it, the conversation the rest."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from bot.runtime import Runtime
from tests.helpers import SMALL_TALK, inbound
from tierbot.config import Config
from tierbot.errors import ConfigError
from tierbot.llm.base import ChatMessage, Completion, ToolCall
from tierbot.llm.offline import OfflineProvider
from tierbot.llm.quoting import unquote
from tierbot.testing.scripted import ScriptedLLM

CH = "console:local"
CHAT = (
    *SMALL_TALK[:10],
    "We shipped release 4.2 of the billing service on Tuesday after the migration finished.",
    "The meeting with Dana about the Q3 roadmap moved to Friday at 10am in room B.",
    "Can you remind me what we decided about the cache eviction policy?",
    "My flight to Lisbon is TP1351 on 2026-12-03, seat 14C.",
)


async def test_summaries_are_merged_not_truncated_when_the_fixed_prompt_fills_most_of_the_window(
    make_config: Callable[..., Config],
) -> None:
    """In a 1,500-token window whose system prompt and tools take ~930 tokens, 60 turns of
    chat stay within the window, summaries are merged into meta-summaries and emergency
    truncation stays rare: summaries were allowed a quarter of the whole window, which
    alone put usage past the aggressive threshold, and most turns ended in an emergency."""
    cfg = make_config({"memory": {"enabled": True}, "defaults": {"context_window": 1500}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        for i in range(60):
            await rt.submit(inbound(CH, CHAT[i % len(CHAT)], pid=f"console-{i}", author="you"))
            await rt.drain()
        status = await rt.command(inbound(CH, "/status"), is_admin=True)
    assert status is not None
    peak = float(re.search(r"peak usage ([\d.]+)%", status)[1])  # type: ignore[index]
    counts = {k: int(n) for k, n in re.findall(r"(\w+) (\d+)", status.split("compactions:")[1])}
    assert peak <= 100.0, status
    assert counts["emergency"] <= 3, status
    assert counts["meta"] > 0, status


async def test_a_window_the_fixed_prompt_nearly_fills_is_refused_at_start_naming_the_key(
    make_config: Callable[..., Config],
) -> None:
    """A 1,000-token window whose system prompt and tools take ~930 tokens cannot hold a
    conversation (every message was an emergency, usage passed 100 %): the runtime refuses
    to start, naming the default's key, a too-small override's, and the smallest window."""
    cfg = make_config(
        {
            "memory": {"enabled": True},
            "defaults": {"context_window": 1000},
            "channels": [
                {"match": "slack:*", "context_window": 1500},
                {"match": "discord:*", "context_window": 1200},
            ],
        }
    )
    with pytest.raises(ConfigError) as refused:
        async with Runtime.open(cfg, llm=OfflineProvider()):
            pass
    paths = [p.path for p in refused.value.problems]
    assert paths == ["defaults.context_window", "channels[1].context_window"], paths
    message = str(refused.value)
    assert "1000 tokens leave the conversation too little room" in message, message
    assert re.search(r"set it to at least 14\d\d", message), message


async def _save_lockers(rt: Runtime) -> None:
    """Twenty memories of Ann's, each a locker and its code."""
    assert rt.memory is not None
    for i in range(20):
        await rt.memory.graph.save(
            f"ann: my locker number {i} at the pool in building {i} has code {4400 + i}",
            "fact",
            channel=CH,
            author_id="ann",
        )


async def test_a_recall_brings_only_what_the_window_has_room_for(
    make_config: Callable[..., Config],
) -> None:
    """A recall of twenty memories in a 1,500-token window whose fixed prompt takes most
    of it: the best hits come back, as many as fit under the emergency threshold, with a
    note saying how many more were found, so the next request stays within the window
    (the whole list put it past 100 %)."""
    llm = ScriptedLLM(chat_reply="ok")
    recall = ToolCall("r1", "memory_recall", {"query": "locker", "limit": 20})
    llm.push("chat", Completion("", tool_calls=(recall,)))
    cfg = make_config({"memory": {"enabled": True}, "defaults": {"context_window": 1500}})
    async with Runtime.open(cfg, llm=llm) as rt:
        await _save_lockers(rt)
        await rt.submit(inbound(CH, "what are my locker codes?", pid="q1", author="ann"))
        await rt.drain()
        actor = rt.registry.actors[CH]
        peak = actor.peak_usage
        answered = llm.calls[1].messages
    [result] = [m for m in answered if m.role == "tool"]
    *hits, note = json.loads(unquote(result.content))
    assert 0 < len(hits) < 20, result.content
    assert all("locker" in h["content"] for h in hits)
    assert note["left_out"] == 20 - len(hits), note  # said, not passed off as all there was
    assert peak <= 0.95, peak


async def test_a_recall_that_would_fill_the_window_to_the_brim_leaves_room_to_answer(
    make_config: Callable[..., Config],
) -> None:
    """Hits that fit under the emergency threshold to its last token left no room for
    the reply: "ok" then put the channel past it (now and then, as the memories' ids
    made the hits a few tokens longer or shorter).  A recall's result now leaves room
    for the shortest reply; one that leaves that room already comes back whole."""
    from tierbot.tokens import MIN_REPLY_TOKENS

    cfg = make_config({"memory": {"enabled": True}, "defaults": {"context_window": 1500}})
    async with Runtime.open(cfg, llm=ScriptedLLM(chat_reply="ok")) as rt:
        await rt.submit(inbound(CH, "what are my locker codes?", pid="q1", author="ann"))
        await rt.drain()
        actor = rt.registry.actors[CH]
        s = actor.history.settings
        brim = int(s.context_window * s.compaction.emergency_threshold) - actor.history.ctx.total
        count = actor.turns.deps.counter.count_message

        def hits(filler: int) -> str:
            found = [
                {"id": f"mem_{i}", "type": "fact", "content": f"ann: locker {i} has code 44{i}"}
                for i in range(5)
            ]
            found.append({"id": "mem_9", "type": "fact", "content": "ann: locker " + "x " * filler})
            return json.dumps(found)

        filler = 0
        while count(hits(filler + 1)) <= brim:
            filler += 1
        brimful = hits(filler)
        assert brim - MIN_REPLY_TOKENS < count(brimful) <= brim  # fills it to the brim
        fitted = actor.turns._fitted(brimful)
        assert count(fitted) <= brim - MIN_REPLY_TOKENS, (count(fitted), brim)
        assert json.loads(fitted)[-1]["left_out"] == 1, fitted  # said, not dropped
        roomy = hits(max(0, filler - 2 * MIN_REPLY_TOKENS))
        assert actor.turns._fitted(roomy) is roomy


#: Thresholds that let a window fill to 90 % without a background compaction.
LATE = {
    "branch_preflight_threshold": 0.5,
    "background_threshold": 0.95,
    "aggressive_threshold": 0.96,
    "emergency_threshold": 0.97,
}


async def _recall_when_nearly_full(rt: Runtime, llm: ScriptedLLM) -> list[ChatMessage]:
    """Fill the channel to 90-95 % with notes, then have the model recall twenty lockers;
    the messages of the request that reads the recall's result."""
    await _save_lockers(rt)
    actor = None
    for i in range(200):
        await rt.submit(
            inbound(CH, f"note {i}: the crate of apples went to stall {i}", pid=f"n{i}")
        )
        await rt.drain()
        actor = rt.registry.actors[CH]
        if actor.history.usage >= 0.90:
            break
    assert actor is not None and 0.90 <= actor.history.usage < 0.95, actor.history.usage
    recall = ToolCall("r1", "memory_recall", {"query": "locker", "limit": 20})
    llm.push("chat", Completion("", tool_calls=(recall,)))
    await rt.submit(inbound(CH, "what are my locker codes?", pid="q1", author="ann"))
    await rt.drain()
    return next(
        c.messages
        for c in reversed(llm.calls)
        if c.purpose == "chat" and any(m.role == "tool" for m in c.messages)
    )


async def test_a_recall_with_room_for_too_few_hits_makes_room_first(
    make_config: Callable[..., Config],
) -> None:
    """The window is nearly full (under the background threshold) when a recall of
    twenty memories comes: rather than bring none ("no room"), the turn cuts the oldest
    live messages as an overflow would (archived, not lost) and brings at least
    three."""
    llm = ScriptedLLM(chat_reply="ok")
    cfg = make_config(
        {"memory": {"enabled": True}, "defaults": {"context_window": 1500, "compaction": LATE}}
    )
    async with Runtime.open(cfg, llm=llm) as rt:
        answered = await _recall_when_nearly_full(rt, llm)
        archived = [m async for m in rt.store.export(CH) if m.text.startswith("note 0:")]
    [result] = [m for m in answered if m.role == "tool"]
    hits = [h for h in json.loads(unquote(result.content)) if "content" in h]
    assert len(hits) >= 3, result.content
    assert archived, "the oldest note is kept in the archive"
    assert not any("note 0:" in m.content for m in answered)  # cut from the live context


async def test_a_store_failing_to_make_room_for_a_recall_is_said_and_the_chat_goes_on(
    make_config: Callable[..., Config],
) -> None:
    """Making room for the recall fails (the store cannot archive the cut): the model is
    told the lookup failed (never an empty "nothing found"), the person still gets a
    reply, and the next message is answered as usual."""
    llm = ScriptedLLM(chat_reply="ok")
    cfg = make_config(
        {"memory": {"enabled": True}, "defaults": {"context_window": 1500, "compaction": LATE}}
    )
    async with Runtime.open(cfg, llm=llm) as rt:
        await rt.submit(inbound(CH, "hello", pid="h0"))
        await rt.drain()
        actor = rt.registry.actors[CH]

        async def failing_overflowed() -> None:
            raise OSError("disk I/O error")

        actor.compaction.overflowed = failing_overflowed  # type: ignore[method-assign]
        answered = await _recall_when_nearly_full(rt, llm)
        replied = rt.outbox.sent[-1]
        await rt.submit(inbound(CH, "are you still there?", pid="q2", author="ann"))
        await rt.drain()
        last = rt.outbox.sent[-1]
    [result] = [m for m in answered if m.role == "tool"]
    body = json.loads(unquote(result.content))
    assert "OSError" in body["error"], body
    assert replied.reply_to == "q1" and replied.text == "ok", replied
    assert last.reply_to == "q2" and last.text == "ok", last


# A newcomer's chat (a team's facts, corrections, questions, a forget, a /compact).
TEAM_CHAT = (
    "hey, I'm Raj, backend dev on the payments team",
    "Our team lead is Priya and she sits in Berlin.",
    "My teammate Kenji handles the Kafka consumers.",
    "We decided to use Postgres 16 for the ledger service.",
    "The staging database host is db-stg-03.internal.",
    "Remember that the deploy freeze starts on Friday.",
    "sorry, I meant Thursday",
    "The on-call rotation this week is Kenji, next week is me.",
    "Sprint demo is on Wednesday at 2pm.",
    "actually make that 4pm",
    "no wait, 3:30pm",
    "My laptop's asset tag is LT-8831.",
    "I prefer tabs over spaces, fight me",
    "Priya's favourite editor is Vim.",
    "Kenji uses Emacs.",
    "brb coffee",
    "ok back",
    "What is the staging database host?",
    "When does the deploy freeze start?",
    "When is the sprint demo?",
    "Who is on call this week?",
    "What editor does Priya use?",
    "Which editors do Priya and Kenji use?",
    "What database did we choose for the ledger?",
    "/compact",
    "What's my laptop asset tag?",
    "Where does Priya sit?",
    "What does Kenji handle?",
    "The staging host changed to db-stg-07.internal.",
    "What is the staging db host?",
    "I'm no longer on the payments team, I moved to the platform team.",
    "Which team am I on?",
    "Forget my laptop asset tag.",
    "What's my laptop asset tag?",
    "My API token for the sandbox is sk-test-9981.",
    "Please delete the sandbox API token.",
    "What's the sandbox API token?",
    "The retro is on Friday at 11am.",
    "Our PM is Lucia and she's out on leave until June 2nd.",
    "Lucia's replacement during leave is Omar.",
    "Who is covering for Lucia?",
    "When is Lucia back?",
    "What do you know about Kenji?",
    "What do you know about me?",
    "What else?",
)


async def test_what_else_after_the_list_in_a_small_window_is_answered_not_refused(
    make_config: Callable[..., Config],
) -> None:
    """In a 2,048-token window, "What else?" right after "What do you know about me?"
    answered "Sorry, this conversation is too long for the model right now.": the
    list's own recalls were still in view, the newest messages, which an emergency cut
    does not take, and no room was left for the next recall. Spent recalls of answered
    turns leave the view first."""
    cfg = make_config({"memory": {"enabled": True}, "defaults": {"context_window": 2048}})
    replies = []
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        for i, line in enumerate(TEAM_CHAT):
            if line.startswith("/"):
                await rt.command(inbound(CH, line), is_admin=True)
            else:
                await rt.submit(inbound(CH, line, pid=f"console-{i}", author="you"))
            await rt.drain()
            replies.append(rt.outbox.sent[-1].text)
    assert not [r for r in replies if "too long for the model" in r], replies
    assert replies[-2].startswith("Here is what you told me:"), replies[-2]
    assert "told me" in replies[-1], replies[-1]
