"""Compaction through the shared job queue: the owner plans and applies, any process summarizes.

Runtimes in one test process stand for a ``tierbot run`` that owns channels and a
``tierbot worker`` (``jobs_only``); the SIGKILL of a worker mid-job is in
tests/fault/test_shared_worker_killed.py, with real processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.runtime import Runtime
from channels import ChannelActor
from tests.helpers import inbound, register_fetch, wait_for
from tierbot.config import Config
from tierbot.errors import ConfigError
from tierbot.messages import Role
from tierbot.pg.jobs import queue_depths
from tierbot.testing.scripted import ScriptedLLM
from tierbot.vocab import Outcome

CH = "test:shared"
WINDOW = 1000


@pytest.fixture
def shared_config(
    make_config: Callable[..., Config], pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Config]:
    monkeypatch.setenv("TIERBOT_DATABASE_URL", pg_dsn)

    def build(**workers: Any) -> Config:
        return make_config(
            {
                "storage": {"backend": "postgres"},
                "defaults": {
                    "context_window": WINDOW,
                    "system_prompt": "sys",
                    "respond": "listen",
                    "compaction": {"min_messages_between": 0, "summary_share": 0.9},
                },
                "workers": {"queue": "shared", "stalled_job_seconds": 2.0, **workers},
            }
        )

    return build


@contextlib.asynccontextmanager
async def opened(
    cfg: Config, llm: ScriptedLLM, *, jobs_only: bool = False
) -> AsyncIterator[Runtime]:
    async with Runtime.open(cfg, llm=llm, jobs_only=jobs_only) as rt:
        yield rt


async def fill_past_background(rt: Runtime, channel: str = CH) -> ChannelActor:
    """Listen-only messages of 50 tokens (``f0``, ``f1`` ...) until the background tier
    plans a pass."""
    actor = await rt.registry.actor(channel)
    n = 0
    while actor.compactor.running is None:
        await rt.submit(inbound(channel, "alpha " * 45, pid=f"f{n}"))
        await wait_for(lambda: actor.idle() or actor.compactor.running is not None)
        n += 1
    return actor


async def committed_records(rt: Runtime) -> list[Any]:
    """The channel's compaction records, once the first has committed: a pass is over
    (``running`` is None) a moment before its record's commit."""
    for _ in range(400):
        records = await rt.store.compactions(CH)
        if records:
            return records
        await asyncio.sleep(0.05)
    return []


async def live_summaries(rt: Runtime) -> list[Any]:
    return [m for m in await rt.store.load_live(CH) if m.role is Role.SUMMARY]


async def no_live_message_inside_a_summary(rt: Runtime) -> None:
    live = await rt.store.load_live(CH)
    live_ids = {m.id for m in live}
    for m in live:
        if m.role in (Role.SUMMARY, Role.MARKER):
            assert not set(await rt.store.covered_by(m.id)) & live_ids


async def test_a_worker_process_summarizes_and_the_owner_swaps_it_in(
    shared_config: Callable[..., Config],
) -> None:
    owner_llm, worker_llm = ScriptedLLM(), ScriptedLLM()
    cfg = shared_config(run_jobs=False)
    async with opened(cfg, owner_llm) as owner, opened(cfg, worker_llm, jobs_only=True) as worker:
        assert owner.job_runner is None and worker.job_runner is not None
        actor = await fill_past_background(owner)
        covered = [m.id for m in actor.compactor.running.covered]
        await wait_for(lambda: actor.compactor.running is None, timeout=20)
        await owner.drain()
        # The worker's model wrote the summary; the owner's model never saw a transcript.
        assert worker_llm.count("summary") == 1 and owner_llm.count("summary") == 0
        summaries = await live_summaries(owner)
        assert len(summaries) == 1
        assert f"Summary of {len(covered)} messages" in summaries[0].text
        assert sorted(await owner.store.covered_by(summaries[0].id)) == sorted(covered)
        assert actor.compactor.counters["background"] == 1
        assert actor.usage < 0.80
        await no_live_message_inside_a_summary(owner)
        assert owner.jobs is not None and owner.jobs.waiting == 0
        assert worker.job_runner.ran == 1
        depth = await queue_depths(owner.jobs.pool, where="test")
        assert depth["queues"].get("compaction", {"todo": 0})["todo"] == 0


async def test_with_no_worker_the_pass_fails_named_and_nothing_is_lost(
    shared_config: Callable[..., Config],
) -> None:
    """No process runs jobs: the owner withdraws the job after queue_wait_seconds, records
    a failed pass that says why, and every message stays live."""
    cfg = shared_config(run_jobs=False, queue_wait_seconds=1.0, retry_base_seconds=30.0)
    async with opened(cfg, ScriptedLLM()) as owner:
        actor = await fill_past_background(owner)
        await wait_for(lambda: actor.compactor.running is None, timeout=20)
        records = await committed_records(owner)
        assert [r.outcome for r in records] == [Outcome.FAILED]
        assert "queue_wait_seconds" in records[0].reason
        assert "run_jobs" in records[0].reason
        assert await live_summaries(owner) == []
        stored = [m async for m in owner.store.export(CH)]
        live = await owner.store.load_live(CH)
        assert {m.id for m in stored} <= {m.id for m in live}
        assert owner.jobs is not None
        depth = await queue_depths(owner.jobs.pool, where="test")
        assert depth["queues"]["compaction"] == {"todo": 0, "doing": 0}


async def test_results_finishing_out_of_order_are_applied_in_history_order(
    shared_config: Callable[..., Config],
) -> None:
    """Two ranges in flight on two workers; the newer finishes first and waits for the
    older, so the summaries land in the order of the history they cover, once each."""
    owner_llm = ScriptedLLM()
    first, second = ScriptedLLM(), ScriptedLLM()
    first.gate["summary"] = asyncio.Event()
    # One job at a time per worker, so the second range cannot go to the busy first one.
    one_each = shared_config(run_jobs=False, compaction_concurrency=1)
    async with (
        opened(shared_config(run_jobs=False), owner_llm) as owner,
        opened(one_each, first, jobs_only=True) as w1,
    ):
        try:
            actor = await fill_past_background(owner)
            await wait_for(lambda: first.count("summary") == 1, timeout=20)
            async with opened(one_each, second, jobs_only=True) as w2:
                # On to the aggressive tier: a second range goes out, and to w2.
                n = 100
                while len(actor.compactor.in_flight) < 2:
                    pid = f"g{n}"
                    await owner.submit(inbound(CH, "alpha " * 15, pid=pid))
                    await wait_for(lambda p=pid: actor.ctx.items[-1].platform_id == p)
                    n += 1
                assert actor.compactor.counters["emergency"] == 0
                runner = w2.job_runner
                assert runner is not None
                await wait_for(lambda: runner.ran == 1, timeout=20)
                await asyncio.sleep(0.3)
                assert await live_summaries(owner) == []  # held behind the older range
                assert len(actor.compaction.held) == 1
                first.gate["summary"].set()
                await wait_for(
                    lambda: not actor.compactor.in_flight and not actor.compaction.held, 20
                )
        finally:
            first.gate["summary"].set()
        await owner.drain()
        summaries = sorted(await live_summaries(owner), key=lambda m: m.pos)
        assert len(summaries) == 2
        firsts = [await owner.store.covered_by(s.id) for s in summaries]
        assert max(firsts[0]) < min(firsts[1])  # the older range is the older summary
        assert w1.job_runner is not None and w1.job_runner.ran == 1
        await no_live_message_inside_a_summary(owner)


def test_the_shared_queue_needs_postgres(make_config: Callable[..., Config]) -> None:
    with pytest.raises(ConfigError) as err:
        make_config({"workers": {"queue": "shared"}})
    assert "[workers] queue" in str(err.value) and "postgres" in str(err.value)
    # One line naming the keys, not the whole file read back.
    assert "got {" not in str(err.value) and len(str(err.value).splitlines()) == 1


async def test_status_shows_the_queue_depth_and_who_runs_jobs(
    shared_config: Callable[..., Config],
) -> None:
    """An owner waiting on a job no worker has taken yet: the queue shows it waiting,
    then running once a worker took it, and the worker's own view says it ran it."""
    from bot.cli_ops import render_status_view
    from bot.ops import jobs_view

    gated = ScriptedLLM()
    gated.gate["summary"] = asyncio.Event()
    cfg = shared_config(run_jobs=False)
    async with opened(cfg, ScriptedLLM()) as owner:
        await fill_past_background(owner)
        await wait_for(lambda: owner.jobs is not None and owner.jobs.waiting == 1)
        view = await jobs_view(owner)
        assert view["queues"]["compaction"] == {"todo": 1, "doing": 0}
        assert view["workers"] == 0 and view["runs_jobs"] is False
        text = render_status_view({"jobs": view}, "http://127.0.0.1:8686")
        assert "job queue: compaction 1 waiting / 0 running; 0 queue workers alive" in text
        assert "this process runs no jobs" in text and "waits for 1" in text
        async with opened(cfg, gated, jobs_only=True) as worker:
            try:
                await wait_for(lambda: gated.count("summary") == 1, timeout=20)
                view = await jobs_view(owner)
                assert view["queues"]["compaction"] == {"todo": 0, "doing": 1}
                assert view["workers"] == 2  # one per queue: summaries and task workers
            finally:
                gated.gate["summary"].set()
            await wait_for(lambda: owner.jobs is not None and owner.jobs.waiting == 0, 20)
            text = render_status_view({"jobs": await jobs_view(worker)}, "http://x")
            assert "this process runs jobs (ran 1, put back 0 stalled) and waits for 0" in text


def task_config(shared_config: Callable[..., Config], **task_workers: Any) -> Config:
    cfg = shared_config(run_jobs=False)
    data = cfg.model_dump()
    data["defaults"]["respond"] = "always"
    data["defaults"]["context_window"] = 4000
    data["defaults"]["task_workers"].update(task_workers)
    return Config.model_validate(data)


def spawn_call(task: str) -> Any:
    from tierbot.llm.base import Completion, ToolCall

    return Completion(text="", tool_calls=(ToolCall("s1", "spawn_worker", {"task": task}),))


async def test_a_task_worker_runs_in_the_worker_process_and_reports_to_its_channel(
    shared_config: Callable[..., Config],
) -> None:
    from tierbot.llm.base import Completion, ToolCall
    from workers.records import read_runs, read_transcript

    owner_llm, worker_llm = ScriptedLLM(), ScriptedLLM()
    owner_llm.push("chat", spawn_call("fetch pages 1 and 2"), Completion("started a worker"))
    worker_llm.push(
        "worker",
        *[
            Completion(text="", tool_calls=(ToolCall(f"f{i}", "fetch", {"page": i}),))
            for i in (1, 2)
        ],
        Completion("fetched 2 pages"),
    )
    cfg = task_config(shared_config)
    async with opened(cfg, owner_llm) as owner, opened(cfg, worker_llm, jobs_only=True) as worker:
        register_fetch(worker, "the kestrel numbers")
        await owner.submit(inbound(CH, "please fetch the report", pid="q"))
        await wait_for(lambda: len(owner.outbox.sent) == 2, timeout=20)
        assert [o.text for o in owner.outbox.sent] == ["started a worker", "fetched 2 pages"]
        assert owner.outbox.sent[1].reply_to == "q"
        assert owner_llm.count("worker") == 0 and worker_llm.count("worker") == 3
        assert worker.job_runner is not None and worker.job_runner.tasks_ran == 1
        runs = await read_runs(owner.store, CH)
        assert [(r["kind"], r["status"], r["result"]) for r in runs] == [
            ("worker", "concluded", "fetched 2 pages")
        ]
        # The worker process wrote the transcript under the owner's run.
        rows = await read_transcript(owner.store, runs[0]["row"])
        assert [c["id"] for r in rows for c in r.tool_calls] == ["f1", "f2"]
        assert "page 2: the kestrel numbers" in [r.content for r in rows if r.role == "tool"][-1]


async def test_a_remote_task_past_its_time_limit_fails_and_is_aborted(
    shared_config: Callable[..., Config],
) -> None:
    from tierbot.llm.base import Completion
    from tierbot.pg.jobs import job_states

    owner_llm = ScriptedLLM()
    worker_llm = ScriptedLLM(latency={"worker": 30.0})
    owner_llm.push("chat", spawn_call("slow task"), Completion("started"))
    cfg = task_config(shared_config, timeout_seconds=1.0)
    async with opened(cfg, owner_llm) as owner, opened(cfg, worker_llm, jobs_only=True):
        await owner.submit(inbound(CH, "go", pid="q"))
        await wait_for(lambda: len(owner.outbox.sent) == 2, timeout=20)
        assert (
            owner.outbox.sent[1].text == "(worker-1 failed: timed out after 1 s; task: slow task)"
        )
        assert owner.jobs is not None
        pool = owner.jobs.pool

        async def states() -> dict[int, str]:
            ids = [r["id"] for r in await pool.fetch("SELECT id FROM procrastinate_jobs")]
            return await job_states(pool, ids, where="test")

        # The worker was told to stop: the job ends aborted, not still running.
        for _ in range(200):
            if list((await states()).values()) == ["aborted"]:
                break
            await asyncio.sleep(0.05)
        assert list((await states()).values()) == ["aborted"]


async def test_a_job_naming_another_channels_messages_summarizes_nothing(
    shared_config: Callable[..., Config],
) -> None:
    """A worker reads a job's messages by id and keeps only its channel's: a job that
    names another channel's messages (a bug, or a row written into the queue by hand)
    fails and says so, and the other channel's text reaches no model."""
    from workers import CompactionJob

    worker_llm = ScriptedLLM()
    async with (
        opened(shared_config(run_jobs=False), ScriptedLLM()) as owner,
        opened(shared_config(), worker_llm, jobs_only=True),
    ):
        await owner.submit(inbound(CH, "the vault code is 7312", pid="secret"))
        await owner.drain()
        theirs = [m async for m in owner.store.export(CH)]
        assert owner.jobs is not None
        job = CompactionJob("test:other", "background", tuple(theirs), max_summary_tokens=100)
        outcome = await owner.jobs.compact(job)
        assert outcome.summary is None
        assert outcome.error == "none of the job's messages is stored in channel test:other"
        assert worker_llm.count("summary") == 0


async def test_a_job_runner_whose_worker_row_was_pruned_starts_again(
    shared_config: Callable[..., Config],
) -> None:
    """Another process that thought this one stalled deletes its worker row: the next
    fetch fails and procrastinate's worker stops.  The runner says so (health fails
    meanwhile) and starts it again, and the owner's pass is summarized."""
    from structlog.testing import capture_logs

    worker_llm = ScriptedLLM()
    async with (
        opened(shared_config(run_jobs=False), ScriptedLLM()) as owner,
        opened(shared_config(), worker_llm, jobs_only=True) as worker,
    ):
        assert owner.jobs is not None and worker.job_runner is not None
        runner = worker.job_runner
        await wait_for(lambda: True, timeout=1)  # the worker registers itself as it starts
        for _ in range(100):
            if await owner.jobs.pool.fetchval("SELECT count(*) FROM procrastinate_workers") == 2:
                break
            await asyncio.sleep(0.05)
        await owner.jobs.pool.execute("DELETE FROM procrastinate_workers")
        with capture_logs() as logs:
            actor = await fill_past_background(owner)
            await wait_for(lambda: actor.compactor.running is None, timeout=30)
        stopped = [e for e in logs if e["event"] == "jobs.runner_stopped"]
        assert stopped and "foreign key" in stopped[0]["error"]
        assert actor.compactor.counters["background"] == 1
        assert worker_llm.count("summary") == 1
        assert runner.problems == {}


async def test_a_dead_workers_job_goes_back_and_waits_for_a_worker_anew(
    shared_config: Callable[..., Config],
) -> None:
    """A worker took the job, ran it past queue_wait_seconds, and died (its heartbeat
    stopped).  With no job runner anywhere, the owner itself puts the job back, waits
    queue_wait_seconds again for a worker (not withdrawing it at once: its first wait
    is long over), then fails the pass with the real reason."""
    wait = 2.0
    cfg = shared_config(run_jobs=False, queue_wait_seconds=wait, retry_base_seconds=30.0)
    async with opened(cfg, ScriptedLLM()) as owner:
        assert owner.jobs is not None
        pool = owner.jobs.pool
        actor = await fill_past_background(owner)
        await wait_for(lambda: owner.jobs is not None and owner.jobs.waiting == 1)
        # A worker takes it (a live heartbeat), and holds it past the first wait.
        worker = await pool.fetchval(
            "INSERT INTO procrastinate_workers (last_heartbeat) VALUES (now()) RETURNING id"
        )
        await pool.execute("UPDATE procrastinate_jobs SET status = 'doing', worker_id = $1", worker)
        await asyncio.sleep(wait + 0.5)
        assert actor.compactor.running is not None  # a running job is waited for
        # The worker dies: its heartbeat stops.
        await pool.execute(
            "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour'"
        )
        died = time.monotonic()
        await wait_for(lambda: actor.compactor.running is None, timeout=30)
        waited = time.monotonic() - died
        records = await committed_records(owner)
        assert [r.outcome for r in records] == [Outcome.FAILED]
        assert "no worker took compaction job" in records[0].reason
        assert waited >= wait  # a fresh wait once back in the queue
        events = [
            r["type"]
            for r in await pool.fetch("SELECT type::text FROM procrastinate_events ORDER BY id")
        ]
        assert events[-2:] == ["deferred_for_retry", "cancelled"], events
        assert owner.jobs.requeued == 1


async def test_a_dsn_the_job_queue_cannot_use_is_refused_with_libpqs_reason(
    shared_config: Callable[..., Config], pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tierbot.errors import StoreError

    monkeypatch.setenv("TIERBOT_DATABASE_URL", pg_dsn + "&search_path=public")
    with pytest.raises(StoreError) as err:
        async with opened(shared_config(), ScriptedLLM()):
            pass
    assert "shared job queue cannot connect" in str(err.value)
    assert "search_path" in str(err.value)
