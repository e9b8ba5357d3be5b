"""The channel actor: one asyncio task per conversation, the only writer of its history.

Everything that changes a channel's history goes through its mailbox and is
handled here, one item at a time: inbound messages (already durable in the
store), finished compaction workers, branch and worker results, and commands.
Messages that arrive while a turn runs are answered together in the next turn.

The actor is the mailbox loop; it owns three parts that run only inside its task
(so it stays the only writer of its history):

- :class:`~channels.history.History`: the live context, its usage and the bot's entries;
- :class:`~channels.compaction.ChannelCompaction`: the compactor and applying its plans;
- :class:`~channels.turn.Turns`: the turn, tools and delegation.

After every message that enters the history the compactor is consulted; an
emergency truncation happens here and now (no LLM), anything else is handed to
the process-wide worker pool and swapped in when it finishes, so the channel
never waits for a summary.  For messages a turn answers, that non-emergency
look happens once the turn's model request is under way, so planning a pass
never delays the reply.
"""

from __future__ import annotations

import asyncio
import collections
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from branches import Delegation
from channels.compaction import ChannelCompaction, Recheck, WorkerDone
from channels.context import LiveContext
from channels.deps import ChannelDeps, MemoryAccess
from channels.history import BOT_AUTHOR, History
from channels.snapshot import ChannelSnapshot
from channels.turn import MAX_TOOL_ROUNDS, Turns
from compactor import Compactor
from tierbot.config import ChannelSettings
from tierbot.events import TurnFailed
from tierbot.llm.base import ChatMessage
from tierbot.messages import Message, Role
from tierbot.vocab import TIERS
from workers.supervisor import TaskOutcome

__all__ = ["BOT_AUTHOR", "MAX_TOOL_ROUNDS", "ChannelActor", "ChannelDeps", "MemoryAccess"]

log = structlog.get_logger("tierbot.channel")


@dataclass(frozen=True, slots=True)
class _Incoming:
    messages: tuple[Message, ...]
    #: Put while the actor was still loading its history: the load may have found some
    #: of them in the store already (see ChannelActor.launch).
    early: bool = False


@dataclass(frozen=True, slots=True)
class _Delegated:
    outcome: TaskOutcome


@dataclass(frozen=True, slots=True)
class _Call:
    fn: Callable[[ChannelActor], Awaitable[Any]]
    future: asyncio.Future[Any]


_STOP = object()

#: How far below the highest id a channel has seen a message may still turn up in a
#: cluster: ids are drawn before their transactions commit, so one stored by another
#: process can become visible after a later one (far more than commit in one moment).
SEEN_WINDOW = 1000


class Mailbox:
    """The actor's inbox: unbounded, one reader (the actor's loop), any writers.

    An asyncio.Queue holds four deques and an event whatever it holds; thousands of
    idle channels stay resident, so this keeps nothing while it is empty.
    """

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: collections.deque[Any] | None = None
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Any) -> None:
        if self._items is None:
            self._items = collections.deque()
        self._items.append(item)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def put(self, item: Any) -> None:
        self.put_nowait(item)

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        item = self._items.popleft()
        if not self._items:
            self._items = None
        return item

    async def get(self) -> Any:
        while not self._items:
            assert self._waiter is None, "a mailbox has one reader"
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self.get_nowait()

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items) if self._items else 0


class ChannelLog:
    """A channel's logger: every event it logs carries ``channel``.

    It binds at each call rather than once per actor: a bound logger with its context
    was about 1.4 KB of an idle resident channel's ~13 KB, and a channel logs a few
    lines a turn at most."""

    __slots__ = ("channel",)

    def __init__(self, channel: str) -> None:
        self.channel = channel

    def debug(self, event: str, **kw: Any) -> None:
        log.debug(event, channel=self.channel, **kw)

    def info(self, event: str, **kw: Any) -> None:
        log.info(event, channel=self.channel, **kw)

    def warning(self, event: str, **kw: Any) -> None:
        log.warning(event, channel=self.channel, **kw)

    def error(self, event: str, **kw: Any) -> None:
        log.error(event, channel=self.channel, **kw)

    def exception(self, event: str, **kw: Any) -> None:
        log.exception(event, channel=self.channel, **kw)


class ChannelActor:
    """Owns one channel's live context, compactor and turn loop."""

    def __init__(self, key: str, deps: ChannelDeps) -> None:
        self.key = key
        self.deps = deps
        self.log = ChannelLog(key)
        self.last_active = time.monotonic()
        self.busy = False
        self._mailbox = Mailbox()
        self._slots = asyncio.Semaphore(deps.config().defaults.mailbox_size)
        self._task: asyncio.Task[None] | None = None
        self._on_failed: Callable[[ChannelActor], None] | None = None
        #: How many times in a row this channel failed to start (the registry's backoff).
        self.start_attempt = 0
        # Set while the actor loads its history (and kept, with the error, if that failed).
        self._booting: asyncio.Future[None] | None = None
        self._early = 0  # batches put while loading, not entered yet
        self._loaded: Collection[int] = ()  # what the load found unanswered, while _early
        self._stopped = False
        # Set after every mailbox batch (see make_room); made only while someone waits.
        self._changed: asyncio.Event | None = None
        self._inbox_tokens = 0  # tokens of messages put but not yet entered
        #: The highest message id this actor has loaded or been handed (a cluster's owner
        #: pulls what other processes stored after it).
        self.last_seen = 0
        # The ids loaded or handed within SEEN_WINDOW of last_seen: in a cluster a message
        # can become visible after one with a higher id (see has_seen).
        self._seen: set[int] = set()
        self._seen_limit = 32
        #: Set by the registry in a cluster, the only place messages arrive out of id order.
        self.track_seen = False
        # The parts call back through a weak reference and the mailbox, never holding the
        # actor: with no cycle through it, an evicted actor is freed at once rather than
        # at the cyclic collector's next full pass.
        me = weakref.ref(self)
        mailbox = self._mailbox
        self.history = History(key, deps, tools=lambda: me().turns.tools())  # type: ignore[union-attr]
        self.compaction = ChannelCompaction(
            key, deps, self.history, post=mailbox.put_nowait, log=self.log
        )
        self.turns = Turns(
            key,
            deps,
            self.history,
            self.compaction,
            enter=lambda msg: me()._enter(msg),  # type: ignore[union-attr]
            on_delegated=lambda outcome: mailbox.put_nowait(_Delegated(outcome)),
            log=self.log,
        )

    # -- the parts, as other floors and tests see them ---------------------------------

    @property
    def settings(self) -> ChannelSettings:
        return self.history.settings

    @property
    def ctx(self) -> LiveContext:
        return self.history.ctx

    @property
    def compactor(self) -> Compactor:
        return self.compaction.compactor

    @property
    def delegation(self) -> Delegation:
        return self.turns.delegation

    @property
    def usage(self) -> float:
        return self.history.usage

    @property
    def peak_usage(self) -> float:
        return self.history.peak_usage

    @property
    def handled_upto(self) -> int:
        return self.history.handled_upto

    @property
    def in_turn(self) -> bool:
        return self.turns.in_turn

    def build_prompt(self) -> list[ChatMessage]:
        """The provider-neutral request for the current live context (see channels.prompt)."""
        return self.turns.build_prompt()

    def summary_budget(self) -> int:
        """Tokens one summary may take (see ``ChannelCompaction.summary_budget``)."""
        return self.compaction.summary_budget()

    async def force_compaction(self) -> str:
        """Start a background compaction now (the ``/compact`` command)."""
        return await self.compaction.force()

    async def set_aside_repeating(self, said: str, author_id: str) -> list[str]:
        """Archive the live exchanges that repeat a forgotten memory of ``author_id``'s
        (see ``Turns.set_aside_repeating``); the platform ids of the messages that said it."""
        return await self.turns.set_aside_repeating(said, author_id)

    async def set_aside_author(self, author_id: str) -> int:
        """Archive what a forgotten author said from the live context (see
        ``Turns.set_aside_author``); how many of their messages left."""
        return await self.turns.set_aside_author(author_id)

    # -- lifecycle -------------------------------------------------------------------

    def launch(self, on_failed: Callable[[ChannelActor], None] | None = None) -> None:
        """Start the actor's task: it rehydrates from the store, then runs the turn loop
        and resumes unanswered messages.  Nothing waits for the load: a channel's first
        message is acknowledged once it is stored (it is among what the load finds).
        Messages put meanwhile wait in the mailbox, and any the load found already are
        entered once.  ``on_failed`` is called with the actor if the load fails."""
        self._on_failed = on_failed
        self._booting = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(), name=f"channel:{self.key}")

    async def start(self) -> None:
        """:meth:`launch`, then wait until the history is loaded (raises what the load
        raised)."""
        self.launch()
        await self.ready()

    async def ready(self) -> None:
        """Wait until the actor has loaded its history; raises what the load raised."""
        if self._booting is not None:
            await asyncio.shield(self._booting)

    async def _load(self) -> tuple[Message, ...] | None:
        """The turn loop's start: rehydrate from the store; the unanswered messages, or
        None when the load failed.  (Its own coroutine: what the load held is freed once
        it returns, not kept for the channel's life in the loop's frame.)"""
        booting = self._booting
        assert booting is not None
        self.busy = True
        try:
            # Both reads at once: they queue back to back on the store's reader instead
            # of each waiting its turn there (10,000 channels starting wait behind each
            # other).
            live, state = await asyncio.gather(
                self.deps.store.load_live(self.key), self.deps.store.channel_state(self.key)
            )
        except Exception as exc:
            # The messages handed meanwhile are stored: the channel's next start (its
            # next message, or the process's) loads and answers them.
            self.log.exception(
                "channel.start_failed",
                error=f"{type(exc).__name__}: {exc}",
                hint="its stored messages are answered when the channel starts again",
            )
            self.busy = False
            booting.set_exception(exc)
            booting.exception()  # retrieved: whoever awaits ready() gets it, or nobody
            if self._on_failed is not None:
                self._on_failed(self)
            return None
        except BaseException:
            booting.cancel()
            raise
        self.history.load(live, state.handled_upto)
        self.compactor.counters.update(state.counters)
        pending = tuple(m for m in live if m.role is Role.USER and m.id > state.handled_upto)
        ids = [m.id for m in live]
        self.last_seen = max(self.last_seen, max(ids, default=state.handled_upto))
        self.note_seen(ids)
        if self._early:
            self._loaded = frozenset(m.id for m in pending)
        self._booting = None
        self._on_failed = None
        booting.set_result(None)
        self.log.debug("channel.started", live=len(live), pending=len(pending))
        return pending

    async def stop(self) -> None:
        """Finish what is in the mailbox, then stop. Safe to call twice."""
        if self._task is None or self._stopped:
            return
        self._stopped = True
        self.compaction.stop()
        await self._mailbox.put(_STOP)
        await self._task
        # Branches and workers die with the channel; their end is recorded for the next start.
        ended = await self.delegation.aclose()
        while not self._mailbox.empty():
            item = self._mailbox.get_nowait()
            ended += [item.outcome] if isinstance(item, _Delegated) else []
        for outcome in ended:
            await self.turns.record_outcome(outcome, live=False)

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def idle(self) -> bool:
        """Nothing queued, nothing being handled, no compaction in flight (or the actor
        could not start: what it was handed is stored, for its next start)."""
        return self.done or (
            self._mailbox.empty()
            and not self.busy
            and self.compaction.idle()
            and not self.delegation.running
        )

    @property
    def mailbox_depth(self) -> int:
        """Items waiting in the mailbox (message batches, worker results, commands)."""
        return self._mailbox.qsize()

    # -- inputs ------------------------------------------------------------------------

    async def put(self, messages: Sequence[Message]) -> None:
        """Hand stored messages to the actor (waits while the mailbox is full)."""
        # Decided before waiting for a slot: the load may complete meanwhile, and these
        # may be among what it found.
        early = self._booting is not None
        self._early += early
        try:
            await self._slots.acquire()
        except BaseException:
            self._early -= early
            raise
        self.last_seen = max(self.last_seen, *(m.id for m in messages))
        self.note_seen([m.id for m in messages])
        self.last_active = time.monotonic()
        self._inbox_tokens += sum(m.tokens for m in messages)
        await self._mailbox.put(_Incoming(tuple(messages), early))

    def has_seen(self, message_id: int) -> bool:
        """Whether the message was loaded or handed to this actor; ids more than
        ``SEEN_WINDOW`` below ``last_seen`` count as seen."""
        return message_id in self._seen or message_id <= self.last_seen - SEEN_WINDOW

    def note_seen(self, ids: Sequence[int]) -> None:
        """Count ``ids`` as seen (handed, loaded, or archived already: not to be handed)."""
        if not self.track_seen:
            return
        self._seen.update(ids)
        if len(self._seen) > self._seen_limit:
            # Ids fall out of the window as the whole log grows; pruning when the set has
            # doubled keeps it small and the cost per message constant.
            floor = self.last_seen - SEEN_WINDOW
            self._seen = {i for i in self._seen if i > floor}
            self._seen_limit = max(32, 2 * len(self._seen))

    async def call(self, fn: Callable[[ChannelActor], Awaitable[Any]]) -> Any:
        """Run ``fn(self)`` inside the actor, between turns, and return its result."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._mailbox.put(_Call(fn, fut))
        return await fut

    # -- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        pending = await self._load()
        if pending is None:
            return
        try:
            # A restart may find more history than fits (messages stored just before a
            # crash, or a smaller window in a new config): check before anything else.
            await self.compaction.check()
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
                        incoming.extend(await self._receive(item))
                    elif isinstance(item, WorkerDone):
                        await self.compaction.worker_done(item)
                    elif isinstance(item, Recheck):
                        await self.compaction.check()
                    elif isinstance(item, _Delegated):
                        if await self.turns.record_outcome(item.outcome, live=True):
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
                except Exception as exc:
                    self._turn_failed(exc)
            if self.compaction.check_due:  # the turn failed or ended before its model call
                try:
                    await self.compaction.check()
                except Exception:
                    self.log.exception("channel.item_failed")
            if woken and not any(m.role is Role.USER for m in incoming):
                try:
                    await self.turns.wake(woken[-1])
                except Exception as exc:
                    self._turn_failed(exc)
            self.last_active = time.monotonic()
            self.busy = False
            changed, self._changed = self._changed, None
            if changed is not None:
                changed.set()
            if stop:
                return

    def _turn_failed(self, exc: Exception) -> None:
        """A turn raised (a bug or a store failure): log it and tell the subscribers."""
        self.log.exception("channel.turn_failed")
        self.deps.events.publish(TurnFailed(self.key, f"{type(exc).__name__}: {exc}"))

    async def _receive(self, item: _Incoming) -> tuple[Message, ...]:
        """Enter a batch of stored messages (those the history's load did not enter
        already); checks wait for the turn's model call if the batch gets a turn (see
        ``ChannelCompaction.check``).  The messages entered."""
        self._slots.release()
        messages = item.messages
        if item.early:
            messages = tuple(m for m in messages if m.id not in self._loaded)
            self._inbox_tokens -= sum(m.tokens for m in item.messages if m.id in self._loaded)
            self._early -= 1
            if not self._early:
                self._loaded = ()
        self.compaction.deferring = self._due(messages)
        try:
            for m in messages:
                self._inbox_tokens -= m.tokens
                await self._enter(m)
        finally:
            self.compaction.deferring = False
        return messages

    async def _enter(self, msg: Message) -> None:
        """A message entered the history: account for it and let the compactor look."""
        self.history.ctx.append(msg)
        self.compactor.on_message(msg.tokens)
        self._index_wake()
        await self.compaction.check()

    def _index_wake(self) -> None:
        """Wake the memory graph's background indexer, when it is on (it reads the store)."""
        if self.deps.memory is not None and self.deps.config().memory.index_live_messages:
            self.deps.memory.index_wake()

    def _due(self, incoming: Sequence[Message]) -> bool:
        """Whether ``incoming`` gets a turn (the channel's respond mode)."""
        users = [m for m in incoming if m.role is Role.USER]
        if not users:
            return False
        mode = self.turns.respond_mode()
        return mode == "always" or (
            mode == "mention" and any(m.meta.get("addressed") or m.meta.get("dm") for m in users)
        )

    async def _respond_if_due(self, incoming: list[Message]) -> None:
        users = [m for m in incoming if m.role is Role.USER]
        if not users:
            return
        if self._due(users):
            await self.turns.answer(users)
        self.history.handled_upto = max(self.history.handled_upto, *(m.id for m in users))
        await self.compaction.save_state()

    # -- backpressure -------------------------------------------------------------------

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
            await self._next_batch()

    async def settle(self) -> None:
        """Wait until usage is under ``background_threshold``, or until no pass is in
        flight or due within the loop guard (a quiet channel's last passes)."""
        while not self.done:
            s = self.settings
            if self.usage < s.compaction.background_threshold or not self._compaction_pending():
                return
            await self._next_batch()

    async def _next_batch(self) -> None:
        """Wait until the loop has handled its next mailbox batch."""
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()

    def _compaction_pending(self) -> bool:
        """A pass is in flight, waiting to be swapped in, or due within the loop guard,
        or the mailbox still holds something that may start one."""
        return self.compaction.pending() or not self._mailbox.empty() or self.busy

    # -- views ----------------------------------------------------------------------------------

    def snapshot(self) -> ChannelSnapshot:
        """Numbers for /status, the ops endpoint and the replay report."""
        s = self.settings
        running = self.compactor.running
        return ChannelSnapshot(
            channel=self.key,
            live_messages=self.history.live_messages(),
            summaries=len(self.ctx.summaries()),
            live_tokens=self.ctx.total,
            context_window=s.context_window,
            usage=self.usage,
            peak_usage=self.peak_usage,
            compactions=self.compactor.snapshot(),
            compaction_running=running.kind.value if running else None,
            background=tuple(self.delegation.status()),
            thresholds={
                kind.value: getattr(s.compaction, f"{kind.value}_threshold") for kind in TIERS
            },
        )
