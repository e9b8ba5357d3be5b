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
    await g.storage.add_tombstones(kind, keys, now)


async def forget(g: MemoryGraph, memory_id: str, *, channel: str | None = None) -> bool:
    async with g.lock:
        node = await g.storage.node_ref(memory_id)
        if node is None or (channel is not None and not g.visible(channel, node.channel)):
            return False
        async with g.transaction():
            await _tombstone(g, "message", node.sources, time.time())
            await delete_nodes(g, [node.rowid], [memory_id])
            if node.type == "episode":
                await episode_index.recompute_contexts(g, node.channel)
        g.unregister(node.rowid)
        return True


async def forget_messages(g: MemoryGraph, channel: str, platform_ids: Iterable[str]) -> int:
    pids = [p for p in dict.fromkeys(platform_ids) if p]
    if not pids:
        return 0
    async with g.lock:
        refs = []
        for pid in pids:
            node = await g.storage.node_ref(episode_index.episode_id(channel, pid))
            if node is not None:
                refs.append(node)
        async with g.transaction():
            await _tombstone(g, "message", pids, time.time())
            if refs:
                await delete_nodes(g, [n.rowid for n in refs], [n.id for n in refs])
                await episode_index.recompute_contexts(g, channel)
        for n in refs:
            g.unregister(n.rowid)
        return len(refs)


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
        nodes = [n for n in await g.storage.authored_nodes(author_id) if seen(n.channel)]
        episodes = [n for n in nodes if n.platform_id is not None]
        memories = [n for n in nodes if n.platform_id is None]
        messages: dict[tuple[str, str], None] = {
            (n.channel, n.platform_id): None for n in episodes if n.platform_id is not None
        }
        # Sources of memories in the author's own name are the author's words; a memory
        # derived from several people's messages vanishes, but their messages stay.
        for n in memories:
            if n.own:
                for pid in n.sources:
                    messages[(n.channel, pid)] = None
        per_memory = Counter(n.channel for n in memories)
        per_episode = Counter(n.channel for n in episodes)
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
        rowids = [n.rowid for n in episodes] + sorted(n.rowid for n in memories)
        ids = [n.id for n in episodes] + [n.id for n in memories]
        now = time.time()
        async with g.transaction():
            if channel is None:
                await _tombstone(g, "author", [author_id], now)
            else:
                await _tombstone(g, "author_in", [scoped_key(author_id, channel)], now)
            await _tombstone(g, "message", [pid for _, pid in messages], now)
            await delete_nodes(g, rowids, ids)
            for touched in sorted({n.channel for n in episodes}):
                await episode_index.recompute_contexts(g, touched)
        for r in rowids:
            g.unregister(r)
        still_named = await g.storage.author_workspaces(author_id)
        for workspace, table in g.names.items():
            if workspace not in still_named:
                for keys in table.values():
                    keys.discard(author_id)
        return report
