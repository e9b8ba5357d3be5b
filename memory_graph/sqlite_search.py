"""Recall's candidates, the state loaded at open, and reading nodes out, on SQLite.

The half of :class:`~memory_graph.sqlite_storage.SQLiteMemoryStorage` that reads
for search (FTS5 with bm25, stored vectors) and loads the graph's in-RAM state; the
other half writes.  See :mod:`memory_graph.storage` for what each operation means.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Any

import aiosqlite
import numpy as np

from . import rows as _rows
from . import schema
from .background import fts_idf
from .storage import (
    TF_SATURATION,
    EmbeddingRow,
    NewNode,
    NodeRow,
    NodeScope,
    TermWeight,
    TextFilter,
)
from .text import fts_query, fts_tags, tag

__all__ = ["SQLiteSearch"]

#: FTS5 column weights: terms, near, far, ws, ch, ty (the tags never score).
BM25_WEIGHTS = (1.0, 0.6, 0.3, 0.0, 0.0, 0.0)
_BM25 = f"bm25(memory_fts, {', '.join(str(w) for w in BM25_WEIGHTS)})"


class SQLiteSearch:
    """Reads for search and for opening; mixed into SQLiteMemoryStorage."""

    _db: aiosqlite.Connection
    _path: str | None

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        return schema.transaction(self._db, self._path)

    async def get_meta(self, key: str) -> str | None:
        return await schema.get_meta(self._db, key)

    async def set_meta(self, key: str, value: str) -> None:
        await schema.set_meta(self._db, key, value)

    # -- state loaded at open ---------------------------------------------------------------

    async def max_rowid(self) -> int:
        # AUTOINCREMENT's counter: a deleted node's rowid (its index label) is never reused.
        async with self._db.execute(
            "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'memory_nodes'), 0),"
            " COALESCE((SELECT MAX(rowid) FROM memory_nodes), 0))"
        ) as cur:
            row = await cur.fetchone()
        return int(row[0] if row else 0)

    #: One process writes a SQLite store (its writer lock): rowids are counted here.
    shared = False

    async def raise_rowid_floor(self, floor: int) -> None:
        return None

    @contextlib.asynccontextmanager
    async def exclusive(self, name: str) -> AsyncIterator[None]:
        yield  # one process: the graph's own lock is enough

    async def take_rowids(self, n: int) -> list[int]:
        raise NotImplementedError("a SQLite store's rowids are counted by its one writer")

    async def rowids_after(self, after: int) -> list[int]:
        async with self._db.execute(
            "SELECT rowid FROM memory_nodes WHERE rowid > ? ORDER BY rowid", (after,)
        ) as cur:
            return [int(r[0]) for r in await cur.fetchall()]

    async def new_nodes(self, rowids: Collection[int]) -> list[NewNode]:
        out: list[NewNode] = []
        ids = list(rowids)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            async with self._db.execute(
                "SELECT rowid, workspace, channel, type, content, author_id, author_name "
                f"FROM memory_nodes WHERE rowid IN ({marks}) ORDER BY rowid",
                chunk,
            ) as cur:
                out += [NewNode(int(r[0]), *r[1:]) for r in await cur.fetchall()]
        return out

    async def node_scopes(self) -> list[NodeScope]:
        # fetchall, not async iteration: aiosqlite fetches one row per thread hop.
        sql = "SELECT rowid, workspace, channel, type FROM memory_nodes"
        return [NodeScope(int(r), ws, ch, t) for r, ws, ch, t in await self._all(sql)]

    async def author_names(self) -> list[tuple[str, str, str]]:
        sql = (
            "SELECT DISTINCT workspace, author_id, author_name FROM memory_nodes "
            "WHERE author_name != ''"
        )
        return [(ws, a, n) for ws, a, n in await self._all(sql)]

    async def entity_names(self) -> list[tuple[int, str, str]]:
        sql = "SELECT rowid, workspace, content FROM memory_nodes WHERE type = 'entity'"
        return [(int(r), ws, c) for r, ws, c in await self._all(sql)]

    async def private_channels(self) -> set[str]:
        return {str(ch) for (ch,) in await self._all("SELECT channel FROM memory_private_channels")}

    async def mark_private(self, channel: str, private: bool, now: float) -> None:
        if private:
            await self._db.execute(
                "INSERT OR IGNORE INTO memory_private_channels (channel, marked_at) VALUES (?, ?)",
                (channel, now),
            )
        else:
            await self._db.execute(
                "DELETE FROM memory_private_channels WHERE channel = ?", (channel,)
            )

    async def channel_tree_scopes(self, channel: str) -> list[NodeScope]:
        prefix = channel + ":"
        sql = (
            "SELECT rowid, workspace, channel, type FROM memory_nodes "
            "WHERE channel = ? OR substr(channel, 1, ?) = ?"
        )
        rows = await self._all(sql, (channel, len(prefix), prefix))
        return [NodeScope(int(r), ws, ch, t) for r, ws, ch, t in rows]

    async def text_index_state(self, version: str, verify: bool) -> str:
        async with self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_fts'"
        ) as cur:
            if await cur.fetchone() is None:
                return "missing"
        if await self.get_meta("fts_version") != version:
            return "stale"
        if verify:
            try:
                await self._db.execute(
                    "INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)"
                )
            except aiosqlite.Error:
                return "stale"
        return "ok"

    async def rebuild_text_index(self, version: str) -> None:
        await self._db.execute("DROP TABLE IF EXISTS memory_fts")
        await self._db.execute(schema.FTS_DDL)
        async with self.transaction():
            await self._db.execute(
                "INSERT INTO memory_fts (rowid, terms, near, far, ws, ch, ty) "
                "SELECT rowid, '', near_text, far_text, '', '', '' FROM memory_nodes"
            )
            sql = "SELECT rowid, content, author_name, workspace, channel, type FROM memory_nodes"
            rows = [
                (*fts_tags(ws, ch, typ, content, author_name), rowid)
                for rowid, content, author_name, ws, ch, typ in await self._all(sql)
            ]
            await self._db.executemany(
                "UPDATE memory_fts SET terms = ?, ws = ?, ch = ?, ty = ? WHERE rowid = ?", rows
            )
            await self.set_meta("fts_version", version)

    async def term_frequencies(self) -> dict[str, int]:
        await self._db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_fts_vocab "
            "USING fts5vocab(main, memory_fts, 'row')"
        )
        rows = await self._all("SELECT term, doc FROM temp.memory_fts_vocab")
        return {str(t): int(n) for t, n in rows}

    # -- recall ------------------------------------------------------------------------------

    async def term_scores(
        self, terms: Sequence[TermWeight], n_rows: int, where: TextFilter
    ) -> list[tuple[int, float]]:
        """One bm25 query per term, summed.  FTS5's bm25 is -(its idf * a saturating tf
        part): dividing by FTS5's idf (from the graph's df, exact but for rows deleted
        since the graph opened; the clamp bounds that error) recovers the tf part."""
        if not terms:
            return []
        one = (
            f"SELECT rowid, min(-{_BM25} / ?, {TF_SATURATION}) * ? AS s "
            "FROM memory_fts WHERE memory_fts MATCH ?"
        )
        params: list[Any] = []
        for t in terms:
            quoted = '"' + t.term.replace('"', '""') + '"'
            match = f"{{terms near far}} : {quoted}{_filter_clause(where)}"
            params += [fts_idf(max(n_rows, 1), t.df), t.weight, match]
        union = " UNION ALL ".join([one] * len(terms))
        # MATERIALIZED: flattened into the aggregate, bm25() would lose its FTS5 context.
        sql = f"WITH u AS MATERIALIZED ({union}) SELECT rowid, sum(s) FROM u GROUP BY rowid"
        return [(int(r), float(s)) for r, s in await self._all(sql, params)]

    async def newest_matches(
        self, terms: Sequence[TermWeight], where: TextFilter, limit: int, since: float | None
    ) -> list[tuple[float, NodeRow]]:
        # FTS5's bm25 weighs each term with its own idf (the weights given match it).
        if not terms:
            return []
        words = [t.term for t in terms]
        match = f"{{terms near far}} : ({fts_query(words)}){_filter_clause(where)}"
        columns = ", ".join(f"n.{c.strip()}" for c in _rows.ROW_COLUMNS.split(","))
        sql = (
            f"SELECT f.s, {columns} FROM (SELECT rowid, {_BM25} AS s "
            "FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid DESC LIMIT ?) AS f "
            "JOIN memory_nodes n ON n.rowid = f.rowid WHERE 1"
        )
        params: list[Any] = [match, limit]
        if since is not None:
            sql += " AND n.created_at >= ?"
            params.append(float(since))
        return [(-float(s), NodeRow.of(values)) for s, *values in await self._all(sql, params)]

    async def node_rows(
        self, rowids: Collection[int], types: Sequence[str] | None, since: float | None
    ) -> list[NodeRow]:
        sql = f"SELECT {_rows.ROW_COLUMNS} FROM memory_nodes WHERE rowid IN ({{}})"
        extra: list[Any] = []
        if types:
            sql += f" AND type IN ({schema.marks(len(types))})"
            extra += list(types)
        if since is not None:
            sql += " AND created_at >= ?"
            extra.append(float(since))
        return [NodeRow.of(r) for r in await self._in(sql, rowids, extra)]

    async def author_memories(
        self, author_id: str, types: Sequence[str] | None, limit: int
    ) -> list[NodeRow]:
        sql = (
            f"SELECT {_rows.ROW_COLUMNS} FROM memory_nodes "
            "WHERE author_id = ? AND type != 'episode'"
        )
        params: list[Any] = [author_id]
        if types:
            sql += f" AND type IN ({schema.marks(len(types))})"
            params += list(types)
        params.append(int(limit))
        rows = await self._all(sql + " ORDER BY created_at DESC, rowid DESC LIMIT ?", params)
        return [NodeRow.of(r) for r in rows]

    async def created_at(self, rowids: Collection[int]) -> dict[int, float]:
        sql = "SELECT rowid, created_at FROM memory_nodes WHERE rowid IN ({})"
        return {int(r): float(ts) for r, ts in await self._in(sql, rowids)}

    async def embedding_matrix(
        self, embedder: str, rowids: Collection[int]
    ) -> tuple[list[int], np.ndarray]:
        sql = (
            "SELECT rowid, embedding FROM memory_nodes WHERE rowid IN ({}) "
            "AND embedder = ? AND embedding IS NOT NULL"
        )
        rows = await self._in(sql, rowids, [embedder])
        if not rows:
            return [], np.empty((0, 0), dtype=np.float32)
        matrix = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32)
        return [int(r) for r, _ in rows], matrix.reshape(len(rows), -1)

    async def embedding_rows(
        self, after: int, embedder: str, limit: int, *, stale_only: bool = False
    ) -> list[EmbeddingRow]:
        which = "" if stale_only else "type != 'episode' OR "
        sql = (
            "SELECT rowid, embedding, embedder, type, content, author_name FROM memory_nodes "
            f"WHERE rowid > ? AND ({which}embedder != ? OR embedding IS NULL) "
            "ORDER BY rowid LIMIT ?"
        )
        return [
            EmbeddingRow(int(r), None if blob is None else blob_vector(blob), e, t, c, n)
            for r, blob, e, t, c, n in await self._all(sql, (after, embedder, limit))
        ]

    async def set_embeddings(
        self, embedder: str, vectors: Sequence[tuple[int, np.ndarray]]
    ) -> None:
        await self._db.executemany(
            "UPDATE memory_nodes SET embedding = ?, embedder = ? WHERE rowid = ?",
            [(np.asarray(v, dtype=np.float32).tobytes(), embedder, r) for r, v in vectors],
        )

    async def add_access(self, rows: Sequence[tuple[int, float, int]]) -> None:
        await self._db.executemany(
            "UPDATE memory_nodes SET access_count = access_count + ?, "
            "accessed_at = MAX(accessed_at, ?) WHERE rowid = ?",
            rows,
        )

    # -- vector search ------------------------------------------------------------------------
    # The graph searches memories in its in-RAM hnswlib index on this backend; nearest()
    # is the exact search over stored vectors the protocol promises (tools and tests).

    vector_index = False

    async def prepare_vector_index(self, dim: int) -> None:
        return None

    async def nearest(
        self,
        vectors: np.ndarray,
        k: int,
        embedder: str,
        where: TextFilter,
        *,
        exact: bool = False,
        ef: int = 40,
    ) -> list[list[tuple[int, float]]]:
        sql = (
            "SELECT rowid, embedding FROM memory_nodes WHERE type != 'episode' "
            "AND embedder = ? AND embedding IS NOT NULL"
        )
        params: list[Any] = [embedder]
        if where.scope is not None:
            sql += f" AND {where.scope} = ?"
            params.append(where.value)
        if where.types:
            sql += f" AND type IN ({schema.marks(len(where.types))})"
            params += list(where.types)
        rows = await self._all(sql, params)
        queries = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
        if not rows:
            return [[] for _ in range(len(queries))]
        labels = np.array([int(r) for r, _ in rows], dtype=np.int64)
        matrix = np.stack([blob_vector(b) for _, b in rows])
        out = []
        for sims in queries @ matrix.T:
            best = np.argsort(-sims, kind="stable")[:k]
            out.append([(int(labels[i]), float(sims[i])) for i in best])
        return out

    # -- reading nodes out ---------------------------------------------------------------------

    async def memory_counts(self) -> dict[str, int]:
        sql = "SELECT channel, COUNT(*) FROM memory_nodes WHERE type != 'episode' GROUP BY channel"
        return {str(ch): int(n) for ch, n in await self._all(sql)}

    async def node_record(self, memory_id: str) -> dict[str, Any] | None:
        sql = f"SELECT {_rows.RECORD_COLUMNS} FROM memory_nodes WHERE id = ?"
        rows = await self._all(sql, (memory_id,))
        return _rows.record(rows[0]) if rows else None

    async def export_nodes(self) -> AsyncIterator[dict[str, Any]]:
        sql = f"SELECT {_rows.RECORD_COLUMNS} FROM memory_nodes ORDER BY rowid"
        async with self._db.execute(sql) as cur:
            cur.arraysize = 500
            async for row in cur:
                yield _rows.record(row)

    async def export_edges(self, memory_id: str | None = None) -> AsyncIterator[dict[str, Any]]:
        where, params = (
            ("WHERE s.id = ? OR d.id = ?", (memory_id, memory_id)) if memory_id else ("", ())
        )
        sql = (
            "SELECT s.id, d.id, e.type, e.weight, e.created_at FROM memory_edges e "
            "JOIN memory_nodes s ON s.rowid = e.src JOIN memory_nodes d ON d.rowid = e.dst "
            f"{where} ORDER BY e.rowid"
        )
        async with self._db.execute(sql, params) as cur:
            cur.arraysize = 500
            async for src, dst, typ, weight, created in cur:
                yield {"src": src, "dst": dst, "type": typ, "weight": weight, "created_at": created}

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await schema.fetch_all(self._db, sql, params)

    async def _in(self, sql: str, rowids: Collection[int], extra: Sequence[Any] = ()) -> list[Any]:
        """Rows of ``sql`` (one ``{}`` where the rowid placeholders go) for ``rowids``,
        in chunks under SQLite's variable limit; ``extra`` params follow the rowids."""
        out: list[Any] = []
        ids = sorted(rowids)  # rows come back in rowid order, as from one IN list
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            out += await self._all(sql.format(schema.marks(len(chunk))), [*chunk, *extra])
        return out


def _filter_clause(where: TextFilter) -> str:
    """``where`` as FTS5 column filters on the tag columns (see text.fts_tags)."""
    clause = ""
    if where.scope == "workspace":
        clause += f' AND ws : "{tag("w", where.value)}"'
    elif where.scope == "channel":
        clause += f' AND ch : "{tag("c", where.value)}"'
    if where.types:
        clause += " AND ty : (" + " OR ".join(f'"{tag("t", t)}"' for t in where.types) + ")"
    return clause


def blob_vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32)
