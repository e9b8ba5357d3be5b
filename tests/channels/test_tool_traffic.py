"""Memory-tool exchanges leave the live context once their turn is answered and another
turn follows: the window holds what people said and what the bot answered, and the
store keeps every exchange, archived."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence

from structlog.testing import capture_logs

from bot.runtime import Runtime
from tests.helpers import inbound
from tierbot.config import Config
from tierbot.llm.base import Completion, ToolCall
from tierbot.messages import Message, Role, State
from tierbot.storage import MessageStore
from tierbot.testing.scripted import ScriptedLLM

CH = "chat:tools"
MEMORY = {"memory": {"enabled": True}, "defaults": {"respond": "always"}}


def _saves(llm: ScriptedLLM, *facts: str) -> None:
    """One turn per fact: the model saves it, then says so."""
    for i, fact in enumerate(facts):
        call = ToolCall(f"s{i}", "memory_save", {"content": fact, "memory_type": "fact"})
        llm.push("chat", Completion("", tool_calls=(call,)), Completion(f"Noted: {fact}"))


def _tools(items: Sequence[Message]) -> list[str]:
    return [m.text for m in items if m.role in (Role.TOOL_CALL, Role.TOOL_RESULT)]


async def _by_state(rt: Runtime) -> dict[State, list[Message]]:
    out: dict[State, list[Message]] = {State.LIVE: [], State.ARCHIVED: []}
    async for m in rt.store.export(CH):
        out.setdefault(m.state, []).append(m)
    return out


async def test_answered_turns_memory_exchanges_are_archived_and_the_newest_stays(
    make_config: Callable[..., Config],
) -> None:
    llm = ScriptedLLM(chat_reply="OK.")
    _saves(llm, "locker code 4411", "prefers tea")
    async with Runtime.open(make_config(MEMORY), llm=llm) as rt:
        await rt.submit(inbound(CH, "My locker code is 4411.", pid="u1"))
        await rt.drain()
        actor = rt.registry.actors[CH]
        assert len(_tools(actor.ctx.items)) == 2  # its own turn's exchange stays in view
        await rt.submit(inbound(CH, "I prefer tea.", pid="u2"))
        await rt.drain()
        live = _tools(actor.ctx.items)
        assert len(live) == 2 and "prefers tea" in live[0]  # the first exchange left
        await rt.submit(inbound(CH, "lol", pid="u3"))
        await rt.drain()
        assert _tools(actor.ctx.items) == []
        roles = [m.role for m in actor.ctx.items]
        assert roles == [Role.USER, Role.ASSISTANT] * 3
        # Nothing is lost: both exchanges are in the store, archived; the window's total
        # is what is left in it.
        stored = await _by_state(rt)
        assert len(_tools(stored[State.ARCHIVED])) == 4
        assert [m.platform_id for m in stored[State.LIVE] if m.role is Role.USER] == [
            "u1",
            "u2",
            "u3",
        ]
        assert actor.ctx.message_tokens == sum(m.tokens for m in actor.ctx.items)
        # The model still had each exchange in front of it for the turn that made it.
        assert any("locker code 4411" in c.content for c in llm.calls[1].messages)


class _SwapFails:
    """The runtime's store, whose next archive without a summary fails (a disk error)."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.failures = 1

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def swap(
        self, channel: str, covered: Sequence[int], replacement: Message | None, **kw: object
    ) -> Message | None:
        if replacement is None and self.failures:
            self.failures -= 1
            raise OSError("disk I/O error")
        return await self._store.swap(channel, covered, replacement, **kw)  # type: ignore[arg-type]


async def test_an_archive_that_fails_keeps_the_exchange_live_and_the_answer_goes_out(
    make_config: Callable[..., Config],
) -> None:
    llm = ScriptedLLM(chat_reply="OK.")
    _saves(llm, "locker code 4411")
    async with Runtime.open(make_config(MEMORY), llm=llm) as rt:
        store = _SwapFails(rt.store)
        rt.registry.deps = dataclasses.replace(rt.registry.deps, store=store)  # type: ignore[arg-type]
        await rt.submit(inbound(CH, "My locker code is 4411.", pid="u1"))
        await rt.drain()
        actor = rt.registry.actors[CH]
        with capture_logs() as logs:
            await rt.submit(inbound(CH, "lol", pid="u2"))
            await rt.drain()
        kept = [e for e in logs if e["event"] == "channel.tool_traffic_kept"]
        assert len(kept) == 1 and "disk I/O error" in kept[0]["error"]
        assert kept[0]["log_level"] == "warning"
        assert [o.text for o in rt.outbox.sent] == ["Noted: locker code 4411", "OK."]
        assert len(_tools(actor.ctx.items)) == 2  # still live, still in the store as live
        assert len(_tools((await _by_state(rt))[State.LIVE])) == 2
        # The next answered turn archives it.
        await rt.submit(inbound(CH, "ok", pid="u3"))
        await rt.drain()
        assert _tools(actor.ctx.items) == []
        assert len(_tools((await _by_state(rt))[State.ARCHIVED])) == 2


async def test_an_exchange_a_compaction_covers_is_left_to_its_summary(
    make_config: Callable[..., Config],
) -> None:
    """A background pass that covers an exchange is in flight when the next turn ends:
    the exchange stays live until the pass lands, and then its summary covers it."""
    llm = ScriptedLLM(chat_reply="OK.")
    for _ in range(3):
        llm.push("chat", Completion("OK."))
    _saves(llm, "locker code 4411")
    summary_gate = asyncio.Event()
    llm.gate["summary"] = summary_gate
    cfg = make_config(
        {**MEMORY, "defaults": {"respond": "always", "compaction": {"background_fraction": 0.9}}}
    )
    async with Runtime.open(cfg, llm=llm) as rt:
        for i, text in enumerate(["Morning all.", "The build is green.", "Lunch at noon."]):
            await rt.submit(inbound(CH, text, pid=f"a{i}"))
            await rt.drain()
        await rt.submit(inbound(CH, "My locker code is 4411.", pid="u1"))
        await rt.drain()
        actor = rt.registry.actors[CH]
        exchange = {m.id for m in actor.ctx.items if m.role in (Role.TOOL_CALL, Role.TOOL_RESULT)}
        # The next turn waits for its model while a pass over the oldest 90 % starts.
        chat_gate = asyncio.Event()
        llm.gate["chat"] = chat_gate
        calls = len(llm.calls)
        await rt.submit(inbound(CH, "lol", pid="u2"))
        for _ in range(3000):  # 30 s at most
            if len(llm.calls) > calls:
                break
            await asyncio.sleep(0.01)
        assert "Compacting" in await actor.force_compaction()
        covered = {m.id for p in actor.compactor.ranges for m in p.covered}
        assert exchange <= covered
        chat_gate.set()
        for _ in range(3000):
            if len(rt.outbox.sent) == 5:
                break
            await asyncio.sleep(0.01)
        assert rt.outbox.sent[-1].text == "OK."
        assert exchange <= {m.id for m in actor.ctx.items}  # left to the pass
        summary_gate.set()
        await rt.drain()
        assert not exchange & {m.id for m in actor.ctx.items}
        summary = next(m for m in actor.ctx.items if m.role is Role.SUMMARY)
        assert exchange <= set(await rt.store.covered_by(summary.id))


async def test_in_a_nearly_full_window_the_newest_exchange_leaves_with_its_answer(
    make_config: Callable[..., Config],
) -> None:
    """Once usage is past the background threshold, the newest turn's exchange is
    archived as soon as it is answered, not kept in view: in a 2,048-token window a
    "what do you know about me?" list's recalls (~400 tokens) otherwise pushed the next
    compaction onto the list itself, and "what else?" found nothing to continue.  Below
    the threshold it stays, as the test above shows."""
    llm = ScriptedLLM(chat_reply="OK.")
    _saves(llm, "locker code 4411")
    small = {**MEMORY, "defaults": {**MEMORY["defaults"], "context_window": 1500}}
    long_note = "My locker code is 4411. " + "It is the one by the pool, " * 24
    async with Runtime.open(make_config(small), llm=llm) as rt:
        await rt.submit(inbound(CH, long_note, pid="u1"))
        await rt.drain()
        actor = rt.registry.actors[CH]
        assert actor.history.usage >= 0.75, actor.history.usage  # past 0.8 before the archive
        assert _tools(actor.ctx.items) == []
        assert actor.ctx.items[-1].role is Role.ASSISTANT  # the answer stays in view
        stored = await _by_state(rt)
        assert len(_tools(stored[State.ARCHIVED])) == 2  # kept, archived


async def test_a_nearly_full_windows_archive_that_fails_still_sends_the_answer(
    make_config: Callable[..., Config],
) -> None:
    """The early archive of a nearly full window failing in the store: the answer goes
    out, the exchange stays live and stored, and the failure is a warning naming it."""
    llm = ScriptedLLM(chat_reply="OK.")
    _saves(llm, "locker code 4411")
    small = {**MEMORY, "defaults": {**MEMORY["defaults"], "context_window": 1500}}
    long_note = "My locker code is 4411. " + "It is the one by the pool, " * 24
    async with Runtime.open(make_config(small), llm=llm) as rt:
        store = _SwapFails(rt.store)
        rt.registry.deps = dataclasses.replace(rt.registry.deps, store=store)  # type: ignore[arg-type]
        with capture_logs() as logs:
            await rt.submit(inbound(CH, long_note, pid="u1"))
            await rt.drain()
        actor = rt.registry.actors[CH]
        kept = [e for e in logs if e["event"] == "channel.tool_traffic_kept"]
        assert len(kept) == 1 and "disk I/O error" in kept[0]["error"], logs
        assert kept[0]["log_level"] == "warning"
        assert [o.text for o in rt.outbox.sent] == ["Noted: locker code 4411"]
        assert len(_tools(actor.ctx.items)) == 2
        assert len(_tools((await _by_state(rt))[State.LIVE])) == 2
