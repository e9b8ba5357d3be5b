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

from . import edges, schema
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
        await asyncio.to_thread(g.vectors.save, g.index_dir)
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
    marks = ",".join("?" * len(_DURABLE))
    async with g.db.execute(
        f"SELECT rowid, importance, accessed_at, current_importance FROM memory_nodes "
        f"WHERE type NOT IN ({marks})",
        _DURABLE,
    ) as cur:
        rows = await cur.fetchall()
    if not rows:
        return 0
    arr = np.array(rows, dtype=np.float64)
    idle = np.maximum(0.0, now - arr[:, 2])
    current = arr[:, 1] * np.power(0.5, idle / half_life)
    changed = np.abs(current - arr[:, 3]) > 1e-9
    updates = [(float(c), int(r)) for c, r in zip(current[changed], arr[changed, 0], strict=True)]
    await g.db.executemany(
        "UPDATE memory_nodes SET current_importance = ? WHERE rowid = ?", updates
    )
    return len(updates)


async def _prune(g: MemoryGraph, now: float) -> list[str]:
    cutoff = now - g.config.prune_age_days * 86400.0
    marks = ",".join("?" * len(_DURABLE))
    async with g.db.execute(
        f"SELECT rowid, id FROM memory_nodes WHERE type NOT IN ({marks}) "
        "AND current_importance < ? AND accessed_at < ? AND created_at < ?",
        (*_DURABLE, g.config.prune_importance, cutoff, cutoff),
    ) as cur:
        rows = [(int(r), str(i)) for r, i in await cur.fetchall()]
    if not rows:
        return []
    async with g.transaction():
        await delete_nodes(g, [r for r, _ in rows], [i for _, i in rows])
    for r, _ in rows:
        g.unregister(r)
    return [i for _, i in rows]


async def _associate(g: MemoryGraph, now: float) -> int:
    """Link memories changed since the last pass to highly similar memories of their scope."""
    since = float(await schema.get_meta(g.db, "associated_until") or 0.0)
    threshold = g.config.association_threshold
    async with g.db.execute(
        "SELECT rowid, channel, embedding FROM memory_nodes WHERE type != 'episode' "
        "AND updated_at >= ? AND embedding IS NOT NULL",
        (since,),
    ) as cur:
        rows = await cur.fetchall()

    def neighbours() -> list[tuple[int, int, float]]:
        out = []
        for rowid, channel, blob in rows:
            vec = np.frombuffer(blob, dtype=np.float32)
            labels, sims = g.vector_search(vec, _ASSOCIATE_K, channel)
            out += [
                (int(rowid), int(lb), float(s))
                for lb, s in zip(labels, sims, strict=True)
                if lb != rowid and s >= threshold
            ]
        return out

    pairs = await asyncio.to_thread(neighbours)
    if pairs:
        others = {b for _, b, _ in pairs}
        marks = ",".join("?" * len(others))
        async with g.db.execute(
            f"SELECT rowid FROM memory_nodes WHERE type != 'episode' AND rowid IN ({marks})",
            tuple(others),
        ) as cur:
            memories = {int(r) for (r,) in await cur.fetchall()}
        pairs = [(min(a, b), max(a, b), s) for a, b, s in pairs if b in memories]
        pairs = list({(a, b): (a, b, s) for a, b, s in pairs}.values())
        linked = await edges.existing(g.db, [(a, b) for a, b, _ in pairs], "related_to")
        pairs = [(a, b, s) for a, b, s in pairs if (a, b) not in linked]
    async with g.transaction():
        await g.db.executemany(
            "INSERT OR IGNORE INTO memory_edges (src, dst, type, weight, created_at) "
            "VALUES (?, ?, 'related_to', ?, ?)",
            [(a, b, s, now) for a, b, s in pairs],
        )
        await schema.set_meta(g.db, "associated_until", repr(time.time()))
    return len(pairs)
