"""The message store on PostgreSQL: the same promises as the SQLite store.

* The log is append-only; ``append`` returns once its transaction has committed; only a
  redelivered ``(channel, platform_id)`` is a duplicate (``ON CONFLICT`` on exactly that
  key), every other failure raises :class:`~tierbot.errors.StoreError`.
* Ids come from an identity sequence: they only grow and are never reused.  Every write
  transaction takes one advisory lock first, so transactions commit in id order even
  when several processes share the database: a reader resuming after the highest id it
  saw (the memory indexer) never skips a row committed late under a lower id.
* One writer task commits queued writes in batches (group commit), each write under its
  own savepoint: one refused write is rolled back alone and raised to its caller.
* A compaction swap is one transaction.

PostgreSQL's ``text`` cannot hold a NUL character: one in a message is stored as
U+FFFD (and logged), rather than the message being refused.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import asyncpg
import structlog

from tierbot.config import StorageConfig
from tierbot.errors import StoreError
from tierbot.messages import Message, Role, State
from tierbot.migrations import Migrations
from tierbot.storage import ChannelState, CompactionRecord, UndeliveredReply

from .connect import dsn_from_env, open_pool, redact
from .migrations import migrate, version

__all__ = ["MIGRATIONS", "PgWriteOp", "PostgresStore"]

log = structlog.get_logger("tierbot.store")

_STEPS: tuple[str, ...] = (
    # 1: the log, summary membership, channel state, compaction history, kept replies
    # (the SQLite store's five steps, as they stand after the fifth).
    """
    CREATE TABLE messages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        channel TEXT NOT NULL,
        platform_id TEXT NOT NULL,
        role TEXT NOT NULL,
        author_id TEXT NOT NULL DEFAULT '',
        author_name TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL,
        tokens INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'live',
        pos DOUBLE PRECISION NOT NULL,
        meta TEXT NOT NULL DEFAULT '{}',
        UNIQUE (channel, platform_id)
    );
    CREATE INDEX messages_live ON messages (channel, state, pos);
    CREATE INDEX messages_author ON messages (author_id) WHERE role = 'user';
    CREATE TABLE summary_members (
        summary_id BIGINT NOT NULL,
        message_id BIGINT NOT NULL,
        PRIMARY KEY (summary_id, message_id)
    );
    CREATE INDEX summary_members_message ON summary_members (message_id);
    CREATE TABLE channels (
        key TEXT PRIMARY KEY,
        handled_upto BIGINT NOT NULL DEFAULT 0,
        counters TEXT NOT NULL DEFAULT '{}',
        updated DOUBLE PRECISION NOT NULL DEFAULT 0
    );
    CREATE TABLE compactions (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        channel TEXT NOT NULL,
        tier TEXT NOT NULL,
        outcome TEXT NOT NULL,
        started DOUBLE PRECISION NOT NULL,
        duration DOUBLE PRECISION NOT NULL,
        usage_before DOUBLE PRECISION NOT NULL,
        usage_after DOUBLE PRECISION NOT NULL,
        covered INTEGER NOT NULL,
        tokens_before INTEGER NOT NULL,
        tokens_after INTEGER NOT NULL,
        memories INTEGER NOT NULL,
        reason TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX compactions_channel ON compactions (channel, started);
    CREATE TABLE undelivered (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        channel TEXT NOT NULL,
        text TEXT NOT NULL,
        reply_to TEXT,
        created DOUBLE PRECISION NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 1,
        error TEXT NOT NULL DEFAULT '',
        sending DOUBLE PRECISION
    );
    CREATE INDEX undelivered_channel ON undelivered (channel, id);
    """,
)

#: The message store's tables on PostgreSQL (component ``store``, as on SQLite).
MIGRATIONS = Migrations("store", _STEPS)

#: Key of the advisory lock every write transaction takes first (commit order = id order).
WRITE_LOCK = 0x74696572626F75

_COLUMNS = (
    "id, channel, platform_id, role, author_id, author_name, text, ts, tokens, state, pos, meta"
)
# Rows go in as arrays, one per column, in order (WITH ORDINALITY keeps it): ids follow it.
_INSERT = """
    INSERT INTO messages (channel, platform_id, role, author_id, author_name, text, ts,
                          tokens, state, pos, meta)
    SELECT channel, platform_id, role, author_id, author_name, text, ts, tokens, state,
           pos, meta
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                $7::float8[], $8::int[], $9::text[], $10::float8[], $11::text[])
         WITH ORDINALITY AS r(channel, platform_id, role, author_id, author_name, text, ts,
                              tokens, state, pos, meta, ord)
    ORDER BY ord
    {conflict}
    RETURNING id, channel, platform_id
"""

PgWriteOp = Callable[[asyncpg.Connection], Awaitable[Any]]


def _clean(text: str) -> str:
    if "\x00" not in text:
        return text
    log.warning("store.nul_replaced", count=text.count("\x00"))
    return text.replace("\x00", "\ufffd")


async def _insert(
    conn: asyncpg.Connection, msgs: Sequence[Message], *, redelivery_ok: bool
) -> list[Message | None]:
    """Insert ``msgs`` in order; each comes back with its id (and pos, when it had none),
    or None for a redelivery (a repeat inside ``msgs`` too).  Any other error raises."""
    if not msgs:
        return []
    conflict = "ON CONFLICT (channel, platform_id) DO NOTHING" if redelivery_ok else ""
    columns: list[list[Any]] = [[] for _ in range(11)]
    for m in msgs:
        values = (
            _clean(m.channel),
            _clean(m.platform_id),
            m.role.value,
            _clean(m.author_id),
            _clean(m.author_name),
            _clean(m.text),
            float(m.ts),
            int(m.tokens),
            m.state.value,
            float(m.pos),
            json.dumps(m.meta) if m.meta else "{}",
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    rows = await conn.fetch(_INSERT.format(conflict=conflict), *columns)
    ids = {(r["channel"], r["platform_id"]): int(r["id"]) for r in rows}
    stored_ids = list(ids.values())
    out: list[Message | None] = []
    for m in msgs:
        mid = ids.pop((_clean(m.channel), _clean(m.platform_id)), None)
        out.append(None if mid is None else m.with_(id=mid, pos=m.pos or float(mid)))
    # As SQLite's trigger does: a message stored without a position takes its id.
    await conn.execute(
        "UPDATE messages SET pos = id WHERE id = ANY($1::bigint[]) AND pos = 0", stored_ids
    )
    return out


def _message(r: Mapping[str, Any]) -> Message:
    meta = r["meta"]
    return Message(
        id=r["id"],
        channel=r["channel"],
        platform_id=r["platform_id"],
        role=Role(r["role"]),
        author_id=r["author_id"],
        author_name=r["author_name"],
        text=r["text"],
        ts=r["ts"],
        tokens=r["tokens"],
        state=State(r["state"]),
        pos=r["pos"],
        meta=json.loads(meta) if meta and meta != "{}" else {},
    )


class PostgresStore:
    """The PostgreSQL :class:`~tierbot.storage.MessageStore`: a pool, one group-committing
    writer task; an async context manager.  :meth:`write` lets other layers' tables (the
    task-worker records) join the writer's batches, as on SQLite."""

    backend = "postgres"

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        where: str,
        commit_batch: int = 512,
        read_only: bool = False,
        components: Sequence[Migrations] = (),
    ) -> None:
        self._pool = pool
        #: The server, as messages name it (password redacted).
        self.where = where
        self.read_only = read_only
        self.components = tuple(components)
        self._commit_batch = commit_batch
        self._queue: asyncio.Queue[tuple[PgWriteOp, asyncio.Future[Any]] | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        self.commits = 0

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        storage: StorageConfig,
        environ: Mapping[str, str],
        *,
        read_only: bool = False,
        components: Sequence[Migrations] = (),
    ) -> PostgresStore:
        """Connect (``[storage] dsn_env``), migrate (not when ``read_only``), start the
        writer.  StoreError of one line when the server cannot be used."""
        dsn = dsn_from_env(storage, environ)
        return await cls.connect(
            dsn,
            storage,
            name=storage.dsn_env,
            read_only=read_only,
            components=components,
        )

    @classmethod
    async def connect(
        cls,
        dsn: str,
        storage: StorageConfig | None = None,
        *,
        name: str = "",
        read_only: bool = False,
        components: Sequence[Migrations] = (),
    ) -> PostgresStore:
        """:meth:`open` with the connection string given (tests, the migration command)."""
        storage = storage or StorageConfig()
        pool = await open_pool(storage, dsn, name=name)
        store = cls(
            pool,
            where=redact(dsn),
            commit_batch=storage.commit_batch,
            read_only=read_only,
            components=components,
        )
        try:
            async with pool.acquire() as conn:
                for m in (MIGRATIONS, *store.components):
                    if read_only:
                        if await version(conn, m, where=store.where) == 0 and m is MIGRATIONS:
                            raise StoreError(
                                f"{store.where} holds no tierbot store (no message log in it)"
                            )
                    else:
                        await migrate(conn, m, where=store.where)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError):
                raise StoreError(f"cannot open the store at {store.where}: {exc}") from exc
            raise
        if not read_only:
            store._writer = asyncio.create_task(store._write_loop(), name="store-writer")
        return store

    @property
    def pool(self) -> asyncpg.Pool:
        """The connection pool (the memory graph and tools share it)."""
        return self._pool

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Flush pending writes, stop the writer, close the pool; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._writer is not None:
                await self._queue.put(None)
                await self._writer
                self._writer = None
        finally:
            await self._pool.close()

    # -- the writer --------------------------------------------------------------------

    async def write(self, op: PgWriteOp) -> Any:
        """Run ``op`` inside the next batch transaction; return once it is committed."""
        if self._writer is None or self._closed:
            raise StoreError(
                f"the store at {self.where} was opened read-only"
                if self.read_only
                else "the store is closed"
            )
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._queue.put((op, fut))
        return await fut

    async def _write_loop(self) -> None:
        stopping = False
        while not stopping:
            first = await self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < self._commit_batch and not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is None:
                    stopping = True
                    break
                batch.append(nxt)
            results: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
            try:
                async with self._pool.acquire() as conn, conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", WRITE_LOCK)
                    for op, fut in batch:
                        try:
                            async with conn.transaction():  # a savepoint per op
                                value = await op(conn)
                        except (asyncpg.PostgresError, StoreError, ValueError) as exc:
                            if conn.is_closed():
                                raise
                            results.append((fut, None, self._error(exc)))
                            continue
                        results.append((fut, value, None))
                self.commits += 1
            except Exception as exc:
                log.error("store.commit_failed", error=str(exc), batch=len(batch))
                err = self._error(exc)
                results = [(fut, None, err) for _, fut in batch]
            for fut, value, error in results:
                if fut.done():
                    continue
                if error is not None:
                    fut.set_exception(error)
                else:
                    fut.set_result(value)

    def _error(self, exc: BaseException) -> BaseException:
        if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError):
            err = StoreError(f"cannot write to the store at {self.where}: {exc}")
            err.__cause__ = exc
            return err
        return exc

    # -- reads -----------------------------------------------------------------------------

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        try:
            return list(await self._pool.fetch(sql, *args))
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            raise StoreError(f"cannot read the store at {self.where}: {exc}") from exc

    async def _val(self, sql: str, *args: Any) -> Any:
        rows = await self._fetch(sql, *args)
        return rows[0][0] if rows else None

    async def _messages(self, sql: str, *args: Any) -> list[Message]:
        return [_message(r) for r in await self._fetch(sql, *args)]

    # -- messages ----------------------------------------------------------------------

    async def append(self, msg: Message) -> Message | None:
        return (await self.append_many([msg]))[0]

    async def append_many(self, msgs: Sequence[Message]) -> list[Message | None]:
        async def op(conn: asyncpg.Connection) -> list[Message | None]:
            return await _insert(conn, msgs, redelivery_ok=True)

        result: list[Message | None] = await self.write(op)
        return result

    async def load_live(self, channel: str) -> list[Message]:
        return await self._messages(
            f"SELECT {_COLUMNS} FROM messages WHERE channel = $1 AND state = 'live' "
            "ORDER BY pos, id",
            channel,
        )

    async def messages_after(self, channel: str, after_id: int) -> list[Message]:
        return await self._messages(
            f"SELECT {_COLUMNS} FROM messages WHERE channel = $1 AND id > $2 ORDER BY id",
            channel,
            after_id,
        )

    async def messages_since(
        self, after_id: int, limit: int, roles: Sequence[Role]
    ) -> tuple[list[Message], int]:
        scanned = await self._fetch(
            "SELECT id, role FROM messages WHERE id > $1 ORDER BY id LIMIT $2", after_id, limit
        )
        if not scanned:
            return [], after_id
        wanted = {r.value for r in roles}
        ids = [int(r["id"]) for r in scanned if r["role"] in wanted]
        return (await self.get_messages(ids) if ids else []), int(scanned[-1]["id"])

    async def count_since(self, after_id: int, roles: Sequence[Role]) -> int:
        return int(
            await self._val(
                "SELECT COUNT(*) FROM messages WHERE id > $1 AND role = ANY($2::text[])",
                after_id,
                [r.value for r in roles],
            )
        )

    async def last_message_id(self) -> int:
        return int(await self._val("SELECT COALESCE(MAX(id), 0) FROM messages"))

    async def get_messages(self, ids: Sequence[int]) -> list[Message]:
        if not ids:
            return []
        return await self._messages(
            f"SELECT {_COLUMNS} FROM messages WHERE id = ANY($1::bigint[]) ORDER BY id",
            list(ids),
        )

    async def export(self, channel: str) -> AsyncIterator[Message]:
        """Every message the channel received or sent (summaries and markers excluded),
        oldest first, read in pages (a long history never sits in memory whole)."""
        roles = [r.value for r in (Role.USER, Role.ASSISTANT, Role.TOOL_CALL, Role.TOOL_RESULT)]
        after = 0
        while True:
            page = await self._messages(
                f"SELECT {_COLUMNS} FROM messages WHERE channel = $1 AND role = ANY($2::text[]) "
                "AND id > $3 ORDER BY id LIMIT 1000",
                channel,
                roles,
                after,
            )
            for m in page:
                yield m
            if len(page) < 1000:
                return
            after = page[-1].id

    async def count(self, channel: str, *, state: State | None = None) -> int:
        sql = "SELECT COUNT(*) FROM messages WHERE channel = $1 AND role IN ('user','assistant')"
        if state is None:
            return int(await self._val(sql, channel))
        return int(await self._val(sql + " AND state = $2", channel, state.value))

    async def channel_keys(self) -> list[str]:
        return [r[0] for r in await self._fetch("SELECT DISTINCT channel FROM messages")]

    # -- channel state -----------------------------------------------------------------------

    async def channel_state(self, channel: str) -> ChannelState:
        rows = await self._fetch(
            "SELECT handled_upto, counters FROM channels WHERE key = $1", channel
        )
        if not rows:
            return ChannelState()
        return ChannelState(handled_upto=int(rows[0][0]), counters=json.loads(rows[0][1]))

    async def save_channel_state(self, channel: str, state: ChannelState) -> None:
        await self.write(lambda conn: _upsert_state(conn, channel, state))

    async def ensure_channel(self, channel: str) -> None:
        await self.write(
            lambda conn: conn.execute(
                "INSERT INTO channels (key) VALUES ($1) ON CONFLICT (key) DO NOTHING", channel
            )
        )

    async def channels_awaiting_reply(self) -> list[str]:
        rows = await self._fetch(
            "SELECT c.key FROM channels c WHERE EXISTS (SELECT 1 FROM messages m "
            "WHERE m.channel = c.key AND m.state = 'live' AND m.role = 'user' "
            "AND m.id > c.handled_upto) ORDER BY c.key"
        )
        return [r[0] for r in rows]

    # -- undelivered replies -------------------------------------------------------------------

    async def save_undelivered(
        self, channel: str, text: str, reply_to: str | None, error: str
    ) -> int:
        async def op(conn: asyncpg.Connection) -> int:
            return int(
                await conn.fetchval(
                    "INSERT INTO undelivered (channel, text, reply_to, created, error) "
                    "VALUES ($1, $2, $3, $4, $5) RETURNING id",
                    channel,
                    _clean(text),
                    reply_to,
                    time.time(),
                    _clean(error),
                )
            )

        rowid: int = await self.write(op)
        return rowid

    async def undelivered(self, prefix: str = "") -> list[UndeliveredReply]:
        rows = await self._fetch(
            "SELECT id, channel, text, reply_to, created, attempts, error, sending "
            "FROM undelivered WHERE left(channel, $1) = $2 ORDER BY id",
            len(prefix),
            prefix,
        )
        return [UndeliveredReply(*r) for r in rows]

    async def mark_delivered(self, reply_id: int) -> None:
        await self.write(
            lambda conn: conn.execute("DELETE FROM undelivered WHERE id = $1", reply_id)
        )

    async def mark_sending(self, reply_id: int) -> None:
        await self.write(
            lambda conn: conn.execute(
                "UPDATE undelivered SET sending = $1 WHERE id = $2", time.time(), reply_id
            )
        )

    async def release_undelivered(self, reply_id: int) -> bool:
        async def op(conn: asyncpg.Connection) -> bool:
            done = await conn.execute(
                "UPDATE undelivered SET sending = NULL WHERE id = $1", reply_id
            )
            return _affected(done) > 0

        result: bool = await self.write(op)
        return result

    async def drop_undelivered(self, reply_id: int) -> bool:
        async def op(conn: asyncpg.Connection) -> bool:
            return (
                _affected(await conn.execute("DELETE FROM undelivered WHERE id = $1", reply_id)) > 0
            )

        result: bool = await self.write(op)
        return result

    async def mark_undelivered_again(self, reply_id: int, error: str) -> None:
        await self.write(
            lambda conn: conn.execute(
                "UPDATE undelivered SET attempts = attempts + 1, error = $1, sending = NULL "
                "WHERE id = $2",
                _clean(error),
                reply_id,
            )
        )

    # -- compaction ------------------------------------------------------------------------

    async def swap(
        self,
        channel: str,
        covered: Sequence[int],
        replacement: Message | None,
        *,
        record: CompactionRecord | None = None,
        state: ChannelState | None = None,
        updates: Sequence[Message] = (),
    ) -> Message | None:
        async def op(conn: asyncpg.Connection) -> Message | None:
            await conn.execute(
                "UPDATE messages SET state = 'archived' WHERE channel = $1 "
                "AND id = ANY($2::bigint[])",
                channel,
                list(covered),
            )
            placed = None
            if replacement is not None:
                placed = (await _insert(conn, [replacement], redelivery_ok=False))[0]
                assert placed is not None
                await conn.execute(
                    "INSERT INTO summary_members (summary_id, message_id) "
                    "SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING",
                    placed.id,
                    list(covered),
                )
            if updates:
                await conn.executemany(
                    "UPDATE messages SET text = $1, tokens = $2, pos = $3, meta = $4 WHERE id = $5",
                    [(_clean(u.text), u.tokens, u.pos, json.dumps(u.meta), u.id) for u in updates],
                )
            if record is not None:
                await _insert_record(conn, record)
            if state is not None:
                await _upsert_state(conn, channel, state)
            return placed

        result: Message | None = await self.write(op)
        return result

    async def delete_messages(self, pairs: Sequence[tuple[str, str]]) -> int:
        async def op(conn: asyncpg.Connection) -> int:
            done = await conn.execute(
                "DELETE FROM messages m USING unnest($1::text[], $2::text[]) AS p(channel, pid) "
                "WHERE m.channel = p.channel AND m.platform_id = p.pid AND m.role = 'user'",
                [c for c, _ in pairs],
                [p for _, p in pairs],
            )
            await _drop_orphan_members(conn)
            return _affected(done)

        deleted: int = await self.write(op)
        return deleted

    async def count_author_messages(self, author_id: str) -> int:
        return int(
            await self._val(
                "SELECT COUNT(*) FROM messages WHERE author_id = $1 AND role = 'user'", author_id
            )
        )

    async def delete_author_messages(
        self, author_id: str, channels: Callable[[str], bool] | None = None
    ) -> int:
        async def op(conn: asyncpg.Connection) -> int:
            found = await conn.fetch(
                "SELECT DISTINCT channel FROM messages WHERE author_id = $1 AND role = 'user'",
                author_id,
            )
            chosen = [r[0] for r in found if channels is None or channels(r[0])]
            done = await conn.execute(
                "DELETE FROM messages WHERE author_id = $1 AND role = 'user' "
                "AND channel = ANY($2::text[])",
                author_id,
                chosen,
            )
            n = _affected(done)
            if n:
                await _drop_orphan_members(conn)
            return n

        deleted: int = await self.write(op)
        return deleted

    async def record_compaction(self, record: CompactionRecord) -> None:
        await self.write(lambda conn: _insert_record(conn, record))

    async def compactions(self, channel: str, limit: int = 100) -> list[CompactionRecord]:
        rows = await self._fetch(
            "SELECT channel, tier, outcome, started, duration, usage_before, usage_after, "
            "covered, tokens_before, tokens_after, memories, reason FROM compactions "
            "WHERE channel = $1 ORDER BY started DESC LIMIT $2",
            channel,
            limit,
        )
        return [CompactionRecord.of_row(*r) for r in rows]

    async def covered_by(self, summary_id: int) -> list[int]:
        rows = await self._fetch(
            "SELECT message_id FROM summary_members WHERE summary_id = $1 ORDER BY message_id",
            summary_id,
        )
        return [int(r[0]) for r in rows]


def _affected(status: str) -> int:
    """Rows a command touched, from its status tag (``DELETE 3``, ``UPDATE 1``)."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


async def _drop_orphan_members(conn: asyncpg.Connection) -> None:
    await conn.execute(
        "DELETE FROM summary_members s WHERE NOT EXISTS "
        "(SELECT 1 FROM messages m WHERE m.id = s.message_id)"
    )


async def _upsert_state(conn: asyncpg.Connection, channel: str, state: ChannelState) -> None:
    await conn.execute(
        "INSERT INTO channels (key, handled_upto, counters, updated) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (key) DO UPDATE SET handled_upto = excluded.handled_upto, "
        "counters = excluded.counters, updated = excluded.updated",
        channel,
        state.handled_upto,
        json.dumps(state.counters),
        time.time(),
    )


async def _insert_record(conn: asyncpg.Connection, r: CompactionRecord) -> None:
    await conn.execute(
        "INSERT INTO compactions (channel, tier, outcome, started, duration, usage_before, "
        "usage_after, covered, tokens_before, tokens_after, memories, reason) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        r.channel,
        str(r.tier.value),
        str(r.outcome.value),
        r.started,
        r.duration,
        r.usage_before,
        r.usage_after,
        r.covered,
        r.tokens_before,
        r.tokens_after,
        r.memories,
        _clean(r.reason),
    )
