"""The SQLite store: an append-only message log, channel state, compaction records.

Invariants:

* The raw message log is the source of truth and is append-only: a message is
  never deleted by tierbot's own operation, only moved from ``live`` to
  ``archived`` (forgetting a user is the one deliberate exception).
* ``append`` returns only after the row is committed, so an adapter may
  acknowledge a platform message once it returns; a crash afterwards loses
  nothing.  Only a redelivered ``(channel, platform_id)`` is a duplicate (and
  ignored); every other failure raises :class:`~tierbot.errors.StoreError`.
* Message ids come from SQLite (AUTOINCREMENT): they only grow, even after
  forgetting deletes the newest rows, because channels compare ids with their
  ``handled_upto``.
* One process writes a store at a time (:mod:`tierbot.storelock`); any number of
  read-only opens (``read_only=True``: no migration, no writer, no lock) may run
  beside it.
* One writer task owns every write and commits them in batches (group commit):
  thousands of channels share one fsync instead of queueing for their own.
* A compaction swap (archive the covered messages, insert the summary that
  replaces them) is one transaction: after a crash the live context is either
  before or after it, never a mix.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiosqlite
import structlog

from tierbot.errors import StoreError
from tierbot.groupcommit import WriteQueue, WriteResult
from tierbot.groupread import GroupRead
from tierbot.messages import Message, Role, State
from tierbot.migrations import Migrations, migrate, version
from tierbot.storage import ChannelState, CompactionRecord, MessageStore, UndeliveredReply
from tierbot.storelock import WriterLock
from tierbot.writeturns import write_turn

T = TypeVar("T")
log = structlog.get_logger("tierbot.store")

#: Prepared statements each connection keeps (sqlite3's default: 128).  Multi-row
#: INSERTs and IN lists make a new statement text for every length, and a prepared
#: 500-row INSERT holds hundreds of KB: at 128 per connection the caches held ~38 MB
#: of a 10,000-channel process.  The statements run on every turn stay cached at 32.
STATEMENT_CACHE = 32

_STEPS: tuple[str, ...] = (
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
    # 2: the branch and task-worker tables, owned by workers/records.py since; a store
    # migrated before keeps them, and the workers' own first step adopts them.
    "",
    # 3: ids assigned by SQLite and never reused (AUTOINCREMENT), seeded past every id a
    # channel may already have handled, so a deleted newest row cannot hand its id on.
    """
    CREATE TABLE messages_v3 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
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
    INSERT INTO messages_v3 SELECT * FROM messages;
    DROP TABLE messages;
    ALTER TABLE messages_v3 RENAME TO messages;
    CREATE INDEX messages_live ON messages (channel, state, pos);
    DELETE FROM sqlite_sequence WHERE name IN ('messages', 'messages_v3');
    INSERT INTO sqlite_sequence (name, seq) VALUES ('messages', MAX(
        COALESCE((SELECT MAX(id) FROM messages), 0),
        COALESCE((SELECT MAX(handled_upto) FROM channels), 0),
        COALESCE((SELECT MAX(message_id) FROM summary_members), 0)));
    CREATE TRIGGER messages_pos_default AFTER INSERT ON messages WHEN NEW.pos = 0
    BEGIN UPDATE messages SET pos = NEW.id WHERE id = NEW.id; END
    """,
    # 4: replies saved in the history but not delivered (the platform was unreachable, or
    # shutdown came first): posted when their adapter next connects, then deleted.
    """
    CREATE TABLE undelivered (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        text TEXT NOT NULL,
        reply_to TEXT,
        created REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 1,
        error TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX undelivered_channel ON undelivered (channel, id);
    """,
    # 5: when a kept reply's post began (NULL: not being posted).  Set and committed before
    # the post, cleared by a refusal, the row deleted once the platform took it: a row
    # still marked at start was being posted when the process died.
    """
    ALTER TABLE undelivered ADD COLUMN sending REAL;
    """,
)

#: The message store's tables: the log, summary membership, channel state, compaction
#: history, kept replies.  Versions 1-5 were recorded in ``schema_version`` before
#: ``tierbot_schema`` existed.
MIGRATIONS = Migrations("store", _STEPS, legacy="schema_version")

_COLUMNS = (
    "id, channel, platform_id, role, author_id, author_name, text, ts, tokens, state, pos, meta"
)
# Every column but the id, which SQLite assigns.
_INSERT = (
    "INSERT INTO messages (channel, platform_id, role, author_id, author_name, text, ts, "
    "tokens, state, pos, meta) VALUES "
)
_ROW = "(?,?,?,?,?,?,?,?,?,?,?)"
#: Rows per INSERT statement: a batch of n rows is cut into the largest of these that fit
#: (11 parameters a row, well under SQLite's variable limit).  Every row count is its own
#: prepared statement; with any count allowed, a burst's batches prepared (and freed) a
#: new one nearly every time, at up to hundreds of KB each.
_INSERT_SIZES = (256, 64, 16, 4, 1)
_KEYS_PER_QUERY = 500  # channels read in one IN list
_IN_SIZES = (1, 4, 16, 64, 256, _KEYS_PER_QUERY)


def _insert_args(m: Message) -> tuple[Any, ...]:
    return (
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
    )


def in_connection_thread(
    db: aiosqlite.Connection, fn: Callable[..., T], *args: Any
) -> Awaitable[T]:
    """Run ``fn(conn, *args)`` in ``db``'s own thread on its sqlite3 connection: one trip
    for what would otherwise be one per statement.

    Each trip waits for the event loop to come round for its result, 10-20 ms when
    thousands of channels keep it busy; a batch of statements run this way holds the
    file for the time SQLite needs, not for that many trips.  aiosqlite has no public
    call for it: ``_execute`` and ``_conn`` are what its own methods are built on (in
    every release pyproject.toml allows; every store test goes through here).
    """
    return db._execute(fn, db._conn, *args)


@dataclass(slots=True)
class Step:
    """One statement of a write: its SQL and parameters are built on the event loop, and
    only run in the connection's thread (what a thread allocates stays in its own malloc
    arena: building them there grew a 10,000-channel process by 2 KB a channel)."""

    sql: str
    params: Any  # one row's parameters; for ``many``, a list of them (executemany)
    many: bool = False


#: What a write makes of its steps' rows (a list per step; executemany: none).
Finish = Callable[[list[list[Any]]], list[Any]]


def run_steps(conn: sqlite3.Connection, steps: Sequence[Step]) -> list[list[Any]]:
    """In the connection's thread: each step's rows (RETURNING ones), in order."""
    out: list[list[Any]] = []
    for step in steps:
        if step.many:
            conn.executemany(step.sql, step.params)
            out.append([])
        else:
            out.append(conn.execute(step.sql, step.params).fetchall())
    return out


def _insert_steps(msgs: Sequence[Message], *, redelivery_ok: bool) -> tuple[list[Step], Finish]:
    """Insert ``msgs`` in order; each comes back with its id (and pos, when it had none), or
    None for a redelivery. Only a ``(channel, platform_id)`` conflict is a redelivery (a
    repeat inside ``msgs`` too): any other constraint error raises."""
    conflict = " ON CONFLICT(channel, platform_id) DO NOTHING" if redelivery_ok else ""
    chunks = []
    start = 0
    while start < len(msgs):
        size = next(n for n in _INSERT_SIZES if n <= len(msgs) - start)
        chunks.append(msgs[start : start + size])
        start += size
    steps = [
        Step(
            _INSERT
            + ",".join([_ROW] * len(chunk))
            + conflict
            + " RETURNING id, channel, platform_id",
            [arg for m in chunk for arg in _insert_args(m)],
        )
        for chunk in chunks
    ]

    def finish(rows_per_step: list[list[Any]]) -> list[Message | None]:
        out: list[Message | None] = []
        for chunk, rows in zip(chunks, rows_per_step, strict=True):
            ids = {(ch, pid): int(mid) for mid, ch, pid in rows}
            for m in chunk:
                # pop: a platform id repeated within the batch was stored once, the first.
                mid = ids.pop((m.channel, m.platform_id), None)
                out.append(None if mid is None else m.with_(id=mid, pos=m.pos or float(mid)))
        return out

    return steps, finish


async def _insert(
    db: aiosqlite.Connection, msgs: Sequence[Message], *, redelivery_ok: bool
) -> list[Message | None]:
    steps, finish = _insert_steps(msgs, redelivery_ok=redelivery_ok)
    result: list[Message | None] = finish(await in_connection_thread(db, run_steps, steps))
    return result


def _in_order(m: Message) -> tuple[float, int]:
    return (m.pos, m.id or 0)


def _row_to_message(row: Sequence[Any]) -> Message:
    # A channel's history repeats its key and its few authors on every message: one
    # string each (sys.intern) rather than one per row read, in every resident channel.
    return Message(
        id=row[0],
        channel=sys.intern(row[1]),
        platform_id=row[2],
        role=Role(row[3]),
        author_id=sys.intern(row[4]),
        author_name=sys.intern(row[5]),
        text=row[6],
        ts=row[7],
        tokens=row[8],
        state=State(row[9]),
        pos=row[10],
        meta=json.loads(row[11]) if row[11] and row[11] != "{}" else {},
    )


def _in_lists(keys: Sequence[str]) -> list[Sequence[str]]:
    """``keys`` in chunks of at most _KEYS_PER_QUERY, each padded (by repeating its last
    key, which an IN list ignores) to one of a few lengths: every length is its own
    prepared statement, and the connection keeps only STATEMENT_CACHE of them."""
    out: list[Sequence[str]] = []
    for start in range(0, len(keys), _KEYS_PER_QUERY):
        chunk = list(keys[start : start + _KEYS_PER_QUERY])
        size = next(n for n in _IN_SIZES if n >= len(chunk))
        out.append(chunk + [chunk[-1]] * (size - len(chunk)))
    return out


def _select_in(conn: sqlite3.Connection, sql: str, keys: Sequence[str]) -> list[Any]:
    """In the reader's thread: the rows of ``sql`` for all ``keys``, its ``{marks}`` made
    an IN list of each chunk's placeholders (see :func:`_in_lists`)."""
    rows: list[Any] = []
    for chunk in _in_lists(keys):
        rows += conn.execute(sql.format(marks=",".join("?" * len(chunk))), chunk).fetchall()
    return rows


_LIVE_IN = f"SELECT {_COLUMNS} FROM messages WHERE channel IN ({{marks}}) AND state='live'"
_STATES_IN = "SELECT key, handled_upto, counters FROM channels WHERE key IN ({marks})"


WriteOp = Callable[[aiosqlite.Connection], Awaitable[Any]]


@dataclass(eq=False, slots=True)
class _Mergeable:
    """A write the writer may run in one statement with the batch's others of its
    ``kind``: appends become one multi-row INSERT, channel states one executemany.

    Under a burst most of a batch is appends and channel states, and each op costs a
    trip to the connection's thread; merged, a batch of hundreds takes one (see
    :meth:`Store._commit_merged`).  ``prepare`` builds the statements of several
    payloads and what to make of their rows, on the event loop.
    Called alone (a batch being retried op by op) it runs on its own payload.
    """

    kind: str
    payload: Any
    prepare: Callable[[list[Any]], tuple[list[Step], Finish]]

    async def __call__(self, db: aiosqlite.Connection) -> Any:
        return (await self.run_many(db, [self.payload]))[0]

    async def run_many(self, db: aiosqlite.Connection, payloads: list[Any]) -> list[Any]:
        steps, finish = self.prepare(payloads)
        return finish(await in_connection_thread(db, run_steps, steps))


def _append_many_ops(payloads: list[Sequence[Message]]) -> tuple[list[Step], Finish]:
    """Several callers' appends in one INSERT (in their order, so a platform id two of
    them carry is the first one's); each gets its own messages back."""
    steps, finish_all = _insert_steps([m for msgs in payloads for m in msgs], redelivery_ok=True)

    def finish(rows_per_step: list[list[Any]]) -> list[Any]:
        stored = finish_all(rows_per_step)
        out = []
        for msgs in payloads:
            out.append(stored[: len(msgs)])
            stored = stored[len(msgs) :]
        return out

    return steps, finish


def _upsert_states(payloads: list[tuple[str, ChannelState]]) -> tuple[list[Step], Finish]:
    """Channel states, the last one of a channel winning (they are in queue order)."""
    now = time.time()
    params = [(key, st.handled_upto, json.dumps(st.counters), now) for key, st in payloads]
    return [Step(_UPSERT_STATE, params, many=True)], lambda _rows: [None] * len(payloads)


@dataclass(slots=True)
class _OpFailed:
    """What the one-trip transaction reports when one of its ops failed and it rolled
    back: the error, to hand to a batch of one or to retry the batch op by op."""

    error: Exception


def _merged_transaction(
    conn: sqlite3.Connection, groups: list[list[Step]]
) -> list[list[list[Any]]] | _OpFailed:
    """A batch of merged writes as one transaction, in the connection's thread: each
    group's rows, or the failure of a statement after rolling the transaction back.
    Raises when the transaction itself is gone (SQLite rolled it back: disk full, I/O
    error) or could not begin or commit."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = [run_steps(conn, steps) for steps in groups]
    except Exception as exc:
        if not conn.in_transaction:
            raise
        conn.execute("ROLLBACK")
        return _OpFailed(exc)
    conn.execute("COMMIT")
    return rows


__all__ = [
    "MIGRATIONS",
    "ChannelState",
    "CompactionRecord",
    "MessageStore",
    "Step",
    "Store",
    "UndeliveredReply",
    "WriteOp",
    "in_connection_thread",
    "run_steps",
]


class Store:
    """The SQLite :class:`~tierbot.storage.MessageStore`: a single group-committing
    writer and a read connection; an async context manager.

    Beyond the protocol it offers :meth:`write`, which other layers' SQLite tables
    (the task-worker records) use to join the writer's batches.
    """

    backend = "sqlite"

    def __init__(
        self,
        path: Path,
        *,
        synchronous: str = "full",
        commit_batch: int = 512,
        busy_timeout: float = 10.0,
        read_only: bool = False,
        components: Sequence[Migrations] = (),
    ) -> None:
        self.path = path
        self.read_only = read_only
        #: Other layers' tables in this file (task-worker records), migrated at open.
        self.components = tuple(components)
        self._synchronous = synchronous.upper()
        self._commit_batch = commit_batch
        self._busy_ms = max(0, int(busy_timeout * 1000))
        self._db: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._lock: WriterLock | None = None
        self._queue: WriteQueue[WriteOp] = WriteQueue()
        self._writer: asyncio.Task[None] | None = None
        self.commits = 0
        #: The error of the last batch of writes the store refused as a whole (a full disk,
        #: an I/O error, a lost connection): its callers got it, and a command that ends
        #: after it must not say it succeeded (see ``tierbot replay``).
        self.refused: StoreError | None = None
        self._live = GroupRead(self._live_many, copy=list)
        self._states = GroupRead(
            self._states_many, copy=lambda st: replace(st, counters=dict(st.counters))
        )

    # -- lifecycle -------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        synchronous: str = "full",
        commit_batch: int = 512,
        busy_timeout: float = 10.0,
        read_only: bool = False,
        components: Sequence[Migrations] = (),
    ) -> Store:
        """Open the store; raise StoreError (StoreLockedError: another writer) on failure.

        ``read_only``: no lock, no migration, no writer task; the file must exist.
        ``components``: the migrations of other layers' tables kept in this file
        (applied after the store's own, on the writer's connection).
        """
        store = cls(
            path,
            synchronous=synchronous,
            commit_batch=commit_batch,
            busy_timeout=busy_timeout,
            read_only=read_only,
            components=components,
        )
        await store._open()
        return store

    async def _open(self) -> None:
        try:
            if self.read_only:
                await self._open_read_only()
                return
            self._lock = WriterLock(self.path).acquire()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = await aiosqlite.connect(
                self.path, isolation_level=None, cached_statements=STATEMENT_CACHE
            )
            await self._db.execute(f"PRAGMA busy_timeout={self._busy_ms}")
            await self._db.execute("PRAGMA journal_mode=WAL")
            await self._db.execute(f"PRAGMA synchronous={self._synchronous}")
            await self._migrate()
            self._reader = await aiosqlite.connect(
                self.path, isolation_level=None, cached_statements=STATEMENT_CACHE
            )
            await self._reader.execute(f"PRAGMA busy_timeout={self._busy_ms}")
            await self._reader.execute("PRAGMA query_only=1")
        except (OSError, aiosqlite.Error) as exc:
            await self.aclose()
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc
        except BaseException:
            await self.aclose()
            raise
        self._writer = asyncio.create_task(self._write_loop(), name="store-writer")

    async def _open_read_only(self) -> None:
        if not self.path.is_file():
            raise StoreError(f"no store at {self.path}: check [storage] path in the config")
        uri = self.path.resolve().as_uri() + "?mode=ro"
        self._reader = await aiosqlite.connect(
            uri, uri=True, isolation_level=None, cached_statements=STATEMENT_CACHE
        )
        await self._reader.execute(f"PRAGMA busy_timeout={self._busy_ms}")
        current = await version(self._reader, MIGRATIONS, where=str(self.path))
        if current == 0:
            raise StoreError(f"{self.path} is not a tierbot store (no message log in it)")
        for component in self.components:
            await version(self._reader, component, where=str(self.path))

    async def _migrate(self) -> None:
        assert self._db is not None
        for m in (MIGRATIONS, *self.components):
            await migrate(self._db, m, where=str(self.path))

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
        """Flush pending writes, stop the writer, close both connections, drop the writer
        lock. Safe to call twice, and after a failed open."""
        try:
            if self._writer is not None:
                await self._queue.stop()
                await self._writer
                self._writer = None
        finally:
            try:
                for conn in (self._reader, self._db):
                    if conn is not None:
                        with contextlib.suppress(aiosqlite.Error):
                            await conn.close()
                self._reader = self._db = None
            finally:
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None

    # -- the writer --------------------------------------------------------------

    async def write(self, op: WriteOp) -> Any:
        """Run ``op`` inside the next batch transaction; return once it is committed.

        One failing op is rolled back and its error raised to its caller without
        affecting the rest of the batch (see :meth:`_commit`).
        """
        if self._writer is None:
            raise StoreError(
                f"the store at {self.path} was opened read-only"
                if self.read_only
                else "the store is closed"
            )
        return await self._queue.submit(op)

    async def _write_loop(self) -> None:
        db = self._db
        assert db is not None
        while (batch := await self._queue.next_batch(self._commit_batch)) is not None:
            try:
                # Optimistic first: the batch's ops one after another in one transaction
                # (appends and channel states merged), which is every batch but the rare
                # one holding a failing op.  That one is rolled back and run again, each
                # op alone under its own savepoint.  The memory graph writes this file
                # through its own connection: take turns with it in this process rather
                # than poll SQLite's lock (see tierbot.writeturns).
                async with write_turn(self.path, self._busy_ms / 1000):
                    results = await self._commit(db, batch, isolated=False)
                    if results is None:
                        results = await self._commit(db, batch, isolated=True)
                        assert results is not None
            except Exception as exc:
                # Report the error that stopped the batch, never a failed rollback's.
                log.error("store.commit_failed", error=str(exc), batch=len(batch))
                if db.in_transaction:
                    try:
                        await db.execute("ROLLBACK")
                    except aiosqlite.Error as again:
                        log.error("store.rollback_failed", error=str(again))
                err = self._error(exc)
                if isinstance(err, StoreError):
                    self.refused = err
                results = [(fut, None, err) for _, fut in batch]
            self._queue.settle(results)

    async def _commit(
        self,
        db: aiosqlite.Connection,
        batch: Sequence[tuple[WriteOp, asyncio.Future[Any]]],
        *,
        isolated: bool,
    ) -> list[WriteResult] | None:
        """Run ``batch`` in one transaction and commit it.  Not ``isolated``: an op's
        failure rolls everything back and returns None (a batch of one: its error).
        ``isolated``: each op under a savepoint, a failing one rolled back alone and its
        error kept for its caller.  Raises when the transaction itself failed."""
        results: list[WriteResult] = []
        kinds: dict[str, list[tuple[_Mergeable, asyncio.Future[Any]]]] = {}
        if not isolated:
            for op, fut in batch:
                if isinstance(op, _Mergeable):
                    kinds.setdefault(op.kind, []).append((op, fut))
            if sum(map(len, kinds.values())) == len(batch):
                return await self._commit_merged(db, batch, kinds)
        await db.execute("BEGIN IMMEDIATE")
        for op, fut in batch:
            if isolated:
                await db.execute("SAVEPOINT op")
            try:
                if isinstance(op, _Mergeable) and op.kind in kinds:
                    # The first of its kind runs them all, where it stands in the batch.
                    group = kinds.pop(op.kind)
                    values = await op.run_many(db, [o.payload for o, _ in group])
                    results += [(f, v, None) for (_, f), v in zip(group, values, strict=True)]
                    continue
                if isinstance(op, _Mergeable) and not isolated:
                    continue  # ran with the first of its kind
                value = await op(db)
            except Exception as exc:
                if not db.in_transaction:
                    # SQLite rolled the whole transaction back (disk full, I/O
                    # error): the batch's earlier ops are gone too.
                    raise
                if not isolated:
                    await db.execute("ROLLBACK")
                    if len(batch) == 1:
                        return [(fut, None, self._error(exc))]
                    return None
                # The op's own failure goes to its caller alone.
                await db.execute("ROLLBACK TO op")
                await db.execute("RELEASE op")
                results.append((fut, None, self._error(exc)))
                continue
            if isolated:
                await db.execute("RELEASE op")
            results.append((fut, value, None))
        await db.execute("COMMIT")
        self.commits += 1
        return results

    async def _commit_merged(
        self,
        db: aiosqlite.Connection,
        batch: Sequence[tuple[WriteOp, asyncio.Future[Any]]],
        kinds: dict[str, list[tuple[_Mergeable, asyncio.Future[Any]]]],
    ) -> list[WriteResult] | None:
        """:meth:`_commit` of a batch of mergeable ops only (a burst's appends and
        channel states), in one trip to the connection's thread."""
        groups = list(kinds.values())
        # Built here (a payload that cannot be, e.g. unserialisable meta, fails here,
        # before the transaction: the batch is retried op by op to find it).
        try:
            prepared = [group[0][0].prepare([o.payload for o, _ in group]) for group in groups]
        except Exception as exc:
            return [(batch[0][1], None, exc)] if len(batch) == 1 else None
        outcome = await in_connection_thread(
            db, _merged_transaction, [steps for steps, _ in prepared]
        )
        if isinstance(outcome, _OpFailed):
            if len(batch) == 1:
                return [(batch[0][1], None, self._error(outcome.error))]
            return None
        self.commits += 1
        results: list[WriteResult] = []
        for group, (_, finish), rows in zip(groups, prepared, outcome, strict=True):
            values = finish(rows)
            results += [(fut, value, None) for (_, fut), value in zip(group, values, strict=True)]
        return results

    def _error(self, exc: Exception) -> Exception:
        """SQLite's own errors become a StoreError naming the store and the real cause."""
        if isinstance(exc, aiosqlite.Error):
            err = StoreError(f"cannot write to the store at {self.path}: {exc}")
            err.__cause__ = exc
            return err
        return exc

    # -- messages ------------------------------------------------------------------

    async def append(self, msg: Message) -> Message | None:
        """Durably append ``msg``; return it with its id, or None if it is a redelivery.

        Raises StoreError when it could not be stored (any other constraint, a full
        disk, a locked database)."""
        return (await self.append_many([msg]))[0]

    async def append_many(self, msgs: Sequence[Message]) -> list[Message | None]:
        """Append several messages in one transaction (all or none); redeliveries come back
        as None."""

        result: list[Message | None] = await self.write(
            _Mergeable("append", msgs, _append_many_ops)
        )
        return result

    async def load_live(self, channel: str) -> list[Message]:
        """The channel's live context, in order.  Channels asked for at once (a burst of
        starts) are read in one query."""
        return await self._live.get(channel)

    async def _live_many(self, channels: Sequence[str]) -> dict[str, list[Message] | Exception]:
        assert self._reader is not None
        rows = await in_connection_thread(self._reader, _select_in, _LIVE_IN, channels)
        out: dict[str, list[Message] | Exception] = {key: [] for key in channels}
        for row in rows:
            live = out[row[1]]
            if isinstance(live, Exception):
                continue
            try:
                live.append(_row_to_message(row))
            except (ValueError, TypeError) as exc:
                # One channel's unreadable row fails its own start, not the others'.
                out[row[1]] = self._unreadable(row[1], f"message {row[0]}", exc)
        for live in out.values():
            if isinstance(live, list):
                live.sort(key=_in_order)
        return out

    def _unreadable(self, channel: str, what: str, exc: Exception) -> StoreError:
        err = StoreError(
            f"cannot read channel {channel!r} from the store at {self.path}: {what}: {exc}"
        )
        err.__cause__ = exc
        return err

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
        scanned = list(
            await self._reader.execute_fetchall(
                "SELECT id, role FROM messages WHERE id > ? ORDER BY id LIMIT ?", (after_id, limit)
            )
        )
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
        rows = await self._reader.execute_fetchall("SELECT DISTINCT channel FROM messages")
        return [r[0] for r in rows]

    async def _select(self, sql: str, args: tuple[Any, ...]) -> list[Message]:
        assert self._reader is not None
        # execute_fetchall: one trip to the connection's thread, not three (a cursor's
        # execute, fetchall and close each take one), on every turn's reads.
        return [_row_to_message(r) for r in await self._reader.execute_fetchall(sql, args)]

    async def _scalar(self, sql: str, args: tuple[Any, ...]) -> Any:
        assert self._reader is not None
        rows = list(await self._reader.execute_fetchall(sql, args))
        return rows[0][0] if rows else None

    # -- channel state -------------------------------------------------------------

    async def channel_state(self, channel: str) -> ChannelState:
        """The channel's state (a fresh one when it has none).  Channels asked for at
        once are read in one query."""
        return await self._states.get(channel)

    async def _states_many(self, channels: Sequence[str]) -> dict[str, ChannelState | Exception]:
        assert self._reader is not None
        rows = await in_connection_thread(self._reader, _select_in, _STATES_IN, channels)
        out: dict[str, ChannelState | Exception] = {key: ChannelState() for key in channels}
        for key, handled_upto, counters in rows:
            try:
                out[key] = ChannelState(handled_upto=handled_upto, counters=json.loads(counters))
            except ValueError as exc:
                out[key] = self._unreadable(key, "its state", exc)
        return out

    async def save_channel_state(self, channel: str, state: ChannelState) -> None:
        await self.write(_Mergeable("state", (channel, state), _upsert_states))

    async def ensure_channel(self, channel: str) -> None:
        """Give ``channel`` a state row (nothing answered yet) unless it has one."""
        await self.write(
            lambda db: db.execute("INSERT OR IGNORE INTO channels (key) VALUES (?)", (channel,))
        )

    async def channels_awaiting_reply(self) -> list[str]:
        """Channels with live user messages after their ``handled_upto``: never handled."""
        assert self._reader is not None
        async with self._reader.execute(
            "SELECT c.key FROM channels c WHERE EXISTS (SELECT 1 FROM messages m "
            "WHERE m.channel = c.key AND m.state = 'live' AND m.role = 'user' "
            "AND m.id > c.handled_upto) ORDER BY c.key"
        ) as cur:
            return [r[0] for r in await cur.fetchall()]

    # -- undelivered replies ---------------------------------------------------------

    async def save_undelivered(
        self, channel: str, text: str, reply_to: str | None, error: str
    ) -> int:
        """Remember a reply its platform did not receive; return its id."""

        async def op(db: aiosqlite.Connection) -> int:
            cur = await db.execute(
                "INSERT INTO undelivered (channel, text, reply_to, created, error) "
                "VALUES (?,?,?,?,?)",
                (channel, text, reply_to, time.time(), error),
            )
            return int(cur.lastrowid or 0)

        rowid: int = await self.write(op)
        return rowid

    async def undelivered(self, prefix: str = "") -> list[UndeliveredReply]:
        """Undelivered replies of channels whose key starts with ``prefix``, oldest first."""
        assert self._reader is not None
        async with self._reader.execute(
            "SELECT id, channel, text, reply_to, created, attempts, error, sending "
            "FROM undelivered "
            "WHERE substr(channel, 1, ?) = ? ORDER BY id",
            (len(prefix), prefix),
        ) as cur:
            return [UndeliveredReply(*row) for row in await cur.fetchall()]

    async def mark_delivered(self, reply_id: int) -> None:
        """The platform took the reply: forget it."""
        await self.write(lambda db: db.execute("DELETE FROM undelivered WHERE id=?", (reply_id,)))

    async def mark_sending(self, reply_id: int) -> None:
        """A post of the reply begins: committed before the platform is asked, so a crash
        before :meth:`mark_delivered` leaves the row marked, never silently re-postable."""
        await self.write(
            lambda db: db.execute(
                "UPDATE undelivered SET sending=? WHERE id=?", (time.time(), reply_id)
            )
        )

    async def release_undelivered(self, reply_id: int) -> bool:
        """An operator found a reply marked as being posted missing on its platform: make
        it postable again (at the adapter's next connect).  False when no such reply."""

        async def op(db: aiosqlite.Connection) -> bool:
            cur = await db.execute("UPDATE undelivered SET sending=NULL WHERE id=?", (reply_id,))
            return cur.rowcount > 0

        done: bool = await self.write(op)
        return done

    async def drop_undelivered(self, reply_id: int) -> bool:
        """Delete a kept reply without posting it.  False when no such reply."""

        async def op(db: aiosqlite.Connection) -> bool:
            cur = await db.execute("DELETE FROM undelivered WHERE id=?", (reply_id,))
            return cur.rowcount > 0

        done: bool = await self.write(op)
        return done

    async def mark_undelivered_again(self, reply_id: int, error: str) -> None:
        """Another attempt failed: count it, keep the latest error, and mark it not being
        posted (the platform refused it, so it may be posted again)."""
        await self.write(
            lambda db: db.execute(
                "UPDATE undelivered SET attempts = attempts + 1, error=?, sending=NULL WHERE id=?",
                (error, reply_id),
            )
        )

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

        async def op(db: aiosqlite.Connection) -> Message | None:
            for i in range(0, len(covered), 500):
                chunk = list(covered[i : i + 500])
                marks = ",".join("?" * len(chunk))
                await db.execute(
                    f"UPDATE messages SET state='archived' WHERE channel=? AND id IN ({marks})",
                    (channel, *chunk),
                )
            placed = None
            if replacement is not None:
                m = placed = (await _insert(db, [replacement], redelivery_ok=False))[0]
                assert m is not None
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

    async def count_author_messages(self, author_id: str) -> int:
        """How many user messages of ``author_id`` are stored, in every channel."""
        assert self._reader is not None
        async with self._reader.execute(
            "SELECT COUNT(*) FROM messages WHERE author_id=? AND role='user'", (author_id,)
        ) as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def delete_author_messages(
        self, author_id: str, channels: Callable[[str], bool] | None = None
    ) -> int:
        """Delete every stored user message of ``author_id`` (in the channels ``channels``
        accepts; all when None); return how many.

        Only forgetting a user does this.  It works from the message log itself, so
        messages the memory graph has not indexed yet go too, not only those a forget
        found through the graph's provenance.
        """

        async def op(db: aiosqlite.Connection) -> int:
            async with db.execute(
                "SELECT DISTINCT channel FROM messages WHERE author_id=? AND role='user'",
                (author_id,),
            ) as cur:
                found = [r[0] for r in await cur.fetchall()]
            n = 0
            for channel in found:
                if channels is None or channels(channel):
                    cur = await db.execute(
                        "DELETE FROM messages WHERE channel=? AND author_id=? AND role='user'",
                        (channel, author_id),
                    )
                    n += cur.rowcount
            if n:
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
            return [CompactionRecord.of_row(*row) for row in await cur.fetchall()]

    async def covered_by(self, summary_id: int) -> list[int]:
        assert self._reader is not None
        async with self._reader.execute(
            "SELECT message_id FROM summary_members WHERE summary_id=? ORDER BY message_id",
            (summary_id,),
        ) as cur:
            return [r[0] for r in await cur.fetchall()]


_UPSERT_STATE = (
    "INSERT INTO channels (key, handled_upto, counters, updated) VALUES (?,?,?,?) "
    "ON CONFLICT(key) DO UPDATE SET handled_upto=excluded.handled_upto, "
    "counters=excluded.counters, updated=excluded.updated"
)


async def _upsert_state(db: aiosqlite.Connection, channel: str, state: ChannelState) -> None:
    steps, _ = _upsert_states([(channel, state)])
    await in_connection_thread(db, run_steps, steps)


async def _insert_record(db: aiosqlite.Connection, r: CompactionRecord) -> None:
    await db.execute(
        "INSERT INTO compactions (channel, tier, outcome, started, duration, usage_before, "
        "usage_after, covered, tokens_before, tokens_after, memories, reason) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            r.channel,
            r.tier,
            r.outcome,
            r.started,
            r.duration,
            r.usage_before,
            r.usage_after,
            r.covered,
            r.tokens_before,
            r.tokens_after,
            r.memories,
            r.reason,
        ),
    )
