"""What a channel delegates: branches (``branch``) and task workers (``spawn_worker``).

A channel actor owns one :class:`Delegation`.  It offers the two tools, starts
a run when the channel's model calls one (returning at once with
``{"started": "branch-3"}``), and reports each run's end through ``on_done``,
which the actor turns into a mailbox item: the actor stays the only writer of
its history.  Limits, timeouts and cancellation are the supervisor's
(:class:`~workers.supervisor.Supervisor`); every run is a row in SQLite and a worker's
whole transcript is kept there too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from branches.branch import BranchLimits, run_branch
from tierbot.config import Config
from tierbot.llm.base import ChatMessage, LLMProvider, ToolCall, ToolSpec
from tierbot.storage import MessageStore
from tierbot.tokens import TokenCounter
from workers.compaction import MemoryWriter
from workers.supervisor import Supervisor, TaskFailed, TaskHandle, TaskOutcome, TaskPool
from workers.task import TaskWorker, WorkerLimits
from workers.tools import Recaller, ToolRegistry, builtin_tools

_TASK = {
    "type": "string",
    "description": "The task, self-contained: the fork sees no later messages.",
}

BRANCH_TOOL = ToolSpec(
    "branch",
    "Think about a task in the background on a copy of this conversation (it can search "
    "memory and the archived conversation). Returns at once; its conclusion reaches you in a "
    "later turn. Keep answering meanwhile.",
    {
        "type": "object",
        "properties": {"task": _TASK},
        "required": ["task"],
        "additionalProperties": False,
    },
)
SPAWN_TOOL = ToolSpec(
    "spawn_worker",
    "Start a background worker for a longer task that needs many tool calls. Returns at "
    "once; the worker posts its result to this channel when done.",
    {
        "type": "object",
        "properties": {"task": _TASK},
        "required": ["task"],
        "additionalProperties": False,
    },
)


class Delegation:
    """One channel's branches and task workers (see the module docstring)."""

    def __init__(
        self,
        channel: str,
        *,
        config: Callable[[], Config],
        llm: LLMProvider,
        counter: TokenCounter,
        store: MessageStore,
        pool: TaskPool,
        on_done: Callable[[TaskOutcome], None],
        recall: Recaller | None = None,
        writer: MemoryWriter | None = None,
    ) -> None:
        self.channel = channel
        self.config = config
        self.llm = llm
        self.counter = counter
        self.store = store
        self.pool = pool
        self.recall = recall
        self.writer = writer
        self.supervisor = Supervisor(channel, pool, on_done)

    # -- what the channel offers ---------------------------------------------------------------

    def tools(self) -> list[ToolSpec]:
        s = self.config().for_channel(self.channel)
        return [
            t
            for t, n in (
                (BRANCH_TOOL, s.branches.max_concurrent),
                (SPAWN_TOOL, s.task_workers.max_concurrent),
            )
            if n > 0
        ]

    def handles(self, name: str) -> bool:
        return name in (BRANCH_TOOL.name, SPAWN_TOOL.name)

    async def start(
        self, call: ToolCall, channel_prompt: Sequence[ChatMessage], *, origin: str | None
    ) -> str:
        """Start the branch or worker ``call`` asks for; the tool result for the channel."""
        task = call.arguments.get("task") if isinstance(call.arguments, dict) else None
        if not isinstance(task, str) or not task.strip():
            return json.dumps({"error": "task: a non-empty string is required"})
        try:
            if call.name == BRANCH_TOOL.name:
                handle = await self.branch(task.strip(), channel_prompt, origin=origin)
            else:
                handle = await self.spawn(task.strip(), origin=origin)
        except TaskFailed as exc:
            return json.dumps({"error": str(exc)})
        return json.dumps({"started": handle.id})

    # -- starting runs ---------------------------------------------------------------------------

    async def branch(
        self, task: str, channel_prompt: Sequence[ChatMessage], *, origin: str | None = None
    ) -> TaskHandle:
        """Fork ``channel_prompt`` (the channel's request as it stands) to work on ``task``.

        Also what the runtime calls to branch on its own.  Raises
        :class:`~workers.supervisor.LimitReached` at ``[defaults.branches] max_concurrent``.
        """
        cfg = self.config()
        s = cfg.for_channel(self.channel)
        b = s.branches
        limits = BranchLimits(
            context_window=s.context_window,
            preflight_threshold=s.compaction.branch_preflight_threshold,
            max_reply_tokens=s.max_reply_tokens,
            max_turns=b.max_turns,
            max_overflow_retries=b.max_overflow_retries,
        )
        tools = builtin_tools(
            self.channel, store=self.store, recall=self.recall, writer=self.writer, general=False
        )
        snapshot = list(channel_prompt)  # the copy is taken now, not when the run starts

        async def run(handle: TaskHandle) -> str:
            return await run_branch(
                handle,
                snapshot,
                llm=self.llm,
                counter=self.counter,
                tools=tools,
                limits=limits,
                transcript=self.pool.records.transcript(handle.row),
            )

        return await self.supervisor.start(
            "branch",
            task,
            run,
            limit=b.max_concurrent,
            pool_limit=cfg.workers.branch_concurrency,
            time_limit=b.timeout_seconds,
            origin=origin,
        )

    async def spawn(self, task: str, *, origin: str | None = None) -> TaskHandle:
        """Start a task worker on ``task`` with the built-in and operator tools."""
        cfg = self.config()
        s = cfg.for_channel(self.channel)
        w = s.task_workers
        limits = WorkerLimits(
            context_window=s.context_window,
            max_reply_tokens=s.max_reply_tokens,
            turns_per_segment=w.turns_per_segment,
            max_segments=w.max_segments,
            segment_compact_threshold=w.segment_compact_threshold,
            max_overflow_retries=w.max_overflow_retries,
        )
        tools = self.worker_tools()
        remote = self.pool.remote

        async def run(handle: TaskHandle) -> str:
            if remote is not None:
                handle.detail = "on the shared job queue"
                return await remote.run_task(
                    channel=self.channel,
                    row=handle.row,
                    task=task,
                    limits=limits,
                    time_limit=w.timeout_seconds,
                )
            worker = TaskWorker(
                handle,
                llm=self.llm,
                counter=self.counter,
                tools=tools,
                limits=limits,
                transcript=self.pool.records.transcript(handle.row),
            )
            return await worker.run()

        return await self.supervisor.start(
            "worker",
            task,
            run,
            limit=w.max_concurrent,
            pool_limit=cfg.workers.task_worker_concurrency,
            time_limit=w.timeout_seconds,
            origin=origin,
        )

    def worker_tools(self) -> ToolRegistry:
        """tierbot's safe tools, then the operator's (``TaskPool.tools``; same names win)."""
        own = builtin_tools(self.channel, store=self.store, recall=self.recall, writer=self.writer)
        return own.merged(self.pool.tools)

    # -- status and shutdown ---------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.supervisor.running

    def status(self) -> list[dict[str, Any]]:
        return self.supervisor.status()

    async def aclose(self) -> list[TaskOutcome]:
        """Cancel every branch and worker; return how each ended. Safe to call twice."""
        return await self.supervisor.aclose()
