"""Task workers: long LLM tool loops a channel delegates, compacted per segment, all on record.

A worker starts from a fresh context (its instructions and the task), runs
``turns_per_segment`` tool turns per segment, at most ``max_segments``
segments, and ends when the model answers without calling a tool; that answer
is its result.  Between segments, when its context usage is above
``segment_compact_threshold``, it compacts its own history: the instructions
and the task stay, the most recent turns stay, older turns (a tool call with
all its results, never one without the other) are dropped and a recap built
in code (which tools ran, with what outcome) takes their place.  A
context-overflow error force-compacts harder and retries, at most
``max_overflow_retries`` times (:func:`complete_with_overflow_retry`, shared
with branches).

Also here, shared with branches:

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
import math
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import aiosqlite
import structlog

from bot.errors import ContextOverflowError, LLMError, TierbotError
from bot.llm.base import ChatMessage, Completion, LLMProvider, Purpose, ToolCall, ToolSpec
from bot.store import Store
from bot.tokens import TokenCounter
from workers.tools import ToolRegistry, ToolResult, message_tokens, specs_tokens, units

log = structlog.get_logger("tierbot.workers.task")

Kind = Literal["branch", "worker"]
Status = Literal["queued", "running", "concluded", "failed", "cancelled"]

CONTINUE_NOTE = "Older context has been compacted; continue where you left off."
WORKER_PROMPT = """You are a tierbot task worker. Work on the task below step by step with \
your tools; the channel that started you keeps talking to people meanwhile. When you are done, \
answer without calling a tool: that answer is posted to the channel as your result, so make it \
complete and concise. Older tool turns may be replaced by a recap to save room; the full \
transcript is kept."""
FINAL_NOTE = "You have used all your tool turns. Report what you found and what remains."
KEEP_RECENT_TURNS = 2


class TaskFailed(TierbotError):
    """A branch or worker cannot finish; the message says why and is shown to the channel."""


class LimitReached(TaskFailed):
    """The channel already runs as many branches (or workers) as its config allows."""


# -- process-wide pool -------------------------------------------------------------------------


class TaskPool:
    """Process-wide slots for branches and workers, and the operator's tool registry.

    One per runtime.  ``tools`` is where an operator or a plugin registers
    worker tools (plain async callables with a JSON schema).  A run past the
    process-wide limit waits for a slot (status ``queued``) instead of failing.
    """

    def __init__(self, tools: ToolRegistry | None = None) -> None:
        self.tools = tools if tools is not None else ToolRegistry()
        self.running: Counter[str] = Counter()
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


@dataclass(frozen=True, slots=True)
class TranscriptRow:
    seq: int
    segment: int
    kind: str
    role: str
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    dropped_by: int


class Transcript:
    """Every message one run produced, appended to SQLite as it happens.

    Dropping a message from the run's context marks its row (``dropped_by`` =
    the number of the compaction that dropped it); rows are never deleted.
    """

    def __init__(self, store: Store, row: int) -> None:
        self.store = store
        self.row = row
        self._seq = 0

    async def add(
        self, segment: int, messages: Sequence[ChatMessage], kind: str = "message"
    ) -> list[int]:
        """Record ``messages``; return their sequence numbers."""
        seqs = list(range(self._seq + 1, self._seq + 1 + len(messages)))
        self._seq += len(messages)
        rows = [
            (self.row, s, segment, kind, m.role, m.content,
             json.dumps([asdict(c) for c in m.tool_calls]), m.tool_call_id or "", time.time())
            for s, m in zip(seqs, messages, strict=True)
        ]  # fmt: skip

        async def op(db: aiosqlite.Connection) -> None:
            await db.executemany(
                "INSERT INTO task_messages (task_id, seq, segment, kind, role, content, "
                "tool_calls, tool_call_id, ts) VALUES (?,?,?,?,?,?,?,?,?)",
                rows,
            )

        if rows:
            await self.store.write(op)
        return seqs

    async def dropped(self, seqs: Sequence[int], compaction: int) -> None:
        async def op(db: aiosqlite.Connection) -> None:
            await db.executemany(
                "UPDATE task_messages SET dropped_by=? WHERE task_id=? AND seq=?",
                [(compaction, self.row, s) for s in seqs],
            )

        if seqs:
            await self.store.write(op)


async def create_run(store: Store, channel: str, kind: str, task: str) -> int:
    """Insert a run's row; its id names the run (``worker-12``) across restarts."""

    async def op(db: aiosqlite.Connection) -> int:
        cur = await db.execute(
            "INSERT INTO tasks (channel, kind, task, status, created) VALUES (?,?,?,?,?)",
            (channel, kind, task, "queued", time.time()),
        )
        return int(cur.lastrowid or 0)

    row: int = await store.write(op)
    return row


async def finish_run(store: Store, row: int, outcome: TaskOutcome) -> None:
    async def op(db: aiosqlite.Connection) -> None:
        await db.execute(
            "UPDATE tasks SET status=?, finished=?, result=?, error=?, stats=? WHERE id=?",
            (outcome.status, time.time(), outcome.result, outcome.error,
             json.dumps(outcome.stats, default=str), row),
        )  # fmt: skip

    await store.write(op)


async def read_runs(store: Store, channel: str) -> list[dict[str, Any]]:
    """Every run of ``channel``, oldest first (read through the writer: sees every commit)."""

    async def op(db: aiosqlite.Connection) -> list[dict[str, Any]]:
        async with db.execute(
            "SELECT id, kind, task, status, result, error, stats FROM tasks WHERE channel=? "
            "ORDER BY id",
            (channel,),
        ) as cur:
            rows = await cur.fetchall()
        keys = ("row", "kind", "task", "status", "result", "error", "stats")
        return [dict(zip(keys, r, strict=True)) | {"stats": json.loads(r[6])} for r in rows]

    result: list[dict[str, Any]] = await store.write(op)
    return result


async def read_transcript(store: Store, row: int) -> list[TranscriptRow]:
    """The full transcript of run ``row``, in order, dropped messages included."""

    async def op(db: aiosqlite.Connection) -> list[TranscriptRow]:
        async with db.execute(
            "SELECT seq, segment, kind, role, content, tool_calls, tool_call_id, dropped_by "
            "FROM task_messages WHERE task_id=? ORDER BY seq",
            (row,),
        ) as cur:
            rows = await cur.fetchall()
        return [
            TranscriptRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7]) for r in rows
        ]

    result: list[TranscriptRow] = await store.write(op)
    return result


# -- per-channel supervision -------------------------------------------------------------------

Run = Callable[[TaskHandle], Awaitable[str]]


class Supervisor:
    """Starts, limits, times out, cancels and records one channel's branches and workers.

    ``on_done(outcome)`` is called once per run that ends on its own
    (concluded, failed, timed out); runs cancelled by :meth:`aclose` are
    returned by it instead.
    """

    def __init__(
        self, channel: str, store: Store, pool: TaskPool, on_done: Callable[[TaskOutcome], None]
    ) -> None:
        self.channel = channel
        self.store = store
        self.pool = pool
        self.on_done = on_done
        self.handles: dict[str, TaskHandle] = {}
        self._tasks: dict[str, asyncio.Task[TaskOutcome]] = {}
        self._closing = False
        self.log = log.bind(channel=channel)

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
            plural = "branches" if kind == "branch" else "workers"
            raise LimitReached(
                f"{self.active(kind)} {plural} already run in this channel, the limit "
                f"(max_concurrent_{plural}); wait for one to finish"
            )
        row = await create_run(self.store, self.channel, kind, task)
        handle = TaskHandle(f"{kind}-{row}", row, kind, task, origin)
        self.handles[handle.id] = handle
        self._tasks[handle.id] = asyncio.create_task(
            self._drive(handle, run, pool_limit, time_limit), name=f"{handle.id}:{self.channel}"
        )
        return handle

    async def _drive(
        self, h: TaskHandle, run: Run, pool_limit: int, time_limit: float
    ) -> TaskOutcome:
        bound = self.log.bind(**{h.kind: h.id})
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
            if not expired:
                bound.exception(f"{h.kind}.crashed")
            error = f"timed out after {time_limit:g} s" if expired else f"TimeoutError: {exc}"
        except TaskFailed as exc:
            error = str(exc)
        except asyncio.CancelledError:
            status, error = "cancelled", "the channel stopped"
            outcome = self._outcome(h, status, result, error)
            await self._settle(h, outcome, bound)
            raise
        except Exception as exc:  # a bug in a run must not take the channel down
            bound.exception(f"{h.kind}.crashed")
            error = f"{type(exc).__name__}: {exc}"
        outcome = self._outcome(h, status, result, error)
        await self._settle(h, outcome, bound)
        if not self._closing:
            try:
                self.on_done(outcome)
            except Exception:
                bound.exception(f"{h.kind}.done_callback_failed")
        return outcome

    def _outcome(self, h: TaskHandle, status: Status, result: str, error: str) -> TaskOutcome:
        duration = time.monotonic() - (h.started or h.created)
        h.status = status
        return TaskOutcome(h.id, h.kind, h.task, status, result, error, h.origin,
                           round(duration, 3), dict(h.stats))  # fmt: skip

    async def _settle(self, h: TaskHandle, outcome: TaskOutcome, bound: Any) -> None:
        self.handles.pop(h.id, None)
        self._tasks.pop(h.id, None)
        event = {"concluded": "concluded", "cancelled": "cancelled"}.get(outcome.status, "failed")
        level = "info" if outcome.status == "concluded" else "warning"
        getattr(bound, level)(
            f"{h.kind}.{event}", duration=outcome.duration, error=outcome.error or None,
            **outcome.stats,
        )  # fmt: skip
        try:
            await finish_run(self.store, h.row, outcome)
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
            e if isinstance(e, TaskOutcome) else
            TaskOutcome(h.id, h.kind, h.task, "cancelled", "", "the channel stopped", h.origin,
                        stats=dict(h.stats))
            for (h, _), e in zip(pairs, ended, strict=True)
        ]  # fmt: skip


# -- the overflow retry, shared with branches -------------------------------------------------


async def complete_with_overflow_retry(
    llm: LLMProvider,
    prompt: Callable[[], list[ChatMessage]],
    tools: Sequence[ToolSpec],
    *,
    purpose: Purpose,
    max_tokens: int,
    retries: int,
    compact: Callable[[int], Awaitable[bool]],
) -> Completion:
    """One completion; on a context overflow, ``compact(attempt)`` harder and retry.

    At most ``retries`` retries; ``compact`` returns False when nothing is left
    to drop.  Raises :class:`TaskFailed` when the overflow persists, and for any
    other provider error (the provider has already retried transient ones).
    """
    attempt = 0
    while True:
        try:
            return await llm.complete(prompt(), tools, max_tokens=max_tokens, purpose=purpose)
        except ContextOverflowError as exc:
            if attempt >= retries:
                raise TaskFailed(
                    f"the context overflowed {attempt + 1} times in a row (max_overflow_retries "
                    f"= {retries}); the task is too large for the model's window"
                ) from exc
            attempt += 1
            if not await compact(attempt):
                raise TaskFailed(
                    "the context overflowed and nothing is left to compact; the task itself "
                    "is too large for the model's window"
                ) from exc
        except LLMError as exc:
            raise TaskFailed(f"the model failed: {type(exc).__name__}: {exc}") from exc


# -- segment compaction ------------------------------------------------------------------------


@dataclass
class Recap:
    """What dropped tool turns did, built in code: per-tool counts and the latest calls."""

    turns: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=8))

    def add(self, unit: Sequence[ChatMessage]) -> None:
        head = unit[0]
        results = {m.tool_call_id: m.content for m in unit[1:]}
        if not head.tool_calls:
            return
        self.turns += 1
        for c in head.tool_calls:
            out = results.get(c.id, "")
            failed = out.startswith('{"error"')
            self.counts[c.name] += 1
            self.errors[c.name] += failed
            args = json.dumps(c.arguments, ensure_ascii=False)
            self.lines.append(
                f"- {c.name}({_clip(args, 60)}) -> {'error: ' if failed else ''}{_clip(out, 80)}"
            )

    def text(self) -> str:
        calls = sum(self.counts.values())
        tally = ", ".join(
            f"{name} x{n}" + (f" ({self.errors[name]} failed)" if self.errors[name] else "")
            for name, n in self.counts.most_common()
        )
        lines = [
            f"[Recap of {self.turns} earlier tool turns ({calls} calls), dropped to save room; "
            "the full transcript is kept.]",
            f"Tools used: {tally or 'none'}.",
        ]
        if self.lines:
            lines.append("Latest of them:")
            lines.extend(self.lines)
        return "\n".join(lines)


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


@dataclass(frozen=True, slots=True)
class WorkerLimits:
    """The operator's thresholds, as one channel's settings resolve them."""

    context_window: int
    max_reply_tokens: int
    turns_per_segment: int
    max_segments: int
    segment_compact_threshold: float
    max_overflow_retries: int


class TaskWorker:
    """Runs one task to its result; see the module docstring for the segment rules."""

    def __init__(
        self,
        handle: TaskHandle,
        *,
        llm: LLMProvider,
        counter: TokenCounter,
        tools: ToolRegistry,
        limits: WorkerLimits,
        transcript: Transcript,
        log_: Any = None,
    ) -> None:
        self.handle = handle
        self.llm = llm
        self.counter = counter
        self.tools = tools
        self.limits = limits
        self.transcript = transcript
        self.log = log_ or log.bind(worker=handle.id)
        self.specs = tools.specs()
        self._fixed = specs_tokens(counter, self.specs)
        self.head: list[ChatMessage] = []
        self.recap = Recap()
        self.body: list[tuple[ChatMessage, int]] = []  # (message, transcript seq)
        self.segment = 1
        self.compactions = 0
        self.calls = 0
        self.turns = 0
        self._ids: set[str] = set()

    # -- context ------------------------------------------------------------------------------

    def prompt(self) -> list[ChatMessage]:
        recap = [ChatMessage("system", self.recap.text())] if self.recap.turns else []
        return [*self.head, *recap, *(m for m, _ in self.body)]

    def tokens(self) -> int:
        return self._fixed + sum(message_tokens(self.counter, m) for m in self.prompt())

    def usage(self) -> float:
        return self.tokens() / self.limits.context_window

    async def _add(self, messages: Sequence[ChatMessage], kind: str = "message") -> None:
        seqs = await self.transcript.add(self.segment, messages, kind)
        self.body.extend(zip(messages, seqs, strict=True))

    async def compact(self, *, force: bool = False) -> bool:
        """Drop the oldest tool turns behind the recap; False when nothing could be dropped.

        Normal: at least half of the droppable turns, then more until usage is
        at most half the threshold, so the next segment has room to run.
        Forced (after an overflow): three quarters, and only the newest turn is
        kept.
        """
        keep = 1 if force else KEEP_RECENT_TURNS
        groups = _seq_units(self.body)
        tool_turns = [i for i, g in enumerate(groups) if g[0][0].tool_calls]
        droppable = tool_turns[:-keep]  # the newest ``keep`` turns always stay
        if not droppable:
            return False
        n = math.ceil(len(droppable) * (0.75 if force else 0.5))
        budget = self.limits.segment_compact_threshold * self.limits.context_window / 2
        before = self.tokens()
        drop = set(droppable[:n])
        recap = self.recap
        for i in droppable[:n]:
            recap.add([m for m, _ in groups[i]])
        rest = droppable[n:]
        self.body = [e for i, g in enumerate(groups) if i not in drop for e in g]
        while rest and self.tokens() > budget:
            i = rest.pop(0)
            recap.add([m for m, _ in groups[i]])
            drop.add(i)
            self.body = [e for j, g in enumerate(groups) if j not in drop for e in g]
        # An old "continue" note would only mislead once its context is gone.
        self.body = [
            e for e in self.body if not (e[0].role == "user" and e[0].content == CONTINUE_NOTE)
        ]
        self.compactions += 1
        dropped = [s for i in sorted(drop) for _, s in groups[i]]
        await self.transcript.dropped(dropped, self.compactions)
        await self.transcript.add(self.segment, [ChatMessage("system", recap.text())], "recap")
        self.log.info(
            "worker.compacted", segment=self.segment, forced=force, dropped=len(dropped),
            tokens_before=before, tokens_after=self.tokens(),
            usage_after=round(self.usage(), 3),
        )  # fmt: skip
        self.handle.stats["compactions"] = self.compactions
        return True

    async def _force(self, attempt: int) -> bool:
        self.log.warning("worker.overflow", attempt=attempt, usage=round(self.usage(), 3))
        if not await self.compact(force=True):
            return False
        await self._add([ChatMessage("user", CONTINUE_NOTE)], "note")
        self.handle.stats["retries"] = self.handle.stats.get("retries", 0) + 1
        self.log.info("worker.retried", attempt=attempt)
        return True

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> str:
        """Work until the model answers without a tool call; return that answer."""
        self.head = [ChatMessage("system", WORKER_PROMPT), ChatMessage("user", self.handle.task)]
        await self.transcript.add(0, self.head, "head")
        lim = self.limits
        for segment in range(1, lim.max_segments + 1):
            self.segment = segment
            for _ in range(lim.turns_per_segment):
                self.handle.detail = (
                    f"segment {self.segment}/{lim.max_segments}, {self.calls} tool calls"
                )
                completion = await self._complete(self.specs)
                if not completion.tool_calls:
                    await self._add([ChatMessage("assistant", completion.text)], "result")
                    return self._result(completion.text)
                await self._turn(completion)
            if self.segment < lim.max_segments and self.usage() > lim.segment_compact_threshold:
                await self.compact()
        await self._add([ChatMessage("user", FINAL_NOTE)], "note")
        completion = await self._complete(())
        await self._add([ChatMessage("assistant", completion.text)], "result")
        return self._result(completion.text)

    def _result(self, text: str) -> str:
        self.handle.stats.update(turns=self.turns, calls=self.calls, segments=self.segment)
        if not text.strip():
            raise TaskFailed("the model finished with an empty answer")
        return text.strip()

    async def _complete(self, specs: Sequence[ToolSpec]) -> Completion:
        return await complete_with_overflow_retry(
            self.llm, self.prompt, specs, purpose="worker",
            max_tokens=self.limits.max_reply_tokens,
            retries=self.limits.max_overflow_retries, compact=self._force,
        )  # fmt: skip

    async def _turn(self, completion: Completion) -> None:
        calls = unique_call_ids(completion.tool_calls, self._ids, "call")
        results: list[ToolResult] = [await self.tools.run(c) for c in calls]
        messages = [ChatMessage("assistant", completion.text, tool_calls=calls)]
        messages += [
            ChatMessage("tool", r.text, tool_call_id=c.id)
            for c, r in zip(calls, results, strict=True)
        ]
        await self._add(messages)
        self.turns += 1
        self.calls += len(calls)


def unique_call_ids(
    calls: Sequence[ToolCall], taken: set[str], prefix: str
) -> tuple[ToolCall, ...]:
    """Rename calls whose id is empty or already in ``taken`` (which is updated), so every
    result pairs with exactly one call in the request."""
    out = []
    for c in calls:
        cid, n = c.id, len(taken)
        while not cid or cid in taken:
            n += 1
            cid = f"{prefix}-{n}"
        taken.add(cid)
        out.append(c if cid == c.id else ToolCall(cid, c.name, c.arguments))
    return tuple(out)


def _seq_units(body: Sequence[tuple[ChatMessage, int]]) -> list[list[tuple[ChatMessage, int]]]:
    """:func:`~workers.tools.units` over (message, seq) pairs."""
    grouped = units([m for m, _ in body])
    out, i = [], 0
    for g in grouped:
        out.append(list(body[i : i + len(g)]))
        i += len(g)
    return out
