"""The ops endpoint: /health against a real Discord adapter and its fake, /metrics and /status."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.adapters.discord import DiscordAdapter
from bot.cli import read_replay
from bot.ops import OpsServer
from bot.runtime import Runtime
from tests.helpers import inbound, wait_for
from tierbot.config import Config
from tierbot.errors import TransientLLMError
from tierbot.events import EmergencyTruncation
from tierbot.llm.base import Completion, ToolCall, Usage
from tierbot.testing import FakeDiscord
from tierbot.testing.scripted import ScriptedLLM, default_summary

CH = "replay:1"
GUILD, CHANNEL = "111", "1001"


async def get(http: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    async with http.get(url) as resp:
        if resp.content_type == "application/json":
            return resp.status, await resp.json()
        return resp.status, await resp.text()


async def until(
    http: aiohttp.ClientSession, url: str, ok: Callable[[int, Any], bool], within: float = 10.0
) -> tuple[int, Any]:
    """Poll ``url`` until ``ok(status, body)``; fail with the last answer after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        status, body = await get(http, url)
        if ok(status, body):
            return status, body
        if time.monotonic() > deadline:
            raise AssertionError(f"last answer: {status} {body}")
        await asyncio.sleep(0.05)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a /metrics page, parsed by prometheus-client's own parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(page: dict[Any, float], name: str, **labels: str) -> float:
    return page.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.slow
async def test_health_follows_the_discord_fake_going_away_and_coming_back(
    make_config: Callable[..., Config], llm: ScriptedLLM
) -> None:
    """/health is 503 naming discord while its server is gone, 200 again once it returns."""
    async with FakeDiscord(heartbeat_ms=500) as fake:
        fake.add_guild(GUILD, "home", {CHANNEL: "general"})
        cfg = make_config(
            {
                "adapters": {
                    "discord": {
                        "enabled": True,
                        "api_base": fake.api_base,
                        "gateway_url": fake.gateway_url,
                    }
                }
            }
        )
        adapter = DiscordAdapter(
            cfg.adapters.discord,
            environ={"DISCORD_TOKEN": fake.token},
            guild_ready_timeout=0.05,
            ready_timeout=5.0,
        )
        async with (
            Runtime.open(cfg, llm=llm) as rt,
            OpsServer(rt, port=0) as ops,
            aiohttp.ClientSession() as http,
        ):
            health = f"{ops.url}/health"
            status, body = await get(http, health)
            assert status == 503 and body["failing"] == ["adapter:discord: not started"]
            assert await rt.start_adapter(adapter)
            status, body = await get(http, health)
            assert status == 200 and body["checks"] == {"store": "ok", "adapter:discord": "ok"}

            await fake.close()
            status, body = await until(http, health, lambda s, b: s == 503)
            assert body["failing"] == ["adapter:discord: not connected"]
            assert body["checks"]["store"] == "ok"

            await fake.start()
            await until(http, health, lambda s, b: s == 200, within=15.0)


async def test_health_names_the_store_when_it_cannot_take_a_write(
    runtime: Runtime,
) -> None:
    """With the store closed under it, /health is 503 and its failing check is the store."""
    async with OpsServer(runtime, port=0) as ops, aiohttp.ClientSession() as http:
        assert (await get(http, f"{ops.url}/health"))[0] == 200
        await runtime.store.aclose()
        status, body = await get(http, f"{ops.url}/health")
    assert status == 503
    assert body["failing"] == ["store: cannot write: the store is closed"]


def replay_file(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "replay.jsonl"
    lines = [
        json.dumps({"id": f"r{i}", "author": "alice", "text": "alpha " * 45}) for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_metrics_parse_and_their_counters_move_with_a_replay(
    make_config: Callable[..., Config], tmp_path: Path
) -> None:
    """After replaying 30 messages through the runtime, /metrics (parsed by prometheus-client)
    shows them in, the replies out, turns, LLM calls and tokens, compactions and usage."""
    llm = ScriptedLLM()
    llm.push(
        "summary", *[lambda msgs: Completion(default_summary(msgs).text, usage=Usage(400, 20))] * 20
    )
    cfg = make_config(
        {
            "defaults": {
                "context_window": 1000,
                "system_prompt": "sys",
                "compaction": {"min_messages_between": 0, "summary_share": 0.9},
            }
        }
    )
    async with (
        Runtime.open(cfg, llm=llm) as rt,
        OpsServer(rt, port=0) as ops,
        aiohttp.ClientSession() as http,
    ):
        status, text = await get(http, f"{ops.url}/metrics")
        assert status == 200
        before = samples(text)
        for message in read_replay(replay_file(tmp_path, 30), CH):
            await rt.submit(message)
        await rt.drain()
        after = samples((await get(http, f"{ops.url}/metrics"))[1])
        usage = (await rt.registry.actor(CH)).usage

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("tierbot_messages_in_total", adapter="replay") == 30
    assert moved("tierbot_messages_stored_total") == 30
    turns = moved("tierbot_turn_duration_seconds_count")
    assert 1 <= turns <= 30
    # Each turn sent one reply (no notices configured).
    assert moved("tierbot_messages_out_total", adapter="replay") == turns
    chat = moved("tierbot_llm_calls_total", provider="scripted", purpose="chat", outcome="ok")
    assert chat == turns
    summaries = moved(
        "tierbot_llm_calls_total", provider="scripted", purpose="summary", outcome="ok"
    )
    assert summaries >= 1
    assert (
        moved("tierbot_llm_tokens_total", provider="scripted", purpose="summary", direction="input")
        == 400 * summaries
    )
    # Every summary call ended one LLM-backed compaction (emergencies call no LLM).
    ended = sum(
        moved("tierbot_compactions_total", tier=t, outcome=o)
        for t in ("background", "aggressive", "rescue", "meta")
        for o in ("ok", "noop", "failed")
    )
    assert ended == summaries
    # Which tier ran depends on how fast the summaries came back (a slow machine lets
    # usage reach the aggressive tier first): one of the two did, and its metrics moved.
    tiers = ("background", "aggressive")
    assert sum(moved("tierbot_compaction_duration_seconds_count", tier=t) for t in tiers) >= 1
    assert sum(moved("tierbot_compaction_tokens_freed_total", tier=t) for t in tiers) > 0
    assert value(after, "tierbot_context_usage_ratio", channel=CH) == pytest.approx(usage)
    assert value(after, "tierbot_channels_live") == 1
    assert value(after, "tierbot_pool_slots", pool="compaction") == 4
    assert moved("tierbot_emergency_truncations_total") == moved(
        "tierbot_compactions_total", tier="emergency", outcome="ok"
    )


async def test_llm_errors_and_emergencies_are_counted_and_listed_as_recent_failures(
    make_config: Callable[..., Config],
) -> None:
    """A failing chat call counts as an LLM error by kind; an emergency truncation counts,
    and both show up in /status recent_failures."""
    llm = ScriptedLLM()
    llm.push("chat", TransientLLMError("upstream 503", provider="scripted"))
    llm.gate["summary"] = asyncio.Event()  # summaries never finish: usage climbs to emergency
    cfg = make_config(
        {
            "defaults": {
                "context_window": 1000,
                "system_prompt": "sys",
                "compaction": {"min_messages_between": 0, "summary_share": 0.9},
            }
        }
    )
    async with (
        Runtime.open(cfg, llm=llm) as rt,
        OpsServer(rt, port=0) as ops,
        aiohttp.ClientSession() as http,
    ):
        # The truncation is counted once its marker and record are stored: wait for its
        # event (the metrics hear it first), not for the compactor's own counter, which
        # moves before those writes and so ahead of the metric on a slow machine.
        truncated = asyncio.Event()
        rt.events.subscribe(EmergencyTruncation, lambda _: truncated.set())
        actor = await rt.registry.actor(CH)
        n = 0
        while actor.compactor.counters["emergency"] == 0:
            await rt.submit(inbound(CH, "alpha " * 95, pid=f"e{n}"))
            await asyncio.sleep(0.01)
            n += 1
            assert n < 60
        await asyncio.wait_for(truncated.wait(), 30.0)
        page = samples((await get(http, f"{ops.url}/metrics"))[1])
        status = (await get(http, f"{ops.url}/status"))[1]
        llm.gate["summary"].set()
    assert (
        value(page, "tierbot_llm_errors_total", provider="scripted", kind="TransientLLMError") == 1
    )
    assert value(page, "tierbot_emergency_truncations_total") >= 1
    assert value(page, "tierbot_emergency_messages_set_aside_total") >= 1
    events = [f["event"] for f in status["recent_failures"]]
    assert "channel.llm_failed" in events and "compaction.emergency" in events


async def test_usage_gauges_keep_cardinality_bounded_to_the_top_channels(
    make_config: Callable[..., Config],
) -> None:
    """With metrics_top_channels = 3, only the three fullest of 8 channels get a series,
    while the aggregates cover all 8; /status lists channels fullest first."""
    cfg = make_config(
        {
            "ops": {"metrics_top_channels": 3},
            "defaults": {"context_window": 2000, "respond": "listen"},
        }
    )
    async with (
        Runtime.open(cfg, llm=ScriptedLLM()) as rt,
        OpsServer(rt, port=0) as ops,
        aiohttp.ClientSession() as http,
    ):
        for i in range(8):
            await rt.submit(inbound(f"load:{i}", "alpha " * (20 * (i + 1))))
        await rt.drain()
        page = samples((await get(http, f"{ops.url}/metrics"))[1])
        status = (await get(http, f"{ops.url}/status?limit=5"))[1]
    labelled = {dict(k[1])["channel"] for k in page if k[0] == "tierbot_context_usage_ratio"}
    assert labelled == {"load:7", "load:6", "load:5"}
    assert value(page, "tierbot_channels_live") == 8
    assert value(page, "tierbot_context_usage_max_ratio") == pytest.approx(
        max(c["usage"] for c in status["channels"])
    )
    assert [c["channel"] for c in status["channels"]] == [f"load:{i}" for i in (7, 6, 5, 4, 3)]
    assert status["channels_live"] == 8
    assert status["pools"]["compaction"] == {"running": 0, "queued": 0, "concurrency": 4}


async def test_two_runtimes_in_one_process_count_only_their_own_events(
    make_config: Callable[..., Config], tmp_path: Path
) -> None:
    """Each runtime has its own registry; a turn in one never moves the other's counters."""
    other_cfg = make_config({"storage": {"path": str(tmp_path / "other.db")}})
    async with (
        Runtime.open(make_config(), llm=ScriptedLLM()) as a,
        Runtime.open(other_cfg, llm=ScriptedLLM()) as b,
    ):
        await a.submit(inbound("only-a:1", "hello"))
        await a.drain()
        await b.drain()
        count_a = samples(_page(a))[("tierbot_turn_duration_seconds_count", ())]
        count_b = samples(_page(b))[("tierbot_turn_duration_seconds_count", ())]
    assert (count_a, count_b) == (1, 0)


def _page(rt: Runtime) -> str:
    from prometheus_client import generate_latest

    return generate_latest(rt.metrics.registry).decode()


async def test_a_running_branch_shows_in_pool_gauges_and_counts_when_it_concludes(
    make_config: Callable[..., Config],
) -> None:
    """While a branch waits on the LLM it is one running branch in /metrics and /status;
    once it concludes, tierbot_tasks_total{kind=branch,outcome=concluded} moved by one."""
    llm = ScriptedLLM()
    llm.gate["branch"] = asyncio.Event()
    call = ToolCall("c1", "branch", {"task": "think"})
    llm.push("chat", Completion(text="", tool_calls=(call,)), Completion("on it"))
    llm.push("branch", Completion(text="the deep thought"))
    async with (
        Runtime.open(make_config(), llm=llm) as rt,
        OpsServer(rt, port=0) as ops,
        aiohttp.ClientSession() as http,
    ):
        await rt.submit(inbound(CH, "please think"))
        await wait_for(lambda: llm.count("branch") == 1)
        page = samples((await get(http, f"{ops.url}/metrics"))[1])
        status = (await get(http, f"{ops.url}/status"))[1]
        llm.gate["branch"].set()
        await rt.drain()
        done = samples((await get(http, f"{ops.url}/metrics"))[1])
    assert value(page, "tierbot_pool_running", pool="branch") == 1
    assert value(page, "tierbot_pool_slots", pool="branch") == 16
    assert status["pools"]["branch"]["running"] == 1
    assert value(done, "tierbot_pool_running", pool="branch") == 0
    assert value(done, "tierbot_tasks_total", kind="branch", outcome="concluded") == 1
    assert value(done, "tierbot_task_duration_seconds_count", kind="branch") == 1


async def test_a_test_capturing_logs_still_sees_every_metric_move(
    make_config: Callable[..., Config],
) -> None:
    """structlog's capture_logs swaps the whole processor chain; metrics come from the
    runtime's event bus, so a turn, a message in and a reply out are still counted while
    logs are captured (they used to be counted from log events and went silent)."""
    from structlog.testing import capture_logs

    async with Runtime.open(make_config(), llm=ScriptedLLM()) as rt:
        with capture_logs() as logs:
            await rt.submit(inbound(CH, "hello while logs are captured"))
            await rt.drain()
        page = samples(_page(rt))
    assert any(e["event"] == "turn.completed" for e in logs), "the logs were captured"
    assert page[("tierbot_turn_duration_seconds_count", ())] == 1
    assert page[("tierbot_messages_in_total", (("adapter", "replay"),))] == 1
    assert page[("tierbot_messages_out_total", (("adapter", "replay"),))] == 1


async def test_a_crashed_worker_is_listed_with_its_exception_in_recent_failures(
    make_config: Callable[..., Config],
) -> None:
    """A task worker whose tool loop raises a bug counts as a failed worker and shows in
    /status recent failures as worker.crashed and worker.failed, naming the exception."""
    llm = ScriptedLLM()
    call = ToolCall("c1", "spawn_worker", {"task": "dig"})
    llm.push("chat", Completion(text="", tool_calls=(call,)), Completion("started"))
    llm.push("worker", RuntimeError("the worker's bug"))
    async with Runtime.open(make_config(), llm=llm) as rt:
        await rt.submit(inbound(CH, "please dig"))
        await wait_for(lambda: len(rt.metrics.recent_failures) >= 2, 10)
        page = samples(_page(rt))
        failures = list(rt.metrics.recent_failures)
    assert page[("tierbot_tasks_total", (("kind", "worker"), ("outcome", "failed")))] == 1
    crashed = [f for f in failures if f["event"] == "worker.crashed"]
    assert crashed and crashed[0]["channel"] == CH
    assert "RuntimeError: the worker's bug" in crashed[0]["reason"]
    assert [f["tier"] for f in failures if f["event"] == "worker.failed"] == ["worker"]
