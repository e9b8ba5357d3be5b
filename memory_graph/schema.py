"""The memory graph's SQLite tables, in tierbot's database file.

SQLite is the source of truth; the FTS5 table and the hnswlib file are indexes
rebuilt from it.  ``memory_nodes.rowid`` is a node's label in both indexes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from tierbot import migrations
from tierbot.errors import StoreError
from tierbot.migrations import Migrations
from tierbot.store import STATEMENT_CACHE, Step, in_connection_thread, run_steps
from tierbot.writeturns import write_turn

_DDL = """
CREATE TABLE IF NOT EXISTS memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory_nodes (
    rowid INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    importance REAL NOT NULL,
    current_importance REAL NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    accessed_at REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    channel TEXT NOT NULL,
    workspace TEXT NOT NULL,
    author_id TEXT NOT NULL DEFAULT '',
    author_name TEXT NOT NULL DEFAULT '',
    platform_id TEXT,
    sources TEXT NOT NULL DEFAULT '[]',
    superseded_by TEXT,
    near_text TEXT NOT NULL DEFAULT '',
    far_text TEXT NOT NULL DEFAULT '',
    embedding BLOB,
    embedder TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS memory_nodes_episode
    ON memory_nodes (channel, platform_id) WHERE platform_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS memory_nodes_hash ON memory_nodes (content_hash);
CREATE INDEX IF NOT EXISTS memory_nodes_author ON memory_nodes (author_id);
CREATE TABLE IF NOT EXISTS memory_edges (
    src INTEGER NOT NULL REFERENCES memory_nodes(rowid) ON DELETE CASCADE,
    dst INTEGER NOT NULL REFERENCES memory_nodes(rowid) ON DELETE CASCADE,
    type TEXT NOT NULL,
    weight REAL NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (src, dst, type)
);
CREATE INDEX IF NOT EXISTS memory_edges_dst ON memory_edges (dst);
CREATE TABLE IF NOT EXISTS memory_sources (
    node INTEGER NOT NULL REFERENCES memory_nodes(rowid) ON DELETE CASCADE,
    channel TEXT NOT NULL,
    platform_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    PRIMARY KEY (node, platform_id)
);
CREATE INDEX IF NOT EXISTS memory_sources_pid ON memory_sources (channel, platform_id);
CREATE TABLE IF NOT EXISTS memory_private_channels (
    channel TEXT PRIMARY KEY,
    marked_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_tombstones (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (kind, key)
);
"""

#: The memory graph's tables, migrated by the kernel's runner on the graph's own
#: connection.  Version 1 was recorded in ``memory_schema_version`` before
#: ``tierbot_schema`` existed; ``IF NOT EXISTS`` lets step 1 adopt those tables.
#: Step 2: a channel's newest episodes (the indexer's context lookup) were found by walking
#: the whole table back from its newest row; this index finds them directly.
_CHANNEL_INDEX = """
CREATE INDEX IF NOT EXISTS memory_nodes_channel ON memory_nodes (channel, type, rowid);
"""
#: How long a write waits for the file (SQLite's busy timeout, and this process's turn).
BUSY_TIMEOUT_S = 10.0

MIGRATIONS = Migrations("memory_graph", (_DDL, _CHANNEL_INDEX), legacy="memory_schema_version")
SCHEMA_VERSION = MIGRATIONS.latest

#: Columns of the full-text table: stemmed own text, near and far neighbour text, then
#: single-token tags for workspace, channel and type so scope filtering happens in FTS5.
FTS_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5("
    "terms, near, far, ws, ch, ty, tokenize = 'unicode61 remove_diacritics 0')"
)


def _read_only_uri(path: str) -> str:
    if not os.path.isfile(path):
        raise StoreError(f"no store at {path}: check [storage] path in the config")
    return Path(os.path.abspath(path)).as_uri() + "?mode=ro"


async def connect(path: str, *, read_only: bool = False) -> aiosqlite.Connection:
    """Open our own connection: WAL, a busy timeout, foreign keys on.

    ``read_only``: the file must exist and is opened ``mode=ro`` (no journal-mode
    change). On failure the connection is closed before StoreError is raised, so no
    aiosqlite thread is left to keep the process alive.
    """
    db: aiosqlite.Connection | None = None
    try:
        if read_only:
            db = await aiosqlite.connect(
                _read_only_uri(path),
                uri=True,
                isolation_level=None,
                cached_statements=STATEMENT_CACHE,
            )
        else:
            db = await aiosqlite.connect(
                path, isolation_level=None, cached_statements=STATEMENT_CACHE
            )
        await db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if not read_only:
            await db.execute("PRAGMA journal_mode = WAL")
            await db.execute("PRAGMA synchronous = NORMAL")
        await db.execute("PRAGMA foreign_keys = ON")
        # Random-key indexes (ids, content hashes) and FTS pages want more than the
        # default 2 MB page cache once the graph holds ~100k nodes; but every page cached
        # (or memory-mapped) is resident memory that grows with the database, so the
        # cache is bounded and reads go through it rather than through mmap.
        await db.execute("PRAGMA cache_size = -16384")
        await db.execute("PRAGMA mmap_size = 0")
    except StoreError:
        if db is not None:
            await db.close()
        raise
    except Exception as exc:  # aiosqlite surfaces sqlite3 and OS errors alike
        if db is not None:
            with contextlib.suppress(Exception):
                await db.close()
        raise StoreError(f"cannot open memory database {path}: {exc}") from exc
    return db


async def migrate(db: aiosqlite.Connection) -> None:
    """Create or upgrade the tables; refuse a graph written by a newer tierbot."""
    await migrations.migrate(db, MIGRATIONS)


async def check(db: aiosqlite.Connection) -> None:
    """For a read-only open: the memory tables exist and are not from a newer tierbot."""
    if await migrations.version(db, MIGRATIONS) == 0:
        raise StoreError(
            "no memory graph in this store yet: it is created when tierbot runs with "
            "[memory] enabled = true"
        )


async def fetch_all(db: aiosqlite.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
    # One trip to the connection's thread (a cursor takes three: execute, fetch, close).
    return list(await db.execute_fetchall(sql, tuple(params)))


def marks(n: int) -> str:
    """``n`` SQL placeholders."""
    return ",".join("?" * n)


async def get_meta(db: aiosqlite.Connection, key: str) -> str | None:
    rows = list(await db.execute_fetchall("SELECT value FROM memory_meta WHERE key = ?", (key,)))
    return None if not rows else str(rows[0][0])


async def set_meta(db: aiosqlite.Connection, key: str, value: str) -> None:
    await db.execute(
        "INSERT INTO memory_meta (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


@contextlib.asynccontextmanager
async def transaction(db: aiosqlite.Connection, path: str | None = None) -> AsyncIterator[None]:
    """One write transaction (``BEGIN IMMEDIATE``): committed when the block ends, rolled
    back when it raises or is cancelled (see :func:`rollback`), the error re-raised.

    ``path``: the file's, to take this process's turn at writing it first (the message
    store writes it through another connection; see :mod:`tierbot.writeturns`)."""
    turn = write_turn(path, BUSY_TIMEOUT_S) if path else contextlib.nullcontext()
    async with turn:
        try:
            # Inside the try: a BEGIN cancelled while it waits for the file lock still
            # runs once the lock frees, so even its cancellation must queue the rollback.
            await db.execute("BEGIN IMMEDIATE")
            yield
            await db.execute("COMMIT")
        except BaseException:
            # A failed COMMIT may have rolled back already: keep the original error.
            await rollback(db)
            raise


async def write_at_once(db: aiosqlite.Connection, path: str | None, steps: Sequence[Step]) -> None:
    """One write transaction of the message store's kind of ``steps`` (``BEGIN IMMEDIATE``
    to ``COMMIT``), run in the
    connection's thread in one trip; rolled back and the error raised when a step fails.

    For writes that read nothing in between (an indexing batch): a transaction of a trip
    per statement holds the file while each trip's result waits for a busy event loop,
    and the message store's commits wait behind it.  A cancelled caller does not leave
    the transaction open: the thread finishes it either way.  ``path``: as for
    :func:`transaction`."""
    turn = write_turn(path, BUSY_TIMEOUT_S) if path else contextlib.nullcontext()
    async with turn:
        await in_connection_thread(db, _run_transaction, steps)


def _run_transaction(conn: sqlite3.Connection, steps: Sequence[Step]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        run_steps(conn, steps)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


async def rollback(db: aiosqlite.Connection) -> None:
    """End the transaction this connection may hold; a no-op error when it holds none.

    Called from every write's error path: a write cancelled while its ``BEGIN`` waited
    for the file lock still begins once the lock frees (aiosqlite runs the statement in
    its thread), so the rollback is queued behind it instead of asking ``in_transaction``
    now; otherwise the connection stays inside a transaction nobody ends and every later
    write fails.
    """
    with contextlib.suppress(aiosqlite.Error):
        await db.execute("ROLLBACK")
