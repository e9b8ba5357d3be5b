"""Task workers through the channel actor with the scripted fake LLM; the tool registry."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from structlog.testing import capture_logs

from bot.runtime import Runtime
from branches import request_tokens
from tests import helpers
from tests.helpers import inbound, pairs_ok, wait_for
from tierbot.errors import ContextOverflowError, ToolError
from tierbot.llm.base import ChatMessage, Completion, ToolCall
from tierbot.llm.quoting import unquote
from tierbot.messages import Message, Role, State
from tierbot.store import Store
from tierbot.testing.scripted import ScriptedLLM
from tierbot.tokens import get_counter
from workers.records import read_runs, read_transcript
from workers.tools import ToolRegistry, builtin_tools, evaluate

CH = "test:1"
WINDOW = 4000
TASK = (
    "Fetch pages 1 to 60 of the report and tell me how many you got. "
    + ("Keep every page number exact; do not skip any page; report failures. " * 12).strip()
)


def settings(**task_workers: Any) -> dict[str, Any]:
    return {
        "defaults": {
            "context_window": WINDOW,
            "system_prompt": "sys",
            "respond": "always",
            "task_workers": task_workers,
        }
    }


def spawn(task: str = TASK, cid: str = "s1") -> Completion:
    return Completion(text="", tool_calls=(ToolCall(cid, "spawn_worker", {"task": task}),))


def fetch_turn(i: int) -> Completion:
    return Completion(text="", tool_calls=(ToolCall(f"f{i}", "fetch", {"page": i}),))


def register_fetch(rt: Runtime) -> None:
    """An operator tool returning ~60 tokens of page text."""
    helpers.register_fetch(rt, "beta " * 62)


async def test_worker_with_60_tool_calls_compacts_between_segments_and_keeps_its_task(
    make_config,
) -> None:
    """60 tool calls: at each segment boundary above 70% the worker compacts (below half the
    threshold), never splits a call from its result, keeps its task, stays inside the window,
    posts its result, and records everything in SQLite, dropped messages included."""
    llm = ScriptedLLM()
    with capture_logs() as logs:
        async with Runtime.open(make_config(settings()), llm=llm) as rt:
            register_fetch(rt)
            llm.push("chat", spawn(), Completion("started a worker"))
            llm.push(
                "worker",
                *[fetch_turn(i) for i in range(1, 61)],
                Completion(text="fetched 60 pages"),
            )
            await rt.submit(inbound(CH, "please fetch the report", pid="q"))
            await wait_for(lambda: len(rt.outbox.sent) == 2)
            await rt.drain()
            actor = await rt.registry.actor(CH)
            assert [o.text for o in rt.outbox.sent] == ["started a worker", "fetched 60 pages"]
            assert rt.outbox.sent[1].reply_to == "q"
            posted = [m for m in actor.ctx.items if m.meta.get("worker") == "worker-1"]
            assert [(m.role, m.text) for m in posted] == [(Role.ASSISTANT, "fetched 60 pages")]

            calls = [c for c in llm.calls if c.purpose == "worker"]
            assert len(calls) == 61
            specs = actor.delegation.worker_tools().specs()
            assert sorted(calls[0].tools) == sorted(s.name for s in specs)
            counter = get_counter()
            usage = [request_tokens(counter, c.messages, specs) / WINDOW for c in calls]
            assert max(usage) < 1.0
            assert all(pairs_ok(c.messages) for c in calls)
            assert all(c.messages[1] == ChatMessage("user", TASK) for c in calls)
            # Compaction happened exactly at the segment boundaries that crossed 70%.
            assert usage[24] > 0.70 and usage[49] > 0.70
            assert usage[25] <= 0.35 and usage[50] <= 0.35
            assert all(usage[i + 1] > usage[i] for i in range(60) if i not in (24, 49))
            assert unquote(calls[25].messages[2].content).startswith("[Recap of ")

            runs = await read_runs(rt.store, CH)
            assert [(r["kind"], r["status"], r["result"]) for r in runs] == [
                ("worker", "concluded", "fetched 60 pages")
            ]
            assert runs[0]["stats"]["compactions"] == 2 and runs[0]["stats"]["calls"] == 60
            rows = await read_transcript(rt.store, runs[0]["row"])
            recorded = [c["id"] for r in rows for c in r.tool_calls]
            assert recorded == [f"f{i}" for i in range(1, 61)]
            assert sum(r.role == "tool" for r in rows) == 60
            dropped = {r.dropped_by for r in rows if r.dropped_by}
            assert dropped == {1, 2}
            assert [r.kind for r in rows].count("recap") == 2
            assert rows[-1].content == "fetched 60 pages" and rows[1].content == TASK
    compacted = [e for e in logs if e["event"] == "worker.compacted"]
    assert [e["segment"] for e in compacted] == [1, 2]
    assert not [e for e in logs if e["event"] == "worker.overflow"]


async def test_regression_a_workers_reply_cap_shrinks_as_its_context_fills(make_config) -> None:
    """A worker asks for max_reply_tokens while its window has room for it and, as tool
    results fill its context, for what the window has left: prompt plus cap never pass the
    window (the full cap on top of a nearly full context used to)."""
    llm = ScriptedLLM()
    cfg = settings(turns_per_segment=40, max_segments=1)
    cfg["defaults"]["max_reply_tokens"] = 2000
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        register_fetch(rt)
        llm.push("chat", spawn(), Completion("started a worker"))
        llm.push("worker", *[fetch_turn(i) for i in range(1, 31)], Completion(text="30 pages"))
        await rt.submit(inbound(CH, "please fetch the report", pid="q"))
        await wait_for(lambda: len(rt.outbox.sent) == 2)
        await rt.drain()
        actor = await rt.registry.actor(CH)
        specs = actor.delegation.worker_tools().specs()
    assert rt.outbox.sent[1].text == "30 pages"
    calls = [c for c in llm.calls if c.purpose == "worker"]
    sent = [request_tokens(get_counter(), c.messages, specs) for c in calls]
    assert [c.max_tokens for c in calls] == [min(2000, WINDOW - n) for n in sent]
    assert calls[0].max_tokens == 2000 and calls[-1].max_tokens < 1000


async def test_worker_overflow_is_force_compacted_and_retried_at_most_twice(make_config) -> None:
    """Two overflows in a row are force-compacted and retried; a third fails the worker
    cleanly and the failure is posted to the channel."""
    llm = ScriptedLLM()
    overflow = ContextOverflowError("too long", provider="scripted", status=400)
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        register_fetch(rt)
        llm.push(
            "chat", spawn("first"), Completion("one"), spawn("second", "s2"), Completion("two")
        )
        llm.push(
            "worker",
            *[fetch_turn(i) for i in range(1, 6)],
            overflow,
            overflow,
            Completion(text="done after retries"),
        )
        await rt.submit(inbound(CH, "go", pid="q1"))
        await wait_for(lambda: len(rt.outbox.sent) == 2)
        calls = [c for c in llm.calls if c.purpose == "worker"]
        assert len(calls[-3].messages) > len(calls[-1].messages)
        assert calls[-1].messages[-1].content.startswith("Older context has been compacted")
        assert all(pairs_ok(c.messages) for c in calls)
        assert rt.outbox.sent[1].text == "done after retries"

        llm.push("worker", *[fetch_turn(i) for i in range(6, 14)], overflow, overflow, overflow)
        await rt.submit(inbound(CH, "again", pid="q2"))
        await wait_for(lambda: len(rt.outbox.sent) == 4)
        await rt.drain()
        assert rt.outbox.sent[3].text.startswith("(worker-2 failed: the context overflowed 3 times")
        assert rt.outbox.sent[3].reply_to == "q2"
        runs = await read_runs(rt.store, CH)
        assert [(r["status"], r["stats"].get("retries")) for r in runs] == [
            ("concluded", 2),
            ("failed", 2),
        ]


async def test_worker_limits_per_channel_and_process_wide(make_config) -> None:
    """A channel past max_concurrent_workers is refused; past the process-wide limit a worker
    waits as queued until a slot frees, and /status data shows it."""
    cfg = settings(max_concurrent=1)
    cfg["workers"] = {"task_worker_concurrency": 1}
    llm = ScriptedLLM()
    gate = asyncio.Event()
    llm.gate["worker"] = gate
    async with Runtime.open(make_config(cfg), llm=llm) as rt:
        two = (
            ToolCall("a", "spawn_worker", {"task": "one"}),
            ToolCall("b", "spawn_worker", {"task": "two"}),
        )
        llm.push(
            "chat",
            Completion(text="", tool_calls=two),
            Completion("ok a"),
            spawn("other"),
            Completion("ok b"),
        )
        await rt.submit(inbound("test:a", "go", pid="a"))
        await wait_for(lambda: len(rt.outbox.sent) == 1)
        a = await rt.registry.actor("test:a")
        spawned = [json.loads(m.text) for m in a.ctx.items if m.role is Role.TOOL_RESULT]
        assert spawned[0] == {"started": "worker-1"}
        assert "[defaults.task_workers] max_concurrent" in spawned[1]["error"]
        await rt.submit(inbound("test:b", "go", pid="b"))
        await wait_for(lambda: len(rt.outbox.sent) == 2)
        b = await rt.registry.actor("test:b")
        assert a.snapshot().background[0]["status"] == "running"
        assert b.snapshot().background[0]["status"] == "queued"
        assert llm.count("worker") == 1
        gate.set()
        await wait_for(lambda: len(rt.outbox.sent) == 4)
        await rt.drain()
        assert llm.count("worker") == 2
        assert rt.registry.deps.tasks.running["worker"] == 0


async def test_worker_past_its_timeout_fails_and_the_channel_is_told(make_config) -> None:
    """A worker slower than worker_timeout_seconds is stopped and the failure posted."""
    llm = ScriptedLLM(latency={"worker": 5.0})
    async with Runtime.open(make_config(settings(timeout_seconds=0.2)), llm=llm) as rt:
        llm.push("chat", spawn("slow task"), Completion("started"))
        await rt.submit(inbound(CH, "go", pid="q"))
        await wait_for(lambda: len(rt.outbox.sent) == 2, timeout=3.0)
        assert rt.outbox.sent[1].text == "(worker-1 failed: timed out after 0.2 s; task: slow task)"
        assert (await read_runs(rt.store, CH))[0]["status"] == "failed"


async def test_registry_turns_every_tool_failure_into_an_error_result() -> None:
    """Unknown tools, bad arguments, ToolErrors, crashes and timeouts come back as JSON errors."""
    reg = ToolRegistry()

    @reg.tool(
        description="echo",
        parameters={
            "type": "object",
            "properties": {"x": {"type": "string"}},
            "required": ["x"],
            "additionalProperties": False,
        },
    )
    async def echo(x: str) -> dict[str, str]:
        if x == "bad":
            raise ToolError("x: must not be bad", tool="echo")
        if x == "crash":
            raise RuntimeError("boom")
        return {"x": x}

    async def slow() -> str:
        await asyncio.sleep(5)
        return "late"

    reg.register("slow", slow, description="slow", timeout=0.05)

    async def run(name: str, **args: Any) -> tuple[bool, str]:
        r = await reg.run(ToolCall("1", name, args))
        return r.ok, r.text

    assert await run("echo", x="hi") == (True, '{"x": "hi"}')
    for name, args, needle in [
        ("nope", {}, "unknown tool 'nope'"),
        ("echo", {}, "missing required argument 'x'"),
        ("echo", {"x": "a", "y": 1}, "unknown argument 'y'"),
        ("echo", {"x": "bad"}, "x: must not be bad"),
        ("echo", {"x": "crash"}, "RuntimeError: boom"),
        ("slow", {}, "timed out after 0.05 s"),
    ]:
        ok, out = await run(name, **args)
        assert not ok and needle in json.loads(out)["error"], (name, out)


def test_calculate_is_arithmetic_only() -> None:
    """calculate evaluates arithmetic and refuses names, attributes, calls and huge powers."""
    assert evaluate("2 ** 10 + sqrt(16) / 4") == 1025.0
    for bad in ("__import__('os')", "(1).__class__", "open('x')", "9 ** 9 ** 9", "x + 1"):
        try:
            evaluate(bad)
        except ToolError:
            continue
        raise AssertionError(f"{bad!r} was evaluated")


async def test_conversation_search_finds_archived_messages(tmp_path) -> None:
    """conversation_search returns archived messages verbatim, best match first."""
    counter = get_counter()
    async with await Store.open(tmp_path / "t.db", synchronous="normal") as store:
        await store.append_many(
            [
                Message(
                    CH,
                    f"p{i}",
                    Role.USER,
                    t,
                    "u1",
                    "ann",
                    tokens=counter.count_message(t),
                    state=State.ARCHIVED if i == 0 else State.LIVE,
                )
                for i, t in enumerate(["the deploy key rotates on Mondays", "lunch is at noon"])
            ]
        )
        tools = builtin_tools(CH, store=store)
        r = await tools.run(ToolCall("1", "conversation_search", {"query": "deploy key rotation"}))
        hits = json.loads(r.text)
        assert hits[0]["content"] == "the deploy key rotates on Mondays"
        assert hits[0]["archived"] is True and hits[0]["author"] == "ann"
        assert len(hits) == 1
