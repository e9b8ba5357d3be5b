"""Compaction that keeps up: re-checks of quiet channels, passes in flight side by side,
and rescues of emergency set-asides in bounded, ordered chunks."""

from __future__ import annotations

import asyncio
from typing import Any

from bot.errors import TransientLLMError
from bot.llm.base import ChatMessage, Completion
from bot.llm.scripted import ScriptedLLM
from bot.messages import Message, Role
from bot.runtime import Runtime
from compactor import Kind
from compactor.scheduler import rescue_chunk
from tests.helpers import export_ids, inbound, wait_for
from tests.test_compaction import CH, barely_smaller, covered_tokens, settings, summary_of, text

FINISHED = ("background", "aggressive", "meta", "rescue", "failed")


def finished(actor: Any) -> int:
    return sum(actor.compactor.counters[k] for k in FINISHED)


def quarter(messages: list[ChatMessage]) -> Completion:
    """A summary a quarter the size of what it covers."""
    return summary_of(max(1, covered_tokens(messages) // 4))


async def entered(actor: Any) -> None:
    await wait_for(lambda: not actor.busy and actor.mailbox_depth == 0)


# -- a channel never rests above a threshold ---------------------------------------------


async def test_quiet_channel_above_threshold_compacts_without_a_new_message(make_config) -> None:
    """A pass that leaves usage over the background threshold is followed by another
    once the loop guard expires, with no new message, until usage is under it."""
    llm = ScriptedLLM()
    llm.push("summary", barely_smaller)
    cfg = settings(min_messages_between=50, loop_guard_seconds=0.05, parallel_compactions=1)
    async with Runtime(make_config(cfg), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        n = 0
        while llm.count("summary") == 0:
            await rt.submit(inbound(CH, text(50), pid=f"f{n}"))
            await entered(actor)
            n += 1
        await wait_for(lambda: actor.compactor.counters["background"] == 1)
        # Nothing else is sent: the guard's expiry alone starts the next pass.
        await wait_for(lambda: llm.count("summary") >= 2, timeout=15)
        await wait_for(lambda: actor.idle() and actor.usage < 0.80, timeout=15)
        assert actor.compactor.counters["background"] >= 2
        assert len(await export_ids(rt, CH)) == n


async def test_failed_pass_is_retried_when_its_backoff_expires_without_a_new_message(
    make_config,
) -> None:
    """A channel left over its threshold by a failed pass retries after the backoff on
    its own, not at the next message."""
    llm = ScriptedLLM()
    llm.push("summary", TransientLLMError("upstream 503"))
    cfg = settings()
    cfg["workers"] = {"retry_base_seconds": 0.05, "retry_max_seconds": 0.05}
    async with Runtime(make_config(cfg), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        n = 0
        while llm.count("summary") == 0:
            await rt.submit(inbound(CH, text(50), pid=f"f{n}"))
            await entered(actor)
            n += 1
        await wait_for(lambda: actor.compactor.counters["failed"] == 1)
        await wait_for(lambda: actor.usage < 0.80, timeout=15)
        assert actor.compactor.counters["background"] == 1
        assert len(await export_ids(rt, CH)) == n


# -- the background tiers keep up ---------------------------------------------------------


async def burst(make_config: Any, parallel: int, latency: int, n: int) -> Any:
    key = f"burst:{parallel}"
    """Send ``n`` 20-token messages; every summary call finishes ``latency`` messages after
    it started (a clock counted in messages, so the machine's speed does not matter)."""
    llm = ScriptedLLM()
    llm.tickets["summary"] = asyncio.Semaphore(0)
    llm.push("summary", *[quarter] * 1000)
    cfg = settings(parallel_compactions=parallel, min_messages_between=4, summary_share=0.3)
    async with Runtime(make_config(cfg), llm=llm) as rt:
        actor = await rt.registry.actor(key)
        started: list[int] = []
        released = 0
        for i in range(n):
            await rt.submit(inbound(key, text(20), pid=f"b{i}"))
            await entered(actor)
            started += [i] * (llm.count("summary") - len(started))
            while released < len(started) and started[released] <= i - latency:
                llm.tickets["summary"].release()
                released += 1
                await wait_for(lambda: finished(actor) >= released)
                await entered(actor)
                started += [i] * (llm.count("summary") - len(started))
        for _ in range(len(started) - released + 10):
            llm.tickets["summary"].release()
        await wait_for(lambda: actor.idle())
        await rt.drain()
        assert sorted(await export_ids(rt, key)) == sorted(f"b{i}" for i in range(n))
        return actor


async def test_burst_that_outruns_one_worker_is_absorbed_by_the_background_tiers(
    make_config,
) -> None:
    """Summaries that take 5 messages' time and free little: one pass at a time falls
    behind into emergency truncations; passes side by side absorb the same burst."""
    one = await burst(make_config, parallel=1, latency=5, n=150)
    assert one.compactor.counters["emergency"] >= 1
    many = await burst(make_config, parallel=3, latency=5, n=150)
    assert many.compactor.counters["emergency"] == 0
    assert many.peak_usage < 0.95
    assert many.compactor.counters["background"] + many.compactor.counters["aggressive"] > (
        one.compactor.counters["background"] + one.compactor.counters["aggressive"]
    )
