"""Compaction that keeps up: re-checks of quiet channels, passes in flight side by side,
and rescues of emergency set-asides in bounded, ordered chunks."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from bot.runtime import Runtime
from compactor.scheduler import rescue_chunk
from tests.channels.test_compaction import (
    CH,
    barely_smaller,
    consistent,
    covered_tokens,
    settings,
    summary_of,
    text,
)
from tests.helpers import export_ids, inbound, wait_for
from tierbot.errors import StoreError, TransientLLMError
from tierbot.events import CompactionFailed
from tierbot.llm.base import ChatMessage, Completion
from tierbot.messages import Message, Role
from tierbot.testing.scripted import ScriptedLLM

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
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
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
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
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


async def test_a_summary_the_store_refuses_fails_its_pass_and_frees_the_range_held_behind_it(
    make_config,
) -> None:
    """The store refusing every write (a full disk) when the oldest range's summary comes
    back fails that pass and says so; the later range held behind it is taken in turn,
    not left waiting for a swap that will never come (an import waiting for room would
    wait forever).  Once the store writes again, the channel compacts on its own and
    keeps every message."""
    llm = ScriptedLLM()
    llm.hold[0] = asyncio.Event()
    cfg = settings()
    cfg["workers"] = {"retry_base_seconds": 0.05, "retry_max_seconds": 0.05}
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        failed: list[CompactionFailed] = []
        rt.events.subscribe(CompactionFailed, failed.append)
        n = 0
        while llm.count("summary") < 2:
            await rt.submit(inbound(CH, text(20), pid=f"f{n}"))
            await entered(actor)
            n += 1
        await wait_for(lambda: bool(actor.compaction.held))
        writes = rt.store.write
        refusing = True

        async def write(op: Any) -> Any:
            if refusing:
                raise StoreError("cannot write to the store at bot.db: database or disk is full")
            return await writes(op)

        rt.store.write = write  # type: ignore[method-assign]
        llm.hold[0].set()
        await wait_for(lambda: len(failed) >= 2 and not actor.compaction.held)
        assert "database or disk is full" in failed[0].reason
        assert not actor.ctx.summaries()
        assert actor.compactor.counters["background"] == 0
        refusing = False
        await asyncio.wait_for(actor.make_room(0), 15)
        await wait_for(lambda: actor.idle() and actor.usage < 0.80, timeout=15)
        assert actor.ctx.summaries()
        await consistent(rt, [f"f{i}" for i in range(n)])


# -- the background tiers keep up ---------------------------------------------------------


async def burst(make_config: Any, parallel: int, latency: int, n: int) -> Any:
    key = f"burst:{parallel}"
    """Send ``n`` 20-token messages; every summary call finishes ``latency`` messages after
    it started (a clock counted in messages, so the machine's speed does not matter)."""
    llm = ScriptedLLM()
    llm.tickets["summary"] = asyncio.Semaphore(0)
    llm.push("summary", *[quarter] * 1000)
    cfg = settings(parallel_compactions=parallel, min_messages_between=4, summary_share=0.3)
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
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
                await wait_for(lambda n=released: finished(actor) >= n)
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


# -- rescues in bounded pieces -------------------------------------------------------------


async def leaves(rt: Runtime, summary_id: int) -> list[int]:
    """Summaries under ``summary_id`` that cover messages (a meta-summary covers summaries)."""
    members = await rt.store.get_messages(await rt.store.covered_by(summary_id))
    members.sort(key=lambda m: (m.pos, m.id))  # history order, not creation order
    if members and all(m.role is Role.SUMMARY for m in members):
        return [leaf for m in members for leaf in await leaves(rt, m.id)]
    return [summary_id]


async def test_emergency_set_aside_of_1500_messages_comes_back_as_ordered_chunks_and_a_meta(
    make_config,
) -> None:
    """1,520 messages set aside by one emergency are rescued as several summaries of at
    most 200 messages, in order, merged into a meta-summary; every set-aside message is
    linked to exactly one summary, tool pairs stay together, and the live context keeps
    the gist (no marker left)."""
    llm = ScriptedLLM()
    llm.gate["summary"] = asyncio.Event()
    llm.push("summary", *[lambda msgs: summary_of(300)] * 100)
    cfg = settings(emergency_fraction=0.95, summary_share=0.1)
    cfg["defaults"]["context_window"] = 16_000
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        # A history that no longer fits (as after a restart with a smaller window): the
        # channel truncates at once when it starts.
        history = []
        for i in range(1600):
            role = Role.USER
            meta: dict[str, Any] = {}
            # The first chunk of 200 would end between the call at 199 and its result.
            if i == 199 or i % 200 == 149:
                role, meta = (
                    Role.TOOL_CALL,
                    {"calls": [{"id": f"c{i}", "name": "x", "arguments": {}}]},
                )
            elif i == 200 or i % 200 == 150:
                role, meta = Role.TOOL_RESULT, {"call_id": f"c{i - 1}"}
            history.append(
                Message(
                    CH,
                    f"h{i}",
                    role,
                    "alpha " * 5,
                    "alice",
                    "alice",
                    ts=float(i),
                    tokens=10,
                    meta=meta,
                )
            )
        await rt.store.append_many(history)
        actor = await rt.registry.actor(CH)
        await wait_for(lambda: any(m.role is Role.MARKER for m in actor.ctx.items))
        assert actor.compactor.counters["emergency"] == 1
        marker = next(m for m in actor.ctx.items if m.role is Role.MARKER)
        aside = set(marker.meta["set_aside"])
        assert len(aside) >= 1500
        llm.gate["summary"].set()
        await wait_for(
            lambda: actor.idle() and not any(m.role is Role.MARKER for m in actor.ctx.items),
            timeout=30,
        )
        await rt.drain()
        live = await rt.store.load_live(CH)
        by_id = {m.id: m for m in await rt.store.get_messages(sorted(aside))}

        summaries = [m for m in live if m.role is Role.SUMMARY]
        assert any(s.meta.get("level", 1) >= 2 for s in summaries)
        chunks: list[list[int]] = []
        for s in summaries:
            for leaf in await leaves(rt, s.id):
                # The last chunk's summary also replaces the marker itself.
                chunks.append([i for i in await rt.store.covered_by(leaf) if i != marker.id])
        assert len(chunks) >= 7
        assert all(len(c) <= 201 for c in chunks)
        linked = [i for c in chunks for i in c]
        assert sorted(linked) == sorted(aside)  # every one exactly once
        # In order: each chunk follows the previous one in the history.
        assert all(max(a) < min(b) for a, b in itertools.pairwise(chunks))
        for c in chunks:
            calls = {by_id[i].meta["calls"][0]["id"] for i in c if by_id[i].role is Role.TOOL_CALL}
            results = {by_id[i].meta["call_id"] for i in c if by_id[i].role is Role.TOOL_RESULT}
            assert calls == results
        assert actor.compactor.counters["rescue"] == len(chunks)


def test_rescue_chunk_is_bounded_and_keeps_a_tool_pair_whole() -> None:
    """A chunk stops at its message or token bound, oldest first, except to finish a tool
    call with its result."""

    def msg(i: int, role: Role = Role.USER) -> Message:
        return Message(CH, f"p{i}", role, "x", "a", "a", ts=0.0, tokens=10, id=i, pos=float(i))

    plain = [msg(i) for i in range(10, 0, -1)]
    assert [m.id for m in rescue_chunk(plain, 1000, 4)] == [1, 2, 3, 4]
    assert [m.id for m in rescue_chunk(plain, 35, 100)] == [1, 2, 3]
    paired = [msg(1), msg(2), msg(3, Role.TOOL_CALL), msg(4, Role.TOOL_RESULT), msg(5)]
    assert [m.id for m in rescue_chunk(paired, 1000, 3)] == [1, 2, 3, 4]
    assert [m.id for m in rescue_chunk([msg(7)], 1, 1)] == [7]


async def test_memories_of_a_pass_are_saved_together_and_a_bad_one_gets_its_own_error(
    make_config,
) -> None:
    """A pass's memory_save calls are saved in one go; a call with a bad memory_type is
    answered with an error naming it, and the others are still saved."""
    from tierbot.llm.base import ToolCall

    def saves(msgs: list[ChatMessage]) -> Completion:
        calls = tuple(
            ToolCall(
                f"s{i}",
                "memory_save",
                {
                    "content": f"Dana owns release {i} of kestrel.",
                    "memory_type": kind,
                    "source_ids": ["f0"],
                },
            )
            for i, kind in enumerate(["fact", "bogus", "decision"])
        )
        return Completion("", calls)

    llm = ScriptedLLM()
    llm.push("summary", saves, Completion(text="Dana owns the kestrel releases."))
    cfg = settings(parallel_compactions=1)
    cfg["memory"] = {"enabled": True}
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        await rt.submit(inbound(CH, text(50), pid="f0", author="dana"))
        for i in range(1, 40):
            await rt.submit(inbound(CH, text(50), pid=f"f{i}"))
            if llm.count("summary") >= 2:
                break
        await rt.drain()
        answered = next(c.messages for c in llm.calls if any(m.role == "tool" for m in c.messages))
        results = {m.tool_call_id: m.content for m in answered if m.role == "tool"}
        assert '"id"' in results["s0"] and '"id"' in results["s2"]
        assert "memory_type" in results["s1"] and "error" in results["s1"]
        assert await rt.memory.count(CH) >= 2


def test_a_fast_channel_starts_its_passes_early_by_what_arrives_during_one() -> None:
    """Once a pass's duration is known, a channel filling fast starts the next pass that
    much below background_threshold (never more than a quarter below); a cold or slow
    channel starts at the threshold."""
    from compactor.scheduler import Pace, start_threshold
    from tierbot.config import CompactionConfig

    cfg = CompactionConfig()
    pace = Pace()
    for k in range(50):  # 50 tokens every 0.1 s: 500 tokens/s
        pace.arrived(50, now=k * 0.1)
    assert start_threshold(cfg, pace.lead(8000, now=5.0)) == cfg.background_threshold
    pace.took(0.8)  # one pass took 0.8 s: 400 tokens, 5% of an 8k window, arrive meanwhile
    assert abs(start_threshold(cfg, pace.lead(8000, now=5.0)) - 0.75) < 0.01
    assert start_threshold(cfg, pace.lead(1000, now=5.0)) == 0.75 * cfg.background_threshold
    assert pace.lead(8000, now=60.0) == 0.0  # quiet for a minute: no lead
    off = CompactionConfig(predictive_start=False)
    assert start_threshold(off, pace.lead(1000, now=5.0)) == off.background_threshold


async def test_a_later_range_that_finishes_first_waits_and_summaries_land_in_order(
    make_config,
) -> None:
    """While the oldest range's summary is slow, a second pass on the next range runs;
    its summary waits for the first one, and both land in history order."""
    llm = ScriptedLLM()
    llm.hold[0] = asyncio.Event()
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        n = 0
        while llm.count("summary") < 2:
            await rt.submit(inbound(CH, text(20), pid=f"f{n}"))
            await entered(actor)
            n += 1
        first, second = actor.compactor.ranges
        assert not {m.id for m in first.covered} & {m.id for m in second.covered}
        assert max(m.pos for m in first.covered) < min(m.pos for m in second.covered)
        # The second summary is back, but it is not swapped in before the first.
        await wait_for(lambda: bool(actor.compaction.held))
        assert not actor.ctx.summaries()
        assert actor.compactor.counters["emergency"] == 0
        llm.hold[0].set()
        await rt.drain()
        summaries = actor.ctx.summaries()
        assert [s.meta["covers"] for s in summaries] == [len(first.covered), len(second.covered)]
        assert summaries[0].pos < summaries[1].pos
        assert sorted(await export_ids(rt, CH)) == sorted(f"f{i}" for i in range(n))
