"""The PostgreSQL implementation of :class:`~memory_graph.storage.MemoryStorage`.

It runs on an asyncpg pool (the message store's, in a running bot) whose connections
know pgvector's type (:func:`tierbot.pg.connect.open_pool`).  A write transaction holds
one connection for its block (:meth:`PostgresMemoryStorage.transaction`); every
statement issued inside the block by the same task runs on it, any other on a pooled
connection of its own.

Text search scores as FTS5's bm25 does on SQLite, term by term: a row's weighted
frequency of the term (own words 1.0, the neighbouring turn 0.6, the one beyond 0.3,
read from the ``tsvector``'s weights) and its length against the average make the
same saturating tf part, so recall ranks alike on both backends.  Vector search of
memories goes through pgvector's HNSW index when ``[memory] vector_search =
"database"`` (:attr:`vector_index`); otherwise the graph keeps its in-RAM index, built
from the vectors stored here, as on SQLite.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence
from typing import Any

import asyncpg
import numpy as np
from pgvector import Vector

from tierbot.errors import StoreError
from tierbot.pg.connect import pg_text as _clean
from tierbot.pg.migrations import migrate, version

from . import rows as _rows
from .pg_schema import MIGRATIONS, tsquery_literal, tsv_literal, vector_index_ddl
from .storage import (
    TF_SATURATION,
    AuthoredNode,
    EmbeddingRow,
    EpisodeContext,
    EpisodeRow,
    ImportanceRow,
    Link,
    MemoryRow,
    NewNode,
    NodeBrief,
    NodeRef,
    NodeRow,
    NodeScope,
    StoredVector,
    TermWeight,
    TextFilter,
    TombstoneKind,
    TombstoneRow,
)
from .text import fts_tags

__all__ = ["PostgresMemoryStorage"]

#: bm25's parameters as FTS5 uses them, and the weights of the tsvector's A, B, C
#: (own terms, near, far: sqlite_search.BM25_WEIGHTS).
_K1 = 1.2
_B = 0.75
_WEIGHT_SQL = "CASE w WHEN 'A' THEN 1.0 WHEN 'B' THEN 0.6 ELSE 0.3 END"
#: Tag tokens FTS5 counts in every row's length (workspace, channel, type).
_TAGS = 3

_INDEXED_UPTO = "indexed_upto"
_MAX_ROWID = "max_rowid"


def _len(text: str) -> int:
    return len(text.split())


class PostgresMemoryStorage:
    """The memory graph's tables in a PostgreSQL database (with pgvector)."""

    def __init__(
        self, pool: asyncpg.Pool, *, where: str, owns_pool: bool = False, vector_index: bool = False
    ) -> None:
        #: Whether memories' vectors are searched here (pgvector's HNSW index, ``[memory]
        #: vector_search = "database"``) rather than in the graph's in-RAM index.
        self.vector_index = vector_index
        self._pool = pool
        self.where = where
        self._owns_pool = owns_pool
        self._closed = False
        self._tx: contextvars.ContextVar[asyncpg.Connection | None] = contextvars.ContextVar(
            f"memory_tx_{id(self)}", default=None
        )
        self._dim = 0

    @classmethod
    async def open(
        cls,
        pool: asyncpg.Pool,
        *,
        where: str,
        read_only: bool = False,
        owns_pool: bool = False,
        vector_index: bool = False,
    ) -> PostgresMemoryStorage:
        """Create or upgrade the tables on ``pool``'s database (``read_only``: check
        them); StoreError naming the server when it cannot."""
        try:
            async with pool.acquire() as conn:
                if read_only:
                    if await version(conn, MIGRATIONS, where=where) == 0:
                        raise StoreError(
                            "no memory graph in this store yet: it is created when tierbot "
                            "runs with [memory] enabled = true"
                        )
                else:
                    await migrate(conn, MIGRATIONS, where=where)
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            if owns_pool:
                await pool.close()
            raise StoreError(f"cannot open the memory graph at {where}: {exc}") from exc
        except BaseException:
            if owns_pool:
                await pool.close()
            raise
        return cls(pool, where=where, owns_pool=owns_pool, vector_index=vector_index)

    @property
    def pool(self) -> asyncpg.Pool:
        return self._pool

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._owns_pool:
                await self._pool.close()

    # -- connections and transactions ----------------------------------------------------

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        conn = self._tx.get()
        if conn is not None:
            yield conn
            return
        async with self._pool.acquire() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        outer = self._tx.get()
        if outer is not None:  # nested: a savepoint on the same connection
            async with outer.transaction():
                yield
            return
        async with self._pool.acquire() as conn, conn.transaction():
            token = self._tx.set(conn)
            try:
                yield
            finally:
                self._tx.reset(token)

    @contextlib.asynccontextmanager
    async def exclusive(self, name: str) -> AsyncIterator[None]:
        """Hold the lock ``name`` against every process on this database (a session
        advisory lock on a connection of its own) while the block runs."""
        key = f"tierbot.memory.{name}"
        try:
            async with self._pool.acquire() as conn:
                await conn.execute("SELECT pg_advisory_lock(hashtext($1))", key)
                try:
                    yield
                finally:
                    await conn.execute("SELECT pg_advisory_unlock(hashtext($1))", key)
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreError(f"memory graph lock failed at {self.where}: {exc}") from exc

    async def _all(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        try:
            async with self._conn() as conn:
                return list(await conn.fetch(sql, *args))
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreError(f"memory graph query failed at {self.where}: {exc}") from exc

    async def _exec(self, sql: str, *args: Any) -> None:
        try:
            async with self._conn() as conn:
                await conn.execute(sql, *args)
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreError(f"memory graph write failed at {self.where}: {exc}") from exc

    async def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        try:
            async with self._conn() as conn:
                await conn.executemany(sql, rows)
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreError(f"memory graph write failed at {self.where}: {exc}") from exc

    # -- meta -----------------------------------------------------------------------------

    async def get_meta(self, key: str) -> str | None:
        rows = await self._all("SELECT value FROM memory_meta WHERE key = $1", key)
        return None if not rows else str(rows[0][0])

    async def set_meta(self, key: str, value: str) -> None:
        await self._exec(
            "INSERT INTO memory_meta (key, value) VALUES ($1, $2) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            key,
            value,
        )

    # -- tombstones ---------------------------------------------------------------------

    async def add_tombstones(self, kind: TombstoneKind, keys: Iterable[str], now: float) -> None:
        await self._many(
            "INSERT INTO memory_tombstones (kind, key, created_at) VALUES ($1, $2, $3) "
            "ON CONFLICT (kind, key) DO UPDATE SET created_at = excluded.created_at",
            [(kind, _clean(k), now) for k in dict.fromkeys(keys) if k],
        )

    async def find_tombstones(
        self, authors: Sequence[str], platform_ids: Sequence[str]
    ) -> list[TombstoneRow]:
        rows = await self._all(
            "SELECT kind, key, created_at FROM memory_tombstones WHERE "
            "(kind = 'author' AND key = ANY($1::text[])) OR "
            "(kind = 'author_in' AND split_part(key, E'\\n', 1) = ANY($1::text[])) OR "
            "(kind = 'message' AND key = ANY($2::text[]))",
            list(dict.fromkeys(authors)),
            list(dict.fromkeys(platform_ids)),
        )
        return [TombstoneRow(k, key, float(t)) for k, key, t in rows]

    # -- what forgetting reads -------------------------------------------------------------

    async def node_ref(self, memory_id: str) -> NodeRef | None:
        rows = await self._all(
            "SELECT rowid, id, type, channel, sources FROM memory_nodes WHERE id = $1", memory_id
        )
        if not rows:
            return None
        rowid, id_, type_, channel, sources = rows[0]
        return NodeRef(int(rowid), id_, type_, channel, tuple(json.loads(sources)))

    async def authored_nodes(self, author_id: str) -> list[AuthoredNode]:
        episodes = await self._all(
            "SELECT rowid, id, channel, platform_id FROM memory_nodes "
            "WHERE type = 'episode' AND author_id = $1 ORDER BY rowid",
            author_id,
        )
        own = await self._all(
            "SELECT rowid, id, channel, sources FROM memory_nodes "
            "WHERE type <> 'episode' AND author_id = $1 ORDER BY rowid",
            author_id,
        )
        derived = await self._all(
            "SELECT DISTINCT n.rowid, n.id, n.channel, n.sources FROM memory_sources s "
            "JOIN memory_nodes e ON e.type = 'episode' AND e.author_id = $1 "
            "AND e.channel = s.channel AND e.platform_id = s.platform_id "
            "JOIN memory_nodes n ON n.rowid = s.node ORDER BY n.rowid",
            author_id,
        )
        return _rows.authored(episodes, own, derived)

    async def author_workspaces(self, author_id: str) -> set[str]:
        rows = await self._all(
            "SELECT DISTINCT workspace FROM memory_nodes WHERE author_id = $1", author_id
        )
        return {ws for (ws,) in rows}

    # -- deleting ---------------------------------------------------------------------------

    async def delete_nodes(self, rowids: Sequence[int], ids: Sequence[str]) -> None:
        async with self.transaction():
            rows = await self._all(
                "DELETE FROM memory_nodes WHERE rowid = ANY($1::bigint[]) RETURNING dl",
                list(rowids),
            )
            await self._stats(-len(rows), -sum(int(r[0]) for r in rows))
            # A memory whose successor is gone is current again.
            await self._exec(
                "UPDATE memory_nodes SET superseded_by = NULL "
                "WHERE superseded_by = ANY($1::text[])",
                list(ids),
            )

    async def _stats(self, rows: int, tokens: int) -> None:
        if rows or tokens:
            await self._exec(
                "UPDATE memory_text_stats SET rows = rows + $1, tokens = tokens + $2", rows, tokens
            )

    # -- links ------------------------------------------------------------------------------

    async def links_of(self, rowids: Collection[int]) -> list[Link]:
        ids = sorted(set(rowids))
        rows = await self._all(
            "SELECT src, dst, type, weight FROM memory_edges WHERE src = ANY($1::bigint[]) "
            "UNION ALL SELECT dst, src, type, weight FROM memory_edges "
            "WHERE dst = ANY($1::bigint[]) ORDER BY 1, 2, 3",
            ids,
        )
        return [Link(int(n), int(o), str(t), float(w)) for n, o, t, w in rows]

    async def link_targets(self, rowids: Collection[int], type_: str) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {}
        rows = await self._all(
            "SELECT src, dst FROM memory_edges WHERE type = $1 AND src = ANY($2::bigint[])",
            type_,
            sorted(set(rowids)),
        )
        for src, dst in rows:
            out.setdefault(int(src), set()).add(int(dst))
        return out

    async def add_links(self, links: Sequence[tuple[int, int, str, float, float]]) -> None:
        if not links:
            return
        cols = list(zip(*links, strict=True))
        await self._exec(
            "INSERT INTO memory_edges (src, dst, type, weight, created_at) "
            "SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::float8[], "
            "$5::float8[]) ON CONFLICT DO NOTHING",
            *[list(c) for c in cols],
        )

    # -- upkeep -------------------------------------------------------------------------------

    async def importance_rows(self, except_types: Sequence[str]) -> list[ImportanceRow]:
        rows = await self._all(
            "SELECT rowid, importance, accessed_at, current_importance FROM memory_nodes "
            "WHERE type <> ALL($1::text[])",
            list(except_types),
        )
        return [ImportanceRow(int(r), float(i), float(a), float(c)) for r, i, a, c in rows]

    async def set_current_importance(self, values: Sequence[tuple[float, int]]) -> None:
        if values:
            await self._exec(
                "UPDATE memory_nodes n SET current_importance = u.v FROM "
                "unnest($1::float8[], $2::bigint[]) AS u(v, r) WHERE n.rowid = u.r",
                [float(v) for v, _ in values],
                [int(r) for _, r in values],
            )

    async def prunable(
        self, except_types: Sequence[str], below: float, idle_before: float
    ) -> list[tuple[int, str]]:
        rows = await self._all(
            "SELECT rowid, id FROM memory_nodes WHERE type <> ALL($1::text[]) "
            "AND current_importance < $2 AND accessed_at < $3 AND created_at < $3",
            list(except_types),
            below,
            idle_before,
        )
        return [(int(r), str(i)) for r, i in rows]

    async def memory_vectors_since(self, since: float) -> list[StoredVector]:
        rows = await self._all(
            "SELECT rowid, channel, embedding FROM memory_nodes WHERE type <> 'episode' "
            "AND updated_at >= $1 AND embedding IS NOT NULL",
            since,
        )
        return [StoredVector(int(r), ch, _vec(v)) for r, ch, v in rows]

    async def memory_rowids(self, rowids: Collection[int]) -> set[int]:
        rows = await self._all(
            "SELECT rowid FROM memory_nodes WHERE type <> 'episode' AND rowid = ANY($1::bigint[])",
            sorted(set(rowids)),
        )
        return {int(r) for (r,) in rows}

    # -- episodes -----------------------------------------------------------------------------

    async def indexed_upto(self) -> int:
        value = await self.get_meta(_INDEXED_UPTO)
        return int(value) if value is not None else 0

    async def raise_indexed_upto(self, message_id: int) -> None:
        await self._raise_meta(_INDEXED_UPTO, int(message_id))

    async def _raise_meta(self, key: str, value: int) -> None:
        await self._exec(
            "INSERT INTO memory_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE "
            "SET value = GREATEST(memory_meta.value::bigint, excluded.value::bigint)::text",
            key,
            str(value),
        )

    async def episode_platform_ids(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        unique = list(dict.fromkeys(keys))
        rows = await self._all(
            "SELECT n.channel, n.platform_id FROM unnest($1::text[], $2::text[]) AS k(c, p) "
            "JOIN memory_nodes n ON n.channel = k.c AND n.platform_id = k.p",
            [c for c, _ in unique],
            [p for _, p in unique],
        )
        return {(r[0], r[1]) for r in rows}

    async def latest_episodes(
        self, channels: Sequence[str], limit: int
    ) -> dict[str, list[EpisodeContext]]:
        rows = await self._all(
            f"SELECT c.ch, e.* FROM unnest($1::text[]) AS c(ch) CROSS JOIN LATERAL "
            f"(SELECT {_rows.EPISODE_CONTEXT_COLUMNS} FROM memory_nodes WHERE channel = c.ch "
            "AND type = 'episode' ORDER BY rowid DESC LIMIT $2) e",
            list(dict.fromkeys(channels)),
            limit,
        )
        out: dict[str, list[EpisodeContext]] = {}
        for r in rows:
            out.setdefault(r[0], []).append(_rows.episode_context(tuple(r)[1:]))
        for found in out.values():
            found.sort(key=lambda e: e.rowid)
        return out

    async def channel_episodes(self, channel: str) -> list[EpisodeContext]:
        rows = await self._all(
            f"SELECT {_rows.EPISODE_CONTEXT_COLUMNS} FROM memory_nodes "
            "WHERE channel = $1 AND type = 'episode' ORDER BY rowid",
            channel,
        )
        return [_rows.episode_context(r) for r in rows]

    async def sources_citing(self, keys: Sequence[tuple[str, str]]) -> list[tuple[int, str, str]]:
        unique = list(dict.fromkeys(keys))
        rows = await self._all(
            "SELECT s.node, s.channel, s.platform_id FROM unnest($1::text[], $2::text[]) "
            "AS k(c, p) JOIN memory_sources s ON s.channel = k.c AND s.platform_id = k.p",
            [c for c, _ in unique],
            [p for _, p in unique],
        )
        return [(int(n), ch, pid) for n, ch, pid in rows]

    async def insert_episodes(self, rows: Sequence[EpisodeRow]) -> None:
        if not rows:
            return
        own = [_len(r.terms) + _TAGS for r in rows]
        dl = [o + _len(r.near) + _len(r.far) for o, r in zip(own, rows, strict=True)]
        await self._exec(
            "INSERT INTO memory_nodes (rowid, id, type, content, content_hash, importance, "
            "current_importance, created_at, updated_at, accessed_at, channel, workspace, "
            "author_id, author_name, platform_id, sources, near_text, far_text, embedding, "
            "embedder, tsv, own_len, dl) "
            "SELECT r, i, 'episode', c, h, 0.5, 0.5, t, t, ia, ch, ws, a, an, p, s, nt, ft, "
            "e, em, tv::tsvector, ol, d FROM unnest($1::bigint[], $2::text[], $3::text[], "
            "$4::text[], $5::float8[], $6::float8[], $7::text[], $8::text[], $9::text[], "
            "$10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::vector[], "
            "$16::text[], $17::text[], $18::int[], $19::int[]) "
            "AS u(r, i, c, h, t, ia, ch, ws, a, an, p, s, nt, ft, e, em, tv, ol, d)",
            [r.rowid for r in rows],
            [r.id for r in rows],
            [_clean(r.content) for r in rows],
            [r.content_hash for r in rows],
            [float(r.created_at) for r in rows],
            [float(r.indexed_at) for r in rows],
            [_clean(r.channel) for r in rows],
            [_clean(r.workspace) for r in rows],
            [_clean(r.author_id) for r in rows],
            [_clean(r.author_name) for r in rows],
            [_clean(r.platform_id) for r in rows],
            [json.dumps([_clean(r.platform_id)]) for r in rows],
            [r.near for r in rows],
            [r.far for r in rows],
            [_pgvec(r.vector) for r in rows],
            [r.embedder for r in rows],
            [tsv_literal((r.terms, "A"), (r.near, "B"), (r.far, "C")) for r in rows],
            own,
            dl,
        )
        await self._stats(len(rows), sum(dl))
        await self._raise_meta(_MAX_ROWID, max(r.rowid for r in rows))

    async def write_episodes(
        self,
        rows: Sequence[EpisodeRow],
        contexts: Sequence[tuple[str, str, int]],
        links: Sequence[tuple[int, int, str, float, float]],
        indexed_upto: int | None,
    ) -> None:
        async with self.transaction():
            await self.insert_episodes(rows)
            await self.set_contexts(contexts)
            await self.add_links(links)
            if indexed_upto is not None:
                await self.raise_indexed_upto(indexed_upto)

    async def set_contexts(self, changes: Sequence[tuple[str, str, int]]) -> None:
        if not changes:
            return
        near = [n for n, _, _ in changes]
        far = [f for _, f, _ in changes]
        rows = await self._all(
            "UPDATE memory_nodes n SET near_text = u.nt, far_text = u.ft, "
            "tsv = ts_filter(n.tsv, '{a}') || u.nv::tsvector || u.fv::tsvector, "
            "dl = n.own_len + u.ctx FROM (SELECT m.rowid, m.dl AS old, x.* FROM "
            "unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[]) "
            "AS x(r, nt, ft, nv, fv, ctx) JOIN memory_nodes m ON m.rowid = x.r) AS u "
            "WHERE n.rowid = u.rowid RETURNING n.dl - u.old",
            [int(r) for _, _, r in changes],
            near,
            far,
            [tsv_literal((t, "B")) for t in near],
            [tsv_literal((t, "C")) for t in far],
            [_len(n) + _len(f) for n, f in zip(near, far, strict=True)],
        )
        await self._stats(0, sum(int(r[0]) for r in rows))

    # -- saving memories --------------------------------------------------------------------

    async def _briefs(self, column: str, cast: str, keys: Collection[Any]) -> list[NodeBrief]:
        rows = await self._all(
            f"SELECT {_rows.BRIEF_COLUMNS} FROM memory_nodes WHERE {column} = ANY($1::{cast}[])",
            list(keys),
        )
        return [_rows.brief(r) for r in rows]

    async def briefs_by_id(self, ids: Collection[str]) -> dict[str, NodeBrief]:
        return {b.id: b for b in await self._briefs("id", "text", ids)}

    async def briefs_by_rowid(self, rowids: Collection[int]) -> dict[int, NodeBrief]:
        return {b.rowid: b for b in await self._briefs("rowid", "bigint", rowids)}

    async def current_memories_by_hash(self, hashes: Collection[str]) -> list[NodeBrief]:
        rows = await self._all(
            f"SELECT {_rows.BRIEF_COLUMNS} FROM memory_nodes WHERE superseded_by IS NULL "
            "AND type <> 'episode' AND content_hash = ANY($1::text[])",
            list(hashes),
        )
        return [_rows.brief(r) for r in rows]

    async def episode_rowids(self, channel: str, platform_ids: Collection[str]) -> dict[str, int]:
        rows = await self._all(
            "SELECT rowid, platform_id FROM memory_nodes WHERE channel = $1 "
            "AND platform_id = ANY($2::text[])",
            channel,
            list(platform_ids),
        )
        return {pid: int(r) for r, pid in rows}

    async def insert_memories(self, rows: Sequence[MemoryRow]) -> None:
        if not rows:
            return
        own = [_len(r.terms) + _TAGS for r in rows]
        await self._exec(
            "INSERT INTO memory_nodes (rowid, id, type, content, content_hash, importance, "
            "current_importance, created_at, updated_at, accessed_at, channel, workspace, "
            "author_id, sources, embedding, embedder, tsv, own_len, dl) "
            "SELECT r, i, ty, c, h, im, im, t, t, t, ch, ws, a, s, e, em, tv::tsvector, ol, ol "
            "FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], "
            "$6::float8[], $7::float8[], $8::text[], $9::text[], $10::text[], $11::text[], "
            "$12::vector[], $13::text[], $14::text[], $15::int[]) "
            "AS u(r, i, ty, c, h, im, t, ch, ws, a, s, e, em, tv, ol)",
            [r.rowid for r in rows],
            [r.id for r in rows],
            [r.type for r in rows],
            [_clean(r.content) for r in rows],
            [r.content_hash for r in rows],
            [float(r.importance) for r in rows],
            [float(r.created_at) for r in rows],
            [_clean(r.channel) for r in rows],
            [_clean(r.workspace) for r in rows],
            [_clean(r.author_id) for r in rows],
            [json.dumps([_clean(s) for s in r.sources]) for r in rows],
            [_pgvec(r.vector) for r in rows],
            [r.embedder for r in rows],
            [tsv_literal((r.terms, "A")) for r in rows],
            own,
        )
        sources = [
            (r.rowid, _clean(r.channel), _clean(s), k)
            for r in rows
            for k, s in enumerate(r.sources)
        ]
        await self._insert_sources(sources)
        await self._stats(len(rows), sum(own))
        await self._raise_meta(_MAX_ROWID, max(r.rowid for r in rows))

    async def _insert_sources(self, sources: Sequence[tuple[int, str, str, int]]) -> None:
        if sources:
            cols = [list(c) for c in zip(*sources, strict=True)]
            await self._exec(
                "INSERT INTO memory_sources (node, channel, platform_id, rank) "
                "SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[]) "
                "ON CONFLICT DO NOTHING",
                *cols,
            )

    async def supersede(self, pairs: Sequence[tuple[str, int]]) -> None:
        await self._many(
            "UPDATE memory_nodes SET superseded_by = $1 WHERE rowid = $2",
            [(s, int(r)) for s, r in pairs],
        )

    async def merge_into(
        self,
        rowid: int,
        importance: Callable[[float], float],
        sources: Sequence[str],
        now: float,
    ) -> None:
        rows = await self._all(
            "SELECT importance, sources, channel FROM memory_nodes WHERE rowid = $1 FOR UPDATE",
            rowid,
        )
        imp, sources_json, channel = rows[0]
        raised = importance(float(imp))
        have = json.loads(sources_json)
        added = [s for s in dict.fromkeys(_clean(s) for s in sources) if s not in have]
        await self._exec(
            "UPDATE memory_nodes SET importance = $1, current_importance = $1, updated_at = $2, "
            "sources = $3 WHERE rowid = $4",
            raised,
            now,
            json.dumps(have + added),
            rowid,
        )
        await self._insert_sources(
            [(rowid, channel, s, len(have) + k) for k, s in enumerate(added)]
        )

    # -- state loaded at open ---------------------------------------------------------------

    async def max_rowid(self) -> int:
        rows = await self._all(
            "SELECT GREATEST(COALESCE((SELECT value::bigint FROM memory_meta WHERE key = $1), 0),"
            " COALESCE((SELECT MAX(rowid) FROM memory_nodes), 0))",
            _MAX_ROWID,
        )
        return int(rows[0][0])

    #: Several processes may write this database (see memory_graph.graph's sync).
    shared = True

    async def raise_rowid_floor(self, floor: int) -> None:
        # Never lowered: a concurrent process may have drawn past it already.  A fresh
        # sequence (not called yet) would hand out its last_value itself.
        await self._all(
            "SELECT setval('memory_rowids', $1) FROM memory_rowids WHERE $1 > 0 "
            "AND (last_value < $1 OR (last_value = $1 AND NOT is_called))",
            floor,
        )

    async def take_rowids(self, n: int) -> list[int]:
        rows = await self._all(
            "SELECT nextval('memory_rowids') FROM generate_series(1, $1::int)", int(n)
        )
        return sorted(int(r[0]) for r in rows)

    async def rowids_after(self, after: int) -> list[int]:
        rows = await self._all(
            "SELECT rowid FROM memory_nodes WHERE rowid > $1 ORDER BY rowid", int(after)
        )
        return [int(r[0]) for r in rows]

    async def new_nodes(self, rowids: Collection[int]) -> list[NewNode]:
        if not rowids:
            return []
        rows = await self._all(
            "SELECT rowid, workspace, channel, type, content, author_id, author_name "
            "FROM memory_nodes WHERE rowid = ANY($1::bigint[]) ORDER BY rowid",
            list(rowids),
        )
        return [NewNode(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows]

    async def node_scopes(self) -> list[NodeScope]:
        rows = await self._all("SELECT rowid, workspace, channel, type FROM memory_nodes")
        return [NodeScope(int(r), ws, ch, t) for r, ws, ch, t in rows]

    async def author_names(self) -> list[tuple[str, str, str]]:
        rows = await self._all(
            "SELECT DISTINCT workspace, author_id, author_name FROM memory_nodes "
            "WHERE author_name <> ''"
        )
        return [(ws, a, n) for ws, a, n in rows]

    async def entity_names(self) -> list[tuple[int, str, str]]:
        rows = await self._all(
            "SELECT rowid, workspace, content FROM memory_nodes WHERE type = 'entity' "
            "ORDER BY rowid"
        )
        return [(int(r), ws, c) for r, ws, c in rows]

    async def private_channels(self) -> set[str]:
        return {str(ch) for (ch,) in await self._all("SELECT channel FROM memory_private_channels")}

    async def mark_private(self, channel: str, private: bool, now: float) -> None:
        if private:
            await self._exec(
                "INSERT INTO memory_private_channels (channel, marked_at) VALUES ($1, $2) "
                "ON CONFLICT DO NOTHING",
                _clean(channel),
                now,
            )
        else:
            await self._exec(
                "DELETE FROM memory_private_channels WHERE channel = $1", _clean(channel)
            )

    async def channel_tree_scopes(self, channel: str) -> list[NodeScope]:
        rows = await self._all(
            "SELECT rowid, workspace, channel, type FROM memory_nodes "
            "WHERE channel = $1 OR left(channel, $2) = $3",
            channel,
            len(channel) + 1,
            channel + ":",
        )
        return [NodeScope(int(r), ws, ch, t) for r, ws, ch, t in rows]

    async def text_index_state(self, version: str, verify: bool) -> str:
        # The index is a column of the rows, written in their transactions: it cannot
        # drift from them, so there is nothing more for ``verify`` to check.
        found = await self.get_meta("fts_version")
        if found is None:
            return "missing"
        return "ok" if found == version else "stale"

    async def rebuild_text_index(self, version: str) -> None:
        rows = await self._all(
            "SELECT rowid, content, author_name, workspace, channel, type, near_text, far_text "
            "FROM memory_nodes"
        )
        updates = []
        for rowid, content, author_name, ws, ch, typ, near, far in rows:
            own_terms = fts_tags(ws, ch, typ, content, author_name)[0]
            own = _len(own_terms) + _TAGS
            updates.append(
                (
                    int(rowid),
                    tsv_literal((own_terms, "A"), (near, "B"), (far, "C")),
                    own,
                    own + _len(near) + _len(far),
                )
            )
        async with self.transaction():
            for start in range(0, len(updates), 5000):
                chunk = updates[start : start + 5000]
                await self._exec(
                    "UPDATE memory_nodes n SET tsv = u.tv::tsvector, own_len = u.ol, dl = u.d "
                    "FROM unnest($1::bigint[], $2::text[], $3::int[], $4::int[]) "
                    "AS u(r, tv, ol, d) WHERE n.rowid = u.r",
                    *[list(c) for c in zip(*chunk, strict=True)],
                )
            await self._exec(
                "UPDATE memory_text_stats SET rows = (SELECT count(*) FROM memory_nodes), "
                "tokens = (SELECT COALESCE(sum(dl), 0) FROM memory_nodes)"
            )
            await self.set_meta("fts_version", version)

    async def term_frequencies(self) -> dict[str, int]:
        rows = await self._all("SELECT word, ndoc FROM ts_stat('SELECT tsv FROM memory_nodes')")
        return {str(t): int(n) for t, n in rows}

    # -- recall ------------------------------------------------------------------------------

    async def term_scores(
        self, terms: Sequence[TermWeight], n_rows: int, where: TextFilter
    ) -> list[tuple[int, float]]:
        """bm25's tf part per term, computed from the tsvector's weighted positions:
        ``f (k1 + 1) / (f + k1 (1 - b + b dl / avgdl))`` with ``f`` the row's weighted
        count of the term, times the term's weight, summed over the terms."""
        if not terms:
            return []
        clause, args = _filter_sql(where, 4)
        sql = (
            "WITH q AS (SELECT * FROM unnest($1::text[], $2::text[], $3::float8[]) "
            "AS q(term, query, weight)), "
            "avg AS (SELECT GREATEST(tokens::float8 / GREATEST(rows, 1), 1e-9) AS dl "
            "FROM memory_text_stats) "
            "SELECT n.rowid, sum(LEAST(f.f * "
            f"{_K1 + 1} / (f.f + {_K1} * (1 - {_B} + {_B} * n.dl / avg.dl)), "
            f"{TF_SATURATION}) * q.weight) "
            # LATERAL: each term's rows come from the GIN index, never from a scan of
            # the table the planner might choose for a join against a guessed row count.
            "FROM q CROSS JOIN avg CROSS JOIN LATERAL (SELECT n.rowid, n.dl, n.tsv "
            # OFFSET 0 keeps the planner from pulling the subquery up into the join.
            f"FROM memory_nodes n WHERE n.tsv @@ q.query::tsquery{clause} OFFSET 0) AS n "
            "CROSS JOIN LATERAL (SELECT COALESCE(sum(" + _WEIGHT_SQL + "), 0) AS f "
            "FROM unnest(n.tsv) AS u, unnest(u.weights) AS w WHERE u.lexeme = q.term) AS f "
            "WHERE f.f > 0 GROUP BY n.rowid"
        )
        rows = await self._all(
            sql,
            [t.term for t in terms],
            [tsquery_literal(t.term) for t in terms],
            [float(t.weight) for t in terms],
            *args,
        )
        return [(int(r), float(s)) for r, s in rows]

    async def newest_matches(
        self, terms: Sequence[TermWeight], where: TextFilter, limit: int, since: float | None
    ) -> list[tuple[float, NodeRow]]:
        """Newest first; the score is bm25's: each term's tf part times its weight."""
        weights = {t.term: float(t.weight) for t in terms if t.term}
        uniq = list(weights)[:24]
        if not uniq:
            return []
        clause, args = _filter_sql(where, 5)
        query = " | ".join(tsquery_literal(t) for t in uniq)
        if since is not None:
            args.append(float(since))
            clause += f" AND n.created_at >= ${4 + len(args)}"
        columns = ", ".join(f"n.{c.strip()}" for c in _rows.ROW_COLUMNS.split(","))
        sql = (
            "WITH avg AS (SELECT GREATEST(tokens::float8 / GREATEST(rows, 1), 1e-9) AS dl "
            "FROM memory_text_stats), "
            f"m AS (SELECT n.rowid FROM memory_nodes n WHERE n.tsv @@ $2::tsquery{clause} "
            "ORDER BY n.rowid DESC LIMIT $3) "
            f"SELECT (SELECT COALESCE(sum(LEAST(f * {_K1 + 1} / (f + {_K1} * "
            f"(1 - {_B} + {_B} * n.dl / avg.dl)), {TF_SATURATION}) * t.weight), 0) FROM "
            "(SELECT sum(" + _WEIGHT_SQL + ") AS f, min(q.weight) AS weight "
            "FROM unnest(n.tsv) AS u, unnest(u.weights) AS w, "
            "unnest($1::text[], $4::float8[]) AS q(term, weight) "
            "WHERE u.lexeme = q.term GROUP BY u.lexeme) AS t), "
            f"{columns} FROM m JOIN memory_nodes n ON n.rowid = m.rowid CROSS JOIN avg "
            "ORDER BY n.rowid DESC"
        )
        rows = await self._all(sql, uniq, query, limit, [weights[t] for t in uniq], *args)
        return [(float(r[0]), NodeRow.of(list(r)[1:])) for r in rows]

    async def node_rows(
        self, rowids: Collection[int], types: Sequence[str] | None, since: float | None
    ) -> list[NodeRow]:
        sql = f"SELECT {_rows.ROW_COLUMNS} FROM memory_nodes WHERE rowid = ANY($1::bigint[])"
        args: list[Any] = [sorted(rowids)]
        if types:
            args.append(list(types))
            sql += f" AND type = ANY(${len(args)}::text[])"
        if since is not None:
            args.append(float(since))
            sql += f" AND created_at >= ${len(args)}"
        return [NodeRow.of(list(r)) for r in await self._all(sql + " ORDER BY rowid", *args)]

    async def author_memories(
        self, author_id: str, types: Sequence[str] | None, limit: int
    ) -> list[NodeRow]:
        sql = (
            f"SELECT {_rows.ROW_COLUMNS} FROM memory_nodes "
            "WHERE author_id = $1 AND type <> 'episode'"
        )
        args: list[Any] = [author_id]
        if types:
            args.append(list(types))
            sql += f" AND type = ANY(${len(args)}::text[])"
        args.append(int(limit))
        sql += f" ORDER BY created_at DESC, rowid DESC LIMIT ${len(args)}"
        return [NodeRow.of(list(r)) for r in await self._all(sql, *args)]

    async def created_at(self, rowids: Collection[int]) -> dict[int, float]:
        rows = await self._all(
            "SELECT rowid, created_at FROM memory_nodes WHERE rowid = ANY($1::bigint[])",
            sorted(rowids),
        )
        return {int(r): float(ts) for r, ts in rows}

    async def embedding_matrix(
        self, embedder: str, rowids: Collection[int]
    ) -> tuple[list[int], np.ndarray]:
        rows = await self._all(
            "SELECT rowid, embedding FROM memory_nodes WHERE rowid = ANY($1::bigint[]) "
            "AND embedder = $2 AND embedding IS NOT NULL ORDER BY rowid",
            sorted(rowids),
            embedder,
        )
        if not rows:
            return [], np.empty((0, 0), dtype=np.float32)
        matrix = np.stack([_vec(v) for _, v in rows])
        return [int(r) for r, _ in rows], matrix

    async def embedding_rows(
        self, after: int, embedder: str, limit: int, *, stale_only: bool = False
    ) -> list[EmbeddingRow]:
        which = "" if stale_only else "type <> 'episode' OR "
        rows = await self._all(
            "SELECT rowid, embedding, embedder, type, content, author_name FROM memory_nodes "
            f"WHERE rowid > $1 AND ({which}embedder <> $2 OR embedding IS NULL) "
            "ORDER BY rowid LIMIT $3",
            after,
            embedder,
            limit,
        )
        return [
            EmbeddingRow(int(r), None if v is None else _vec(v), e, t, c, n)
            for r, v, e, t, c, n in rows
        ]

    async def set_embeddings(
        self, embedder: str, vectors: Sequence[tuple[int, np.ndarray]]
    ) -> None:
        if vectors:
            await self._exec(
                "UPDATE memory_nodes n SET embedding = u.e, embedder = $3 FROM "
                "unnest($1::bigint[], $2::vector[]) AS u(r, e) WHERE n.rowid = u.r",
                [int(r) for r, _ in vectors],
                [_pgvec(v) for _, v in vectors],
                embedder,
            )

    async def add_access(self, rows: Sequence[tuple[int, float, int]]) -> None:
        if rows:
            await self._exec(
                "UPDATE memory_nodes n SET access_count = access_count + u.c, "
                "accessed_at = GREATEST(accessed_at, u.a) FROM "
                "unnest($1::bigint[], $2::float8[], $3::bigint[]) AS u(c, a, r) "
                "WHERE n.rowid = u.r",
                [int(c) for c, _, _ in rows],
                [float(a) for _, a, _ in rows],
                [int(r) for _, _, r in rows],
            )

    # -- vectors ----------------------------------------------------------------------------

    async def prepare_vector_index(self, dim: int) -> None:
        """Build the HNSW index for ``dim``-dimensional vectors unless it exists."""
        self._dim = int(dim)
        _, ddl = vector_index_ddl(self._dim)
        await self._exec(ddl)

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
        """Per query vector, up to ``k`` (rowid, cosine) of memories (not episodes) made by
        ``embedder`` within ``where``, best first.  ``exact``: a full scan of the
        filter's rows; otherwise the HNSW index, searching ``ef`` candidates."""
        dim = self._dim or int(vectors.shape[1])
        cast = f"vector({dim})"
        clause, args = _filter_sql(where, 4)
        order = f"(n.embedding::{cast} <=> q.v::{cast})"
        if exact:
            order += " + 0"  # not the index's expression: an exact scan of the filter
        sql = (
            "SELECT q.i, m.rowid, 1 - (m.embedding::" + cast + " <=> q.v::" + cast + ") "
            "FROM unnest($1::vector[]) WITH ORDINALITY AS q(v, i) CROSS JOIN LATERAL "
            "(SELECT n.rowid, n.embedding FROM memory_nodes n WHERE n.type <> 'episode' "
            f"AND vector_dims(n.embedding) = {dim} AND n.embedder = $3{clause} "
            f"ORDER BY {order} LIMIT $2) AS m ORDER BY 1, 3 DESC"
        )
        out: list[list[tuple[int, float]]] = [[] for _ in range(len(vectors))]
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(f"SET LOCAL hnsw.ef_search = {max(1, min(int(ef), 1000))}")
                rows = await conn.fetch(sql, [_pgvec(v) for v in vectors], int(k), embedder, *args)
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreError(f"memory vector search failed at {self.where}: {exc}") from exc
        for i, rowid, sim in rows:
            out[int(i) - 1].append((int(rowid), float(sim)))
        return out

    # -- reading nodes out ---------------------------------------------------------------------

    async def memory_counts(self) -> dict[str, int]:
        rows = await self._all(
            "SELECT channel, COUNT(*) FROM memory_nodes WHERE type <> 'episode' GROUP BY channel"
        )
        return {str(ch): int(n) for ch, n in rows}

    async def node_record(self, memory_id: str) -> dict[str, Any] | None:
        rows = await self._all(
            f"SELECT {_rows.RECORD_COLUMNS} FROM memory_nodes WHERE id = $1", memory_id
        )
        return _rows.record(rows[0]) if rows else None

    async def export_nodes(self) -> AsyncIterator[dict[str, Any]]:
        after = 0
        while True:
            rows = await self._all(
                f"SELECT rowid, {_rows.RECORD_COLUMNS} FROM memory_nodes WHERE rowid > $1 "
                "ORDER BY rowid LIMIT 1000",
                after,
            )
            if not rows:
                return
            after = int(rows[-1][0])
            for r in rows:
                yield _rows.record(list(r)[1:])

    async def export_edges(self, memory_id: str | None = None) -> AsyncIterator[dict[str, Any]]:
        where = "AND (s.id = $2 OR d.id = $2)" if memory_id else "AND $2::text IS NULL"
        after = 0
        while True:
            rows = await self._all(
                "SELECT e.id, s.id, d.id, e.type, e.weight, e.created_at FROM memory_edges e "
                "JOIN memory_nodes s ON s.rowid = e.src JOIN memory_nodes d ON d.rowid = e.dst "
                f"WHERE e.id > $1 {where} ORDER BY e.id LIMIT 1000",
                after,
                memory_id,
            )
            if not rows:
                return
            after = int(rows[-1][0])
            for _, src, dst, typ, weight, created in rows:
                yield {
                    "src": src,
                    "dst": dst,
                    "type": typ,
                    "weight": weight,
                    "created_at": created,
                }


def _filter_sql(where: TextFilter, first: int) -> tuple[str, list[Any]]:
    """``where`` as SQL on ``n.`` columns, its parameters numbered from ``$first``."""
    clause = ""
    args: list[Any] = []
    if where.scope == "workspace":
        args.append(where.value)
        clause += f" AND n.workspace = ${first + len(args) - 1}"
    elif where.scope == "channel":
        args.append(where.value)
        clause += f" AND n.channel = ${first + len(args) - 1}"
    if where.types:
        args.append(list(where.types))
        clause += f" AND n.type = ANY(${first + len(args) - 1}::text[])"
    return clause, args


def _pgvec(v: np.ndarray) -> Vector:
    return Vector(np.asarray(v, dtype=np.float32))


def _vec(v: Any) -> np.ndarray:
    if isinstance(v, Vector):
        v = v.to_numpy()
    return np.asarray(v, dtype=np.float32)
