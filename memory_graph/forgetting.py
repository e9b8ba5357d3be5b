"""Forgetting: deleting nodes and leaving tombstones so in-flight work cannot bring them back.

Tombstones are keyed by platform message id (the id alone: ``is_forgotten`` is
asked without a channel, so a forgotten id blocks that id in every channel, which
errs on the side of forgetting) and by author id.  An author tombstone blocks every
later memory saved in that author's name and every episode of theirs written up to
the moment they were forgotten.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from . import episodes as episode_index
from .types import ForgetReport

if TYPE_CHECKING:
    from .graph import MemoryGraph

_CHUNK = 500


async def tombstoned(
    g: MemoryGraph, authors: Iterable[str], pids: Iterable[str], *, with_times: bool = False
) -> tuple[dict[str, float], set[str]]:
    """(forgotten authors -> when, forgotten platform ids) among the given ones."""
    dead_authors: dict[str, float] = {}
    dead_pids: set[str] = set()
    for kind, keys in (("author", list(set(authors))), ("message", list(set(pids)))):
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            async with g.db.execute(
                "SELECT key, created_at FROM memory_tombstones "
                f"WHERE kind = ? AND key IN ({marks})",
                (kind, *chunk),
            ) as cur:
                for key, created in await cur.fetchall():
                    if kind == "author":
                        dead_authors[key] = float(created)
                    else:
                        dead_pids.add(key)
    return dead_authors, dead_pids


async def is_forgotten(g: MemoryGraph, *, author_id: str, platform_ids: Sequence[str]) -> bool:
    authors, pids = await tombstoned(g, [author_id] if author_id else [], platform_ids)
    return bool(authors or pids)


async def _delete(g: MemoryGraph, rowids: list[int], ids: list[str]) -> None:
    """Delete nodes (edges and sources cascade) and their FTS rows; inside a transaction."""
    for start in range(0, len(rowids), _CHUNK):
        chunk = rowids[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        await g.db.execute(f"DELETE FROM memory_fts WHERE rowid IN ({marks})", chunk)
        await g.db.execute(f"DELETE FROM memory_nodes WHERE rowid IN ({marks})", chunk)
    for start in range(0, len(ids), _CHUNK):
        chunk_ids = ids[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk_ids))
        # A memory whose successor is gone is current again.
        await g.db.execute(
            f"UPDATE memory_nodes SET superseded_by = NULL WHERE superseded_by IN ({marks})",
            chunk_ids,
        )


async def _tombstone(g: MemoryGraph, kind: str, keys: Iterable[str], now: float) -> None:
    await g.db.executemany(
        "INSERT OR IGNORE INTO memory_tombstones (kind, key, created_at) VALUES (?, ?, ?)",
        [(kind, k, now) for k in dict.fromkeys(keys) if k],
    )


async def forget(g: MemoryGraph, memory_id: str, *, channel: str | None = None) -> bool:
    async with g.lock:
        async with g.db.execute(
            "SELECT rowid, sources, type, channel FROM memory_nodes WHERE id = ?", (memory_id,)
        ) as cur:
            row = await cur.fetchone()
        if row is None or (channel is not None and not g.visible(channel, row[3])):
            return False
        rowid, sources = int(row[0]), json.loads(row[1])
        await g.db.execute("BEGIN IMMEDIATE")
        try:
            await _tombstone(g, "message", sources, time.time())
            await _delete(g, [rowid], [memory_id])
            if row[2] == "episode":
                await episode_index.recompute_contexts(g, row[3])
            await g.db.execute("COMMIT")
        except BaseException:
            await g.db.execute("ROLLBACK")
            raise
        g.unregister(rowid)
        return True


async def forget_author(g: MemoryGraph, author_id: str) -> ForgetReport:
    if not author_id:
        raise ValueError("author_id must not be empty")
    async with g.lock:
        async with g.db.execute(
            "SELECT rowid, id, channel, platform_id FROM memory_nodes "
            "WHERE type = 'episode' AND author_id = ?",
            (author_id,),
        ) as cur:
            episodes = list(await cur.fetchall())
        async with g.db.execute(
            "SELECT rowid, id, channel, sources FROM memory_nodes "
            "WHERE type != 'episode' AND author_id = ? "
            "UNION SELECT n.rowid, n.id, n.channel, n.sources FROM memory_sources s "
            "JOIN memory_nodes e ON e.type = 'episode' AND e.author_id = ? "
            "AND e.channel = s.channel AND e.platform_id = s.platform_id "
            "JOIN memory_nodes n ON n.rowid = s.node",
            (author_id, author_id),
        ) as cur:
            memories = list(await cur.fetchall())
        messages: dict[tuple[str, str], None] = {(ch, pid): None for _, _, ch, pid in episodes}
        authored = {r for r, *_ in memories}
        # Sources of memories in the author's own name are the author's words; a memory
        # derived from several people's messages vanishes, but their messages stay.
        async with g.db.execute(
            "SELECT rowid, channel, sources FROM memory_nodes WHERE type != 'episode' "
            "AND author_id = ?",
            (author_id,),
        ) as cur:
            for _, ch, sources in await cur.fetchall():
                for pid in json.loads(sources):
                    messages[(ch, pid)] = None
        rowids = [r for r, *_ in episodes] + sorted(authored)
        ids = [i for _, i, *_ in episodes] + [i for _, i, *_ in memories]
        now = time.time()
        await g.db.execute("BEGIN IMMEDIATE")
        try:
            await _tombstone(g, "author", [author_id], now)
            await _tombstone(g, "message", [pid for _, pid in messages], now)
            await _delete(g, rowids, ids)
            for channel in sorted({ch for _, _, ch, _ in episodes}):
                await episode_index.recompute_contexts(g, channel)
            await g.db.execute("COMMIT")
        except BaseException:
            await g.db.execute("ROLLBACK")
            raise
        for r in rowids:
            g.unregister(r)
        for table in g.names.values():
            for keys in table.values():
                keys.discard(author_id)
        return ForgetReport(
            author_id=author_id,
            memories_deleted=len(memories),
            episodes_deleted=len(episodes),
            messages=tuple(messages),
        )
