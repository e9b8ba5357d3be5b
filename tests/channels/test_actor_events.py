"""The channel actor publishes typed events for what it does: metrics and /status read these."""

from __future__ import annotations

import asyncio
from typing import Any

from bot.runtime import Runtime
from tests.helpers import inbound, wait_for
from tierbot.errors import ContextOverflowError, TransientLLMError
from tierbot.events import (
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    ContextOverflow,
    EmergencyTruncation,
    Event,
    TurnCompleted,
    TurnFailed,
)
from tierbot.testing.scripted import ScriptedLLM
from tierbot.vocab import CompactionKind, Outcome

CH = "test:1"
WINDOW = 1000


def settings(respond: str = "listen") -> dict[str, Any]:
    return {
        "defaults": {
            "context_window": WINDOW,
            "system_prompt": "sys",
            "respond": respond,
            "compaction": {"min_messages_between": 0, "summary_share": 0.9},
        }
    }


def text(tokens: int) -> str:
    return "alpha " * (tokens - 5)


def record(rt: Runtime) -> list[Event]:
    """Every event the runtime's channels publish, in order."""
    seen: list[Event] = []
    rt.events.subscribe(Event, seen.append)
    return seen


def of(seen: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in seen if isinstance(e, kind)]


async def feed_until(rt: Runtime, seen: list[Event], kind: type[Event]) -> None:
    """Send 50-token messages, one settled pass at a time, until an event of ``kind``."""
    actor = await rt.registry.actor(CH)
    n = 0
    while not of(seen, kind):
        await rt.submit(inbound(CH, text(50), pid=f"f{n}"))
        await wait_for(lambda: actor.idle() or actor.compactor.running is not None)
        n += 1
    await rt.drain()


async def test_a_turn_publishes_turn_completed_for_its_channel(make_config) -> None:
    """Answering a message publishes one TurnCompleted naming the channel."""
    async with Runtime.open(make_config(settings("always")), llm=ScriptedLLM()) as rt:
        seen = record(rt)
        await rt.submit(inbound(CH, "hello there"))
        await rt.drain()
        turns = of(seen, TurnCompleted)
        assert [t.channel for t in turns] == [CH]
        assert turns[0].duration >= 0.0


async def test_a_model_failure_publishes_turn_failed_naming_the_error(make_config) -> None:
    """A turn whose model call fails publishes TurnFailed with the error's type and text."""
    llm = ScriptedLLM()
    llm.push("chat", TransientLLMError("upstream 503"))
    async with Runtime.open(make_config(settings("always")), llm=llm) as rt:
        seen = record(rt)
        await rt.submit(inbound(CH, "hello there"))
        await rt.drain()
        (failed,) = of(seen, TurnFailed)
        assert failed.channel == CH
        assert "TransientLLMError" in failed.reason and "upstream 503" in failed.reason
        assert failed.by_model
        assert of(seen, TurnCompleted), "the apology is still a completed turn"


async def test_a_provider_overflow_publishes_context_overflow_from_the_channel(
    make_config,
) -> None:
    """A prompt the provider refuses as too long publishes ContextOverflow(source=channel)."""
    llm = ScriptedLLM()
    llm.push("chat", ContextOverflowError("too long", provider="scripted", status=400))
    async with Runtime.open(make_config(settings("always")), llm=llm) as rt:
        seen = record(rt)
        await rt.submit(inbound(CH, "hello there"))
        await rt.drain()
        assert [(e.channel, e.source) for e in of(seen, ContextOverflow)] == [(CH, "channel")]


async def test_a_background_pass_publishes_started_then_finished_with_its_figures(
    make_config,
) -> None:
    """A background compaction publishes CompactionStarted, then CompactionFinished whose
    token figures show what it freed."""
    async with Runtime.open(make_config(settings()), llm=ScriptedLLM()) as rt:
        seen = record(rt)
        await feed_until(rt, seen, CompactionFinished)
        started, finished = of(seen, CompactionStarted), of(seen, CompactionFinished)
        assert started[0].kind is CompactionKind.BACKGROUND
        assert seen.index(started[0]) < seen.index(finished[0])
        done = finished[0]
        assert done.channel == CH and done.kind is CompactionKind.BACKGROUND
        assert done.tokens_after < done.tokens_before
        assert done.tokens_after == (await rt.store.compactions(CH))[0].tokens_after


async def test_a_failed_pass_publishes_compaction_failed_with_its_reason(make_config) -> None:
    """A summary call that fails publishes CompactionFailed(outcome=failed) with the reason."""
    llm = ScriptedLLM()
    llm.push("summary", TransientLLMError("upstream 503"))
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        seen = record(rt)
        await feed_until(rt, seen, CompactionFailed)
        failed = of(seen, CompactionFailed)[0]
        assert failed.outcome is Outcome.FAILED and "upstream 503" in failed.reason


async def test_an_emergency_publishes_its_usage_before_and_after(make_config) -> None:
    """A jump past 95% while summaries hang publishes EmergencyTruncation with the usage it
    found, the usage it left and how many messages it set aside."""
    llm = ScriptedLLM()
    llm.gate["summary"] = asyncio.Event()
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        seen = record(rt)
        actor = await rt.registry.actor(CH)
        for i in range(19):
            await rt.submit(inbound(CH, text(50), pid=f"f{i}"))
        await wait_for(lambda: bool(of(seen, EmergencyTruncation)))
        llm.gate["summary"].set()
        await rt.drain()
        (emergency,) = of(seen, EmergencyTruncation)
        assert emergency.usage_before >= 0.95 > emergency.usage_after
        assert emergency.set_aside > 0
        assert actor.compactor.counters["emergency"] == 1
