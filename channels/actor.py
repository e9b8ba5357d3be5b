"""The channel actor: one asyncio task per conversation, the only writer of its history.

Everything that changes a channel's history goes through its mailbox and is
handled here, one item at a time: inbound messages (already durable in the
store), finished compaction workers, and commands.  Messages that arrive while
a turn runs are answered together in the next turn.

After every message that enters the history the compactor is consulted; an
emergency truncation happens here and now (no LLM), anything else is handed to
the process-wide worker pool and swapped in when it finishes, so the channel
never waits for a summary.  For messages a turn answers, that non-emergency
look happens once the turn's model request is under way, so planning a pass
never delays the reply.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import structlog

from branches import Delegation
from channels.context import LiveContext
from channels.prompt import build_prompt
from compactor import Compactor, Plan, forced_note
from compactor.scheduler import in_flight_ids, rescue_chunk
from compactor.scheduler import summary_budget as _summary_budget
from tierbot.config import ChannelSettings, Config, RespondMode
from tierbot.errors import ContextOverflowError, LLMError, ToolError
from tierbot.llm.base import ChatMessage, Completion, LLMProvider, ToolCall, ToolSpec
from tierbot.messages import Message, Outbound, ProgressHandle, Role, State
from tierbot.retry import Backoff
from tierbot.store import ChannelState, CompactionRecord, Store
from tierbot.tokens import TokenCounter
from tierbot.vocab import CompactionKind
from workers import CompactionJob, CompactionOutcome, CompactionWorker, WorkerPool
from workers.supervisor import TaskOutcome, TaskPool

log = structlog.get_logger("tierbot.channel")

MAX_TOOL_ROUNDS = 4
# The bot's entries sit this far apart after the newest entered message; messages are
# positioned at their integer id, so 100,000 entries fit before the next one (and a
# hundred before a reworded marker, placed 1e-3 after what it follows).
_POS_STEP = 1e-5
BOT_AUTHOR = "tierbot"


class MemoryAccess(Protocol):
    """What a channel needs from the memory graph to answer from memory."""

    def recall_tool(self) -> ToolSpec: ...

    async def recall_from_tool(
        self, arguments: dict[str, Any], *, channel: str, exclude: Collection[str] = ()
    ) -> str:
        """Run memory_recall; ``exclude`` names platform ids the channel already has live."""
        ...

    def index_wake(self) -> None:
        """New messages are stored: the background indexer reads them from the store soon;
        never waits."""
        ...

    async def count(self, channel: str) -> int: ...


@dataclass
class ChannelDeps:
    """Everything a channel actor uses, shared by all channels of a runtime."""

    config: Callable[[], Config]
    store: Store
    llm: LLMProvider
    counter: TokenCounter
    pool: WorkerPool
    worker: CompactionWorker
    deliver: Callable[[Outbound], Awaitable[None]]
    respond_mode: Callable[[str], RespondMode]
    memory: MemoryAccess | None = None
    progress: Callable[[str, str | None], Awaitable[ProgressHandle | None]] | None = None
    tasks: TaskPool = field(default_factory=TaskPool)  # process-wide branch/worker slots, tools


@dataclass(frozen=True, slots=True)
class _Incoming:
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class _WorkerDone:
    plan: Plan
    outcome: CompactionOutcome | None
    error: BaseException | None
    rescued: tuple[int, ...] = ()  # a rescue's chunk: the set-aside ids it summarized
    missing: tuple[int, ...] = ()  # set-aside ids no longer in the store (forgotten)


@dataclass(frozen=True, slots=True)
class _Ran:
    """What a compaction job returns to the actor: the worker's outcome and, for a
    rescue, which set-aside messages it covered and which it found gone (None as
    outcome: nothing was left to summarise, no worker ran)."""

    outcome: CompactionOutcome | None
    rescued: tuple[int, ...] = ()
    missing: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class _Recheck:
    """The loop guard or a failure backoff expired: look at the usage again."""


@dataclass(frozen=True, slots=True)
class _Delegated:
    outcome: TaskOutcome


@dataclass(frozen=True, slots=True)
class _Call:
    fn: Callable[[ChannelActor], Awaitable[Any]]
    future: asyncio.Future[Any]


_STOP = object()


class ChannelActor:
    """Owns one channel's live context, compactor and turn loop."""

    def __init__(self, key: str, deps: ChannelDeps) -> None:
        self.key = key
        self.deps = deps
        self.log = log.bind(channel=key)
        self.ctx = LiveContext()
        self.compactor = Compactor(key)
        self.handled_upto = 0
        self.peak_usage = 0.0
        self.last_active = time.monotonic()
        self.in_turn = False
        self.busy = False
        self._fixed_key: tuple[str, tuple[str, ...]] | None = None
        self._mailbox: asyncio.Queue[Any] = asyncio.Queue()
        self._slots = asyncio.Semaphore(deps.config().defaults.mailbox_size)
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        # Branches started here whose branch_result has not entered the history yet.
        self._awaiting: set[str] = set()
        # Finished range passes waiting for an older range to be swapped in first.
        self._held: list[_WorkerDone] = []
        self._recheck: asyncio.TimerHandle | None = None
        self._recheck_at = 0.0
        self._changed = asyncio.Event()  # set after every mailbox batch (see make_room)
        # While messages a turn will answer enter, a check that cannot be an emergency waits
        # until that turn's model request is out (see _call_model).
        self._deferring = False
        self._check_due = False
        self._inbox_tokens = 0  # tokens of messages put but not yet entered
        self.delegation = Delegation(
            key,
            config=deps.config,
            llm=deps.llm,
            counter=deps.counter,
            store=deps.store,
            pool=deps.tasks,
            recall=deps.memory,
            writer=deps.worker.memory,
            on_done=lambda outcome: self._mailbox.put_nowait(_Delegated(outcome)),
        )

    # -- lifecycle -------------------------------------------------------------------

    @property
    def settings(self) -> ChannelSettings:
        return self.deps.config().for_channel(self.key)

    async def start(self) -> None:
        """Rehydrate from the store and start the turn loop; resumes unanswered messages."""
        live = await self.deps.store.load_live(self.key)
        state = await self.deps.store.channel_state(self.key)
        self.ctx = LiveContext(live)
        self._refresh_fixed()
        self.handled_upto = state.handled_upto
        self.compactor.counters.update(state.counters)
        self.peak_usage = self.usage
        pending = tuple(m for m in live if m.role is Role.USER and m.id > self.handled_upto)
        self._task = asyncio.create_task(self._run(pending), name=f"channel:{self.key}")
        self.log.debug("channel.started", live=len(live), pending=len(pending))

    async def stop(self) -> None:
        """Finish what is in the mailbox, then stop. Safe to call twice."""
        if self._task is None or self._stopped:
            return
        self._stopped = True
        self._cancel_recheck()
        await self._mailbox.put(_STOP)
        await self._task
        # Branches and workers die with the channel; their end is recorded for the next start.
        ended = await self.delegation.aclose()
        while not self._mailbox.empty():
            item = self._mailbox.get_nowait()
            ended += [item.outcome] if isinstance(item, _Delegated) else []
        for outcome in ended:
            await self._record_outcome(outcome, live=False)

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def idle(self) -> bool:
        """Nothing queued, nothing being handled, no compaction in flight."""
        return (
            self._mailbox.empty()
            and not self.busy
            and self.compactor.running is None
            and not self._held
            and not self.delegation.running
        )

    @property
    def mailbox_depth(self) -> int:
        """Items waiting in the mailbox (message batches, worker results, commands)."""
        return self._mailbox.qsize()

    # -- inputs ------------------------------------------------------------------------

    async def put(self, messages: Sequence[Message]) -> None:
        """Hand stored messages to the actor (waits while the mailbox is full)."""
        await self._slots.acquire()
        self.last_active = time.monotonic()
        self._inbox_tokens += sum(m.tokens for m in messages)
        await self._mailbox.put(_Incoming(tuple(messages)))

    async def call(self, fn: Callable[[ChannelActor], Awaitable[Any]]) -> Any:
        """Run ``fn(self)`` inside the actor, between turns, and return its result."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._mailbox.put(_Call(fn, fut))
        return await fut

    # -- the loop ------------------------------------------------------------------------

    async def _run(self, pending: tuple[Message, ...]) -> None:
        self.busy = True
        try:
            # A restart may find more history than fits (messages stored just before a
            # crash, or a smaller window in a new config): check before anything else.
            await self._check()
            if pending:
                await self._respond_if_due(list(pending))
        except Exception:
            self.log.exception("channel.resume_failed")
        self.busy = False
        while True:
            batch = [await self._mailbox.get()]
            self.busy = True
            while not self._mailbox.empty():
                batch.append(self._mailbox.get_nowait())
            incoming: list[Message] = []
            woken: list[str | None] = []
            stop = False
            for item in batch:
                try:
                    if item is _STOP:
                        stop = True
                    elif isinstance(item, _Incoming):
                        self._slots.release()
                        self._deferring = self._due(item.messages)
                        try:
                            for m in item.messages:
                                self._inbox_tokens -= m.tokens
                                await self._enter(m)
                        finally:
                            self._deferring = False
                        incoming.extend(item.messages)
                    elif isinstance(item, _WorkerDone):
                        await self._worker_done(item)
                    elif isinstance(item, _Recheck):
                        await self._check()
                    elif isinstance(item, _Delegated):
                        if await self._record_outcome(item.outcome, live=True):
                            woken.append(item.outcome.origin)
                    elif isinstance(item, _Call):
                        try:
                            item.future.set_result(await item.fn(self))
                        except Exception as exc:
                            item.future.set_exception(exc)
                except Exception:
                    self.log.exception("channel.item_failed")
            if incoming:
                try:
                    await self._respond_if_due(incoming)
                except Exception:
                    self.log.exception("channel.turn_failed")
            if self._check_due:  # the turn failed or ended before its model call
                try:
                    await self._check()
                except Exception:
                    self.log.exception("channel.item_failed")
            if woken and not any(m.role is Role.USER for m in incoming):
                try:
                    await self._wake(woken[-1])
                except Exception:
                    self.log.exception("channel.turn_failed")
            self.last_active = time.monotonic()
            self.busy = False
            self._changed.set()
            if stop:
                return

    def _due(self, incoming: Sequence[Message]) -> bool:
        """Whether ``incoming`` gets a turn (the channel's respond mode)."""
        users = [m for m in incoming if m.role is Role.USER]
        if not users:
            return False
        mode = self.deps.respond_mode(self.key)
        return mode == "always" or (
            mode == "mention" and any(m.meta.get("addressed") or m.meta.get("dm") for m in users)
        )

    async def _respond_if_due(self, incoming: list[Message]) -> None:
        users = [m for m in incoming if m.role is Role.USER]
        if not users:
            return
        if self._due(users):
            self.in_turn = True
            try:
                await self._turn(users)
            finally:
                self.in_turn = False
        self.handled_upto = max(self.handled_upto, *(m.id for m in users))
        await self._save_state()

    # -- history and usage --------------------------------------------------------------

    @property
    def usage(self) -> float:
        return self.ctx.usage(self.settings.context_window)

    def _refresh_fixed(self) -> None:
        """Count the system prompt and tool schemas; recounted only when they change."""
        s = self.settings
        tools = self._tools()
        key = (s.system_prompt, tuple(t.name for t in tools))
        if key == self._fixed_key:
            return
        schema = json.dumps([asdict(t) for t in tools]) if tools else ""
        self._fixed_key = key
        self.ctx.set_fixed(
            self.deps.counter.count_message(s.system_prompt) + self.deps.counter.count(schema)
        )

    async def _enter(self, msg: Message) -> None:
        """A message entered the history: account for it and let the compactor look."""
        self.ctx.append(msg)
        self.compactor.on_message(msg.tokens)
        self._index_wake()
        await self._check()

    def _index_wake(self) -> None:
        """Wake the memory graph's background indexer, when it is on (it reads the store)."""
        if self.deps.memory is not None and self.deps.config().memory.index_live_messages:
            self.deps.memory.index_wake()

    async def _check(self) -> None:
        self._refresh_fixed()
        usage = self.usage
        self.peak_usage = max(self.peak_usage, usage)
        s = self.settings
        if self._deferring and usage < s.compaction.emergency_threshold:
            self._check_due = True  # see _call_model
            return
        self._check_due = False
        plan = self.compactor.check(
            self.ctx.items,
            usage,
            s.context_window,
            s.compaction,
            markers=self.ctx.marker_count,
            summary_tokens=self.ctx.summary_tokens,
            in_flight=self._awaiting,
        )
        if plan is None:
            self._arm_recheck(self.compactor.wake_at)
            return
        if plan.kind is CompactionKind.EMERGENCY:
            await self._truncate(plan)
            await self._check()
        else:
            self._launch(plan)
            # A burst may need more than one range in flight: look again until the
            # projected usage is under the threshold or the slots are taken.
            if len(self.compactor.in_flight) < s.compaction.parallel_compactions:
                await self._check()

    def _arm_recheck(self, at: float | None) -> None:
        """Re-check this channel at monotonic time ``at`` even if no message comes."""
        if at is None or self._stopped:
            return
        if self._recheck is not None and self._recheck_at <= at:
            return
        self._cancel_recheck()
        loop = asyncio.get_running_loop()
        self._recheck_at = at
        self._recheck = loop.call_at(
            loop.time() + max(0.0, at - time.monotonic()), self._fire_recheck
        )

    def _fire_recheck(self) -> None:
        self._recheck = None
        if not self._stopped:
            self._mailbox.put_nowait(_Recheck())

    def _cancel_recheck(self) -> None:
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None

    async def make_room(self, tokens: int) -> None:
        """Wait until ``tokens`` more would keep usage under ``aggressive_threshold``, or
        until no pass in flight or due could make room (backpressure for imports).

        Nobody waits for a reply during an import, so it may wait for compaction
        instead of forcing an emergency truncation; it never waits on a channel
        that nothing is compacting (the emergency tier stays the last resort).
        """
        while not self.done:
            s = self.settings
            coming = self.ctx.total + self._inbox_tokens + tokens
            if coming < s.compaction.aggressive_threshold * s.context_window:
                return
            if not self._compaction_pending():
                return
            self._changed.clear()
            await self._changed.wait()

    async def settle(self) -> None:
        """Wait until usage is under ``background_threshold``, or until no pass is in
        flight or due within the loop guard (a quiet channel's last passes)."""
        while not self.done:
            s = self.settings
            if self.usage < s.compaction.background_threshold or not self._compaction_pending():
                return
            self._changed.clear()
            await self._changed.wait()

    def _compaction_pending(self) -> bool:
        """A pass is in flight, waiting to be swapped in, or due within the loop guard."""
        guard = self.settings.compaction.loop_guard_seconds
        due = self._recheck is not None and self._recheck_at <= time.monotonic() + guard
        return bool(
            self.compactor.in_flight or self._held or not self._mailbox.empty() or self.busy or due
        )

    async def _append(self, msg: Message) -> Message:
        """Store and enter one of the bot's own entries, right after what the actor has seen.

        A message stored meanwhile but not entered yet (it waits in the mailbox) comes
        after it: the context keeps the order the actor saw things in, so a tool call
        stays next to its result and a reply before the questions it never saw.
        """
        if len(self.ctx):
            msg = msg.with_(pos=self.ctx.items[-1].pos + _POS_STEP)
        stored = await self.deps.store.append(msg)
        assert stored is not None, "internal platform ids are unique"
        await self._enter(stored)
        return stored

    def _new(self, role: Role, text: str, **meta: Any) -> Message:
        return Message(
            channel=self.key,
            platform_id=f"{role.value}:{uuid.uuid4().hex}",
            role=role,
            text=text,
            author_id=BOT_AUTHOR if role is not Role.MARKER else "",
            author_name=BOT_AUTHOR if role is not Role.MARKER else "",
            ts=time.time(),
            tokens=self.deps.counter.count_message(text),
            meta=meta,
        )

    async def _save_state(self) -> None:
        await self.deps.store.save_channel_state(self.key, self._state())

    def _state(self) -> ChannelState:
        return ChannelState(self.handled_upto, dict(self.compactor.counters))

    # -- a turn -----------------------------------------------------------------------------

    def _tools(self) -> list[ToolSpec]:
        memory = [self.deps.memory.recall_tool()] if self.deps.memory is not None else []
        # A listen-only channel never calls its model: it could not delegate anything.
        listening = self.deps.respond_mode(self.key) == "listen"
        return memory + ([] if listening else self.delegation.tools())

    def build_prompt(self) -> list[ChatMessage]:
        """The provider-neutral request for the current live context (see channels.prompt)."""
        return build_prompt(self.settings.system_prompt, self.ctx.items)

    async def _turn(self, users: list[Message]) -> None:
        last = users[-1]
        started = time.monotonic()
        handle = None
        if self.deps.progress is not None:
            handle = await self.deps.progress(self.key, last.platform_id)
        try:
            waiting = set(self._awaiting)
            text = await self._complete()
            # A reply written while a branch it started still runs is a progress note: the
            # answer comes later, so it is never mined for memories nor indexed.
            note = {"progress": True} if self._awaiting - waiting else {}
            reply = await self._append(
                self._new(Role.ASSISTANT, text, reply_to=last.platform_id, **note)
            )
            await self.deps.deliver(Outbound(self.key, reply.text, reply_to=last.platform_id))
            self.log.info(
                "turn.completed",
                messages=len(users),
                duration=round(time.monotonic() - started, 4),
                usage=round(self.usage, 4),
            )
        finally:
            if handle is not None:
                await handle.done()

    async def _complete(self) -> str:
        s = self.settings
        overflowed = False
        for _ in range(MAX_TOOL_ROUNDS + 1):
            try:
                completion = await self._call_model(s.max_reply_tokens)
            except ContextOverflowError:
                if overflowed:
                    return "Sorry, this conversation is too long for the model right now."
                overflowed = True
                self.log.warning("channel.context_overflow", usage=round(self.usage, 3))
                plan = self.compactor.check(
                    self.ctx.items, 1.0, s.context_window, s.compaction, in_flight=self._awaiting
                )
                if plan is not None and plan.kind is CompactionKind.EMERGENCY:
                    await self._truncate(plan)
                continue
            except LLMError as exc:
                self.log.error("channel.llm_failed", error=str(exc), kind=type(exc).__name__)
                return f"Sorry, I could not reach the model ({type(exc).__name__})."
            if completion.usage is not None and completion.usage.input_tokens:
                self.ctx.report_input_tokens(completion.usage.input_tokens)
            if not completion.tool_calls:
                return completion.text or "…"
            await self._run_tools(completion.text, completion.tool_calls)
        return "Sorry, I got lost using my tools."

    async def _call_model(self, max_tokens: int) -> Completion:
        """One chat request for the current context; a check left due by the messages this
        turn answers runs while the request is in flight.

        That check is never an emergency (those run at once, before the prompt is built),
        so it leaves the live context as it is: planning a background pass (a cut over
        the whole history) overlaps the model call instead of delaying it.
        """
        request = self.deps.llm.complete(self.build_prompt(), self._tools(), max_tokens=max_tokens)
        if not self._check_due:
            return await request
        call = asyncio.ensure_future(request)
        try:
            await asyncio.sleep(0)  # the request gets under way first
            await self._check()
        except Exception:
            self.log.exception("channel.item_failed")
        except BaseException:
            call.cancel()
            raise
        return await call

    async def _run_tools(self, text: str, calls: Sequence[ToolCall]) -> None:
        payload = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
        shown = text or "; ".join(f"{c.name}({json.dumps(c.arguments)})" for c in calls)
        await self._append(self._new(Role.TOOL_CALL, shown, calls=payload))
        for c in calls:
            result = await self._tool(c)
            if c.name == "branch" and result.startswith('{"started"'):
                self._awaiting.add(json.loads(result)["started"])
            await self._append(self._new(Role.TOOL_RESULT, result, call_id=c.id, tool=c.name))

    async def _tool(self, call: ToolCall) -> str:
        if self.delegation.handles(call.name):
            origin = next((m for m in reversed(self.ctx.items) if m.role is Role.USER), None)
            return await self.delegation.start(
                call, self.build_prompt(), origin=origin.platform_id if origin else None
            )
        memory = self.deps.memory
        if call.name == "memory_recall" and memory is not None:
            try:
                # What is in the live context is already in front of the model.
                live = {m.platform_id for m in self.ctx.items}
                return await memory.recall_from_tool(call.arguments, channel=self.key, exclude=live)
            except ToolError as exc:
                return json.dumps({"error": str(exc)})
        return json.dumps({"error": f"unknown tool {call.name!r}"})

    # -- branches and workers -----------------------------------------------------------------

    async def _record_outcome(self, outcome: TaskOutcome, *, live: bool) -> bool:
        """Put a finished branch or worker into the history; True if a turn should follow.

        A branch's conclusion (or failure) enters as a tool call/result pair the
        model reads in its next turn; a worker's result is posted to the channel.
        ``live=False`` (the actor has stopped) writes to the store only.
        """
        if outcome.kind == "branch":
            call = {"id": outcome.id, "name": "branch_result", "arguments": {"id": outcome.id}}
            entries = [
                self._new(Role.TOOL_CALL, f"branch_result({outcome.id})", calls=[call]),
                self._new(
                    Role.TOOL_RESULT,
                    outcome.as_tool_result(),
                    call_id=outcome.id,
                    tool="branch_result",
                ),
            ]
        else:
            entries = [
                self._new(
                    Role.ASSISTANT,
                    outcome.report(),
                    reply_to=outcome.origin,
                    worker=outcome.id,
                    status=outcome.status,
                )
            ]
        for entry in entries:
            if live:
                await self._append(entry)
            else:
                await self.deps.store.append(entry)
        self._awaiting.discard(outcome.id)  # only now may a cut take the whole exchange
        if outcome.kind == "worker" and live:
            await self.deps.deliver(Outbound(self.key, outcome.report(), reply_to=outcome.origin))
        return live and outcome.kind == "branch" and outcome.status != "cancelled"

    async def _wake(self, origin: str | None) -> None:
        """A branch came back while nobody was talking: answer the message that started it."""
        if self.deps.respond_mode(self.key) == "listen":
            return
        users = [m for m in self.ctx.items if m.role is Role.USER]
        asked = next((m for m in reversed(users) if m.platform_id == origin), None)
        if asked is None and not users:
            return
        self.in_turn = True
        try:
            await self._turn([asked or users[-1]])
        finally:
            self.in_turn = False

    # -- compaction ---------------------------------------------------------------------------

    async def _truncate(self, plan: Plan) -> None:
        """Emergency: set the oldest messages aside now, behind one marker; no LLM.

        Earlier markers are folded into the new one, so the context never fills
        with markers; the set-aside messages are summarized later (a rescue job).
        """
        started = time.monotonic()
        before, tokens_before = self.usage, self.ctx.total
        old_markers = [m for m in self.ctx.items if m.role is Role.MARKER]
        aside = [int(i) for mk in old_markers for i in mk.meta.get("set_aside", [])]
        aside += [m.id for m in plan.covered]
        first_pos = min([m.pos for m in plan.covered] + [mk.pos for mk in old_markers])
        marker = self._marker(sorted(set(aside))).with_(pos=first_pos)
        remove = [m.id for m in plan.covered] + [mk.id for mk in old_markers]
        self.compactor.emergency_done()
        placed = await self.deps.store.swap(self.key, remove, marker, state=self._state())
        self.ctx.replace(remove, placed)
        await self.deps.store.record_compaction(
            self._record(plan, "ok", started, before, self.ctx.total, tokens_before, 0)
        )
        self.log.warning(
            "compaction.emergency",
            usage_before=round(before, 3),
            usage_after=round(self.usage, 3),
            set_aside=len(plan.covered),
        )

    def _marker(self, set_aside: Sequence[int]) -> Message:
        text = (
            f"[{len(set_aside)} earlier messages were set aside to keep this conversation within "
            "its context window. They are archived and will be summarized.]"
        )
        return self._new(Role.MARKER, text, set_aside=list(set_aside))

    def _launch(self, plan: Plan) -> None:
        """Hand ``plan`` to the worker pool; its result comes back through the mailbox."""
        self.compactor.started(plan)
        self.log.info(
            "compaction.triggered",
            tier=plan.kind.value,
            usage=round(plan.usage, 3),
            messages=len(plan.covered),
        )
        worker = self.deps.worker
        busy = in_flight_ids(p.covered for p in self.compactor.ranges)

        async def run() -> _Ran:
            messages: tuple[Message, ...] = plan.covered
            rescued: tuple[int, ...] = ()
            missing: tuple[int, ...] = ()
            if plan.kind is CompactionKind.RESCUE and plan.marker is not None:
                chunk, missing = await self._rescue_chunk(plan.marker, busy)
                messages = tuple(chunk)
                rescued = tuple(m.id for m in messages)
                if not messages:  # every set-aside message left was forgotten
                    return _Ran(None, (), missing)
            job = CompactionJob(
                channel=self.key,
                kind=plan.kind.value,
                messages=messages,
                max_summary_tokens=self.summary_budget(),
                level=plan.level,
                extract_memories=plan.kind is not CompactionKind.META,
            )
            return _Ran(await worker.run(job), rescued, missing)

        def done(result: Any, error: BaseException | None) -> None:
            ran = result if isinstance(result, _Ran) else None
            outcome = ran.outcome if ran is not None else None
            self._mailbox.put_nowait(
                _WorkerDone(
                    plan, outcome, error, ran.rescued if ran else (), ran.missing if ran else ()
                )
            )

        self.deps.pool.submit(self.key, run, done, urgency=plan.usage)

    async def _rescue_chunk(
        self, marker: Message, busy: set[int]
    ) -> tuple[list[Message], tuple[int, ...]]:
        """The oldest bounded chunk of what ``marker`` set aside (ids a range in flight
        covers are left to it): at most ``rescue_chunk_messages`` messages and the
        tokens of a background pass, so no summary covers thousands of messages.

        Also the set-aside ids looked at and no longer stored (a user forgotten with
        ``keep_messages_on_forget = false``): they are skipped, never waited for.  An
        empty chunk means nothing set aside is left to summarise.
        """
        s = self.settings
        ids = sorted(int(i) for i in marker.meta.get("set_aside", []) if int(i) not in busy)
        limit = s.compaction.rescue_chunk_messages
        max_tokens = max(1, int(s.compaction.background_fraction * s.context_window))
        # Set-aside ids are in history order; a few more than the limit let the chunk
        # finish a tool call/result pair.  A window whose messages are all gone moves
        # on to the next, so forgotten messages never stall the rescue.
        step = limit + 8
        missing: list[int] = []
        for start in range(0, len(ids), step):
            window = ids[start : start + step]
            loaded = await self.deps.store.get_messages(window)
            found = {m.id for m in loaded}
            missing += [i for i in window if i not in found]
            if loaded:
                return rescue_chunk(loaded, max_tokens, limit), tuple(missing)
        return [], tuple(missing)

    def summary_budget(self) -> int:
        """Tokens one summary may take: the configured cap, but never more than half the
        share summaries may fill, so a small window is not flooded by its summaries."""
        s = self.settings
        return _summary_budget(s.compaction, s.context_window)

    async def force_compaction(self) -> str:
        """Start a background compaction now (the ``/compact`` command)."""
        s = self.settings
        plan = self.compactor.forced(self.ctx.items, self.usage, s.compaction, self._awaiting)
        if plan is None:
            running = self.compactor.running
            return "A compaction is already running." if running else "Nothing to compact yet."
        self._launch(plan)
        return (
            f"Compacting the oldest {len(plan.covered)} messages in the background; "
            "I will say here how it went."
        )

    async def _worker_done(self, done: _WorkerDone) -> None:
        """Swap in a finished pass; a range that finished before an older one waits for it,
        so summaries land in the order of the history they cover."""
        if not self.compactor.first_range(done.plan):
            self._held.append(done)
            return
        await self._apply(done)
        while self._held:
            nxt = next((d for d in self._held if self.compactor.first_range(d.plan)), None)
            if nxt is None:
                return
            self._held.remove(nxt)
            await self._apply(nxt)

    async def _apply(self, done: _WorkerDone) -> None:
        plan, outcome = done.plan, done.outcome
        started = time.monotonic() - (outcome.duration if outcome else 0.0)
        before, tokens_before = self.usage, self.ctx.total
        memories = outcome.memories if outcome else 0
        if (
            plan.kind is CompactionKind.RESCUE
            and done.missing
            and not done.rescued
            and done.error is None
        ):
            await self._rescue_gone(plan, done.missing, started)
            return
        if outcome is None or outcome.summary is None:
            reason = str(done.error) if done.error else (outcome.error if outcome else "")
            await self._failed(plan, "failed", reason or "unknown", started, memories)
            return
        live = self.ctx.ids()
        cover = [m for m in plan.covered if m.id in live]
        summary = self._summary(plan, outcome.summary, len(done.rescued))
        frees = sum(m.tokens for m in cover) - summary.tokens
        if plan.kind is not CompactionKind.RESCUE and cover and frees <= 0:
            reason = (
                f"the summary ({summary.tokens} tokens) is not smaller than the "
                f"{len(cover)} messages it would replace ({summary.tokens + frees} tokens)"
            )
            await self._failed(plan, "noop", reason, started, memories)
            return
        cover_ids = {m.id for m in plan.covered}
        if plan.kind is CompactionKind.RESCUE and done.rescued:
            # One chunk: the marker stays (reworded) until its last chunk lands.
            cover_ids = set(done.rescued)
        elif plan.kind is CompactionKind.RESCUE and plan.marker is not None:
            cover_ids |= {int(i) for i in plan.marker.meta.get("set_aside", [])}
        gone = set(done.missing)
        if gone:
            self.log.warning(
                "compaction.rescue_missing",
                missing=len(gone),
                hint="set-aside messages were forgotten; skipped",
            )
        updates: list[Message] = []
        for mk in [m for m in self.ctx.items if m.role is Role.MARKER and m.id not in cover_ids]:
            aside = [int(i) for i in mk.meta.get("set_aside", [])]
            remaining = [i for i in aside if i not in cover_ids and i not in gone]
            if len(remaining) == len(aside):
                continue
            if not remaining:
                cover_ids.add(mk.id)
                continue
            fresh = self._marker(remaining)
            updates.append(
                mk.with_(
                    text=fresh.text,
                    tokens=fresh.tokens,
                    meta=fresh.meta,
                    pos=max(m.pos for m in plan.covered) + 1e-3,
                )
            )
        summary, cover_ids = self._fit(plan, summary, cover_ids, updates)
        if plan.kind in (CompactionKind.BACKGROUND, CompactionKind.AGGRESSIVE):
            self.compactor.summary_size = summary.tokens
        self.compactor.finished(plan, "ok")
        # The record goes into the swap's own transaction: one commit (one fsync) instead
        # of two while a turn may be waiting behind them.
        record = self._record(
            plan,
            "ok",
            started,
            before,
            self._total_after(cover_ids, updates, summary),
            tokens_before,
            memories,
        )
        placed = await self.deps.store.swap(
            self.key,
            sorted(cover_ids),
            summary,
            record=record,
            state=self._state(),
            updates=updates,
        )
        for u in updates:
            self.ctx.update(u)
        self.ctx.replace(cover_ids, placed if summary.state is State.LIVE else None)
        self.log.info(
            "compaction.completed",
            tier=plan.kind.value,
            messages=len(cover_ids),
            tokens_before=tokens_before,
            tokens_after=self.ctx.total,
            duration=round(outcome.duration, 3),
            memories=memories,
        )
        if plan.forced:
            freed = tokens_before - self.ctx.total
            await self.deps.deliver(Outbound(self.key, forced_note(plan, "ok", freed=freed)))
        elif self.settings.compaction.notice and plan.kind is not CompactionKind.META:
            note = (
                f"(I summarized {len(plan.covered)} older messages to keep this conversation "
                "within my context window; nothing is lost, ask me about them.)"
            )
            await self.deps.deliver(Outbound(self.key, note))
        await self._check()

    async def _rescue_gone(self, plan: Plan, missing: Sequence[int], started: float) -> None:
        """A rescue found nothing left to summarise: the set-aside messages it looked at
        were forgotten.  Take them off the markers (a marker left with none goes) so no
        later rescue looks for them again; no summary, no model call."""
        gone = set(missing)
        before, tokens_before = self.usage, self.ctx.total
        updates: list[Message] = []
        remove: list[int] = []
        left = 0
        for mk in [m for m in self.ctx.items if m.role is Role.MARKER]:
            aside = [int(i) for i in mk.meta.get("set_aside", [])]
            remaining = [i for i in aside if i not in gone]
            left += len(remaining)
            if len(remaining) == len(aside):
                continue
            if not remaining:
                remove.append(mk.id)
                continue
            fresh = self._marker(remaining)
            updates.append(mk.with_(text=fresh.text, tokens=fresh.tokens, meta=fresh.meta))
        self.compactor.finished(plan, "ok")
        reason = f"{len(gone)} set-aside messages were forgotten before they were summarized"
        live = {m.id: m for m in self.ctx.items}
        after = tokens_before - sum(live[i].tokens for i in remove)
        after += sum(u.tokens - live[u.id].tokens for u in updates)
        record = self._record(plan, "ok", started, before, after, tokens_before, 0, reason)
        await self.deps.store.swap(
            self.key, remove, None, record=record, state=self._state(), updates=updates
        )
        for u in updates:
            self.ctx.update(u)
        self.ctx.replace(remove, None)
        self.log.warning(
            "compaction.rescue_missing",
            missing=len(gone),
            still_set_aside=left,
            hint="set-aside messages were forgotten; skipped",
        )
        await self._check()

    def _total_after(
        self, cover_ids: Collection[int], updates: Sequence[Message], summary: Message
    ) -> int:
        """The context's token total once a swap of ``cover_ids`` for ``summary`` (and the
        marker ``updates``) is applied, computed before it is."""
        live = {m.id: m for m in self.ctx.items}
        total = self.ctx.total - sum(live[i].tokens for i in cover_ids if i in live)
        total += sum(u.tokens - live[u.id].tokens for u in updates if u.id in live)
        return total + (summary.tokens if summary.state is State.LIVE else 0)

    def _fit(
        self, plan: Plan, summary: Message, cover_ids: set[int], updates: list[Message]
    ) -> tuple[Message, set[int]]:
        """Keep a summary live only if it shrinks the context or fits under the background
        threshold.

        A summary of messages an emergency already set aside (a rescue, or a worker
        overtaken by a truncation) adds tokens; when that would push usage to the
        background threshold it is stored archived (linked, searchable) instead and
        the marker stays, reworded, so summarizing never pushes usage back up.
        """
        s = self.settings
        live = {m.id: m for m in self.ctx.items}
        leaving = sum(live[i].tokens for i in cover_ids if i in live)
        projected = self.ctx.total - leaving + summary.tokens
        grows = summary.tokens > leaving
        if not grows or projected < s.compaction.background_threshold * s.context_window:
            return summary, cover_ids
        marker = plan.marker
        last_chunk = marker is not None and marker.id in cover_ids
        if (
            plan.kind is CompactionKind.RESCUE
            and marker is not None
            and marker.id in live
            and last_chunk
        ):
            n = len(marker.meta.get("set_aside", []))
            text = (
                f"[{n} earlier messages were set aside and summarized; the summary is archived "
                "and their content can be recalled from memory.]"
            )
            updates.append(
                marker.with_(
                    text=text, tokens=self.deps.counter.count_message(text), meta={"summarized": n}
                )
            )
            cover_ids = cover_ids - {marker.id}
        return summary.with_(state=State.ARCHIVED), cover_ids

    def _summary(self, plan: Plan, text: str, rescued: int = 0) -> Message:
        covered = plan.covered
        if plan.kind is CompactionKind.RESCUE and plan.marker is not None:
            first_pos = plan.marker.pos
            n = rescued or len(plan.marker.meta.get("set_aside", []))
        else:
            first_pos = min(m.pos for m in covered)
            n = len(covered)
        level = plan.level if plan.kind is CompactionKind.META else 1
        header = f"[Summary of {n} earlier {'summaries' if level > 1 else 'messages'}]"
        body = f"{header}\n{text.strip()}"
        msg = self._new(Role.SUMMARY, body, level=level, kind=plan.kind.value, covers=n)
        return msg.with_(pos=first_pos, author_id="", author_name="")

    async def _failed(
        self, plan: Plan, outcome: str, reason: str, started: float, memories: int
    ) -> None:
        cfg = self.deps.config().workers
        backoff = Backoff(cfg.retry_base_seconds, cfg.retry_max_seconds, jitter=0.0)
        self.compactor.finished(plan, outcome, backoff.delay(self.compactor.failures))
        usage, tokens = self.usage, self.ctx.total
        record = self._record(plan, outcome, started, usage, tokens, tokens, memories, reason)
        await self.deps.store.record_compaction(record)
        await self._save_state()
        self.log.warning("compaction.failed", tier=plan.kind.value, outcome=outcome, reason=reason)
        if plan.forced:
            await self.deps.deliver(Outbound(self.key, forced_note(plan, outcome, reason=reason)))
        # No immediate re-check: the retry waits for the backoff, then looks again even if
        # no message comes (a quiet channel must not rest over its threshold).
        if outcome != "noop":
            self._arm_recheck(self.compactor.retry_at)

    def _record(
        self,
        plan: Plan,
        outcome: str,
        started: float,
        usage_before: float,
        tokens_after: int,
        tokens_before: int,
        memories: int,
        reason: str = "",
    ) -> CompactionRecord:
        window = self.settings.context_window
        return CompactionRecord(
            channel=self.key,
            tier=plan.kind.value,
            outcome=outcome,
            started=time.time() - (time.monotonic() - started),
            duration=time.monotonic() - started,
            usage_before=usage_before,
            usage_after=tokens_after / window,
            covered=len(plan.covered),
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            memories=memories,
            reason=reason,
        )

    # -- views ----------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Numbers for /status and the replay report."""
        s = self.settings
        return {
            "channel": self.key,
            "live_messages": sum(
                1 for m in self.ctx.items if m.role not in (Role.SUMMARY, Role.MARKER)
            ),
            "summaries": len(self.ctx.summaries()),
            "live_tokens": self.ctx.total,
            "context_window": s.context_window,
            "usage": self.usage,
            "peak_usage": self.peak_usage,
            "compactions": self.compactor.snapshot(),
            "compaction_running": self.compactor.running.kind.value
            if self.compactor.running
            else None,
            "background": self.delegation.status(),
            "thresholds": {
                "background": s.compaction.background_threshold,
                "aggressive": s.compaction.aggressive_threshold,
                "emergency": s.compaction.emergency_threshold,
            },
        }
