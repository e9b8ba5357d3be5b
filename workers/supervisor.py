"""Supervision of branches and task workers: limits, timeouts, cancellation, records.

* :class:`TaskPool`, one per runtime: process-wide slots per kind and the
  operator's tool registry;
* :class:`Supervisor`, one per channel: per-channel limits, wall-clock
  timeouts, cancellation, status, and a row per run in SQLite;
* :class:`Transcript`: every message a run produced, in SQLite, including what
  its compaction later dropped from its context.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import structlog

from tierbot.errors import TierbotError
from tierbot.events import Bus, ContextOverflow, TaskCrashed, TaskFinished
from workers.records import TaskRecords
from workers.tools import ToolRegistry

if TYPE_CHECKING:
    from workers.task import WorkerLimits

log = structlog.get_logger("tierbot.workers.supervisor")

Kind = Literal["branch", "worker"]
Status = Literal["queued", "running", "concluded", "failed", "cancelled"]


class TaskFailed(TierbotError):
    """A branch or worker cannot finish; the message says why and is shown to the channel."""


class LimitReached(TaskFailed):
    """The channel already runs as many branches (or workers) as its config allows."""


# -- process-wide pool -------------------------------------------------------------------------


class RemoteTasks(Protocol):
    """Where task workers run when they do not run here: the shared job queue
    (:class:`workers.shared.SharedQueue`)."""

    async def run_task(
        self, *, channel: str, row: int, task: str, limits: WorkerLimits, time_limit: float
    ) -> str: ...


class TaskPool:
    """Process-wide slots for branches and workers, and the operator's tool registry.

    One per runtime.  ``tools`` is where an operator or a plugin registers
    worker tools (plain async callables with a JSON schema).  A run past the
    process-wide limit waits for a slot (status ``queued``) instead of failing.
    """

    def __init__(
        self, records: TaskRecords, tools: ToolRegistry | None = None, events: Bus | None = None
    ) -> None:
        #: Where runs and their transcripts are recorded.
        self.records = records
        self.tools = tools if tools is not None else ToolRegistry()
        #: Where runs publish how they ended (the runtime's bus).
        self.events = events if events is not None else Bus()
        self.running: Counter[str] = Counter()
        #: With ``[workers] queue = "shared"``: task workers run in whichever process
        #: takes them from the queue (branches stay here: they fork a live prompt).
        self.remote: RemoteTasks | None = None
        self._waiters: dict[str, deque[asyncio.Future[None]]] = {}

    async def acquire(self, kind: str, limit: int) -> None:
        if self.running[kind] < limit and not self._waiters.get(kind):
            self.running[kind] += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(kind, deque()).append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(kind)  # the slot was handed over as we were cancelled
            else:
                self._waiters[kind].remove(fut)
            raise

    def release(self, kind: str) -> None:
        """Free a slot: hand it to the oldest waiter, if any."""
        waiters = self._waiters.get(kind)
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self.running[kind] -= 1


# -- records -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """How a branch or worker ended: its result or the reason it did not conclude."""

    id: str
    kind: Kind
    task: str
    status: Status
    result: str = ""
    error: str = ""
    origin: str | None = None
    duration: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "concluded"

    def as_tool_result(self) -> str:
        """The outcome as the channel's model reads it."""
        body: dict[str, Any] = {self.kind: self.id, "task": self.task}
        if self.ok:
            body["conclusion" if self.kind == "branch" else "result"] = self.result
        else:
            body[self.status] = self.error or self.status
        return json.dumps(body, ensure_ascii=False)

    def report(self) -> str:
        """The outcome as people in the channel read it."""
        if self.ok:
            return self.result
        return f"({self.id} {self.status}: {self.error or self.status}; task: {self.task})"


@dataclass
class TaskHandle:
    """A run's live status (what ``/status`` shows); mutated only by its own run."""

    id: str
    row: int
    kind: Kind
    task: str
    origin: str | None
    status: Status = "queued"
    created: float = field(default_factory=time.monotonic)
    started: float | None = None
    detail: str = ""
    stats: dict[str, Any] = field(default_factory=dict)
    channel: str = ""
    events: Bus = field(default_factory=Bus, repr=False)

    def overflowed(self) -> None:
        """Tell the bus this run's prompt did not fit the window (refused as too long, or no
        room left for a reply); it compacts and retries."""
        self.events.publish(ContextOverflow(self.channel, self.kind))

    def view(self) -> dict[str, Any]:
        now = time.monotonic()
        return {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "task": self.task,
            "seconds": round(now - (self.started or self.created), 1),
            "detail": self.detail,
        }


# -- per-channel supervision -------------------------------------------------------------------

Run = Callable[[TaskHandle], Awaitable[str]]


class Supervisor:
    """Starts, limits, times out, cancels and records one channel's branches and workers.

    ``on_done(outcome)`` is called once per run that ends on its own
    (concluded, failed, timed out); runs cancelled by :meth:`aclose` are
    returned by it instead.
    """

    def __init__(
        self, channel: str, pool: TaskPool, on_done: Callable[[TaskOutcome], None]
    ) -> None:
        self.channel = channel
        self.pool = pool
        self.on_done = on_done
        self.handles: dict[str, TaskHandle] = {}
        self._tasks: dict[str, asyncio.Task[TaskOutcome]] = {}
        self._closing = False

    def active(self, kind: Kind | None = None) -> int:
        return sum(1 for h in self.handles.values() if kind is None or h.kind == kind)

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    def status(self) -> list[dict[str, Any]]:
        return [h.view() for h in self.handles.values()]

    async def start(
        self,
        kind: Kind,
        task: str,
        run: Run,
        *,
        limit: int,
        pool_limit: int,
        time_limit: float,
        origin: str | None = None,
    ) -> TaskHandle:
        """Record and start a run; raises :class:`LimitReached` at the per-channel limit."""
        if self._closing:
            raise TaskFailed(f"channel {self.channel} is shutting down")
        if self.active(kind) >= limit:
            plural, section = (
                ("branches", "branches") if kind == "branch" else ("workers", "task_workers")
            )
            raise LimitReached(
                f"{self.active(kind)} {plural} already run in this channel, the limit "
                f"([defaults.{section}] max_concurrent); wait for one to finish"
            )
        row = await self.pool.records.create_run(self.channel, kind, task)
        handle = TaskHandle(
            f"{kind}-{row}", row, kind, task, origin, channel=self.channel, events=self.pool.events
        )
        self.handles[handle.id] = handle
        self._tasks[handle.id] = asyncio.create_task(
            self._drive(handle, run, pool_limit, time_limit), name=f"{handle.id}:{self.channel}"
        )
        return handle

    async def _drive(
        self, h: TaskHandle, run: Run, pool_limit: int, time_limit: float
    ) -> TaskOutcome:
        # Bound per task, not per channel: an idle channel holds no logger of its own.
        bound = log.bind(channel=self.channel, **{h.kind: h.id})
        status: Status = "failed"
        result = error = ""
        clock: asyncio.Timeout | None = None
        try:
            await self.pool.acquire(h.kind, pool_limit)
            try:
                h.status, h.started = "running", time.monotonic()
                bound.info(f"{h.kind}.started", task=h.task[:200])
                clock = asyncio.timeout(time_limit)
                async with clock:
                    result = await run(h)
                status = "concluded"
            finally:
                self.pool.release(h.kind)
        except TimeoutError as exc:
            expired = clock is not None and clock.expired()
            error = f"timed out after {time_limit:g} s" if expired else f"TimeoutError: {exc}"
            if not expired:
                bound.exception(f"{h.kind}.crashed")
                self.pool.events.publish(TaskCrashed(self.channel, h.kind, error))
        except TaskFailed as exc:
            error = str(exc)
        except asyncio.CancelledError:
            status, error = "cancelled", "the channel stopped"
            outcome = self._outcome(h, status, result, error)
            try:
                await self._settle(h, outcome, bound)
            finally:
                self._tasks.pop(h.id, None)
            raise
        except Exception as exc:  # a bug in a run must not take the channel down
            bound.exception(f"{h.kind}.crashed")
            error = f"{type(exc).__name__}: {exc}"
            self.pool.events.publish(TaskCrashed(self.channel, h.kind, error))
        outcome = self._outcome(h, status, result, error)
        try:
            await self._settle(h, outcome, bound)
            if not self._closing:
                try:
                    self.on_done(outcome)
                except Exception:
                    bound.exception(f"{h.kind}.done_callback_failed")
        finally:
            self._tasks.pop(h.id, None)
        return outcome

    def _outcome(self, h: TaskHandle, status: Status, result: str, error: str) -> TaskOutcome:
        duration = time.monotonic() - (h.started or h.created)
        h.status = status
        return TaskOutcome(
            h.id, h.kind, h.task, status, result, error, h.origin, round(duration, 3), dict(h.stats)
        )

    async def _settle(self, h: TaskHandle, outcome: TaskOutcome, bound: Any) -> None:
        # The run stays counted as running (``_tasks``) until its outcome is posted: a
        # drain that looked between the two saw an idle channel whose answer was still
        # to come (the record below is a store write, slow on a loaded PostgreSQL).
        self.handles.pop(h.id, None)
        event = {"concluded": "concluded", "cancelled": "cancelled"}.get(outcome.status, "failed")
        level = "info" if outcome.status == "concluded" else "warning"
        getattr(bound, level)(
            f"{h.kind}.{event}",
            duration=outcome.duration,
            error=outcome.error or None,
            **outcome.stats,
        )
        self.pool.events.publish(
            TaskFinished(self.channel, h.kind, event, outcome.duration, outcome.error)
        )
        try:
            await self.pool.records.finish_run(
                h.row,
                status=outcome.status,
                result=outcome.result,
                error=outcome.error,
                stats=outcome.stats,
            )
        except Exception as exc:  # the store may already be closing at shutdown
            bound.warning(f"{h.kind}.record_failed", error=str(exc))

    async def aclose(self) -> list[TaskOutcome]:
        """Cancel every run and wait for it; return how each ended (cancelled, or concluded
        if it finished first: ``on_done`` is no longer called).  Safe to call twice."""
        self._closing = True
        pairs = [(self.handles[k], t) for k, t in list(self._tasks.items()) if k in self.handles]
        for _, t in pairs:
            t.cancel()
        ended = await asyncio.gather(*(t for _, t in pairs), return_exceptions=True)
        return [
            e
            if isinstance(e, TaskOutcome)
            else TaskOutcome(
                h.id,
                h.kind,
                h.task,
                "cancelled",
                "",
                "the channel stopped",
                h.origin,
                stats=dict(h.stats),
            )
            for (h, _), e in zip(pairs, ended, strict=True)
        ]
