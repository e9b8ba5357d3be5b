"""Channel leases with fencing tokens: one writer per channel across processes.

A cluster is several tierbot processes on one PostgreSQL store.  Each channel is
owned by at most one of them at a time, through a row of ``channel_leases``:

* **Acquire.**  A process takes a channel whose lease is absent or has expired
  (database time, so the processes' clocks do not matter).  Taking it over draws a
  new *fencing token* from a sequence: tokens only grow.
* **Renew.**  The holder extends every lease it holds once per heartbeat; a lease it
  finds gone or re-tokened was taken over, and it stops that channel's actor.
* **Fence.**  Every write of a channel's owner (a reply, a compaction swap, the
  channel's ``handled_upto``) runs :meth:`Leases.check` in its own transaction, which
  reads the lease row ``FOR SHARE``: a write by a process that lost the lease fails
  with :class:`LeaseLostError`, and a takeover waits until an owner's write in flight
  has committed.  Storing an inbound message is not fenced: any process may receive
  any message, and storing it is the acknowledgement to the platform.
* **Release.**  A process that stops cleanly deletes its leases, so its channels move
  at once rather than after ``lease_seconds``.

``cluster_processes`` lists the live processes (heartbeat, shards, counts) for
``tierbot status``.  Inbound messages wake a channel's owner through
``NOTIFY tierbot_inbox`` with the channel key as payload.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog

from tierbot.errors import StoreError
from tierbot.migrations import Migrations

__all__ = [
    "CLUSTER_TABLES",
    "INBOX_CHANNEL",
    "LeaseLostError",
    "Leases",
    "ProcessRow",
    "default_process_id",
]

log = structlog.get_logger("tierbot.cluster")

#: The NOTIFY channel on which a stored inbound message wakes its channel's owner.
INBOX_CHANNEL = "tierbot_inbox"

CLUSTER_TABLES = Migrations(
    "cluster",
    (
        """
        CREATE SEQUENCE lease_tokens;
        CREATE TABLE channel_leases (
            channel TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            token BIGINT NOT NULL,
            expires TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX channel_leases_owner ON channel_leases (owner);
        CREATE TABLE cluster_processes (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            started TIMESTAMPTZ NOT NULL,
            heartbeat TIMESTAMPTZ NOT NULL,
            info TEXT NOT NULL DEFAULT '{}'
        );
        """,
    ),
)


class LeaseLostError(StoreError):
    """A channel's owner wrote after another process took the channel over."""

    def __init__(self, channel: str, owner: str) -> None:
        super().__init__(
            f"channel {channel}: this process ({owner}) no longer holds its lease; "
            "another process owns it now"
        )
        self.channel = channel


def default_process_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class ProcessRow:
    """One process of the cluster as ``tierbot status`` shows it."""

    id: str
    host: str
    pid: int
    started: float
    heartbeat_age: float
    leases: int
    info: dict[str, Any]


_ACQUIRE = """
    INSERT INTO channel_leases (channel, owner, token, expires)
    VALUES ($1, $2, nextval('lease_tokens'), clock_timestamp() + make_interval(secs => $3))
    ON CONFLICT (channel) DO UPDATE
        SET owner = EXCLUDED.owner,
            token = CASE WHEN channel_leases.owner = EXCLUDED.owner
                         THEN channel_leases.token ELSE EXCLUDED.token END,
            expires = EXCLUDED.expires
        WHERE channel_leases.owner = EXCLUDED.owner
           OR channel_leases.expires < clock_timestamp()
    RETURNING token
"""


class Leases:
    """This process's view of the lease table: what it holds, under which tokens."""

    def __init__(self, pool: asyncpg.Pool, owner: str, *, lease_seconds: float) -> None:
        self._pool = pool
        self.owner = owner
        self.lease_seconds = lease_seconds
        #: channel -> fencing token of the leases this process believes it holds.
        self.held: dict[str, int] = {}
        #: Channels a write found taken over since the last heartbeat.
        self._fenced: set[str] = set()

    # -- the process row -----------------------------------------------------------

    async def register(self, info: Mapping[str, Any]) -> None:
        """Enter this process in ``cluster_processes``; refuse a live namesake."""
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT pid, host, EXTRACT(EPOCH FROM clock_timestamp() - heartbeat) AS age "
                "FROM cluster_processes WHERE id = $1",
                self.owner,
            )
            if row is not None and float(row["age"]) < self.lease_seconds:
                raise StoreError(
                    f"[cluster] process_id {self.owner!r} is in use by pid {row['pid']} on "
                    f"{row['host']} (heartbeat {float(row['age']):.1f} s ago): give each "
                    "process its own id"
                )
            await conn.execute(
                "INSERT INTO cluster_processes (id, host, pid, started, heartbeat, info) "
                "VALUES ($1, $2, $3, clock_timestamp(), clock_timestamp(), $4) "
                "ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid, "
                "started = EXCLUDED.started, heartbeat = EXCLUDED.heartbeat, info = EXCLUDED.info",
                self.owner,
                socket.gethostname(),
                os.getpid(),
                json.dumps(dict(info)),
            )
            # Leases under this id are a previous life's (a restart with a fixed id):
            # they are ours to release, not to keep, since no actor holds them now.
            await conn.execute("DELETE FROM channel_leases WHERE owner = $1", self.owner)

    async def processes(self) -> list[ProcessRow]:
        async with self._pool.acquire() as conn:
            return await processes(conn)

    # -- leases --------------------------------------------------------------------

    async def acquire(self, channel: str) -> int | None:
        """This process's token for ``channel``: held already, taken now, or None when
        another live process holds it."""
        token = self.held.get(channel)
        if token is not None:
            return token
        async with self._pool.acquire() as conn:
            token = await conn.fetchval(_ACQUIRE, channel, self.owner, self.lease_seconds)
        if token is not None:
            self.held[channel] = int(token)
            log.debug("cluster.lease_acquired", channel=channel, token=token)
        return None if token is None else int(token)

    async def heartbeat(self, info: Mapping[str, Any]) -> list[str]:
        """Renew every lease held; return the channels found taken over (forgotten here)."""
        # Only what was held before the lease table is read can be found lost: a lease
        # taken while this beat runs may commit after its read and must not be dropped.
        before = dict(self.held)
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "UPDATE cluster_processes SET heartbeat = clock_timestamp(), info = $2 "
                "WHERE id = $1",
                self.owner,
                json.dumps(dict(info)),
            )
            # A row a write in flight holds FOR SHARE (the fence) is skipped, not waited
            # for: waiting while holding other rows could deadlock with a batch that
            # checks several channels.  It is renewed at the next beat, well before the
            # lease (at least two beats long) lapses.
            await conn.execute(
                "WITH mine AS (SELECT channel FROM channel_leases WHERE owner = $1 "
                "FOR NO KEY UPDATE SKIP LOCKED) "
                "UPDATE channel_leases l SET expires = clock_timestamp() "
                "+ make_interval(secs => $2) FROM mine WHERE l.channel = mine.channel",
                self.owner,
                self.lease_seconds,
            )
            rows = await conn.fetch(
                "SELECT channel, token FROM channel_leases WHERE owner = $1", self.owner
            )
        current = {r["channel"]: int(r["token"]) for r in rows}
        lost = [
            ch for ch, tok in before.items() if current.get(ch) != tok and self.held.get(ch) == tok
        ]
        for ch in lost:
            self.held.pop(ch, None)
        lost += sorted(self._fenced - set(lost))
        self._fenced.clear()
        return lost

    async def release(self, channels: Sequence[str]) -> None:
        """Give up ``channels`` (evicted actors): another process may take them at once."""
        mine = [(ch, self.held.pop(ch)) for ch in channels if ch in self.held]
        if not mine:
            return
        async with self._pool.acquire() as conn:
            await conn.executemany(
                "DELETE FROM channel_leases WHERE channel = $1 AND owner = $2 AND token = $3",
                [(ch, self.owner, tok) for ch, tok in mine],
            )

    async def leave(self) -> None:
        """A clean stop: every lease released, the process row removed."""
        self.held.clear()
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM channel_leases WHERE owner = $1", self.owner)
            await conn.execute("DELETE FROM cluster_processes WHERE id = $1", self.owner)

    async def orphans(self, limit: int = 100) -> list[str]:
        """Channels with unanswered messages and no live owner (their owner died)."""
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT c.key FROM channels c "
                "LEFT JOIN channel_leases l ON l.channel = c.key "
                "WHERE (l.channel IS NULL OR l.expires < clock_timestamp()) "
                "AND EXISTS (SELECT 1 FROM messages m WHERE m.channel = c.key "
                "AND m.state = 'live' AND m.role = 'user' AND m.id > c.handled_upto) "
                "ORDER BY c.key LIMIT $1",
                limit,
            )
        return [r["key"] for r in rows]

    # -- the fence -----------------------------------------------------------------

    async def check(self, conn: asyncpg.Connection, channel: str) -> None:
        """Inside a write transaction: raise LeaseLostError unless this process still
        holds ``channel`` under the token it was given.  The row stays share-locked
        until the transaction ends, so a takeover waits for this write to commit."""
        token = self.held.get(channel)
        current = await conn.fetchval(
            "SELECT token FROM channel_leases WHERE channel = $1 AND owner = $2 FOR SHARE",
            channel,
            self.owner,
        )
        if token is None or current is None or int(current) != token:
            if self.held.pop(channel, None) is not None:
                self._fenced.add(channel)
            log.warning("cluster.write_fenced", channel=channel, owner=self.owner)
            raise LeaseLostError(channel, self.owner)


async def processes(conn: asyncpg.Connection) -> list[ProcessRow]:
    """Every process row, with its lease count and seconds since its heartbeat."""
    rows = await conn.fetch(
        "SELECT p.id, p.host, p.pid, EXTRACT(EPOCH FROM p.started) AS started, "
        "EXTRACT(EPOCH FROM clock_timestamp() - p.heartbeat) AS age, p.info, "
        "(SELECT count(*) FROM channel_leases l WHERE l.owner = p.id "
        " AND l.expires >= clock_timestamp()) AS leases "
        "FROM cluster_processes p ORDER BY p.id"
    )
    return [
        ProcessRow(
            id=r["id"],
            host=r["host"],
            pid=int(r["pid"]),
            started=float(r["started"]),
            heartbeat_age=float(r["age"]),
            leases=int(r["leases"]),
            info=json.loads(r["info"]),
        )
        for r in rows
    ]
