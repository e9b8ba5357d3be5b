"""Conversation correctness under the bot's own machinery: tool traffic, bursts, small windows.

Faults injected: a burst of questions arriving while a turn and a branch run; a
2,048-token window that forces emergencies while a branch is in flight; a
compaction over a history full of tool calls, tool results and progress notes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from bot.cli import replay
from bot.runtime import Runtime
from channels import ChannelActor
from tests.helpers import inbound, pairs_ok, wait_for
from tierbot.config import Config
from tierbot.llm.base import Completion, ToolCall
from tierbot.llm.offline import OfflineProvider
from tierbot.messages import Message, Role, State
from tierbot.store import Store
from tierbot.testing.scripted import ScriptedLLM
from tierbot.tokens import get_counter

CH = "conv:1"

FACTS = [
    ("f1", "alice", "My favourite colour is teal."),
    ("f2", "bob", "I live in Lisbon and work at Acme."),
    ("f3", "carol", "The release train leaves with version 2.4."),
]
ARCHIVED = ("old1", "dave", "The staging server is called kestrel-03.")
# Each question, and the word only its right answer contains.
QUESTIONS = [
    ("q1", "What is alice's favourite colour?", "teal"),
    ("q2", "Where does bob live?", "Lisbon"),
    ("q3", "Which version leaves with the release train?", "2.4"),
    ("q4", "What is the staging server called?", "kestrel-03"),
]


def archived(channel: str, pid: str, author: str, text: str) -> Message:
    tokens = get_counter().count_message(text)
    return Message(
        channel, pid, Role.USER, text, author, author, ts=1.0, tokens=tokens, state=State.ARCHIVED
    )


def assert_each_answered_once(replies: Sequence[Message]) -> None:
    """Every question's answer is in exactly one of the bot's replies."""
    answers = [m.text for m in replies if m.role is Role.ASSISTANT]
    for pid, question, word in QUESTIONS:
        carrying = [a for a in answers if word in a]
        assert len(carrying) == 1, f"{pid} {question!r} answered {len(carrying)} times: {answers}"


async def exported(store: Store, channel: str) -> list[Message]:
    return [m async for m in store.export(channel)]


# -- a burst of questions ------------------------------------------------------------------


@pytest.mark.parametrize("looked_up", ["first", "last"])
async def test_regression_a_burst_is_answered_whole_and_once_through_the_runtime(
    make_config: Callable[..., Config], looked_up: str
) -> None:
    """Four questions sent one after another while the bot answers the first (and branches
    for the one about an archived fact, asked first or last) each get an answer, and none is
    answered twice: the branch's late answer is for its own question, not the newest one."""
    cfg = make_config({"defaults": {"respond": "always"}})
    questions = QUESTIONS[-1:] + QUESTIONS[:-1] if looked_up == "first" else QUESTIONS
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        await rt.store.append_many([archived(CH, *ARCHIVED)])
        for pid, author, text in FACTS:
            await rt.submit(inbound(CH, text, pid=pid, author=author))
        await rt.drain()
        before = len(await exported(rt.store, CH))
        for pid, question, _ in questions:  # no wait in between: a real burst
            await rt.submit(inbound(CH, question, pid=pid, author="erin"))
        await rt.drain()
        history = (await exported(rt.store, CH))[before:]
        assert_each_answered_once(history)
        answers = [m for m in history if m.role is Role.ASSISTANT]
        assert [o.text for o in rt.outbox.sent][-len(answers) :] == [m.text for m in answers]


async def test_regression_replay_of_a_burst_answers_every_question_once(
    make_config: Callable[..., Config], tmp_path: Path
) -> None:
    """`tierbot replay` of a burst of four questions answers all four, each once, including
    the one whose answer had to be looked up in the archive by a branch."""
    cfg = make_config({"defaults": {"respond": "always"}})
    async with Runtime.open(cfg) as rt:  # the archived fact, from an earlier life of the channel
        await rt.store.append_many([archived(CH, *ARCHIVED)])
    lines = [
        {"id": p, "author": a, "text": t, "ts": 1_700_000_000 + i}
        for i, (p, a, t) in enumerate(FACTS)
    ]
    lines += [
        {"id": p, "author": "erin", "text": q, "ts": 1_700_000_100 + i}
        for i, (p, q, _) in enumerate(QUESTIONS)
    ]
    path = tmp_path / "burst.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    report = await replay(cfg, path, CH, listen_only=False)
    assert report["messages_in"] == len(lines)
    store = await Store.open(cfg.storage_path())
    try:
        history = await exported(store, CH)
    finally:
        await store.aclose()
    assert_each_answered_once(history)
    # The branch for the archived fact ran and came back as one exchange.
    calls = [m for m in history if m.role is Role.TOOL_CALL]
    assert any("branch_result" in m.text for m in calls)


# -- tool traffic never becomes memories ---------------------------------------------------

TOOL_TRACES = ('"started"', '"branch"', '"conclusion"', "branch(", "branch_result", '{"')


async def test_regression_tool_traffic_never_becomes_memories_episodes_or_answers(
    make_config: Callable[..., Config],
) -> None:
    """After a conversation with a branch call and its results is compacted, no memory or
    episode holds tool JSON or a progress note, and a later answer never quotes it."""
    cfg = make_config(
        {
            "memory": {"enabled": True},
            "defaults": {"respond": "always", "compaction": {"background_fraction": 0.9}},
        }
    )
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        await rt.store.append_many([archived(CH, *ARCHIVED)])
        actor = await rt.registry.actor(CH)
        await rt.submit(inbound(CH, "We decided to deploy on Thursday at 10:00.", pid="d1"))
        await rt.submit(inbound(CH, "What is the staging server called?", pid="q4"))
        await rt.drain()
        tools = [m for m in actor.ctx.items if m.role in (Role.TOOL_CALL, Role.TOOL_RESULT)]
        # branch + started, branch_result + conclusion.  The first turn's memory_save and
        # its result (the decision, saved at once) left the live context once the next
        # turn was answered: archived, with everything else kept in the store.
        assert len(tools) == 4
        assert not any("memory_save" in m.text for m in tools)
        saved = [m for m in await exported(rt.store, CH) if "memory_save" in m.text]
        assert [m.state for m in saved] == [State.ARCHIVED]
        assert any(m.meta.get("progress") for m in actor.ctx.items)
        await rt.submit(inbound(CH, "thanks, that settles it", pid="t1"))
        await rt.drain()
        assert "Compacting" in await actor.call(lambda a: a.force_compaction())
        await wait_for(lambda: actor.compactor.counters["background"] == 1, timeout=15)
        await rt.drain()
        await rt.memory.indexer.flush()
        assert not [m for m in actor.ctx.items if m.role is Role.TOOL_CALL]  # all compacted

        nodes = [n async for n in rt.memory.graph.export() if n["kind"] == "node"]
        memories = [n for n in nodes if n["type"] != "episode"]
        assert any("deploy on Thursday" in n["content"] for n in memories)
        for n in nodes:
            assert not any(t in n["content"] for t in TOOL_TRACES), n
            assert "Let me look further back" not in n["content"], n
        # Nothing the bot merely repeated of a user became a memory of its own.
        assert not [n for n in memories if n["content"].startswith("tierbot:")]

        rt.outbox.sent.clear()
        for i, question in enumerate(["What was the branch task?", "What did the branch start?"]):
            await rt.submit(inbound(CH, question, pid=f"later{i}"))
            await rt.drain()
        assert rt.outbox.sent
        for out in rt.outbox.sent:
            assert not any(t in out.text for t in TOOL_TRACES), out.text


# -- a cut never splits a tool exchange ------------------------------------------------------


def assert_exchanges_whole(items: Sequence[Message]) -> None:
    """Every live tool result has its live call and every live call its results; a branch's
    start and its later branch_result are live together once both exist."""
    calls: dict[str, int] = {}
    for i, m in enumerate(items):
        if m.role is Role.TOOL_CALL:
            calls.update((c["id"], i) for c in m.meta.get("calls", []))
    answered = {str(m.meta.get("call_id")) for m in items if m.role is Role.TOOL_RESULT}
    for m in items:
        if m.role is Role.TOOL_RESULT:
            assert m.meta.get("call_id") in calls, f"result {m.text!r} lives without its call"
    for cid in calls:
        assert cid in answered, f"call {cid} lives without its result"
    started = {
        json.loads(m.text)["started"]: m
        for m in items
        if m.role is Role.TOOL_RESULT and m.text.startswith('{"started"')
    }
    for m in items:
        if m.role is Role.TOOL_RESULT and m.meta.get("tool") == "branch_result":
            assert m.meta["call_id"] in started, f"branch_result {m.text!r} without its start"


def branch_call(task: str, cid: str) -> Completion:
    return Completion(text="", tool_calls=(ToolCall(cid, "branch", {"task": task}),))


async def check_whole(rt: Runtime, actor: ChannelActor) -> None:
    assert_exchanges_whole(actor.ctx.items)
    assert_exchanges_whole(await rt.store.load_live(CH))
    assert pairs_ok(actor.build_prompt()[1:])


async def settled(actor: ChannelActor) -> None:
    """Wait until the actor has handled everything in its mailbox (branches may still run)."""
    await wait_for(lambda: actor.mailbox_depth == 0 and not actor.busy, timeout=15)


async def test_regression_a_small_window_never_splits_a_tool_call_from_its_result(
    make_config: Callable[..., Config],
) -> None:
    """With a 2,048-token window, emergencies and background compactions over a history with
    a finished and an in-flight branch never leave a result, or a branch_result, live without
    its call, nor a call without its result."""
    llm = ScriptedLLM(chat_reply="ok")
    cfg = make_config(
        {
            "defaults": {
                "context_window": 2048,
                "respond": "mention",
                "compaction": {"min_messages_between": 0},
            }
        }
    )
    filler = "lorem ipsum dolor sit amet " * 8
    async with Runtime.open(cfg, llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        # A branch that finishes at once, then one held in flight.
        llm.push("chat", branch_call("first", "c1"), Completion("looking"))
        await rt.submit(inbound(CH, "look up the first thing", pid="a1"))
        await rt.drain()
        assert any(m.meta.get("tool") == "branch_result" for m in actor.ctx.items)
        llm.gate["branch"] = branch_gate = asyncio.Event()
        llm.gate["summary"] = summary_gate = asyncio.Event()  # emergencies must do the work
        llm.push("chat", branch_call("second", "c2"), Completion("still looking"))
        await rt.submit(inbound(CH, "look up the second thing", pid="a2"))
        await wait_for(lambda: actor.delegation.running and len(rt.outbox.sent) >= 3)
        for i in range(60):  # unaddressed chatter: the window fills again and again
            await rt.submit(inbound(CH, f"{i} {filler}", pid=f"n{i}", addressed=False))
            await settled(actor)
            await check_whole(rt, actor)
        assert actor.compactor.counters["emergency"] >= 2
        assert actor.usage < 1.0
        assert [m for m in actor.ctx.items if m.text.startswith('{"started": "branch-2"')]
        branch_gate.set()
        summary_gate.set()
        await wait_for(lambda: not actor.delegation.running)
        await rt.drain()
        await check_whole(rt, actor)
        for i in range(60):
            await rt.submit(inbound(CH, f"{i} {filler}", pid=f"m{i}", addressed=False))
            await rt.drain()
            await check_whole(rt, actor)
        counters = actor.compactor.counters
        assert counters["background"] + counters["aggressive"] >= 1


async def test_regression_a_model_cannot_save_the_bots_quote_of_a_user_as_its_memory(
    make_config: Callable[..., Config],
) -> None:
    """A summarizing model that saves the bot's reply quoting a user as a memory is refused
    (the user's own line is the memory); what the bot itself promised is saved."""
    llm = ScriptedLLM()
    cfg = make_config(
        {
            "memory": {"enabled": True},
            "defaults": {"respond": "always", "compaction": {"background_fraction": 0.9}},
        }
    )
    said = "The staging server is called kestrel-03 and runs Debian."
    async with Runtime.open(cfg, llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        llm.push(
            "chat",
            Completion(f"Earlier, dave said: «{said}»"),
            Completion("I will rotate the kestrel-03 keys on Monday."),
        )
        await rt.submit(inbound(CH, said, pid="u1", author="dave", addressed=False))
        await rt.submit(inbound(CH, "what is the staging server?", pid="u2"))
        await rt.drain()
        await rt.submit(inbound(CH, "can you rotate its keys?", pid="u3"))
        await rt.drain()
        await rt.submit(inbound(CH, "thanks", pid="u4"))
        await rt.drain()
        quote_id, promise_id = [m.platform_id for m in actor.ctx.items if m.role is Role.ASSISTANT][
            :2
        ]

        def save(content: str, source: str, cid: str) -> ToolCall:
            args = {"content": content, "memory_type": "fact", "source_ids": [source]}
            return ToolCall(cid, "memory_save", args)

        copied = f"tierbot: Earlier, dave said: {said}"
        promise = "tierbot promised to rotate the kestrel-03 keys on Monday"
        saves = (save(copied, quote_id, "s1"), save(promise, promise_id, "s2"))
        summary = "dave named the staging server; tierbot will rotate its keys."
        llm.push("summary", Completion("", tool_calls=saves), Completion(summary))
        assert "Compacting" in await actor.call(lambda a: a.force_compaction())
        await wait_for(lambda: actor.compactor.counters["background"] == 1, timeout=15)
        await rt.drain()
        contents = [
            n["content"]
            async for n in rt.memory.graph.export()
            if n["kind"] == "node" and n["type"] != "episode"
        ]
        assert promise in contents
        assert copied not in contents
