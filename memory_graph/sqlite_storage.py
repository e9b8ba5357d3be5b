"""The SQLite implementation of :class:`~memory_graph.storage.MemoryStorage`.

It runs on the graph's own aiosqlite connection (WAL, autocommit: every write
transaction is explicit, :meth:`SQLiteMemoryStorage.transaction`).  The tables
are :mod:`memory_graph.schema`'s.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Sequence

import aiosqlite

from . import schema
from .storage import AuthoredNode, NodeRef, TombstoneKind, TombstoneRow

__all__ = ["SQLiteMemoryStorage"]

#: Rows per ``IN (...)`` list, well under SQLite's variable limit.
_CHUNK = 500


def _chunks(values: Sequence[object]) -> Iterable[list[object]]:
    for start in range(0, len(values), _CHUNK):
        yield list(values[start : start + _CHUNK])


class SQLiteMemoryStorage:
    """The memory graph's tables in tierbot's SQLite file."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        return schema.transaction(self._db)

    async def get_meta(self, key: str) -> str | None:
        return await schema.get_meta(self._db, key)

    async def set_meta(self, key: str, value: str) -> None:
        await schema.set_meta(self._db, key, value)

    # -- tombstones ---------------------------------------------------------------------

    async def add_tombstones(self, kind: TombstoneKind, keys: Iterable[str], now: float) -> None:
        # A repeated forget moves the time forward: an author tombstone blocks what was
        # said up to the *latest* forget, not only up to the first.
        await self._db.executemany(
            "INSERT INTO memory_tombstones (kind, key, created_at) VALUES (?, ?, ?) "
            "ON CONFLICT (kind, key) DO UPDATE SET created_at = excluded.created_at",
            [(kind, k, now) for k in dict.fromkeys(keys) if k],
        )

    async def find_tombstones(
        self, authors: Sequence[str], platform_ids: Sequence[str]
    ) -> list[TombstoneRow]:
        found: list[TombstoneRow] = []
        queries = (
            ("author", list(dict.fromkeys(authors)), "key"),
            # A scoped key is "author id \n channel": match on the author id part.
            ("author_in", list(dict.fromkeys(authors)), "substr(key, 1, instr(key, char(10)) - 1)"),
            ("message", list(dict.fromkeys(platform_ids)), "key"),
        )
        for kind, keys, column in queries:
            for chunk in _chunks(keys):
                async with self._db.execute(
                    "SELECT key, created_at FROM memory_tombstones "
                    f"WHERE kind = ? AND {column} IN ({schema.marks(len(chunk))})",
                    (kind, *chunk),
                ) as cur:
                    found += [TombstoneRow(kind, k, float(t)) for k, t in await cur.fetchall()]
        return found

    # -- what forgetting reads -------------------------------------------------------------

    async def node_ref(self, memory_id: str) -> NodeRef | None:
        async with self._db.execute(
            "SELECT rowid, id, type, channel, sources FROM memory_nodes WHERE id = ?",
            (memory_id,),
        ) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        rowid, id_, type_, channel, sources = row
        return NodeRef(int(rowid), id_, type_, channel, tuple(json.loads(sources)))

    async def authored_nodes(self, author_id: str) -> list[AuthoredNode]:
        episodes = await schema.fetch_all(
            self._db,
            "SELECT rowid, id, channel, platform_id FROM memory_nodes "
            "WHERE type = 'episode' AND author_id = ? ORDER BY rowid",
            (author_id,),
        )
        own = await schema.fetch_all(
            self._db,
            "SELECT rowid, id, channel, sources FROM memory_nodes "
            "WHERE type != 'episode' AND author_id = ? ORDER BY rowid",
            (author_id,),
        )
        derived = await schema.fetch_all(
            self._db,
            "SELECT DISTINCT n.rowid, n.id, n.channel, n.sources FROM memory_sources s "
            "JOIN memory_nodes e ON e.type = 'episode' AND e.author_id = ? "
            "AND e.channel = s.channel AND e.platform_id = s.platform_id "
            "JOIN memory_nodes n ON n.rowid = s.node ORDER BY n.rowid",
            (author_id,),
        )
        out = [AuthoredNode(int(r), i, ch, pid, (), True) for r, i, ch, pid in episodes]
        own_rows = {int(r) for r, *_ in own}
        out += [
            AuthoredNode(int(r), i, ch, None, tuple(json.loads(s)), True) for r, i, ch, s in own
        ]
        out += [
            AuthoredNode(int(r), i, ch, None, tuple(json.loads(s)), False)
            for r, i, ch, s in derived
            if int(r) not in own_rows
        ]
        return out

    async def author_workspaces(self, author_id: str) -> set[str]:
        rows = await schema.fetch_all(
            self._db,
            "SELECT DISTINCT workspace FROM memory_nodes WHERE author_id = ?",
            (author_id,),
        )
        return {ws for (ws,) in rows}

    # -- deleting ---------------------------------------------------------------------------

    async def delete_nodes(self, rowids: Sequence[int], ids: Sequence[str]) -> None:
        for chunk in _chunks(rowids):
            marks = schema.marks(len(chunk))
            await self._db.execute(f"DELETE FROM memory_fts WHERE rowid IN ({marks})", chunk)
            await self._db.execute(f"DELETE FROM memory_nodes WHERE rowid IN ({marks})", chunk)
        for chunk in _chunks(ids):
            # A memory whose successor is gone is current again.
            await self._db.execute(
                "UPDATE memory_nodes SET superseded_by = NULL "
                f"WHERE superseded_by IN ({schema.marks(len(chunk))})",
                chunk,
            )
