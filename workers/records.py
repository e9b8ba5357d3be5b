"""The records of branches and task workers: one row per run, and its whole transcript.

The tables live in the store's database but belong to this floor: their schema is
:data:`TASK_TABLES` on SQLite and :data:`TASK_TABLES_PG` on PostgreSQL, migrated
when the runtime opens the store (``components=[...]``), and every statement that
reads or writes them is here, written once with ``?`` placeholders and run through
a small dialect per backend.  Writes (and reads, so they see every commit) go
through the store's single writer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from tierbot.llm.base import ChatMessage
from tierbot.migrations import Migrations

__all__ = [
    "TASK_TABLES",
    "TASK_TABLES_PG",
    "TaskRecords",
    "Transcript",
    "TranscriptRow",
    "read_runs",
    "read_transcript",
]

#: One row per run, and every message a run produced, including the ones its own
#: compaction later dropped (``dropped_by`` > 0).  Stores migrated before this
#: floor owned them got the same tables from the store's own step 2: ``IF NOT EXISTS``
#: adopts them.
TASK_TABLES = Migrations(
    "workers",
    (
        """
        CREATE TABLE IF NOT EXISTS tasks (
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
        CREATE INDEX IF NOT EXISTS tasks_channel ON tasks (channel, created);
        CREATE TABLE IF NOT EXISTS task_messages (
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
    ),
)


#: The same tables on PostgreSQL.
TASK_TABLES_PG = Migrations(
    "workers",
    (
        """
        CREATE TABLE tasks (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            channel TEXT NOT NULL,
            kind TEXT NOT NULL,
            task TEXT NOT NULL,
            status TEXT NOT NULL,
            created DOUBLE PRECISION NOT NULL,
            finished DOUBLE PRECISION,
            result TEXT NOT NULL DEFAULT '',
            error TEXT NOT NULL DEFAULT '',
            stats TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX tasks_channel ON tasks (channel, created);
        CREATE TABLE task_messages (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            task_id BIGINT NOT NULL,
            seq INTEGER NOT NULL,
            segment INTEGER NOT NULL,
            kind TEXT NOT NULL DEFAULT 'message',
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            tool_calls TEXT NOT NULL DEFAULT '[]',
            tool_call_id TEXT NOT NULL DEFAULT '',
            dropped_by INTEGER NOT NULL DEFAULT 0,
            ts DOUBLE PRECISION NOT NULL,
            UNIQUE (task_id, seq)
        );
        """,
    ),
)


class RecordStore(Protocol):
    """What the records need of a message store: its single writer and its backend."""

    backend: str

    async def write(self, op: Any) -> Any: ...


class _Dialect:
    """Runs ``?``-placeholder SQL on one backend's connection (inside a write op)."""

    def __init__(self, backend: str) -> None:
        self.pg = backend == "postgres"

    def _sql(self, sql: str) -> str:
        if not self.pg:
            return sql
        parts = sql.split("?")
        return parts[0] + "".join(f"${i}{part}" for i, part in enumerate(parts[1:], start=1))

    async def executemany(self, conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await conn.executemany(self._sql(sql), rows)

    async def execute(self, conn: Any, sql: str, *args: Any) -> None:
        if self.pg:
            await conn.execute(self._sql(sql), *args)
        else:
            await conn.execute(sql, args)

    async def insert(self, conn: Any, sql: str, *args: Any) -> int:
        """Run an INSERT; the new row's id."""
        if self.pg:
            return int(await conn.fetchval(self._sql(sql) + " RETURNING id", *args))
        cur = await conn.execute(sql, args)
        return int(cur.lastrowid or 0)

    async def fetch(self, conn: Any, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        if self.pg:
            return [tuple(r) for r in await conn.fetch(self._sql(sql), *args)]
        async with conn.execute(sql, args) as cur:
            return [tuple(r) for r in await cur.fetchall()]


def _dialect(store: RecordStore) -> _Dialect:
    return _Dialect(getattr(store, "backend", "sqlite"))


@dataclass(frozen=True, slots=True)
class TranscriptRow:
    seq: int
    segment: int
    kind: str
    role: str
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    dropped_by: int


class Transcript:
    """Every message one run produced, appended to the store as it happens.

    Dropping a message from the run's context marks its row (``dropped_by`` =
    the number of the compaction that dropped it); rows are never deleted.
    """

    def __init__(self, store: RecordStore, row: int) -> None:
        self.store = store
        self.row = row
        self._seq = 0
        self._sql = _dialect(store)

    async def add(
        self, segment: int, messages: Sequence[ChatMessage], kind: str = "message"
    ) -> list[int]:
        """Record ``messages``; return their sequence numbers."""
        seqs = list(range(self._seq + 1, self._seq + 1 + len(messages)))
        self._seq += len(messages)
        rows = [
            (
                self.row,
                s,
                segment,
                kind,
                m.role,
                m.content,
                json.dumps([asdict(c) for c in m.tool_calls]),
                m.tool_call_id or "",
                time.time(),
            )
            for s, m in zip(seqs, messages, strict=True)
        ]

        async def op(conn: Any) -> None:
            await self._sql.executemany(
                conn,
                "INSERT INTO task_messages (task_id, seq, segment, kind, role, content, "
                "tool_calls, tool_call_id, ts) VALUES (?,?,?,?,?,?,?,?,?)",
                rows,
            )

        if rows:
            await self.store.write(op)
        return seqs

    async def dropped(self, seqs: Sequence[int], compaction: int) -> None:
        async def op(conn: Any) -> None:
            await self._sql.executemany(
                conn,
                "UPDATE task_messages SET dropped_by=? WHERE task_id=? AND seq=?",
                [(compaction, self.row, s) for s in seqs],
            )

        if seqs:
            await self.store.write(op)


async def read_runs(store: RecordStore, channel: str) -> list[dict[str, Any]]:
    """Every run of ``channel``, oldest first (read through the writer: sees every commit)."""
    sql = _dialect(store)

    async def op(conn: Any) -> list[dict[str, Any]]:
        rows = await sql.fetch(
            conn,
            "SELECT id, kind, task, status, result, error, stats FROM tasks WHERE channel=? "
            "ORDER BY id",
            channel,
        )
        keys = ("row", "kind", "task", "status", "result", "error", "stats")
        return [dict(zip(keys, r, strict=True)) | {"stats": json.loads(r[6])} for r in rows]

    result: list[dict[str, Any]] = await store.write(op)
    return result


async def read_transcript(store: RecordStore, row: int) -> list[TranscriptRow]:
    """The full transcript of run ``row``, in order, dropped messages included."""
    sql = _dialect(store)

    async def op(conn: Any) -> list[TranscriptRow]:
        rows = await sql.fetch(
            conn,
            "SELECT seq, segment, kind, role, content, tool_calls, tool_call_id, dropped_by "
            "FROM task_messages WHERE task_id=? ORDER BY seq",
            row,
        )
        return [
            TranscriptRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7]) for r in rows
        ]

    result: list[TranscriptRow] = await store.write(op)
    return result


class TaskRecords:
    """The task tables of one store: what the supervisor, branches and workers record.

    The runtime builds one over the store it opened (SQLite or PostgreSQL) and hands it
    to the :class:`~workers.supervisor.TaskPool`; nothing above this floor sees the SQL.
    Writes go through the store's single writer.
    """

    def __init__(self, store: RecordStore) -> None:
        self.store = store
        self._sql = _dialect(store)

    async def create_run(self, channel: str, kind: str, task: str) -> int:
        """Insert a run's row; its id names the run (``worker-12``) across restarts."""

        async def op(conn: Any) -> int:
            return await self._sql.insert(
                conn,
                "INSERT INTO tasks (channel, kind, task, status, created) VALUES (?,?,?,?,?)",
                channel,
                kind,
                task,
                "queued",
                time.time(),
            )

        row: int = await self.store.write(op)
        return row

    async def finish_run(
        self, row: int, *, status: str, result: str, error: str, stats: dict[str, Any]
    ) -> None:
        """Record how run ``row`` ended."""

        async def op(conn: Any) -> None:
            await self._sql.execute(
                conn,
                "UPDATE tasks SET status=?, finished=?, result=?, error=?, stats=? WHERE id=?",
                status,
                time.time(),
                result,
                error,
                json.dumps(stats, default=str),
                row,
            )

        await self.store.write(op)

    def transcript(self, row: int) -> Transcript:
        """The transcript of run ``row``, to append to."""
        return Transcript(self.store, row)
