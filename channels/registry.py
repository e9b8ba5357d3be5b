"""The registry owns every channel actor: creates them on first message, evicts idle ones.

``submit`` is the runtime's entry for inbound messages: it counts the
message's tokens once, writes it durably to the store (a duplicate platform id
is ignored), and only then hands it to the channel's actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Sequence

import structlog

from channels.actor import SEEN_WINDOW, ChannelActor, ChannelDeps
from tierbot.errors import NotOwnerError
from tierbot.messages import Delivery, InboundMessage, Message, Role, State
from tierbot.retry import Backoff

log = structlog.get_logger("tierbot.registry")

#: A channel whose history could not be read starts again by itself after this backoff
#: (and answers its stored messages then), as well as at its next message: a database
#: that was unreachable for a moment does not leave a channel silent until someone
#: speaks in it again.  It keeps trying while the failure lasts, at most every 5 minutes.
START_RETRY = Backoff(base=5.0, cap=300.0)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _storable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD. Undecodable bytes typed into
    the console (or escapes in a crafted platform payload) arrive as lone surrogates, which
    SQLite cannot store: the message would be lost and the console's input loop with it."""
    if text.isascii() or _SURROGATE.search(text) is None:  # C speed: every message
        return text
    return _SURROGATE.sub("\ufffd", text)


def to_message(inbound: InboundMessage, tokens: int) -> Message:
    meta: dict[str, object] = {}
    if inbound.addressed:
        meta["addressed"] = True
    if inbound.is_dm:
        meta["dm"] = True
    if inbound.private:
        meta["private"] = True
    if inbound.reply_to:
        meta["reply_to"] = inbound.reply_to
    return Message(
        channel=inbound.channel,
        platform_id=inbound.platform_id,
        role=Role.USER,
        text=_storable(inbound.text),
        author_id=_storable(inbound.author_id),
        author_name=_storable(inbound.author_name),
        ts=inbound.ts,
        tokens=tokens,
        meta=meta,
    )


class ChannelRegistry:
    """All live channel actors of one runtime."""

    def __init__(self, deps: ChannelDeps) -> None:
        self.deps = deps
        self.actors: dict[str, ChannelActor] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self.start_retry = START_RETRY
        self._retries: dict[str, asyncio.TimerHandle] = {}  # channels that could not start
        self._restarting: set[asyncio.Task[None]] = set()
        self._closed = False
        self.messages_in = 0
        self.duplicates = 0
        #: Submissions not acknowledged yet (being stored and handed to their actors).
        self.acking = 0
        #: In a cluster: whether this process owns a channel (taking its lease when it
        #: is free).  A channel it does not own gets its messages stored, then ``wake``.
        self.claim: Callable[[str], Awaitable[bool]] | None = None
        self.wake: Callable[[str], Awaitable[None]] | None = None
        #: In a cluster: called with the channels whose actors stopped (lease released).
        self.released: Callable[[Sequence[str]], Awaitable[None]] | None = None

    async def actor(self, key: str) -> ChannelActor:
        """The actor for ``key``, started (and rehydrated from the store) if needed."""
        actor = self.actors.get(key)
        if actor is None or actor.done:
            if self.claim is not None and not await self.claim(key):
                raise NotOwnerError(key)
            # Its caller gets the load's error: no retry of its own.
            actor = self._launch(key, retry=False)
        try:
            await actor.ready()
        except Exception:
            if self.actors.get(key) is actor:
                del self.actors[key]
            raise
        return actor

    def _launch(self, key: str, attempt: int = 0, *, retry: bool = True) -> ChannelActor:
        self._cancel_retry(key)
        actor = ChannelActor(key, self.deps)
        actor.track_seen = self.claim is not None
        actor.start_attempt = attempt
        actor.launch(on_failed=self._start_failed if retry else None)
        self.actors[key] = actor
        return actor

    def _start_failed(self, actor: ChannelActor) -> None:
        """``actor`` could not load its history (it logged why): start it again later."""
        if self._closed or self.actors.get(actor.key) is not actor:
            return
        delay = self.start_retry.delay(actor.start_attempt)
        log.info(
            "channel.start_retry",
            channel=actor.key,
            seconds=round(delay, 1),
            attempt=actor.start_attempt + 1,
        )
        loop = asyncio.get_running_loop()
        self._retries[actor.key] = loop.call_later(delay, self._retry_start, actor)

    def _retry_start(self, actor: ChannelActor) -> None:
        if self._closed or self.actors.get(actor.key) is not actor:
            self._retries.pop(actor.key, None)
            return  # started again by a message meanwhile, or taken over
        task = asyncio.create_task(self._restart(actor), name=f"restart:{actor.key}")
        self._restarting.add(task)
        task.add_done_callback(self._restarting.discard)

    async def _restart(self, actor: ChannelActor) -> None:
        key = actor.key
        async with self._locks.setdefault(key, asyncio.Lock()):
            # Only now, under the channel's lock (which eviction respects): until then
            # the pending retry kept the channel from being evicted.
            self._retries.pop(key, None)
            if self._closed or self.actors.get(key) is not actor:
                return
            try:
                if self.claim is not None and not await self.claim(key):
                    return  # another process owns it now, and starts it there
            except Exception as exc:
                log.warning("channel.start_retry_failed", channel=key, error=str(exc))
                self._start_failed(actor)
                return
            self._launch(key, actor.start_attempt + 1)

    def _cancel_retry(self, key: str) -> None:
        handle = self._retries.pop(key, None)
        if handle is not None:
            handle.cancel()

    async def submit(self, inbound: InboundMessage) -> Delivery:
        """Store ``inbound`` durably, then deliver it to its channel."""
        return (await self.submit_many([inbound]))[0]

    async def submit_many(self, inbounds: Sequence[InboundMessage]) -> list[Delivery]:
        """Like :meth:`submit` for many messages; one commit per channel batch."""
        self.acking += 1
        try:
            return await self._submit_many(inbounds)
        finally:
            self.acking -= 1

    async def _submit_many(self, inbounds: Sequence[InboundMessage]) -> list[Delivery]:
        by_channel: dict[str, list[int]] = {}
        for i, m in enumerate(inbounds):
            by_channel.setdefault(m.channel, []).append(i)
        results: list[Delivery] = [Delivery(False, "not processed")] * len(inbounds)
        counter = self.deps.counter
        for key, idxs in by_channel.items():
            lock = self._locks.setdefault(key, asyncio.Lock())
            async with lock:
                owned = self.claim is None or await self.claim(key)
                actor: ChannelActor | None = None
                if owned and self.claim is not None:
                    # A cluster's owner rehydrates before storing: it pulls what other
                    # processes store, and must not be handed what it loads.
                    actor = await self.actor(key)
                elif owned:
                    actor = self.actors.get(key)
                    if actor is not None and actor.done:
                        actor = None
                msgs = [
                    to_message(inbounds[i], counter.count_message(inbounds[i].text)) for i in idxs
                ]
                stored = await self.deps.store.append_many(msgs)
                fresh = [m for m in stored if m is not None]
                for i, row in zip(idxs, stored, strict=True):
                    results[i] = Delivery(True) if row is not None else Delivery(False, "duplicate")
                self.messages_in += len(fresh)
                self.duplicates += len(stored) - len(fresh)
                if len(fresh) < len(stored):
                    log.info(
                        "message.duplicate_ignored", channel=key, count=len(stored) - len(fresh)
                    )
                if not fresh:
                    continue
                if actor is None and owned:
                    # Stored first, then started: its load finds these as unanswered
                    # messages and answers them, as after a restart, and the platform's
                    # acknowledgement does not wait for the channel's history to load.
                    self._launch(key)
                elif actor is None:
                    assert self.wake is not None
                    await self.wake(key)
                elif self.claim is not None:
                    # Other processes store this channel's messages too: hand the actor
                    # everything after what it has seen, in log order.
                    await self._pull(actor)
                else:
                    await actor.put(fresh)
        return results

    async def pull(self, key: str) -> int:
        """A cluster's owner: hand ``key``'s actor the user messages other processes
        stored after what it has seen (starting it if needed); how many."""
        async with self._locks.setdefault(key, asyncio.Lock()):
            actor = self.actors.get(key)
            if actor is None or actor.done:
                await self.actor(key)  # a starting actor loads them itself
                return 0
            return await self._pull(actor)

    async def _pull(self, actor: ChannelActor) -> int:
        # From SEEN_WINDOW back: a message stored by another process may have committed
        # after a later one this actor has already been handed.
        after = await self.deps.store.messages_after(
            actor.key, max(0, actor.last_seen - SEEN_WINDOW)
        )
        users = [m for m in after if m.role is Role.USER and not actor.has_seen(m.id)]
        new = [m for m in users if m.state is State.LIVE]
        # Archived already (compacted before a restart): nothing to hand, nothing to pull.
        actor.note_seen([m.id for m in users if m.state is not State.LIVE])
        if new:
            await actor.put(new)
        return len(new)

    async def forget(self, keys: Sequence[str]) -> None:
        """A cluster: another process took ``keys`` over; stop their actors here.  What
        they would still write is refused by the fence, so nothing is written twice."""
        for key in keys:
            actor = self.actors.pop(key, None)
            if actor is None:
                continue
            try:
                await actor.stop()
            except Exception as exc:  # the fence refuses the stopping actor's writes
                log.info("channel.lease_lost", channel=key, detail=str(exc))

    async def resume(self, keys: Sequence[str]) -> None:
        """Start the actors of ``keys`` now rather than at their next message.

        A starting actor answers the messages after its ``handled_upto``:
        those stored just before a shutdown or a crash.
        """
        for key in keys:
            async with self._locks.setdefault(key, asyncio.Lock()):
                try:
                    await self.actor(key)
                except NotOwnerError:
                    continue  # a cluster: its owner answers it

    # -- background work -------------------------------------------------------------

    def idle(self) -> bool:
        return (
            all(a.idle() for a in self.actors.values())
            and self.deps.pool.running == 0
            and (self.deps.pool.queued == 0)
        )

    async def drain(self, poll: float = 0.01) -> None:
        """Wait until every mailbox is empty and no compaction is queued or running.

        It waits for the busy actors one after another, each looked at alone, rather than
        asking every actor at every poll: with 10,000 resident channels a poll of all of
        them took the event loop about as long as the poll interval, and slowed the turns
        it waited for.  A pass that waited for nobody, then a poll later everything idle
        once more (an actor may have been handed work behind the pass), ends it."""
        while True:
            await asyncio.sleep(0)
            waited = False
            for actor in list(self.actors.values()):
                while not actor.idle():
                    waited = True
                    await asyncio.sleep(poll)
            pool = self.deps.pool
            if waited or pool.running or pool.queued:
                await asyncio.sleep(0 if waited else poll)
                continue
            await asyncio.sleep(poll)
            if self.idle():
                return

    def start_sweeper(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep(), name="channel-sweeper")

    async def _sweep(self) -> None:
        while True:
            idle_after = self.deps.config().defaults.idle_evict_seconds
            await asyncio.sleep(min(max(idle_after / 4, 0.05), 30.0))
            await self.evict_idle(idle_after)

    async def evict_idle(self, idle_after: float) -> list[str]:
        """Stop actors idle for ``idle_after`` seconds; they rehydrate on their next message."""
        now = time.monotonic()
        evicted = []
        for key, actor in list(self.actors.items()):
            if actor.idle() and now - actor.last_active >= idle_after:
                if key in self._retries:
                    continue  # could not start: kept until a retry starts it
                lock = self._locks.get(key)
                if lock is not None and lock.locked():
                    continue
                await actor.stop()
                self.actors.pop(key, None)
                evicted.append(key)
                log.debug("channel.evicted", channel=key)
        gone = [k for k in evicted if k not in self.actors]  # none restarted meanwhile
        for key in gone:  # an evicted channel keeps nothing here, not even its lock
            lock = self._locks.get(key)
            if lock is not None and not lock.locked():
                del self._locks[key]
        if gone and self.released is not None:
            await self.released(gone)
        return evicted

    async def aclose(self) -> None:
        """Stop the sweeper, then every actor after it finishes its mailbox."""
        self._closed = True
        for key in list(self._retries):
            self._cancel_retry(key)
        for task in list(self._restarting):
            task.cancel()
        for task in list(self._restarting):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        await asyncio.gather(*(a.stop() for a in self.actors.values()), return_exceptions=True)
