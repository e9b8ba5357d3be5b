"""Branches end to end through the channel actor, with the scripted fake LLM (and one offline)."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from structlog.testing import capture_logs

from bot.runtime import Runtime
from branches import request_tokens
from channels import ChannelActor
from tests.helpers import inbound, pairs_ok, wait_for
from tierbot.errors import ContextOverflowError
from tierbot.llm.base import Completion, ToolCall
from tierbot.llm.offline import OfflineProvider
from tierbot.llm.quoting import unquote
from tierbot.messages import Message, Role, State
from tierbot.testing.scripted import ScriptedLLM
from tierbot.tokens import get_counter
from workers.records import read_runs
from workers.task import CONTINUE_NOTE
from workers.tools import builtin_tools

CH = "test:1"
WINDOW = 8000


def settings(respond: str = "mention", **compaction: Any) -> dict[str, Any]:
    """A channel with an 8,000-token window whose own compaction stays out of the way."""
    return {
        "defaults": {
            "context_window": WINDOW,
            "system_prompt": "sys",
            "respond": respond,
            "compaction": {
                "background_threshold": 0.96,
                "aggressive_threshold": 0.97,
                "emergency_threshold": 0.98,
                **compaction,
            },
        }
    }


def text(tokens: int) -> str:
    """A message text that costs exactly ``tokens`` tokens in the history (with overhead)."""
    return "alpha " * (tokens - 5)


def branch_call(task: str, cid: str = "c1") -> Completion:
    return Completion(text="", tool_calls=(ToolCall(cid, "branch", {"task": task}),))


async def fill(rt: Runtime, until: float) -> ChannelActor:
    """Add unaddressed 50-token messages in one batch until usage reaches ``until``."""
    actor = await rt.registry.actor(CH)
    need = max(0, math.ceil((until * WINDOW - actor.ctx.total) / 50))
    await rt.registry.submit_many(
        [inbound(CH, text(50), pid=f"f{i}", addressed=False) for i in range(need)]
    )
    await rt.drain()
    return actor


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


def results(actor: ChannelActor) -> list[dict[str, Any]]:
    """The branch outcomes the channel's history holds, decoded."""
    out = []
    for m in actor.ctx.items:
        if m.role is Role.TOOL_RESULT and m.meta.get("tool") == "branch_result":
            out.append(json.loads(m.text))
    return out


async def test_branch_over_a_full_channel_precompacts_its_copy_and_leaves_the_channel_alone(
    make_config,
) -> None:
    """A branch of a channel at 90% usage compacts its copy below 60% before its first call;
    the channel's history is unchanged."""
    llm = ScriptedLLM()
    with capture_logs() as logs:
        async with Runtime.open(make_config(settings()), llm=llm) as rt:
            actor = await fill(rt, 0.90)
            assert actor.usage >= 0.90
            before = {m.id: m.text for m in actor.ctx.items}
            stored_before = {m.id: m.text for m in await rt.store.load_live(CH)}
            llm.push("chat", branch_call("what did we say about alpha?"), Completion("thinking"))
            llm.push("branch", Completion(text="alpha, many times"))
            await rt.submit(inbound(CH, "what did we say about alpha?", pid="q"))
            await wait_for(lambda: len(rt.outbox.sent) == 2)
            await rt.drain()

            first = next(c for c in llm.calls if c.purpose == "branch")
            specs = builtin_tools(CH, store=rt.store, general=False).specs()
            assert first.tools == [s.name for s in specs]
            used = request_tokens(get_counter(), first.messages, specs) / WINDOW
            assert used < 0.60
            assert any(unquote(m.content).startswith("[Branch copy:") for m in first.messages)
            assert first.messages[-1].content == "what did we say about alpha?"  # the task
            assert any(
                m.role == "user" and m.content.startswith("what did") for m in first.messages[:-1]
            )
            assert pairs_ok(first.messages)
            # The channel's history: every message still there, unchanged, in memory and stored.
            live = {m.id: m.text for m in actor.ctx.items}
            assert all(live.get(i) == t for i, t in before.items())
            stored = {m.id: m.text for m in await rt.store.load_live(CH)}
            assert all(stored.get(i) == t for i, t in stored_before.items())
            assert results(actor) == [
                {
                    "branch": "branch-1",
                    "task": "what did we say about alpha?",
                    "conclusion": "alpha, many times",
                }
            ]
    compacted = events(logs, "branch.compacted")
    assert len(compacted) == 1 and compacted[0]["usage_before"] >= 0.9
    assert compacted[0]["usage_after"] < 0.6
    assert [e["event"] for e in logs if e.get("branch") == "branch-1"] == [
        "branch.started",
        "branch.compacted",
        "branch.concluded",
    ]


async def test_two_overflows_in_a_row_force_compact_twice_then_the_branch_concludes(
    make_config,
) -> None:
    """Two context-overflow errors: the branch force-compacts and retries twice, then concludes."""
    llm = ScriptedLLM()
    with capture_logs() as logs:
        async with Runtime.open(make_config(settings()), llm=llm) as rt:
            actor = await fill(rt, 0.30)
            llm.push("chat", branch_call("find it"), Completion("looking"))
            overflow = ContextOverflowError("too long", provider="scripted", status=400)
            llm.push("branch", overflow, overflow, Completion(text="found it"))
            await rt.submit(inbound(CH, "where is it?", pid="q"))
            await wait_for(lambda: len(rt.outbox.sent) == 2)
            await rt.drain()
            calls = [c for c in llm.calls if c.purpose == "branch"]
            assert len(calls) == 3
            sizes = [request_tokens(get_counter(), c.messages) for c in calls]
            assert sizes[0] > sizes[1] > sizes[2]
            assert [c.messages[-1].content for c in calls[1:]] == [CONTINUE_NOTE] * 2
            assert sum(m.content == CONTINUE_NOTE for m in calls[2].messages) == 1
            assert all(pairs_ok(c.messages) for c in calls)
            assert results(actor)[-1]["conclusion"] == "found it"
            # The channel was woken to answer with the conclusion in its prompt.
            assert "found it" in llm.calls[-1].messages[-1].content
    assert [e["attempt"] for e in events(logs, "branch.retried")] == [1, 2]
    assert len(events(logs, "branch.concluded")) == 1


async def test_regression_a_branch_asks_for_no_more_reply_than_its_window_leaves(
    make_config,
) -> None:
    """With max_reply_tokens set to nearly the whole window, a branch still sends a request
    that fits: the reply cap is what the window leaves after the branch's prompt (the full
    cap used to be sent on top of it)."""
    llm = ScriptedLLM()
    cfg = settings()
    cfg["defaults"]["max_reply_tokens"] = WINDOW - 100
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        await fill(rt, 0.30)
        llm.push("chat", branch_call("find it"), Completion("looking"))
        llm.push("branch", Completion(text="found it"))
        await rt.submit(inbound(CH, "where is it?", pid="q"))
        await wait_for(lambda: len(rt.outbox.sent) == 2)
        await rt.drain()
        specs = builtin_tools(CH, store=rt.store, general=False).specs()
    [call] = [c for c in llm.calls if c.purpose == "branch"]
    sent = request_tokens(get_counter(), call.messages, specs)
    assert sent > 100
    assert call.max_tokens == WINDOW - sent


async def test_three_overflows_in_a_row_fail_cleanly_and_the_channel_is_told(make_config) -> None:
    """A third overflow is not retried: the branch fails, the failure enters the channel's
    history and the channel answers with it in view."""
    llm = ScriptedLLM(chat_reply="sorry, I could not look that up")
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        actor = await fill(rt, 0.30)
        llm.push("chat", branch_call("find it"), Completion("looking"))
        overflow = ContextOverflowError("too long", provider="scripted", status=400)
        llm.push("branch", overflow, overflow, overflow, Completion(text="never reached"))
        await rt.submit(inbound(CH, "where is it?", pid="q"))
        await wait_for(lambda: len(rt.outbox.sent) == 2)
        await rt.drain()
        assert llm.count("branch") == 3
        told = results(actor)[-1]
        assert "overflowed 3 times" in told["failed"]
        assert told["branch"] == "branch-1"
        assert json.loads(unquote(llm.calls[-1].messages[-1].content)) == told
        assert rt.outbox.sent[-1].text == "sorry, I could not look that up"
        assert rt.outbox.sent[-1].reply_to == "q"
        runs = await read_runs(rt.store, CH)
        assert [(r["kind"], r["status"]) for r in runs] == [("branch", "failed")]


async def test_the_channel_answers_other_messages_while_a_slow_branch_runs(make_config) -> None:
    """While a branch waits on a slow LLM, the channel answers new messages; the conclusion is
    folded in afterwards and answered in a turn of its own."""
    llm = ScriptedLLM()
    gate = asyncio.Event()
    llm.gate["branch"] = gate
    async with Runtime.open(make_config(settings(respond="always")), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        llm.push(
            "chat",
            branch_call("think hard"),
            Completion("on it"),
            Completion("hi bob"),
            Completion("here is what I found"),
        )
        llm.push("branch", Completion(text="the deep thought"))
        await rt.submit(inbound(CH, "please think", pid="q1"))
        await wait_for(lambda: llm.count("branch") == 1 and len(rt.outbox.sent) == 1)
        await rt.submit(inbound(CH, "hello", pid="q2", author="bob"))
        await wait_for(lambda: len(rt.outbox.sent) == 2)
        assert [o.text for o in rt.outbox.sent] == ["on it", "hi bob"]
        assert actor.delegation.running and not actor.idle()
        assert actor.snapshot().background[0]["status"] == "running"
        gate.set()
        await wait_for(lambda: len(rt.outbox.sent) == 3)
        await rt.drain()
        assert rt.outbox.sent[-1].text == "here is what I found"
        assert rt.outbox.sent[-1].reply_to == "q1"
        assert results(actor)[0]["conclusion"] == "the deep thought"
        assert actor.snapshot().background == ()


async def test_branch_limit_per_channel_and_timeout_hold(make_config) -> None:
    """Past max_concurrent_branches a branch call is refused; a branch past its timeout fails
    and the channel is told."""
    cfg = settings()
    cfg["defaults"]["branches"] = {"max_concurrent": 2, "timeout_seconds": 0.3}
    llm = ScriptedLLM(latency={"branch": 5.0})
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        three = tuple(ToolCall(f"c{i}", "branch", {"task": f"task {i}"}) for i in range(3))
        llm.push("chat", Completion(text="", tool_calls=three), Completion("started two"))
        await rt.submit(inbound(CH, "go", pid="q"))
        await wait_for(lambda: len(rt.outbox.sent) == 1)
        started = [
            json.loads(m.text)
            for m in actor.ctx.items
            if m.role is Role.TOOL_RESULT and m.meta.get("tool") == "branch"
        ]
        assert started[:2] == [{"started": "branch-1"}, {"started": "branch-2"}]
        assert "[defaults.branches] max_concurrent" in started[2]["error"]
        await wait_for(lambda: len(results(actor)) == 2, timeout=3.0)
        await rt.drain()
        assert [r["failed"] for r in results(actor)] == ["timed out after 0.3 s"] * 2
        assert llm.count("branch") == 2


async def test_stopping_the_channel_cancels_its_branch_and_records_it(make_config) -> None:
    """Stopping (eviction or shutdown) cancels a running branch; its end is kept in the store."""
    llm = ScriptedLLM()
    llm.gate["branch"] = asyncio.Event()
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        llm.push("chat", branch_call("slow"), Completion("thinking"))
        await rt.submit(inbound(CH, "think", pid="q"))
        await wait_for(lambda: llm.count("branch") == 1 and len(rt.outbox.sent) == 1)
        await actor.stop()
        assert not actor.delegation.running
        runs = await read_runs(rt.store, CH)
        assert [r["status"] for r in runs] == ["cancelled"]
        stored = [m for m in await rt.store.load_live(CH) if m.role is Role.TOOL_RESULT]
        assert json.loads(stored[-1].text)["cancelled"] == "the channel stopped"
        # The channel comes back with the cancellation in view, and nothing else pending.
        again = await rt.registry.actor(CH)
        assert results(again)[-1]["cancelled"] == "the channel stopped"
        assert not again.delegation.running


async def test_offline_recall_branch_answers_from_a_long_archived_message(make_config) -> None:
    """Offline: a question about something archived long ago is branched, the branch finds the
    message with conversation_search, and the channel answers with it."""
    async with Runtime.open(make_config(settings(respond="always")), llm=OfflineProvider()) as rt:
        counter = get_counter()
        said = "For the billing service we picked Postgres 16 on port 5433."
        old = [
            Message(
                CH,
                f"old{i}",
                Role.USER,
                t,
                "bob",
                "bob",
                ts=1.0 + i,
                tokens=counter.count_message(t),
                state=State.ARCHIVED,
            )
            for i, t in enumerate([said, "The office plants need water on Fridays."])
        ]
        await rt.store.append_many(old)
        await rt.submit(inbound(CH, "Which database did we pick for billing?", pid="q"))
        await wait_for(lambda: len(rt.outbox.sent) == 2)
        await rt.drain()
        holding, answer = (o.text for o in rt.outbox.sent)
        assert holding.startswith("Let me look further back")
        assert answer == f"bob said on 1970-01-01: «{said}»"
        assert rt.outbox.sent[1].reply_to == "q"
        runs = await read_runs(rt.store, CH)
        assert [(r["kind"], r["status"]) for r in runs] == [("branch", "concluded")]


async def test_regression_tool_schemas_of_slots_dataclasses_are_counted(make_config) -> None:
    """Offering tools no longer crashes the fixed-token count (ToolSpec has no __dict__); the
    branch and spawn_worker schemas are counted, and a listen-only channel offers neither."""
    cfg = settings(respond="always")
    cfg["channels"] = [{"match": "quiet:*", "respond": "listen"}]
    async with Runtime.open(make_config(cfg), llm=ScriptedLLM()) as rt:
        talking = await rt.registry.actor(CH)
        quiet = await rt.registry.actor("quiet:1")
        counter = get_counter()
        assert [t.name for t in talking.turns.tools()] == ["branch", "spawn_worker"]
        assert talking.ctx.fixed_tokens == counter.count_message("sys") + request_tokens(
            counter, [], talking.turns.tools()
        )
        assert quiet.turns.tools() == [] and quiet.ctx.fixed_tokens == counter.count_message("sys")
