"""Tiered compaction end to end through the channel actor, with a scripted fake LLM."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from bot.cli import replay
from bot.runtime import Runtime
from channels import ChannelActor
from tests.helpers import export_ids, inbound, wait_for
from tierbot.errors import TransientLLMError
from tierbot.llm.base import Completion
from tierbot.llm.quoting import unquote
from tierbot.messages import Role
from tierbot.testing.scripted import ScriptedLLM
from tierbot.vocab import CompactionKind

CH = "test:1"
WINDOW = 1000


def settings(**compaction: Any) -> dict[str, Any]:
    """A listen-only channel with a 1,000-token window and a 5-token system prompt."""
    return {
        "defaults": {
            "context_window": WINDOW,
            "system_prompt": "sys",
            "respond": "listen",
            "compaction": {"min_messages_between": 0, "summary_share": 0.9, **compaction},
        }
    }


def text(tokens: int) -> str:
    """A message text that costs exactly ``tokens`` tokens in the history (with overhead)."""
    return "alpha " * (tokens - 5)


async def fill(rt: Runtime, until: float, size: int = 50, prefix: str = "f") -> ChannelActor:
    """Add ``size``-token messages one by one until usage reaches ``until``."""
    actor = await rt.registry.actor(CH)
    n = 0
    while actor.usage < until:
        await rt.submit(inbound(CH, text(size), pid=f"{prefix}{n}"))
        await wait_for(lambda: actor.idle() or actor.compactor.running is not None)
        await asyncio.sleep(0)
        n += 1
    return actor


def covered_tokens(messages: list[Any]) -> int:
    """Tokens of the messages a summary request covers (from its transcript)."""
    from tierbot.llm.transcript import parse_transcript
    from tierbot.tokens import get_counter

    entries = parse_transcript(unquote(messages[-1].content))
    return sum(get_counter().count_message(e.text) for e in entries)


def barely_smaller(messages: list[Any], free: int = 2) -> Completion:
    """A summary whose history entry is ``free`` tokens smaller than what it covers."""
    from tierbot.llm.transcript import parse_transcript
    from tierbot.tokens import get_counter

    n_entries = len(parse_transcript(unquote(messages[-1].content)))
    goal = covered_tokens(messages) - free
    header = f"[Summary of {n_entries} earlier messages]\n"
    n = goal
    while n > 1 and get_counter().count_message(header + "summary " * n) > goal:
        n -= 1
    return summary_of(n)


def summary_of(tokens: int) -> Completion:
    return Completion(text="summary " * tokens)


async def consistent(rt: Runtime, expected: list[str]) -> None:
    """Every message is exported exactly once and every live summary covers archived ones."""
    ids = await export_ids(rt, CH)
    assert sorted(ids) == sorted(expected)
    assert len(set(ids)) == len(ids)
    live = await rt.store.load_live(CH)
    live_ids = {m.id for m in live}
    for m in live:
        if m.role in (Role.SUMMARY, Role.MARKER):
            assert not set(await rt.store.covered_by(m.id)) & live_ids


# -- tiers and fractions ----------------------------------------------------------------


async def test_background_fires_at_80_percent_and_not_below(make_config) -> None:
    """No compaction below 0.80; at the first message reaching it, 30% of messages go."""
    llm = ScriptedLLM()
    llm.gate["summary"] = asyncio.Event()
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        seen_below = []
        n = 0
        while actor.compactor.running is None:
            seen_below.append(actor.usage)
            await rt.submit(inbound(CH, text(50), pid=f"f{n}"))
            await wait_for(lambda: actor.idle() or actor.compactor.running is not None)
            n += 1
        assert max(seen_below) < 0.80
        assert 0.80 <= actor.usage < 0.85
        plan = actor.compactor.running
        assert plan.kind is CompactionKind.BACKGROUND
        assert len(plan.covered) == math.ceil(0.30 * n)
        assert [m.platform_id for m in plan.covered] == [f"f{i}" for i in range(len(plan.covered))]
        llm.gate["summary"].set()
        await rt.drain()
        assert actor.compactor.counters["background"] == 1
        assert actor.usage < 0.80


async def test_aggressive_takes_half_at_85_percent(make_config) -> None:
    """A jump to >= 0.85 (below 0.95) compacts the oldest 50% in the background."""
    llm = ScriptedLLM()
    llm.gate["summary"] = asyncio.Event()
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        actor = await fill(rt, 0.70)
        live = len(actor.ctx)
        await rt.submit(inbound(CH, text(170), pid="big"))
        await wait_for(lambda: actor.compactor.running is not None)
        assert 0.85 <= actor.usage < 0.95
        assert actor.compactor.running.kind is CompactionKind.AGGRESSIVE
        assert len(actor.compactor.running.covered) == math.ceil(0.5 * (live + 1))
        llm.gate["summary"].set()
        await rt.drain()


async def test_one_compaction_at_a_time_and_aggressive_is_remembered(make_config) -> None:
    """With parallel_compactions = 1, while a background job runs no second starts; an
    aggressive trigger runs after it."""
    llm = ScriptedLLM()
    llm.gate["summary"] = asyncio.Event()
    # The first summary frees only a few tokens, so usage stays above 0.85 after it lands.
    llm.push("summary", barely_smaller)
    async with Runtime.open(make_config(settings(parallel_compactions=1)), llm=llm) as rt:
        actor = await fill(rt, 0.80)
        assert actor.compactor.running.kind is CompactionKind.BACKGROUND
        await fill(rt, 0.90, size=20, prefix="g")
        await asyncio.sleep(0.05)
        assert llm.count("summary") == 1
        assert actor.compactor.pending_aggressive
        llm.gate["summary"].set()
        await wait_for(lambda: actor.compactor.counters["background"] == 1)
        await rt.drain()
        assert llm.count("summary") == 2
        assert actor.compactor.counters["aggressive"] == 1
        assert not actor.compactor.pending_aggressive


async def test_loop_guard_waits_for_new_messages(make_config) -> None:
    """After a compaction the next needs min_messages_between new messages (or the
    loop guard's time, here far away)."""
    llm = ScriptedLLM()
    llm.push("summary", barely_smaller)
    cfg = settings(min_messages_between=3, loop_guard_seconds=3600)
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        actor = await fill(rt, 0.80, size=40)
        await rt.drain()
        assert llm.count("summary") == 1
        assert actor.usage >= 0.80  # still over: only the guard holds the next one back
        for i in range(2):
            await rt.submit(inbound(CH, "tiny", pid=f"t{i}"))
            await rt.drain()
        assert llm.count("summary") == 1
        await rt.submit(inbound(CH, "tiny", pid="t2"))
        await rt.drain()
        assert llm.count("summary") == 2


# -- emergency and the swap ------------------------------------------------------------------


async def test_emergency_truncates_at_once_even_while_a_worker_runs(make_config) -> None:
    """At 0.95 half the messages leave immediately behind a marker; the worker's summary
    still lands later without duplicating or losing anything."""
    llm = ScriptedLLM()
    llm.gate["summary"] = asyncio.Event()
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        actor = await fill(rt, 0.80)
        running = actor.compactor.running
        assert running is not None
        await rt.submit(inbound(CH, text(200), pid="huge"))
        # The counter moves before the swap commits; the marker enters after it.
        await wait_for(lambda: any(m.role is Role.MARKER for m in actor.ctx.items))
        assert actor.compactor.counters["emergency"] == 1
        assert actor.usage < 0.95
        markers = [m for m in actor.ctx.items if m.role is Role.MARKER]
        assert len(markers) == 1 and "set aside" in markers[0].text
        assert llm.count("summary") == 1  # the marker needed no LLM
        llm.gate["summary"].set()
        await rt.drain()
        expected = [f"f{i}" for i in range(100) if f"f{i}" in await export_ids(rt, CH)]
        await consistent(rt, [*expected, "huge"])
        roles = [m.role for m in actor.ctx.items]
        assert Role.MARKER not in roles  # the rescue job summarized what was set aside
        assert roles[0] is Role.SUMMARY


async def test_messages_arriving_mid_compaction_stay_in_order(make_config) -> None:
    """The summary replaces exactly the covered messages; newer ones stay untouched, in order."""
    llm = ScriptedLLM()
    llm.gate["summary"] = asyncio.Event()
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        actor = await fill(rt, 0.80)
        covered = {m.platform_id for m in actor.compactor.running.covered}
        before = [m.platform_id for m in actor.ctx.items if m.platform_id not in covered]
        for i in range(3):
            await rt.submit(inbound(CH, "late arrival", pid=f"late{i}"))
        await wait_for(lambda: any(m.platform_id == "late2" for m in actor.ctx.items))
        llm.gate["summary"].set()
        await rt.drain()
        items = list(actor.ctx.items)
        assert items[0].role is Role.SUMMARY
        assert [m.platform_id for m in items[1:]] == [*before, "late0", "late1", "late2"]
        assert items[0].meta["covers"] == len(covered)


async def test_summary_survives_restart_and_live_context_resumes(make_config) -> None:
    """After a restart the channel's live context is exactly what it was."""
    cfg = make_config(settings())
    async with Runtime.open(cfg, llm=ScriptedLLM()) as rt:
        actor = await fill(rt, 0.85)
        await rt.drain()
        before = [(m.platform_id, m.tokens) for m in actor.ctx.items]
        total = actor.ctx.total
    async with Runtime.open(cfg, llm=ScriptedLLM()) as rt:
        actor = await rt.registry.actor(CH)
        assert [(m.platform_id, m.tokens) for m in actor.ctx.items] == before
        assert actor.ctx.total == total


async def test_meta_summaries_keep_summaries_from_filling_the_context(make_config) -> None:
    """When summaries exceed their share, the oldest merge into a level-2 meta-summary."""
    llm = ScriptedLLM()
    llm.push("summary", *[lambda msgs: summary_of(40)] * 50)
    async with Runtime.open(make_config(settings(summary_share=0.2)), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        for i in range(120):
            await rt.submit(inbound(CH, text(40), pid=f"m{i}"))
            await rt.drain()
        summaries = actor.ctx.summaries()
        assert any(s.meta.get("level", 1) >= 2 for s in summaries)
        assert actor.compactor.counters["meta"] >= 1
        assert sum(s.tokens for s in summaries) <= 0.2 * WINDOW + 60
        meta = next(s for s in summaries if s.meta.get("level", 1) >= 2)
        members = await rt.store.get_messages(await rt.store.covered_by(meta.id))
        assert members and all(m.role is Role.SUMMARY for m in members)
        await consistent(rt, [f"m{i}" for i in range(120)])


async def test_tool_call_and_result_are_never_split(make_config) -> None:
    """A compaction never covers a tool call without its result (or the reverse)."""
    from tierbot.llm.base import ToolCall

    llm = ScriptedLLM()
    cfg = settings()
    cfg["defaults"]["respond"] = "always"
    for i in range(20):
        llm.push(
            "chat",
            Completion("", (ToolCall(f"c{i}", "lookup", {"q": "x" * 40}),)),
            Completion("alpha " * 20),
        )
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        for i in range(20):
            await rt.submit(inbound(CH, text(30), pid=f"u{i}"))
            await rt.drain()
        assert actor.compactor.counters["background"] + actor.compactor.counters["aggressive"]
        for s in actor.ctx.summaries():
            members = await rt.store.get_messages(await rt.store.covered_by(s.id))
            calls = {m.meta.get("calls")[0]["id"] for m in members if m.role is Role.TOOL_CALL}
            results = {m.meta.get("call_id") for m in members if m.role is Role.TOOL_RESULT}
            assert calls == results


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        (TransientLLMError("upstream 503"), "TransientLLMError"),
        (Completion(text="   "), "empty summary"),
        (Completion(text="summary " * 5000), "exceeds max_summary_tokens"),
    ],
)
async def test_failed_compaction_keeps_messages_and_retries(make_config, step, reason) -> None:
    """An LLM error, empty or oversized summary leaves the messages live, is counted and
    logged, releases the lock, and the retry follows when the backoff expires."""
    llm = ScriptedLLM()
    llm.push("summary", step)
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        n = 0
        while llm.count("summary") == 0:
            await rt.submit(inbound(CH, text(50), pid=f"f{n}"))
            await wait_for(lambda: actor.idle() or actor.compactor.running is not None)
            n += 1
        await wait_for(lambda: actor.compactor.counters["failed"] == 1)
        # The lock was released; with no new message the retry (backoff 0 s) succeeds.
        await wait_for(lambda: actor.compactor.counters["background"] == 1)
        await rt.drain()
        # Read once drained: the counter moves before the failure's record commits.
        errors = [r for r in await rt.store.compactions(CH) if r.outcome == "failed"]
        assert len(errors) == 1 and reason in errors[0].reason
        assert llm.count("summary") == 2
        assert actor.compactor.counters["background"] == 1
        assert actor.compactor.running is None
        assert len(await export_ids(rt, CH)) == n


async def test_timeout_is_a_failure_not_a_hang(make_config) -> None:
    """A summary slower than compaction_timeout_seconds fails cleanly."""
    llm = ScriptedLLM(latency={"summary": 5.0})
    cfg = settings()
    cfg["workers"] = {"compaction_timeout_seconds": 0.2, "retry_base_seconds": 60.0}
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        actor = await fill(rt, 0.80)
        live = len(actor.ctx)
        await wait_for(lambda: actor.compactor.counters["failed"] == 1)
        await rt.drain()
        assert actor.compactor.running is None
        assert len(actor.ctx) == live
        assert "timed out" in (await rt.store.compactions(CH))[0].reason


async def test_compaction_that_frees_nothing_is_widened_not_retried_on_the_same_messages(
    make_config,
) -> None:
    """A summary no smaller than what it covers is a no-op and never re-run as is: the
    next pass, at once, takes a wider cut, until the same summary size does beat it."""
    llm = ScriptedLLM()
    llm.push("summary", *[lambda msgs: summary_of(400)] * 10)
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        n = 0
        while not await rt.store.compactions(CH):
            await rt.submit(inbound(CH, text(50), pid=f"f{n}"))
            await rt.drain()
            n += 1
        records = list(reversed(await rt.store.compactions(CH)))  # oldest first
        *noops, ok = records
        assert noops and all(r.outcome == "noop" for r in noops) and ok.outcome == "ok"
        assert all(r.tokens_after == r.tokens_before for r in noops), "a no-op changes nothing"
        widths = [r.covered for r in records]
        assert widths == sorted(set(widths)), f"each pass covers more than the last: {widths}"
        assert ok.tokens_after < ok.tokens_before
        summarized = [tuple(m.content for m in c.messages) for c in llm.calls]
        assert len(set(summarized)) == len(summarized) == len(records)
        assert actor.usage < 0.80


async def test_persistent_failures_still_keep_the_channel_under_its_window(make_config) -> None:
    """If every summary fails, emergency truncation still bounds usage below 1.0."""
    llm = ScriptedLLM()
    llm.push("summary", *[TransientLLMError("down")] * 500)
    cfg = settings()
    # A long backoff: the failed pass is not retried within the test, as if the provider
    # stayed down.
    cfg["workers"] = {"retry_base_seconds": 3600.0, "retry_max_seconds": 3600.0}
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        actor = await rt.registry.actor(CH)
        for i in range(80):
            await rt.submit(inbound(CH, text(50), pid=f"m{i}"))
            await rt.drain()
            assert actor.usage < 1.0
        assert actor.compactor.counters["emergency"] >= 1
        await consistent(rt, [f"m{i}" for i in range(80)])


# -- the replay acceptance test --------------------------------------------------------------


def chat_lines(n: int, prefix: str = "r") -> tuple[list[str], int]:
    """``n`` replay lines of 20-40 words each, and their tokens in the history."""
    import random

    from tierbot.tokens import get_counter

    vocab = (
        "we decided to ship the release on friday after alice reviewed the migration and bob "
        "said the dashboard still needs alerts for queue depth while carol prefers postgres "
        "over mysql because the team knows it and the deadline is tight"
    ).split()
    rng = random.Random(13)
    counter = get_counter()
    lines, total = [], 0
    for i in range(n):
        words = [rng.choice(vocab) for _ in range(rng.randint(20, 40))]
        t = f"message {i}: " + " ".join(words) + "."
        total += counter.count_message(t)
        lines.append(json.dumps({"id": f"{prefix}{i}", "author": f"user{i % 7}", "text": t}))
    return lines, total


@pytest.mark.slow
async def test_replay_of_2000_messages_into_a_twentieth_window(make_config, tmp_path: Path) -> None:
    """2,000 chat-length messages replayed into a window 1/20 of the transcript: the import
    waits for compaction instead of outrunning it, so at most 3 emergencies, it ends below
    the background threshold, never reaches 1.0, and every message is exported once."""
    lines, total = chat_lines(2000)
    path = tmp_path / "replay.jsonl"
    path.write_text("\n".join(lines) + "\n")
    cfg = make_config({"defaults": {"context_window": total // 20}})
    report = await replay(cfg, path, "replay:1", listen_only=True)
    assert report["messages_in"] == 2000
    assert report["compactions"]["emergency"] <= 3
    assert report["final_usage"] < cfg.defaults.compaction.background_threshold
    assert report["peak_usage"] < 1.0
    assert report["archived_messages"] + report["live_messages"] == 2000
    async with Runtime.open(cfg, llm=ScriptedLLM()) as rt:
        ids = [m.platform_id async for m in rt.store.export("replay:1")]
    assert ids == [f"r{i}" for i in range(2000)]
