"""Forgetting: deleting nodes and leaving tombstones so in-flight work cannot bring them back.

Tombstones are keyed by platform message id (the id alone: ``is_forgotten`` is
asked without a channel, so a forgotten id blocks that id in every channel, which
errs on the side of forgetting) and by author id.  An author tombstone blocks every
later memory saved in that author's name and every episode of theirs written up to
the moment they were forgotten.

An author is forgotten either everywhere (the operator's ``tierbot memory forget
--author``: kind ``author``, key the author id) or only in what one channel can see
(an admin's ``/forget --author``: kind ``author_in``, key ``author id \n channel``).
A scoped tombstone applies wherever that channel's memories are visible
(:meth:`MemoryGraph.visible`), never in another workspace or another user's DM.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import episodes as episode_index
from . import schema
from .types import ForgetReport

if TYPE_CHECKING:
    from .graph import MemoryGraph

_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Tombstones:
    """The tombstones found for some authors and platform ids.

    ``authors`` maps an author id to its tombstones: (the channel a scoped forget was
    issued from, or None for everywhere; when).
    """

    authors: dict[str, list[tuple[str | None, float]]]
    pids: frozenset[str]

    def author_forgotten_at(self, g: MemoryGraph, author_id: str, channel: str) -> float | None:
        """When ``author_id`` was last forgotten as seen from ``channel``; None if never."""
        times = [
            when
            for origin, when in self.authors.get(author_id, ())
            if origin is None or g.visible(channel, origin)
        ]
        return max(times, default=None)


def _scoped_key(author_id: str, channel: str) -> str:
    return f"{author_id}\n{channel}"


async def tombstoned(g: MemoryGraph, authors: Iterable[str], pids: Iterable[str]) -> Tombstones:
    """The tombstones of the given authors (global and scoped) and platform ids."""
    dead_authors: dict[str, list[tuple[str | None, float]]] = {}
    dead_pids: set[str] = set()
    author_list, pid_list = list(set(authors)), list(set(pids))
    queries = (
        ("author", author_list, "key"),
        ("author_in", author_list, "substr(key, 1, instr(key, char(10)) - 1)"),
        ("message", pid_list, "key"),
    )
    for kind, keys, column in queries:
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            async with g.db.execute(
                "SELECT key, created_at FROM memory_tombstones "
                f"WHERE kind = ? AND {column} IN ({marks})",
                (kind, *chunk),
            ) as cur:
                for key, created in await cur.fetchall():
                    if kind == "message":
                        dead_pids.add(key)
                    elif kind == "author":
                        dead_authors.setdefault(key, []).append((None, float(created)))
                    else:
                        author, _, origin = key.partition("\n")
                        dead_authors.setdefault(author, []).append((origin, float(created)))
    return Tombstones(dead_authors, frozenset(dead_pids))


async def is_forgotten(
    g: MemoryGraph, *, author_id: str, platform_ids: Sequence[str], channel: str | None = None
) -> bool:
    """Any tombstone of the messages, or of the author as seen from ``channel`` (without a
    channel, a scoped tombstone anywhere counts: that errs on the side of forgetting)."""
    stones = await tombstoned(g, [author_id] if author_id else [], platform_ids)
    if stones.pids:
        return True
    if channel is None:
        return bool(stones.authors)
    return stones.author_forgotten_at(g, author_id, channel) is not None


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
    # A repeated forget moves the time forward: an author tombstone blocks what was
    # said up to the *latest* forget, not only up to the first.
    await g.db.executemany(
        "INSERT INTO memory_tombstones (kind, key, created_at) VALUES (?, ?, ?) "
        "ON CONFLICT (kind, key) DO UPDATE SET created_at = excluded.created_at",
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
        try:
            await g.db.execute("BEGIN IMMEDIATE")
            await _tombstone(g, "message", sources, time.time())
            await _delete(g, [rowid], [memory_id])
            if row[2] == "episode":
                await episode_index.recompute_contexts(g, row[3])
            await g.db.execute("COMMIT")
        except BaseException:
            await schema.rollback(g.db)
            raise
        g.unregister(rowid)
        return True


async def forget_author(
    g: MemoryGraph, author_id: str, *, channel: str | None = None, dry_run: bool = False
) -> ForgetReport:
    """Delete what came from ``author_id``; with ``channel``, only what that channel can see.

    ``dry_run`` reports what would go and changes nothing.
    """
    if not author_id:
        raise ValueError("author_id must not be empty")

    def seen(node_channel: str) -> bool:
        return channel is None or g.visible(channel, node_channel)

    async with g.lock:
        async with g.db.execute(
            "SELECT rowid, id, channel, platform_id FROM memory_nodes "
            "WHERE type = 'episode' AND author_id = ?",
            (author_id,),
        ) as cur:
            episodes = [r for r in await cur.fetchall() if seen(r[2])]
        async with g.db.execute(
            "SELECT rowid, id, channel, sources FROM memory_nodes "
            "WHERE type != 'episode' AND author_id = ? "
            "UNION SELECT n.rowid, n.id, n.channel, n.sources FROM memory_sources s "
            "JOIN memory_nodes e ON e.type = 'episode' AND e.author_id = ? "
            "AND e.channel = s.channel AND e.platform_id = s.platform_id "
            "JOIN memory_nodes n ON n.rowid = s.node",
            (author_id, author_id),
        ) as cur:
            memories = [r for r in await cur.fetchall() if seen(r[2])]
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
                if seen(ch):
                    for pid in json.loads(sources):
                        messages[(ch, pid)] = None
        per_memory = Counter(ch for _, _, ch, _ in memories)
        per_episode = Counter(ch for _, _, ch, _ in episodes)
        per_message = Counter(ch for ch, _ in messages)
        report = ForgetReport(
            author_id=author_id,
            memories_deleted=len(memories),
            episodes_deleted=len(episodes),
            messages=tuple(messages),
            per_channel=tuple(
                (ch, per_memory[ch], per_episode[ch], per_message[ch])
                for ch in sorted({*per_memory, *per_episode, *per_message})
            ),
            scope=channel,
        )
        if dry_run:
            return report
        rowids = [r for r, *_ in episodes] + sorted(authored)
        ids = [i for _, i, *_ in episodes] + [i for _, i, *_ in memories]
        now = time.time()
        try:
            await g.db.execute("BEGIN IMMEDIATE")
            if channel is None:
                await _tombstone(g, "author", [author_id], now)
            else:
                await _tombstone(g, "author_in", [_scoped_key(author_id, channel)], now)
            await _tombstone(g, "message", [pid for _, pid in messages], now)
            await _delete(g, rowids, ids)
            for touched in sorted({ch for _, _, ch, _ in episodes}):
                await episode_index.recompute_contexts(g, touched)
            await g.db.execute("COMMIT")
        except BaseException:
            await schema.rollback(g.db)
            raise
        for r in rowids:
            g.unregister(r)
        async with g.db.execute(
            "SELECT DISTINCT workspace FROM memory_nodes WHERE author_id = ?", (author_id,)
        ) as cur:
            still_named = {ws for (ws,) in await cur.fetchall()}
        for workspace, table in g.names.items():
            if workspace not in still_named:
                for keys in table.values():
                    keys.discard(author_id)
        return report
