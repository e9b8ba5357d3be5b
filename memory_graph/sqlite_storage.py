"""The SQLite implementation of :class:`~memory_graph.storage.MemoryStorage`.

It runs on the graph's own aiosqlite connection (WAL, autocommit: every write
transaction is explicit, :meth:`SQLiteMemoryStorage.transaction`).  The tables
are :mod:`memory_graph.schema`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite
import numpy as np

from tierbot.errors import StoreError
from tierbot.store import Step

from . import rows as _rows
from . import schema
from .sqlite_search import SQLiteSearch, blob_vector
from .storage import (
    AuthoredNode,
    EpisodeContext,
    EpisodeRow,
    ImportanceRow,
    Link,
    MemoryRow,
    NodeBrief,
    NodeRef,
    StoredVector,
    TombstoneKind,
    TombstoneRow,
)

__all__ = ["SQLiteMemoryStorage"]

#: Rows per ``IN (...)`` list, well under SQLite's variable limit.
_CHUNK = 500


def _chunks(values: Sequence[object]) -> Iterable[list[object]]:
    for start in range(0, len(values), _CHUNK):
        yield list(values[start : start + _CHUNK])


def _pair_chunks(keys: Sequence[tuple[str, str]]) -> Iterable[list[tuple[str, str]]]:
    """``keys`` without repeats, in chunks of at most ``_CHUNK``."""
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), _CHUNK):
        yield unique[start : start + _CHUNK]


def _pairs(n: int) -> str:
    """``n`` two-value rows of placeholders for a VALUES list."""
    return ",".join(["(?,?)"] * n)


class SQLiteMemoryStorage(SQLiteSearch):
    """The memory graph's tables in tierbot's SQLite file."""

    def __init__(self, db: aiosqlite.Connection, path: str | None = None) -> None:
        self._db = db
        #: The file's path, for this process's turn at writing it (None: no turns).
        self._path = path
        self._closed = False

    @classmethod
    async def open(cls, path: Path, *, read_only: bool = False) -> SQLiteMemoryStorage:
        """Connect to ``path`` and create or upgrade the tables (``read_only``: check them,
        change nothing).  Raises StoreError naming the file when it cannot."""
        db = await schema.connect(str(path), read_only=read_only)
        try:
            if read_only:
                await schema.check(db)
            else:
                await schema.migrate(db)
        except BaseException as exc:
            await db.close()
            if isinstance(exc, OSError | aiosqlite.Error):
                raise StoreError(f"cannot open the memory graph in {path}: {exc}") from exc
            raise
        return cls(db, None if read_only else str(path))

    @property
    def connection(self) -> aiosqlite.Connection:
        """The aiosqlite connection (for SQLite-specific tests and tools only)."""
        return self._db

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._db.close()

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
        queries = (
            ("author", list(dict.fromkeys(authors)), "key"),
            # A scoped key is "author id \n channel": match on the author id part.
            ("author_in", list(dict.fromkeys(authors)), "substr(key, 1, instr(key, char(10)) - 1)"),
            ("message", list(dict.fromkeys(platform_ids)), "key"),
        )
        # Every chunk's query in one statement (up to 4 chunks' parameters): asked on
        # every turn, so one trip to the connection's thread instead of one per kind.
        statements: list[tuple[list[str], list[object]]] = [([], [])]
        for kind, keys, column in queries:
            for chunk in _chunks(keys):
                if len(statements[-1][1]) + len(chunk) > 4 * _CHUNK:
                    statements.append(([], []))
                sql, args = statements[-1]
                sql.append(
                    "SELECT kind, key, created_at FROM memory_tombstones "
                    f"WHERE kind = ? AND {column} IN ({schema.marks(len(chunk))})"
                )
                args += [kind, *chunk]
        found: list[TombstoneRow] = []
        for sql, args in statements:
            if sql:
                rows = await self._db.execute_fetchall(" UNION ALL ".join(sql), tuple(args))
                found += [TombstoneRow(kind, k, float(t)) for kind, k, t in rows]
        return found

    # -- what forgetting reads -------------------------------------------------------------

    async def node_ref(self, memory_id: str) -> NodeRef | None:
        rows = list(
            await self._db.execute_fetchall(
                "SELECT rowid, id, type, channel, sources FROM memory_nodes WHERE id = ?",
                (memory_id,),
            )
        )
        if not rows:
            return None
        rowid, id_, type_, channel, sources = rows[0]
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
        return _rows.authored(episodes, own, derived)

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

    # -- links ------------------------------------------------------------------------------
    # Both directions are indexed (the primary key leads with src, memory_edges_dst with
    # dst), so each read is one indexed query per chunk.

    async def links_of(self, rowids: Collection[int]) -> list[Link]:
        out: list[Link] = []
        for ids in _chunks(sorted(set(rowids))):
            marks = schema.marks(len(ids))
            sql = (
                f"SELECT src, dst, type, weight FROM memory_edges WHERE src IN ({marks}) "
                f"UNION ALL SELECT dst, src, type, weight FROM memory_edges WHERE dst IN ({marks}) "
                "ORDER BY 1, 2, 3"
            )
            for node, other, typ, weight in await schema.fetch_all(self._db, sql, (*ids, *ids)):
                out.append(Link(int(node), int(other), str(typ), float(weight)))
        return out

    async def link_targets(self, rowids: Collection[int], type_: str) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {}
        for ids in _chunks(sorted(set(rowids))):
            sql = (
                "SELECT src, dst FROM memory_edges "
                f"WHERE type = ? AND src IN ({schema.marks(len(ids))})"
            )
            for src, dst in await schema.fetch_all(self._db, sql, (type_, *ids)):
                out.setdefault(int(src), set()).add(int(dst))
        return out

    async def add_links(self, links: Sequence[tuple[int, int, str, float, float]]) -> None:
        await self._run(_link_steps(links))

    # -- upkeep -------------------------------------------------------------------------------

    async def importance_rows(self, except_types: Sequence[str]) -> list[ImportanceRow]:
        rows = await schema.fetch_all(
            self._db,
            "SELECT rowid, importance, accessed_at, current_importance FROM memory_nodes "
            f"WHERE type NOT IN ({schema.marks(len(except_types))})",
            except_types,
        )
        return [ImportanceRow(int(r), float(i), float(a), float(c)) for r, i, a, c in rows]

    async def set_current_importance(self, values: Sequence[tuple[float, int]]) -> None:
        await self._db.executemany(
            "UPDATE memory_nodes SET current_importance = ? WHERE rowid = ?", values
        )

    async def prunable(
        self, except_types: Sequence[str], below: float, idle_before: float
    ) -> list[tuple[int, str]]:
        rows = await schema.fetch_all(
            self._db,
            f"SELECT rowid, id FROM memory_nodes WHERE type NOT IN "
            f"({schema.marks(len(except_types))}) "
            "AND current_importance < ? AND accessed_at < ? AND created_at < ?",
            (*except_types, below, idle_before, idle_before),
        )
        return [(int(r), str(i)) for r, i in rows]

    async def memory_vectors_since(self, since: float) -> list[StoredVector]:
        rows = await schema.fetch_all(
            self._db,
            "SELECT rowid, channel, embedding FROM memory_nodes WHERE type != 'episode' "
            "AND updated_at >= ? AND embedding IS NOT NULL",
            (since,),
        )
        return [StoredVector(int(r), ch, blob_vector(blob)) for r, ch, blob in rows]

    async def memory_rowids(self, rowids: Collection[int]) -> set[int]:
        out: set[int] = set()
        for ids in _chunks(sorted(set(rowids))):
            rows = await schema.fetch_all(
                self._db,
                "SELECT rowid FROM memory_nodes WHERE type != 'episode' "
                f"AND rowid IN ({schema.marks(len(ids))})",
                ids,
            )
            out.update(int(r) for (r,) in rows)
        return out

    # -- episodes -----------------------------------------------------------------------------

    async def indexed_upto(self) -> int:
        value = await schema.get_meta(self._db, _INDEXED_UPTO)
        return int(value) if value is not None else 0

    async def raise_indexed_upto(self, message_id: int) -> None:
        await self._db.execute(_RAISE_INDEXED_UPTO, (_INDEXED_UPTO, int(message_id)))

    async def episode_platform_ids(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        have: set[tuple[str, str]] = set()
        for chunk in _pair_chunks(keys):
            # A join, not a row-value IN: SQLite scans the table for the latter.
            rows = await schema.fetch_all(
                self._db,
                f"WITH k(c, p) AS (VALUES {_pairs(len(chunk))}) SELECT n.channel, "
                "n.platform_id FROM k JOIN memory_nodes n ON n.channel = k.c "
                "AND n.platform_id = k.p",
                [v for pair in chunk for v in pair],
            )
            have.update((r[0], r[1]) for r in rows)
        return have

    async def latest_episodes(
        self, channels: Sequence[str], limit: int
    ) -> dict[str, list[EpisodeContext]]:
        out: dict[str, list[EpisodeContext]] = {}
        unique = list(dict.fromkeys(channels))
        # One statement per 200 channels (SQLite allows 500 terms in a compound select),
        # each term a walk down memory_nodes_channel.
        for start in range(0, len(unique), 200):
            chunk = unique[start : start + 200]
            one = (
                f"SELECT * FROM (SELECT channel, {_rows.EPISODE_CONTEXT_COLUMNS} FROM "
                "memory_nodes WHERE channel = ? AND type = 'episode' ORDER BY rowid DESC "
                "LIMIT ?)"
            )
            rows = await schema.fetch_all(
                self._db,
                " UNION ALL ".join([one] * len(chunk)),
                [v for ch in chunk for v in (ch, limit)],
            )
            for r in rows:
                out.setdefault(r[0], []).append(_rows.episode_context(r[1:]))
        for found in out.values():
            found.sort(key=lambda e: e.rowid)
        return out

    async def channel_episodes(self, channel: str) -> list[EpisodeContext]:
        rows = await schema.fetch_all(
            self._db,
            f"SELECT {_rows.EPISODE_CONTEXT_COLUMNS} FROM memory_nodes "
            "WHERE channel = ? AND type = 'episode' ORDER BY rowid",
            [channel],
        )
        return [_rows.episode_context(r) for r in rows]

    async def sources_citing(self, keys: Sequence[tuple[str, str]]) -> list[tuple[int, str, str]]:
        out: list[tuple[int, str, str]] = []
        for chunk in _pair_chunks(keys):
            rows = await schema.fetch_all(
                self._db,
                f"WITH k(c, p) AS (VALUES {_pairs(len(chunk))}) SELECT s.node, s.channel, "
                "s.platform_id FROM k JOIN memory_sources s ON s.channel = k.c "
                "AND s.platform_id = k.p",
                [v for pair in chunk for v in pair],
            )
            out += [(int(node), ch, pid) for node, ch, pid in rows]
        return out

    async def insert_episodes(self, rows: Sequence[EpisodeRow]) -> None:
        await self._run(_episode_steps(rows))

    async def set_contexts(self, changes: Sequence[tuple[str, str, int]]) -> None:
        await self._run(_context_steps(changes))

    async def write_episodes(
        self,
        rows: Sequence[EpisodeRow],
        contexts: Sequence[tuple[str, str, int]],
        links: Sequence[tuple[int, int, str, float, float]],
        indexed_upto: int | None,
    ) -> None:
        steps = [*_episode_steps(rows), *_context_steps(contexts), *_link_steps(links)]
        if indexed_upto is not None:
            steps.append(Step(_RAISE_INDEXED_UPTO, (_INDEXED_UPTO, int(indexed_upto))))
        await schema.write_at_once(self._db, self._path, steps)

    async def _run(self, steps: Sequence[Step]) -> None:
        """``steps`` inside the caller's transaction, a trip each."""
        for step in steps:
            if step.many:
                await self._db.executemany(step.sql, step.params)
            else:
                await self._db.execute(step.sql, step.params)

    # -- saving memories --------------------------------------------------------------------

    async def _briefs(self, column: str, keys: Collection[Any]) -> list[NodeBrief]:
        out: list[NodeBrief] = []
        for chunk in _chunks(list(keys)):
            rows = await schema.fetch_all(
                self._db,
                f"SELECT {_rows.BRIEF_COLUMNS} FROM memory_nodes "
                f"WHERE {column} IN ({schema.marks(len(chunk))})",
                chunk,
            )
            out += [_rows.brief(r) for r in rows]
        return out

    async def briefs_by_id(self, ids: Collection[str]) -> dict[str, NodeBrief]:
        return {b.id: b for b in await self._briefs("id", ids)}

    async def briefs_by_rowid(self, rowids: Collection[int]) -> dict[int, NodeBrief]:
        return {b.rowid: b for b in await self._briefs("rowid", rowids)}

    async def current_memories_by_hash(self, hashes: Collection[str]) -> list[NodeBrief]:
        out: list[NodeBrief] = []
        for chunk in _chunks(list(hashes)):
            rows = await schema.fetch_all(
                self._db,
                f"SELECT {_rows.BRIEF_COLUMNS} FROM memory_nodes WHERE superseded_by IS NULL "
                f"AND type != 'episode' AND content_hash IN ({schema.marks(len(chunk))})",
                chunk,
            )
            out += [_rows.brief(r) for r in rows]
        return out

    async def episode_rowids(self, channel: str, platform_ids: Collection[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for chunk in _chunks(list(platform_ids)):
            rows = await schema.fetch_all(
                self._db,
                "SELECT rowid, platform_id FROM memory_nodes WHERE channel = ? "
                f"AND platform_id IN ({schema.marks(len(chunk))})",
                [channel, *chunk],
            )
            out.update({pid: int(r) for r, pid in rows})
        return out

    async def insert_memories(self, rows: Sequence[MemoryRow]) -> None:
        await self._db.executemany(
            "INSERT INTO memory_nodes (rowid, id, type, content, content_hash, importance, "
            "current_importance, created_at, updated_at, accessed_at, channel, workspace, "
            "author_id, sources, embedding, embedder) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    r.rowid,
                    r.id,
                    r.type,
                    r.content,
                    r.content_hash,
                    r.importance,
                    r.importance,
                    r.created_at,
                    r.created_at,
                    r.created_at,
                    r.channel,
                    r.workspace,
                    r.author_id,
                    json.dumps(list(r.sources)),
                    r.vector.astype(np.float32).tobytes(),
                    r.embedder,
                )
                for r in rows
            ],
        )
        await self._db.executemany(
            "INSERT INTO memory_fts (rowid, terms, ws, ch, ty) VALUES (?, ?, ?, ?, ?)",
            [(r.rowid, r.terms, r.workspace_tag, r.channel_tag, r.type_tag) for r in rows],
        )
        await self._db.executemany(
            "INSERT OR IGNORE INTO memory_sources (node, channel, platform_id, rank) "
            "VALUES (?, ?, ?, ?)",
            [(r.rowid, r.channel, s, k) for r in rows for k, s in enumerate(r.sources)],
        )

    async def supersede(self, pairs: Sequence[tuple[str, int]]) -> None:
        await self._db.executemany(
            "UPDATE memory_nodes SET superseded_by = ?, updated_at = updated_at WHERE rowid = ?",
            pairs,
        )

    async def merge_into(
        self,
        rowid: int,
        importance: Callable[[float], float],
        sources: Sequence[str],
        now: float,
    ) -> None:
        rows = await schema.fetch_all(
            self._db,
            "SELECT importance, sources, channel FROM memory_nodes WHERE rowid = ?",
            [rowid],
        )
        imp, sources_json, channel = rows[0]
        raised = importance(float(imp))
        have = json.loads(sources_json)
        added = [s for s in dict.fromkeys(sources) if s not in have]
        await self._db.execute(
            "UPDATE memory_nodes SET importance = ?, current_importance = ?, updated_at = ?, "
            "sources = ? WHERE rowid = ?",
            (raised, raised, now, json.dumps(have + added), rowid),
        )
        await self._db.executemany(
            "INSERT OR IGNORE INTO memory_sources (node, channel, platform_id, rank) "
            "VALUES (?, ?, ?, ?)",
            [(rowid, channel, s, len(have) + k) for k, s in enumerate(added)],
        )


#: memory_meta key of the live indexer's high-water mark: every stored message with an id
#: at or below it has been considered for indexing (indexed, or skipped by rule).
_INDEXED_UPTO = "indexed_upto"


_RAISE_INDEXED_UPTO = (
    "INSERT INTO memory_meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
    "value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))"
)


def _episode_steps(rows: Sequence[EpisodeRow]) -> list[Step]:
    """Episode nodes and their text-index rows."""
    if not rows:
        return []
    nodes = [
        (
            r.rowid,
            r.id,
            r.content,
            r.content_hash,
            r.created_at,
            r.created_at,
            r.indexed_at,
            r.channel,
            r.workspace,
            r.author_id,
            r.author_name,
            r.platform_id,
            json.dumps([r.platform_id]),
            r.near,
            r.far,
            r.vector.astype(np.float32).tobytes(),
            r.embedder,
        )
        for r in rows
    ]
    text = [
        (r.rowid, r.terms, r.workspace_tag, r.channel_tag, r.type_tag, r.near, r.far) for r in rows
    ]
    return [
        Step(
            "INSERT INTO memory_nodes (rowid, id, type, content, content_hash, importance, "
            "current_importance, created_at, updated_at, accessed_at, channel, workspace, "
            "author_id, author_name, platform_id, sources, near_text, far_text, embedding, "
            "embedder) VALUES (?, ?, 'episode', ?, ?, 0.5, 0.5, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?, ?)",
            nodes,
            many=True,
        ),
        Step(
            "INSERT INTO memory_fts (rowid, terms, ws, ch, ty, near, far) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            text,
            many=True,
        ),
    ]


def _context_steps(changes: Sequence[tuple[str, str, int]]) -> list[Step]:
    """``(near, far, rowid)``: episodes' context columns and their text index."""
    if not changes:  # a trip to the connection's thread saved
        return []
    return [
        Step(
            "UPDATE memory_nodes SET near_text = ?, far_text = ? WHERE rowid = ?",
            changes,
            many=True,
        ),
        Step("UPDATE memory_fts SET near = ?, far = ? WHERE rowid = ?", changes, many=True),
    ]


def _link_steps(links: Sequence[tuple[int, int, str, float, float]]) -> list[Step]:
    if not links:
        return []
    sql = (
        "INSERT OR IGNORE INTO memory_edges (src, dst, type, weight, created_at) "
        "VALUES (?, ?, ?, ?, ?)"
    )
    return [Step(sql, links, many=True)]
