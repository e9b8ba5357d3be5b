"""The SQLite store: an append-only message log, channel state, compaction records.

Invariants:

* The raw message log is the source of truth and is append-only: a message is
  never deleted by tierbot's own operation, only moved from ``live`` to
  ``archived`` (forgetting a user is the one deliberate exception).
* ``append`` returns only after the row is committed, so an adapter may
  acknowledge a platform message once it returns; a crash afterwards loses
  nothing.  A duplicate ``(channel, platform_id)`` is ignored.
* One writer task owns every write and commits them in batches (group commit):
  thousands of channels share one fsync instead of queueing for their own.
* A compaction swap (archive the covered messages, insert the summary that
  replaces them) is one transaction: after a crash the live context is either
  before or after it, never a mix.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiosqlite
import structlog

from bot.errors import StoreError
from bot.messages import Message, Role, State

T = TypeVar("T")
log = structlog.get_logger("tierbot.store")

_MIGRATIONS: tuple[str, ...] = (
    # 1: the message log, channel state, summary membership, compaction history.
    """
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        platform_id TEXT NOT NULL,
        role TEXT NOT NULL,
        author_id TEXT NOT NULL DEFAULT '',
        author_name TEXT NOT NULL DEFAULT '',
        text TEXT NOT NULL,
        ts REAL NOT NULL,
        tokens INTEGER NOT NULL,
        state TEXT NOT NULL DEFAULT 'live',
        pos REAL NOT NULL,
        meta TEXT NOT NULL DEFAULT '{}',
        UNIQUE (channel, platform_id)
    );
    CREATE INDEX messages_live ON messages (channel, state, pos);
    CREATE TABLE summary_members (
        summary_id INTEGER NOT NULL,
        message_id INTEGER NOT NULL,
        PRIMARY KEY (summary_id, message_id)
    );
    CREATE INDEX summary_members_message ON summary_members (message_id);
    CREATE TABLE channels (
        key TEXT PRIMARY KEY,
        handled_upto INTEGER NOT NULL DEFAULT 0,
        counters TEXT NOT NULL DEFAULT '{}',
        updated REAL NOT NULL DEFAULT 0
    );
    CREATE TABLE compactions (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        tier TEXT NOT NULL,
        outcome TEXT NOT NULL,
        started REAL NOT NULL,
        duration REAL NOT NULL,
        usage_before REAL NOT NULL,
        usage_after REAL NOT NULL,
        covered INTEGER NOT NULL,
        tokens_before INTEGER NOT NULL,
        tokens_after INTEGER NOT NULL,
        memories INTEGER NOT NULL,
        reason TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX compactions_channel ON compactions (channel, started);
    """,
    # 2: branches and task workers (workers/task.py): one row per run, and every message a
    # run produced, including the ones its own compaction later dropped (dropped_by > 0).
    """
    CREATE TABLE tasks (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        kind TEXT NOT NULL,
        task TEXT NOT NULL,
        status TEXT NOT NULL,
        created REAL NOT NULL,
        finished REAL,
        result TEXT NOT NULL DEFAULT '',
        error TEXT NOT NULL DEFAULT '',
        stats TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX tasks_channel ON tasks (channel, created);
    CREATE TABLE task_messages (
        id INTEGER PRIMARY KEY,
        task_id INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        segment INTEGER NOT NULL,
        kind TEXT NOT NULL DEFAULT 'message',
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tool_calls TEXT NOT NULL DEFAULT '[]',
        tool_call_id TEXT NOT NULL DEFAULT '',
        dropped_by INTEGER NOT NULL DEFAULT 0,
        ts REAL NOT NULL,
        UNIQUE (task_id, seq)
    );
    """,
)

_COLUMNS = (
    "id, channel, platform_id, role, author_id, author_name, text, ts, tokens, state, pos, meta"
)


def _row_to_message(row: Sequence[Any]) -> Message:
    return Message(
        id=row[0],
        channel=row[1],
        platform_id=row[2],
        role=Role(row[3]),
        author_id=row[4],
        author_name=row[5],
        text=row[6],
        ts=row[7],
        tokens=row[8],
        state=State(row[9]),
        pos=row[10],
        meta=json.loads(row[11]) if row[11] and row[11] != "{}" else {},
    )


@dataclass(frozen=True, slots=True)
class ChannelState:
    """What a restarted channel needs besides its live messages."""

    handled_upto: int = 0
    counters: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """One compaction's outcome, for the operator's history view."""

    channel: str
    tier: str
    outcome: str
    started: float
    duration: float
    usage_before: float
    usage_after: float
    covered: int
    tokens_before: int
    tokens_after: int
    memories: int
    reason: str = ""


WriteOp = Callable[[aiosqlite.Connection], Awaitable[Any]]


class Store:
    """Async SQLite store with a single group-committing writer; an async context manager."""

    def __init__(self, path: Path, *, synchronous: str = "full", commit_batch: int = 512) -> None:
        self.path = path
        self._synchronous = synchronous.upper()
        self._commit_batch = commit_batch
        self._db: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._queue: asyncio.Queue[tuple[WriteOp, asyncio.Future[Any]] | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None
        self._next_id = 1
        self.commits = 0

    # -- lifecycle -------------------------------------------------------------

    @classmethod
    async def open(cls, path: Path, *, synchronous: str = "full", commit_batch: int = 512) -> Store:
        store = cls(path, synchronous=synchronous, commit_batch=commit_batch)
        await store._open()
        return store

    async def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = await aiosqlite.connect(self.path, isolation_level=None)
            await self._db.execute("PRAGMA journal_mode=WAL")
            await self._db.execute(f"PRAGMA synchronous={self._synchronous}")
            await self._db.execute("PRAGMA busy_timeout=10000")
            await self._migrate()
            async with self._db.execute("SELECT COALESCE(MAX(id), 0) FROM messages") as cur:
                row = await cur.fetchone()
            self._next_id = (row[0] if row else 0) + 1
            self._reader = await aiosqlite.connect(self.path, isolation_level=None)
            await self._reader.execute("PRAGMA busy_timeout=10000")
            await self._reader.execute("PRAGMA query_only=1")
        except (OSError, aiosqlite.Error) as exc:
            await self.aclose()
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc
        except BaseException:
            await self.aclose()
            raise
        self._writer = asyncio.create_task(self._write_loop(), name="store-writer")

    async def _migrate(self) -> None:
        assert self._db is not None
        await self._db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER)")
        async with self._db.execute("SELECT MAX(version) FROM schema_version") as cur:
            row = await cur.fetchone()
        current = row[0] if row and row[0] is not None else 0
        if current > len(_MIGRATIONS):
            raise StoreError(
                f"the store at {self.path} has schema version {current}, newer than this "
                f"tierbot ({len(_MIGRATIONS)}); upgrade tierbot"
            )
        for version in range(current + 1, len(_MIGRATIONS) + 1):
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                for stmt in _MIGRATIONS[version - 1].split(";"):
                    if stmt.strip():
                        await self._db.execute(stmt)
                await self._db.execute("INSERT INTO schema_version VALUES (?)", (version,))
                await self._db.execute("COMMIT")
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise
            log.info("store.migrated", version=version)

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Flush pending writes, stop the writer, close both connections. Safe to call twice."""
        if self._writer is not None:
            await self._queue.put(None)
            await self._writer
            self._writer = None
        for conn in (self._reader, self._db):
            if conn is not None:
                await conn.close()
        self._reader = self._db = None

    # -- the writer --------------------------------------------------------------

    async def write(self, op: WriteOp) -> Any:
        """Run ``op`` inside the next batch transaction; return once it is committed.

        Each op runs under its own savepoint: one failing op is rolled back and
        its error raised to its caller without affecting the rest of the batch.
        """
        if self._writer is None:
            raise StoreError("the store is closed")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._queue.put((op, fut))
        return await fut

    async def _write_loop(self) -> None:
        db = self._db
        assert db is not None
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
                await db.execute("BEGIN IMMEDIATE")
                for op, fut in batch:
                    await db.execute("SAVEPOINT op")
                    try:
                        value = await op(db)
                        await db.execute("RELEASE op")
                        results.append((fut, value, None))
                    except Exception as exc:  # the op's own failure goes to its caller
                        await db.execute("ROLLBACK TO op")
                        await db.execute("RELEASE op")
                        results.append((fut, None, exc))
                await db.execute("COMMIT")
                self.commits += 1
            except Exception as exc:
                log.error("store.commit_failed", error=str(exc), batch=len(batch))
                try:
                    await db.execute("ROLLBACK")
                except aiosqlite.Error:
                    pass
                err = StoreError(f"cannot write to the store at {self.path}: {exc}")
                results = [(fut, None, err) for _, fut in batch]
            for fut, value, error in results:
                if fut.done():
                    continue
                if error is not None:
                    fut.set_exception(error)
                else:
                    fut.set_result(value)

    # -- messages ------------------------------------------------------------------

    def _assign(self, msg: Message) -> Message:
        mid = self._next_id
        self._next_id += 1
        return msg.with_(id=mid, pos=msg.pos or float(mid))

    async def append(self, msg: Message) -> Message | None:
        """Durably append ``msg``; return it with its id, or None if it is a duplicate."""
        return (await self.append_many([msg]))[0]

    async def append_many(self, msgs: Sequence[Message]) -> list[Message | None]:
        """Append several messages in one transaction; duplicates come back as None."""
        assigned = [self._assign(m) for m in msgs]

        async def op(db: aiosqlite.Connection) -> list[Message | None]:
            out: list[Message | None] = []
            for m in assigned:
                cur = await db.execute(
                    f"INSERT OR IGNORE INTO messages ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        m.id,
                        m.channel,
                        m.platform_id,
                        m.role.value,
                        m.author_id,
                        m.author_name,
                        m.text,
                        m.ts,
                        m.tokens,
                        m.state.value,
                        m.pos,
                        json.dumps(m.meta) if m.meta else "{}",
                    ),
                )
                out.append(m if cur.rowcount == 1 else None)
            return out

        result: list[Message | None] = await self.write(op)
        return result

    async def load_live(self, channel: str) -> list[Message]:
        """The channel's live context, in order."""
        return await self._select(
            f"SELECT {_COLUMNS} FROM messages WHERE channel=? AND state='live' ORDER BY pos, id",
            (channel,),
        )

    async def messages_after(self, channel: str, after_id: int) -> list[Message]:
        return await self._select(
            f"SELECT {_COLUMNS} FROM messages WHERE channel=? AND id>? ORDER BY id",
            (channel, after_id),
        )

    async def messages_since(
        self, after_id: int, limit: int, roles: Sequence[Role]
    ) -> tuple[list[Message], int]:
        """Up to ``limit`` committed messages of ``roles`` with ``id > after_id``, every
        channel, in id order; and the highest id the scan covered (``after_id`` when none).

        Ids grow in commit order, so a reader that resumes from the covered id misses
        nothing; the covered id may pass rows of other roles that were skipped."""
        assert self._reader is not None
        async with self._reader.execute(
            "SELECT id, role FROM messages WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit)
        ) as cur:
            scanned = list(await cur.fetchall())
        if not scanned:
            return [], after_id
        wanted = {r.value for r in roles}
        ids = [i for i, role in scanned if role in wanted]
        return (await self.get_messages(ids) if ids else []), int(scanned[-1][0])

    async def count_since(self, after_id: int, roles: Sequence[Role]) -> int:
        """Committed messages of ``roles`` with ``id > after_id``."""
        marks = ",".join("?" * len(roles))
        sql = f"SELECT COUNT(*) FROM messages WHERE id > ? AND role IN ({marks})"
        return int(await self._scalar(sql, (after_id, *[r.value for r in roles])))

    async def last_message_id(self) -> int:
        """The highest committed message id (0 for an empty store)."""
        return int(await self._scalar("SELECT COALESCE(MAX(id), 0) FROM messages", ()))

    async def get_messages(self, ids: Sequence[int]) -> list[Message]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        return await self._select(
            f"SELECT {_COLUMNS} FROM messages WHERE id IN ({marks}) ORDER BY id", tuple(ids)
        )

    async def export(self, channel: str) -> AsyncIterator[Message]:
        """Every message the channel received or sent (summaries and markers excluded)."""
        assert self._reader is not None
        roles = (Role.USER, Role.ASSISTANT, Role.TOOL_CALL, Role.TOOL_RESULT)
        marks = ",".join("?" * len(roles))
        async with self._reader.execute(
            f"SELECT {_COLUMNS} FROM messages WHERE channel=? AND role IN ({marks}) ORDER BY id",
            (channel, *[r.value for r in roles]),
        ) as cur:
            async for row in cur:
                yield _row_to_message(row)

    async def count(self, channel: str, *, state: State | None = None) -> int:
        sql = "SELECT COUNT(*) FROM messages WHERE channel=? AND role IN ('user','assistant')"
        args: tuple[Any, ...] = (channel,)
        if state is not None:
            sql += " AND state=?"
            args += (state.value,)
        return int(await self._scalar(sql, args))

    async def channel_keys(self) -> list[str]:
        assert self._reader is not None
        async with self._reader.execute("SELECT DISTINCT channel FROM messages") as cur:
            return [r[0] for r in await cur.fetchall()]

    async def _select(self, sql: str, args: tuple[Any, ...]) -> list[Message]:
        assert self._reader is not None
        async with self._reader.execute(sql, args) as cur:
            return [_row_to_message(r) for r in await cur.fetchall()]

    async def _scalar(self, sql: str, args: tuple[Any, ...]) -> Any:
        assert self._reader is not None
        async with self._reader.execute(sql, args) as cur:
            row = await cur.fetchone()
        return row[0] if row else None

    # -- channel state -------------------------------------------------------------

    async def channel_state(self, channel: str) -> ChannelState:
        assert self._reader is not None
        async with self._reader.execute(
            "SELECT handled_upto, counters FROM channels WHERE key=?", (channel,)
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return ChannelState()
        return ChannelState(handled_upto=row[0], counters=json.loads(row[1]))

    async def save_channel_state(self, channel: str, state: ChannelState) -> None:
        await self.write(lambda db: _upsert_state(db, channel, state))

    # -- compaction ------------------------------------------------------------------

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
        """Atomically archive ``covered`` and insert ``replacement`` (a summary or marker).

        The replacement is linked to every message it covers.  Messages already
        archived stay archived; the replacement still lands once.  ``updates``
        rewrites live entries (text, tokens, pos, meta) in the same transaction.
        """
        placed = self._assign(replacement) if replacement is not None else None

        async def op(db: aiosqlite.Connection) -> Message | None:
            for i in range(0, len(covered), 500):
                chunk = list(covered[i : i + 500])
                marks = ",".join("?" * len(chunk))
                await db.execute(
                    f"UPDATE messages SET state='archived' WHERE channel=? AND id IN ({marks})",
                    (channel, *chunk),
                )
            if placed is not None:
                m = placed
                await db.execute(
                    f"INSERT INTO messages ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        m.id, m.channel, m.platform_id, m.role.value, m.author_id,
                        m.author_name, m.text, m.ts, m.tokens, m.state.value, m.pos,
                        json.dumps(m.meta),
                    ),
                )  # fmt: skip
                await db.executemany(
                    "INSERT OR IGNORE INTO summary_members VALUES (?, ?)",
                    [(m.id, mid) for mid in covered],
                )
            for u in updates:
                await db.execute(
                    "UPDATE messages SET text=?, tokens=?, pos=?, meta=? WHERE id=?",
                    (u.text, u.tokens, u.pos, json.dumps(u.meta), u.id),
                )
            if record is not None:
                await _insert_record(db, record)
            if state is not None:
                await _upsert_state(db, channel, state)
            return placed

        result: Message | None = await self.write(op)
        return result

    async def delete_messages(self, pairs: Sequence[tuple[str, str]]) -> int:
        """Delete user messages by (channel, platform id): only forgetting a user does this."""

        async def op(db: aiosqlite.Connection) -> int:
            n = 0
            for channel, pid in pairs:
                cur = await db.execute(
                    "DELETE FROM messages WHERE channel=? AND platform_id=? AND role='user'",
                    (channel, pid),
                )
                n += cur.rowcount
            await db.execute(
                "DELETE FROM summary_members WHERE message_id NOT IN (SELECT id FROM messages)"
            )
            return n

        deleted: int = await self.write(op)
        return deleted

    async def record_compaction(self, record: CompactionRecord) -> None:
        await self.write(lambda db: _insert_record(db, record))

    async def compactions(self, channel: str, limit: int = 100) -> list[CompactionRecord]:
        assert self._reader is not None
        async with self._reader.execute(
            "SELECT channel, tier, outcome, started, duration, usage_before, usage_after, "
            "covered, tokens_before, tokens_after, memories, reason FROM compactions "
            "WHERE channel=? ORDER BY started DESC LIMIT ?",
            (channel, limit),
        ) as cur:
            return [CompactionRecord(*row) for row in await cur.fetchall()]

    async def covered_by(self, summary_id: int) -> list[int]:
        assert self._reader is not None
        async with self._reader.execute(
            "SELECT message_id FROM summary_members WHERE summary_id=? ORDER BY message_id",
            (summary_id,),
        ) as cur:
            return [r[0] for r in await cur.fetchall()]


async def _upsert_state(db: aiosqlite.Connection, channel: str, state: ChannelState) -> None:
    await db.execute(
        "INSERT INTO channels (key, handled_upto, counters, updated) VALUES (?,?,?,?) "
        "ON CONFLICT(key) DO UPDATE SET handled_upto=excluded.handled_upto, "
        "counters=excluded.counters, updated=excluded.updated",
        (channel, state.handled_upto, json.dumps(state.counters), time.time()),
    )


async def _insert_record(db: aiosqlite.Connection, r: CompactionRecord) -> None:
    await db.execute(
        "INSERT INTO compactions (channel, tier, outcome, started, duration, usage_before, "
        "usage_after, covered, tokens_before, tokens_after, memories, reason) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            r.channel, r.tier, r.outcome, r.started, r.duration, r.usage_before,
            r.usage_after, r.covered, r.tokens_before, r.tokens_after, r.memories, r.reason,
        ),
    )  # fmt: skip
