"""A message waiting behind a finished compaction: the swap lands first, then the turn."""

from __future__ import annotations

import asyncio

from bot.llm.scripted import ScriptedLLM
from bot.messages import Role
from bot.runtime import Runtime
from tests.helpers import inbound, pairs_ok, wait_for

CH = "test:1"


def filler(n: int) -> str:
    return f"filler{n}z " + "alpha " * 40  # the z: filler1 is no part of filler10


async def test_turn_queued_behind_a_finished_compaction_sees_the_summary(make_config) -> None:
    """A message that arrives while the channel answers, after a summary finished, is answered
    from the summarized history (never from the messages it replaced), and the summary lands
    in the store and the live context alike, with an exact running token total."""
    llm = ScriptedLLM()
    llm.gate["summary"] = asyncio.Event()
    cfg = make_config(
        {
            "defaults": {
                "context_window": 2000,
                "system_prompt": "sys",
                "respond": "always",
                "compaction": {"min_messages_between": 0, "summary_share": 0.9},
            }
        }
    )
    async with Runtime(cfg, llm=llm) as rt:
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
