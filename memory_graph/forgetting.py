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
from collections.abc import Iterable
from typing import TYPE_CHECKING

from . import episodes as episode_index
from .tombstones import delete_nodes, scoped_key
from .types import ForgetReport

if TYPE_CHECKING:
    from .graph import MemoryGraph


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
        if row is None:
            return False
        rowid, sources_json, node_type, node_channel = row
        if channel is not None and not g.visible(channel, node_channel):
            return False
        async with g.transaction():
            await _tombstone(g, "message", json.loads(sources_json), time.time())
            await delete_nodes(g, [int(rowid)], [memory_id])
            if node_type == "episode":
                await episode_index.recompute_contexts(g, node_channel)
        g.unregister(int(rowid))
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
        async with g.transaction():
            if channel is None:
                await _tombstone(g, "author", [author_id], now)
            else:
                await _tombstone(g, "author_in", [scoped_key(author_id, channel)], now)
            await _tombstone(g, "message", [pid for _, pid in messages], now)
            await delete_nodes(g, rowids, ids)
            for touched in sorted({ch for _, _, ch, _ in episodes}):
                await episode_index.recompute_contexts(g, touched)
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
