"""One process's part in a cluster: its leases, its inbox, its heartbeat.

With ``[cluster] enabled = true`` (PostgreSQL only), a :class:`ClusterMember` joins
the runtime's channel registry:

* A message received for a channel nobody owns makes this process its owner (the
  lease is taken as the message is stored).  A message for a channel another live
  process owns is stored here (the platform's acknowledgement) and the owner is woken
  with ``NOTIFY``; the owner hands its actor everything after what it has seen, in
  log order.
* Every ``heartbeat_seconds`` the member renews its leases, stops the actors of
  channels another process took over (their writes are fenced anyway), takes over
  channels with unanswered messages whose owner's lease lapsed (a dead process), and
  pulls messages a missed notification left waiting.  A new owner's actor answers
  what its channel has not answered yet (after ``handled_upto``).
* A clean stop releases every lease, so the channels move at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import asyncpg
import structlog

from channels.actor import SEEN_WINDOW
from tierbot.config import ClusterConfig
from tierbot.errors import NotOwnerError, StoreError
from tierbot.pg.cluster import INBOX_CHANNEL, Leases, default_process_id
from tierbot.pg.store import PostgresStore

if TYPE_CHECKING:
    from channels.registry import ChannelRegistry

log = structlog.get_logger("tierbot.cluster")


class ClusterMember:
    """Leases, inbox listener and heartbeat of one process; start with :meth:`join`."""

    def __init__(
        self,
        store: PostgresStore,
        registry: ChannelRegistry,
        config: ClusterConfig,
        dsn: str,
        *,
        connect_timeout: float = 10.0,
    ) -> None:
        self.store = store
        self._dsn = dsn
        self.registry = registry
        self.config = config
        self.id = config.process_id or default_process_id()
        #: How long opening the listening connection may take.
        self.connect_timeout = connect_timeout
        self.leases = Leases(store.pool, self.id, lease_seconds=config.lease_seconds)
        self.info: dict[str, Any] = {}
        self.woken = 0
        self.takeovers = 0
        self._listener: asyncpg.Connection | None = None
        self._beat: asyncio.Task[None] | None = None
        self._pulls: dict[str, asyncio.Task[None]] = {}
        self._mark = 0  # the highest message id the heartbeat's catch-up has looked past

    async def join(self) -> None:
        """Register, fence the store, hook the registry, listen, start the heartbeat."""
        await self.leases.register(self.info)
        self.store.fence = self.leases
        self.registry.claim = self._claim
        self.registry.wake = self._wake
        self.registry.released = self.leases.release
        self._mark = await self.store.last_message_id()
        await self._listen()
        self._beat = asyncio.create_task(self._heartbeat_loop(), name="cluster-heartbeat")
        log.info("cluster.joined", process=self.id, lease_seconds=self.config.lease_seconds)

    async def _listen(self) -> None:
        try:
            conn = await asyncio.wait_for(asyncpg.connect(self._dsn), self.connect_timeout)
            await conn.add_listener(INBOX_CHANNEL, self._notified)
            self._listener = conn
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreError(
                f"[cluster] cannot listen for wake-ups at {self.store.where}: {exc!r}"
            ) from exc

    async def leave(self) -> None:
        """Stop the heartbeat and listener, release every lease (after the actors stopped)."""
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
            self._beat = None
        for task in list(self._pulls.values()):
            task.cancel()
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.close()
            self._listener = None
        try:
            await self.leases.leave()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            # The leases lapse by themselves after lease_seconds.
            log.warning("cluster.leave_failed", process=self.id, error=str(exc))
        log.info("cluster.left", process=self.id)

    # -- the registry's hooks ------------------------------------------------------

    async def _claim(self, channel: str) -> bool:
        return await self.leases.acquire(channel) is not None

    async def _wake(self, channel: str) -> None:
        """Wake ``channel``'s owner.  The message is stored already: when the wake-up
        fails, the owner's heartbeat catch-up pulls it, so the delivery stands."""
        self.woken += 1
        try:
            async with self.store.pool.acquire() as conn:
                await conn.execute("SELECT pg_notify($1, $2)", INBOX_CHANNEL, channel)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning(
                "cluster.wake_failed",
                channel=channel,
                error=str(exc),
                detail="stored; its owner picks it up at its next heartbeat",
            )

    # -- the inbox -----------------------------------------------------------------

    def _notified(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        if payload in self.leases.held:
            self._spawn_pull(payload)

    def _spawn_pull(self, key: str) -> None:
        if key in self._pulls:
            return
        task = asyncio.create_task(self._pull(key), name=f"cluster-pull:{key}")
        self._pulls[key] = task
        task.add_done_callback(lambda _t: self._pulls.pop(key, None))

    async def _pull(self, key: str) -> None:
        try:
            await self.registry.pull(key)
        except (StoreError, NotOwnerError) as exc:
            log.warning("cluster.pull_failed", channel=key, error=str(exc))

    # -- the heartbeat -------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_seconds)
            try:
                await self.heartbeat()
            except (OSError, StoreError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                # Leases lapse if this goes on: other processes take the channels and
                # the fence refuses this process's writes.  Nothing is lost either way.
                log.error("cluster.heartbeat_failed", process=self.id, error=str(exc))

    async def heartbeat(self) -> None:
        """One round: renew, drop what was taken over, take orphans, catch up."""
        self.info = {
            "channels": len(self.registry.actors),
            "messages_in": self.registry.messages_in,
            "woken": self.woken,
            "takeovers": self.takeovers,
        }
        if self._listener is None or self._listener.is_closed():
            # The server restarted or the connection dropped: listen again.  What was
            # announced meanwhile is pulled by the catch-up below.
            log.warning("cluster.listener_reconnecting", process=self.id)
            await self._listen()
        lost = await self.leases.heartbeat(self.info)
        if lost:
            log.warning("cluster.leases_lost", process=self.id, channels=len(lost))
            await self.registry.forget(lost)
        orphans = await self.leases.orphans()
        taken = [ch for ch in orphans if await self.leases.acquire(ch) is not None]
        if taken:
            self.takeovers += len(taken)
            log.info("cluster.channels_taken_over", process=self.id, channels=len(taken))
            await self.registry.resume(taken)
        await self._catch_up()

    async def _catch_up(self) -> None:
        """Pull held channels that got messages a notification did not announce.

        Ids are drawn before their transactions commit, so a message may become visible
        after one with a higher id: each scan reaches ``SEEN_WINDOW`` ids back past the
        mark, and a channel is pulled only for a message its actor has not seen."""
        rows = await self._new_since(max(0, self._mark - SEEN_WINDOW))
        due: set[str] = set()
        for channel, message_id in rows:
            self._mark = max(self._mark, message_id)
            if channel in due or channel not in self.leases.held:
                continue
            actor = self.registry.actors.get(channel)
            if actor is None or not actor.has_seen(message_id):
                due.add(channel)
        for channel in sorted(due):
            self._spawn_pull(channel)

    async def _new_since(self, mark: int) -> Sequence[tuple[str, int]]:
        async with self.store.pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT channel, id FROM messages WHERE id > $1 AND role = 'user' ORDER BY id",
                mark,
            )
        return [(r["channel"], int(r["id"])) for r in rows]
