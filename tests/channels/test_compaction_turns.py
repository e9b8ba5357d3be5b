"""Compaction around a channel's turns: what the model is sent, and when passes start."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from bot.runtime import Runtime
from channels import ChannelActor
from compactor import Plan
from tests.helpers import inbound, pairs_ok, wait_for
from tierbot.llm.base import ChatMessage, Completion, Purpose, ToolSpec
from tierbot.messages import Role
from tierbot.testing.scripted import ScriptedLLM
from tierbot.vocab import CompactionKind

CH = "test:1"
WINDOW = 2000


def filler(n: int) -> str:
    return f"filler{n}z " + "alpha " * 40  # the z: filler1 is no part of filler10


def answering(respond: str = "always", **compaction: Any) -> dict[str, Any]:
    """A channel that answers every message (or those addressed to it), in a 2,000-token
    window."""
    return {
        "defaults": {
            "context_window": WINDOW,
            "system_prompt": "sys",
            "respond": respond,
            "compaction": {"min_messages_between": 0, "summary_share": 0.9, **compaction},
        }
    }


class Watching:
    """The scripted model, noting at each chat request which pass the channel had in flight
    and how full its context was."""

    def __init__(self, inner: ScriptedLLM) -> None:
        self.inner = inner
        self.name = "watching"
        self.actor: ChannelActor | None = None
        self.seen: list[tuple[Plan | None, float]] = []

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
        purpose: Purpose = "chat",
    ) -> Completion:
        if purpose == "chat" and self.actor is not None:
            self.seen.append((self.actor.compactor.running, self.actor.usage))
        return await self.inner.complete(messages, tools, max_tokens, purpose)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def fill_unaddressed(rt: Runtime, until: float) -> ChannelActor:
    """Add 49-token messages not addressed to the bot (no turn) until usage reaches
    ``until``."""
    actor = await rt.registry.actor(CH)
    n = 0
    while actor.usage < until:
        await rt.submit(inbound(CH, filler(n), pid=f"f{n}", addressed=False))
        await wait_for(actor.idle)
        n += 1
    assert actor.compactor.running is None
    return actor


async def test_turn_crossing_the_threshold_asks_the_model_before_planning_the_pass(
    make_config,
) -> None:
    """The message that takes a channel past its background threshold is answered without
    waiting for the pass to be planned: the model request goes out first, the pass starts
    while it runs, and its summary lands."""
    llm = Watching(ScriptedLLM())
    llm.inner.gate["summary"] = asyncio.Event()
    cfg = make_config(answering("mention", predictive_start=False))
    async with Runtime.open(cfg, llm=llm) as rt:
        actor = await fill_unaddressed(rt, 0.77)  # under 0.7945: one filler is 49 tokens
        llm.actor = actor
        await rt.submit(inbound(CH, "crossing " + "beta " * 80, pid="cross"))  # 87 tokens
        await wait_for(lambda: any(o.reply_to == "cross" for o in rt.outbox.sent))
        running, usage = llm.seen[-1]
        assert 0.80 <= usage < 0.85  # the request carried the crossing message...
        assert running is None  # ...and went out before the pass was planned
        plan = actor.compactor.running
        assert (
            plan is not None and plan.kind is CompactionKind.BACKGROUND
        )  # started during that turn
        llm.inner.gate["summary"].set()
        await rt.drain()
        assert actor.ctx.items[0].role is Role.SUMMARY
        assert [r.outcome for r in await rt.store.compactions(CH)] == ["ok"]


async def test_turn_past_the_emergency_threshold_truncates_before_the_model_call(
    make_config,
) -> None:
    """A message that takes a channel past 95% is answered from a context already truncated
    behind a marker: the emergency is never put off until the model call is under way."""
    llm = Watching(ScriptedLLM())
    cfg = make_config(answering("mention", predictive_start=False))
    async with Runtime.open(cfg, llm=llm) as rt:
        actor = await fill_unaddressed(rt, 0.75)
        llm.actor = actor
        await rt.submit(inbound(CH, "huge " + "gamma " * 500, pid="huge"))
        await wait_for(lambda: any(o.reply_to == "huge" for o in rt.outbox.sent))
        assert actor.compactor.counters["emergency"] == 1
        prompt = llm.inner.calls[[c.purpose for c in llm.inner.calls].index("chat")].messages
        assert any("set aside" in m.content for m in prompt)
        assert any("gamma" in m.content for m in prompt)
        _, usage = llm.seen[-1]
        assert usage < 0.95


async def test_turn_queued_behind_a_finished_compaction_sees_the_summary(make_config) -> None:
    """A message that arrives while the channel answers, after a summary finished, is answered
    from the summarized history (never from the messages it replaced), and the summary lands
    in the store and the live context alike, with an exact running token total."""
    llm = ScriptedLLM()
    llm.gate["summary"] = asyncio.Event()
    cfg = make_config(answering())
    async with Runtime.open(cfg, llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        n = 0
        while actor.compactor.running is None:
            await rt.submit(inbound(CH, filler(n), pid=f"f{n}"))
            await wait_for(lambda: actor.idle() or actor.compactor.running is not None)
            n += 1
        plan = actor.compactor.running
        covered = [m.text.split()[0] for m in plan.covered if m.role is Role.USER]
        assert covered

        # q1's turn waits in its model call; meanwhile the summary finishes and q2 arrives,
        # so the next mailbox batch holds the finished compaction and q2 together.
        llm.gate["chat"] = asyncio.Event()
        chats = llm.count("chat")
        await rt.submit(inbound(CH, "question one", pid="q1"))
        await wait_for(lambda: llm.count("chat") == chats + 1)
        llm.gate["summary"].set()
        await wait_for(lambda: actor.mailbox_depth == 1)
        await rt.submit(inbound(CH, "question two", pid="q2"))
        await wait_for(lambda: actor.mailbox_depth == 2)
        llm.gate["chat"].set()
        await rt.drain()

        prompts = [c.messages for c in llm.calls if c.purpose == "chat"]
        q1_prompt = " ".join(m.content for m in prompts[chats])
        q2_prompt = " ".join(m.content for m in prompts[chats + 1])
        assert "question two" in q2_prompt and "question one" in q2_prompt
        assert all(word in q1_prompt for word in covered)  # before: the originals
        assert not any(word in q2_prompt for word in covered)  # after: only the summary
        assert "[Summary of" in q2_prompt
        assert pairs_ok(prompts[chats + 1])
        assert any(o.reply_to == "q2" for o in rt.outbox.sent)

        items = list(actor.ctx.items)
        assert items[0].role is Role.SUMMARY
        assert actor.compactor.running is None
        records = await rt.store.compactions(CH)
        assert [r.outcome for r in records] == ["ok"]
        assert actor.ctx.message_tokens == sum(m.tokens for m in items)
        live = await rt.store.load_live(CH)
        assert [m.id for m in live] == [m.id for m in items]
        assert not {m.id for m in plan.covered} & {m.id for m in live}
