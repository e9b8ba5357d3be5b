"""Periodic upkeep: importance decay, pruning of faded memories, association edges.

Decay is recomputed from the stored base importance and the time since last access
(current = base * 0.5 ** (idle / half_life)), so running it twice changes nothing.
Identity memories, entity anchors and episodes never decay and are never pruned:
episodes are the archive's raw words, which the graph does not throw away.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import numpy as np
import structlog

from . import edges
from .tombstones import delete_nodes
from .types import MaintenanceReport

if TYPE_CHECKING:
    from .graph import MemoryGraph

log = structlog.get_logger("tierbot.memory")

_DURABLE = ("episode", "identity", "entity")
_ASSOCIATE_K = 8


async def run(g: MemoryGraph, now: float) -> MaintenanceReport:
    async with g.lock:
        await g.flush_access()
        decayed = await _decay(g, now)
        pruned_ids = await _prune(g, now)
        associated = await _associate(g, now)
        await g.save_vectors()
    report = MaintenanceReport(
        decayed=decayed,
        pruned=len(pruned_ids),
        associated=associated,
        index_saved=True,
        pruned_ids=tuple(pruned_ids),
    )
    log.info("memory.maintenance", decayed=decayed, pruned=len(pruned_ids), associated=associated)
    return report


async def _decay(g: MemoryGraph, now: float) -> int:
    half_life = g.config.decay_half_life_days * 86400.0
    rows = await g.storage.importance_rows(_DURABLE)
    if not rows:
        return 0
    arr = np.array(
        [(r.rowid, r.importance, r.accessed_at, r.current_importance) for r in rows],
        dtype=np.float64,
    )
    idle = np.maximum(0.0, now - arr[:, 2])
    current = arr[:, 1] * np.power(0.5, idle / half_life)
    changed = np.abs(current - arr[:, 3]) > 1e-9
    updates = [(float(c), int(r)) for c, r in zip(current[changed], arr[changed, 0], strict=True)]
    await g.storage.set_current_importance(updates)
    return len(updates)


async def _prune(g: MemoryGraph, now: float) -> list[str]:
    cutoff = now - g.config.prune_age_days * 86400.0
    rows = await g.storage.prunable(_DURABLE, g.config.prune_importance, cutoff)
    if not rows:
        return []
    async with g.transaction():
        await delete_nodes(g, [r for r, _ in rows], [i for _, i in rows])
    for r, _ in rows:
        g.unregister(r)
    return [i for _, i in rows]


async def _associate(g: MemoryGraph, now: float) -> int:
    """Link memories changed since the last pass to highly similar memories of their scope."""
    since = float(await g.storage.get_meta("associated_until") or 0.0)
    threshold = g.config.association_threshold
    rows = await g.storage.memory_vectors_since(since)

    def neighbours() -> list[tuple[int, int, float]]:
        out = []
        for row in rows:
            labels, sims = g.vector_search(row.vector, _ASSOCIATE_K, row.channel)
            out += [
                (row.rowid, int(lb), float(s))
                for lb, s in zip(labels, sims, strict=True)
                if lb != row.rowid and s >= threshold
            ]
        return out

    if g.vectors_in_storage:
        pairs = []
        for row in rows:
            labels, sims = await g.nearest(row.vector, _ASSOCIATE_K, row.channel)
            pairs += [
                (row.rowid, int(lb), float(s))
                for lb, s in zip(labels, sims, strict=True)
                if lb != row.rowid and s >= threshold
            ]
    else:
        pairs = await asyncio.to_thread(neighbours)
    if pairs:
        memories = await g.storage.memory_rowids({b for _, b, _ in pairs})
        pairs = [(min(a, b), max(a, b), s) for a, b, s in pairs if b in memories]
        pairs = list({(a, b): (a, b, s) for a, b, s in pairs}.values())
        linked = await edges.existing(g.storage, [(a, b) for a, b, _ in pairs], "related_to")
        pairs = [(a, b, s) for a, b, s in pairs if (a, b) not in linked]
    async with g.transaction():
        await g.storage.add_links([(a, b, "related_to", s, now) for a, b, s in pairs])
        await g.storage.set_meta("associated_until", repr(time.time()))
    return len(pairs)
