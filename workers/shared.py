"""Compaction and task workers as a pool shared by every process: procrastinate's queue
on PostgreSQL.

With ``[workers] queue = "shared"`` a channel's owner keeps deciding *what* to
compact and applies every result itself, in the order of the history it covers
(:mod:`channels.compaction`); only the summary is computed elsewhere:

* :class:`SharedCompaction` stands where the in-process :class:`CompactionWorker`
  stood.  ``run(job)`` defers a ``tierbot.compact`` job naming the messages by id,
  and waits for its result: the ``NOTIFY`` of the worker that ran it wakes the wait,
  a poll catches what a missed notification left.  A job no worker took within
  ``queue_wait_seconds`` is cancelled and fails like a timed-out summary (the
  owner retries after its backoff); a job that ended without a result fails too.
* :class:`JobRunner` runs jobs in any process: ``tierbot run`` with ``run_jobs``
  and ``tierbot worker``.  It reads the messages from the store, summarizes them
  and saves memories with the ordinary :class:`CompactionWorker`, and writes the
  outcome into ``job_results``.  Its procrastinate worker sends heartbeats; a job
  whose worker stopped sending them (killed mid-summary) goes back to the queue.

Task workers go the same way on a queue of their own (:meth:`SharedQueue.run_task`):
the whole tool loop runs where the job is taken, its transcript recorded under the
owner's run, and the owner keeps the time limit (it aborts the job past it).

A result is taken once (``DELETE ... RETURNING``) by the process that deferred it,
which hands it to the channel's actor exactly once.  A job that runs twice keeps
its first result; the memories both runs saved merge like any repeated save.
When the owner dies, its new owner plans again from the store: the dead owner's
results are swept after a day.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import asyncpg
import procrastinate
import psycopg
import structlog

from tierbot.errors import StoreError
from tierbot.pg.jobs import (
    JOBS_DONE_CHANNEL,
    job_states,
    put_result,
    sweep_results,
    take_results,
)
from tierbot.retry import Backoff
from tierbot.storage import MessageStore
from workers.compaction import CompactionJob, CompactionOutcome, CompactionWorker, MemoryWriter
from workers.records import TaskRecords
from workers.supervisor import TaskFailed, TaskHandle
from workers.task import TaskWorker, WorkerLimits
from workers.tools import Recaller, ToolRegistry, builtin_tools

__all__ = ["COMPACTION_QUEUE", "COMPACT_TASK", "JobRunner", "SharedCompaction", "SharedQueue"]

log = structlog.get_logger("tierbot.workers.shared")

COMPACTION_QUEUE = "compaction"
COMPACT_TASK = "tierbot.compact"
TASK_QUEUE = "tasks"
TASK_TASK = "tierbot.task"
#: Results nobody took for this long belonged to an owner that died: swept.
RESULT_TTL_SECONDS = 86_400.0
#: How long past its time limit a task may run here when no owner aborts it.
ABORT_GRACE_SECONDS = 10.0
#: A job runner that stopped starts again after 1 s, 2 s, 4 s ... at most 30 s.
RUNNER_RESTART = Backoff(base=1.0, cap=30.0)
#: Jobs that failed, were cancelled or aborted are kept this long (to look into).
FINISHED_KEEP_HOURS = 72
_ENDED = ("failed", "cancelled", "aborted", "succeeded")


class JobFailed(TaskFailed):
    """A shared job ended without a result: its owner fails the pass (and retries it
    later) or the task."""


@dataclass
class _Waiting:
    future: asyncio.Future[dict[str, Any]]
    deadline: float
    what: str
    state: str = "todo"


class SharedQueue:
    """One process's handle on the queue: the procrastinate app (psycopg) beside the
    store's asyncpg pool, the wake-up listener and the collector of results."""

    def __init__(
        self,
        dsn: str,
        pool: asyncpg.Pool,
        *,
        where: str,
        wait_seconds: float,
        stalled_seconds: float = 30.0,
        poll_seconds: float = 1.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.dsn = dsn
        self.pool = pool
        self.where = where
        #: How long a job may wait for a worker before its owner cancels it (live).
        self.wait_seconds = wait_seconds
        #: A job whose worker sent no heartbeat for this long goes back to the queue.
        self.stalled_seconds = stalled_seconds
        self.poll_seconds = poll_seconds
        self.connect_timeout = connect_timeout
        self.app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(
                conninfo=dsn, min_size=1, max_size=6, timeout=connect_timeout
            )
        )
        self.deferred = 0
        self.collected = 0
        self.requeued = 0
        self._looked_for_stalled = 0.0
        self._waiting: dict[int, _Waiting] = {}
        self._wake = asyncio.Event()
        self._listener: asyncpg.Connection | None = None
        self._collector: asyncio.Task[None] | None = None
        self._cancels: set[asyncio.Task[Any]] = set()
        self._swept = 0.0

    async def open(self) -> None:
        try:
            # One connection first: libpq's own reason (a URI parameter it does not take,
            # a refused password) rather than the pool's timeout after its retries.
            probe = await psycopg.AsyncConnection.connect(
                self.dsn, connect_timeout=max(1, int(self.connect_timeout))
            )
            await probe.close()
        except Exception as exc:
            raise StoreError(
                f"[workers] the shared job queue cannot connect to {self.where}: "
                + (" ".join(str(exc).split()) or repr(exc))
            ) from exc
        try:
            await asyncio.wait_for(self.app.open_async(), self.connect_timeout)
            listener = await asyncio.wait_for(asyncpg.connect(self.dsn), self.connect_timeout)
            self._listener = listener
            await listener.add_listener(JOBS_DONE_CHANNEL, self._notified)
        except Exception as exc:  # asyncpg's, psycopg's (the app's pool), OSError, timeout
            await self.aclose()
            raise StoreError(f"[workers] the shared job queue at {self.where}: {exc!r}") from exc
        self._collector = asyncio.create_task(self._collect_loop(), name="job-results")

    async def aclose(self) -> None:
        if self._collector is not None:
            self._collector.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._collector
            self._collector = None
        # Jobs the stopping channels gave up are withdrawn before the connections go.
        if self._cancels:
            await asyncio.wait(set(self._cancels), timeout=self.connect_timeout)
        for task in list(self._cancels):
            task.cancel()
        for waiting in self._waiting.values():
            if not waiting.future.done():
                waiting.future.set_exception(JobFailed("the process is stopping"))
        self._waiting.clear()
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.close()
            self._listener = None
        with contextlib.suppress(Exception):
            await self.app.close_async()

    @property
    def waiting(self) -> int:
        """Jobs this process deferred whose result has not come back yet."""
        return len(self._waiting)

    # -- the owner's side ------------------------------------------------------------

    async def compact(self, job: CompactionJob, *, priority: int = 0) -> CompactionOutcome:
        """Defer ``job`` and wait for its outcome."""
        args: dict[str, Any] = {
            "channel": job.channel,
            "kind": job.kind,
            "ids": [m.id for m in job.messages],
            "max_summary_tokens": job.max_summary_tokens,
            "level": job.level,
            "extract_memories": job.extract_memories,
        }
        result = await self._run(COMPACT_TASK, COMPACTION_QUEUE, args, "compaction", priority)
        return _outcome(result)

    async def run_task(
        self, *, channel: str, row: int, task: str, limits: WorkerLimits, time_limit: float
    ) -> str:
        """Run a task worker's whole loop (its segments, compacted between them) in a
        process that runs jobs; its transcript is recorded under ``row`` as here.  Its
        answer, or :class:`TaskFailed` with the reason."""
        args: dict[str, Any] = {
            "channel": channel,
            "row": row,
            "task": task,
            "limits": asdict(limits),
            "time_limit": time_limit,
        }
        result = await self._run(TASK_TASK, TASK_QUEUE, args, "task", 0)
        if result.get("error") is not None:
            raise TaskFailed(str(result["error"]))
        return str(result["result"])

    async def _run(
        self, name: str, queue: str, args: dict[str, Any], what: str, priority: int
    ) -> dict[str, Any]:
        try:
            job_id = await self.app.configure_task(
                name, queue=queue, priority=priority
            ).defer_async(**args)
        except Exception as exc:  # psycopg's errors: the job was not queued
            raise StoreError(f"[workers] cannot queue a {what} job at {self.where}: {exc}") from exc
        self.deferred += 1
        loop = asyncio.get_running_loop()
        waiting = _Waiting(loop.create_future(), time.monotonic() + self.wait_seconds, what)
        self._waiting[job_id] = waiting
        try:
            return await asyncio.shield(waiting.future)
        except asyncio.CancelledError:
            # The caller stopped waiting (evicted channel, lost lease, shutdown, a task's
            # time limit): the job is withdrawn, or aborted if a worker runs it.
            self._waiting.pop(job_id, None)
            task = asyncio.create_task(self._withdraw(job_id, abort=True))
            self._cancels.add(task)
            task.add_done_callback(self._cancels.discard)
            raise

    async def _withdraw(self, job_id: int, *, abort: bool = False) -> bool:
        try:
            manager = self.app.job_manager
            return bool(await manager.cancel_job_by_id_async(job_id, abort=abort))
        except Exception as exc:
            log.warning("jobs.withdraw_failed", job=job_id, error=str(exc))
            return False

    def _notified(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        with contextlib.suppress(ValueError):
            if int(payload) in self._waiting:
                self._wake.set()

    async def _collect_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_seconds)
            self._wake.clear()
            try:
                await self.collect()
            except StoreError as exc:  # the database is away: every wait goes on
                log.warning("jobs.collect_failed", error=str(exc))
            except Exception:  # a bug here must not leave every wait hanging for good
                log.exception("jobs.collect_crashed")

    async def collect(self) -> None:
        """Hand every result that came in to its waiter; fail the jobs that ended
        without one or waited past ``wait_seconds`` for a worker."""
        now = time.monotonic()
        if now - self._swept > 3600:
            self._swept = now
            await sweep_results(self.pool, RESULT_TTL_SECONDS, where=self.where)
        if not self._waiting:
            return
        ids = list(self._waiting)
        # States before results: a job gone from procrastinate's table by then had
        # written its result first, so the read after sees it.
        states = await job_states(self.pool, ids, where=self.where)
        if "doing" in states.values() and now - self._looked_for_stalled > self.stalled_seconds / 3:
            # Not only job runners put stalled jobs back: an owner with none beside it
            # would wait for a dead worker's job forever.
            self._looked_for_stalled = now
            await self.requeue_stalled()
        results = await take_results(self.pool, ids, where=self.where)
        for job_id in ids:
            waiting = self._waiting.get(job_id)
            if waiting is None:
                continue
            if job_id in results:
                self._resolve(job_id, results[job_id], None)
                continue
            state = states.get(job_id)
            what = waiting.what
            if state is None or state in _ENDED:
                why = f"{what} job {job_id} ended ({state or 'deleted'}) without a result"
                self._resolve(job_id, None, JobFailed(why))
            elif state == "todo" and waiting.state != "todo":
                # Back in the queue (its worker died): a new wait for a worker starts.
                waiting.deadline = now + self.wait_seconds
            elif state == "todo" and now > waiting.deadline:
                if await self._withdraw(job_id):
                    why = (
                        f"no worker took {what} job {job_id} within {self.wait_seconds:.0f} s "
                        "([workers] queue_wait_seconds): is a process with run_jobs running?"
                    )
                    self._resolve(job_id, None, JobFailed(why))
            if state is not None:
                waiting.state = state

    async def requeue_stalled(self) -> int:
        """Put back on the queue the jobs whose worker stopped sending heartbeats (it
        died mid-job); how many.  Any process may: the first one to look wins."""
        manager = self.app.job_manager
        try:
            stalled = await manager.get_stalled_jobs(seconds_since_heartbeat=self.stalled_seconds)
        except Exception as exc:  # psycopg's errors
            raise StoreError(f"the job queue at {self.where} cannot be read: {exc}") from exc
        n = 0
        for job in stalled:
            try:
                await manager.retry_job(job)
            except Exception as exc:  # another process put it back first
                log.info("jobs.requeue_skipped", job=job.id, error=str(exc))
                continue
            n += 1
            log.warning("jobs.requeued", job=job.id, hint="its worker stopped mid-job")
        self.requeued += n
        return n

    async def delete_finished(self, hours: int = FINISHED_KEEP_HOURS) -> None:
        """Delete jobs that ended (failed, cancelled, aborted) more than ``hours`` ago;
        succeeded ones go at once."""
        try:
            await self.app.job_manager.delete_old_jobs(
                hours, include_failed=True, include_cancelled=True, include_aborted=True
            )
        except Exception as exc:
            raise StoreError(f"the job queue at {self.where} cannot be cleaned: {exc}") from exc

    def _resolve(
        self, job_id: int, result: dict[str, Any] | None, error: BaseException | None
    ) -> None:
        waiting = self._waiting.pop(job_id, None)
        if waiting is None or waiting.future.done():
            return
        self.collected += 1
        if error is not None:
            log.warning("jobs.failed", job=job_id, error=str(error))
            waiting.future.set_exception(error)
        else:
            assert result is not None
            waiting.future.set_result(result)


def _outcome(result: dict[str, Any]) -> CompactionOutcome:
    return CompactionOutcome(
        summary=result.get("summary"),
        memories=int(result.get("memories", 0)),
        duration=float(result.get("duration", 0.0)),
        error=result.get("error"),
    )


class SharedCompaction:
    """The owner's compaction worker when summaries run on the shared queue: the
    same ``run(job)`` as :class:`CompactionWorker`, computed by whichever process
    takes the job.  ``memory`` is this process's writer (branches save through it)."""

    def __init__(self, queue: SharedQueue, local: CompactionWorker) -> None:
        self.queue = queue
        self.local = local

    @property
    def memory(self) -> MemoryWriter | None:
        return self.local.memory

    @property
    def timeout(self) -> float:
        return self.local.timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self.local.timeout = value

    async def run(self, job: CompactionJob) -> CompactionOutcome:
        # A channel near its emergency tier (aggressive) goes first, then rescues of
        # what an emergency set aside, then background and meta passes.
        priority = {"aggressive": 2, "rescue": 1}.get(job.kind, 0)
        return await self.queue.compact(job, priority=priority)


@dataclass(frozen=True, slots=True)
class TaskKit:
    """What a task worker run here needs besides the model: where its transcript goes,
    the memory it recalls from, and the operator's tools this process registered."""

    records: TaskRecords
    recall: Recaller | None
    tools: ToolRegistry


class JobRunner:
    """Runs queued compaction jobs and task workers in this process; start with
    :meth:`start`.  Each queue has its own procrastinate worker and limit, so long
    task loops never hold the slots summaries need."""

    def __init__(
        self,
        queue: SharedQueue,
        store: MessageStore,
        worker: CompactionWorker,
        kit: TaskKit,
        *,
        concurrency: int,
        task_concurrency: int,
        stalled_seconds: float,
        drain_seconds: float,
        name: str,
    ) -> None:
        self.queue = queue
        self.store = store
        self.worker = worker
        self.kit = kit
        self.concurrency = concurrency
        self.task_concurrency = task_concurrency
        self.stalled_seconds = stalled_seconds
        #: How long a stop waits for the jobs in hand; the rest are aborted and their
        #: owners retry them.
        self.drain_seconds = drain_seconds
        self.name = name
        self.ran = 0
        self.tasks_ran = 0
        #: Queues whose procrastinate worker stopped and is waiting to start again, and
        #: why (``/health`` fails meanwhile).
        self.problems: dict[str, str] = {}
        self._closing = False
        self._tasks: list[asyncio.Task[None]] = []
        self._sweeper: asyncio.Task[None] | None = None
        app = queue.app
        app.task(name=COMPACT_TASK, queue=COMPACTION_QUEUE, pass_context=True)(self._compact)
        app.task(name=TASK_TASK, queue=TASK_QUEUE, pass_context=True)(self._task_worker)

    @property
    def requeued(self) -> int:
        return self.queue.requeued

    def start(self) -> None:
        for queue, concurrency in (
            (COMPACTION_QUEUE, self.concurrency),
            (TASK_QUEUE, self.task_concurrency),
        ):
            self._tasks.append(
                asyncio.create_task(
                    self._keep_running(queue, concurrency), name=f"job-runner:{queue}"
                )
            )
        self._sweeper = asyncio.create_task(self._requeue_loop(), name="job-requeue")

    async def _keep_running(self, queue: str, concurrency: int) -> None:
        """Run ``queue``'s procrastinate worker, and start it again when it stops.

        It stops for good on errors of its own side tasks: a database away for longer
        than its connection timeout, or its worker row pruned by a process that thought
        it stalled.  The process must not go on looking healthy while it runs nothing.
        """
        attempt = 0
        while not self._closing:
            started = time.monotonic()
            try:
                await self.queue.app.run_worker_async(
                    queues=[queue],
                    name=f"{self.name}:{queue}",
                    concurrency=concurrency,
                    wait=True,
                    install_signal_handlers=False,
                    update_heartbeat_interval=max(0.5, self.stalled_seconds / 4),
                    stalled_worker_timeout=self.stalled_seconds,
                    delete_jobs="successful",
                    fetch_job_polling_interval=1.0,
                    shutdown_graceful_timeout=self.drain_seconds,
                )
                why = "it stopped"
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # procrastinate's ConnectorException and the like
                why = " ".join(str(exc).split()) or repr(exc)
                if exc.__cause__ is not None:
                    why += f" ({' '.join(str(exc.__cause__).split())})"
            if self._closing:
                return
            if time.monotonic() - started > 60:
                attempt = 0
            wait = RUNNER_RESTART.delay(attempt)
            attempt += 1
            self.problems[queue] = (
                f"the {queue} queue's worker stopped: {why}; again in {wait:.0f} s"
            )
            log.error("jobs.runner_stopped", queue=queue, error=why, restart_in=round(wait, 1))
            await asyncio.sleep(wait)
            self.problems.pop(queue, None)

    async def aclose(self) -> None:
        self._closing = True
        for task in (self._sweeper, *self._tasks):
            if task is not None:
                task.cancel()
        for task in (self._sweeper, *self._tasks):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._tasks = []
        self._sweeper = None

    async def _requeue_loop(self) -> None:
        cleaned = time.monotonic()
        while True:
            await asyncio.sleep(max(0.5, self.stalled_seconds / 3))
            try:
                await self.queue.requeue_stalled()
                if time.monotonic() - cleaned > 3600:
                    cleaned = time.monotonic()
                    await self.queue.delete_finished()
            except Exception as exc:  # the database is away: try again next round
                log.warning("jobs.requeue_failed", error=str(exc))

    async def _compact(self, context: procrastinate.JobContext, **args: Any) -> None:
        job_id = context.job.id
        assert job_id is not None
        channel = str(args["channel"])
        ids: Sequence[int] = args["ids"]
        # Only the job's own channel: ids are the owner's, never taken on trust.
        found = {m.id: m for m in await self.store.get_messages(ids) if m.channel == channel}
        messages = tuple(found[i] for i in ids if i in found)
        if not messages:
            outcome = CompactionOutcome(
                None, 0, 0.0, error=f"none of the job's messages is stored in channel {channel}"
            )
        else:
            outcome = await self.worker.run(
                CompactionJob(
                    channel=channel,
                    kind=str(args["kind"]),
                    messages=messages,
                    max_summary_tokens=int(args["max_summary_tokens"]),
                    level=int(args["level"]),
                    extract_memories=bool(args["extract_memories"]),
                )
            )
        result = {
            "summary": outcome.summary,
            "memories": outcome.memories,
            "duration": outcome.duration,
            "error": outcome.error,
        }
        self.ran += 1
        log.info(
            "jobs.ran",
            job=job_id,
            channel=channel,
            messages=len(messages),
            ok=outcome.summary is not None,
        )
        if not await put_result(self.queue.pool, job_id, channel, result, where=self.queue.where):
            log.warning("jobs.ran_twice", job=job_id, channel=channel, hint="first result kept")

    async def _task_worker(self, context: procrastinate.JobContext, **args: Any) -> None:
        job_id = context.job.id
        assert job_id is not None
        channel, row, task = str(args["channel"]), int(args["row"]), str(args["task"])
        # The owner's supervisor enforces the time limit and aborts the job; this is the
        # backstop for an owner that died meanwhile.
        limit = float(args["time_limit"]) + ABORT_GRACE_SECONDS
        kit = self.kit
        tools = builtin_tools(
            channel, store=self.store, recall=kit.recall, writer=self.worker.memory
        ).merged(kit.tools)
        handle = TaskHandle(f"worker-{row}", row, "worker", task, None, channel=channel)
        worker = TaskWorker(
            handle,
            llm=self.worker.llm,
            counter=self.worker.counter,
            tools=tools,
            limits=WorkerLimits(**args["limits"]),
            transcript=kit.records.transcript(row),
        )
        result: dict[str, Any]
        try:
            async with asyncio.timeout(limit):
                result = {"result": await worker.run(), "error": None}
        except TimeoutError:
            result = {"result": None, "error": f"timed out after {limit:g} s"}
        except TaskFailed as exc:
            result = {"result": None, "error": str(exc)}
        except Exception as exc:  # a bug or a provider's error fails the task, not the job
            log.exception("jobs.task_crashed", job=job_id, channel=channel)
            result = {"result": None, "error": f"{type(exc).__name__}: {exc}"}
        self.tasks_ran += 1
        log.info("jobs.ran", job=job_id, channel=channel, task=row, ok=result["error"] is None)
        if not await put_result(self.queue.pool, job_id, channel, result, where=self.queue.where):
            log.warning("jobs.ran_twice", job=job_id, channel=channel, hint="first result kept")
