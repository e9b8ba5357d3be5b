"""Writes: validated memory saves (with near-duplicate merging) and episode indexing."""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tierbot.errors import ToolError
from tierbot.keys import workspace_of

from . import tombstones
from .schema import fetch_all, marks
from .text import content_hash, fts_tags, terms
from .types import DEFAULT_IMPORTANCE, MAX_CONTENT_BYTES, SAVABLE_TYPES, MemoryDraft, SaveResult

if TYPE_CHECKING:
    from .graph import MemoryGraph

_MERGE_BUMP = 0.05
_DEDUPE_K = 8
_DEDUPE_EF = 32


def _fail(argument: str, message: str) -> ToolError:
    return ToolError(f"{argument}: {message}", tool="memory_save", argument=argument)


def validate_draft(d: MemoryDraft) -> None:
    """Check one draft's own fields; raises ToolError naming the bad argument."""
    if not isinstance(d.content, str) or not d.content.strip():
        raise _fail("content", "must be a non-empty string")
    size = len(d.content.encode("utf-8", "surrogatepass"))
    if size > MAX_CONTENT_BYTES:
        raise _fail("content", f"is {size} bytes; the limit is {MAX_CONTENT_BYTES}, shorten it")
    if d.memory_type not in SAVABLE_TYPES:
        raise _fail("memory_type", f"must be one of {', '.join(SAVABLE_TYPES)}")
    if d.importance is not None:
        if isinstance(d.importance, bool) or not isinstance(d.importance, int | float):
            raise _fail("importance", "must be a number between 0 and 1")
        if not (0.0 <= float(d.importance) <= 1.0) or math.isnan(d.importance):
            raise _fail("importance", f"must be between 0 and 1, got {d.importance}")
    if not isinstance(d.channel, str) or not d.channel:
        raise _fail("channel", "must name the channel the memory comes from")
    if d.supersedes is not None and (not isinstance(d.supersedes, str) or not d.supersedes):
        raise _fail("supersedes", "must be a memory id")
    for r in d.related_to:
        if not isinstance(r, str) or not r:
            raise _fail("related_to", "must be a list of memory ids")
    for s in d.sources:
        if not isinstance(s, str) or not s:
            raise _fail("sources", "must be a list of platform message ids")


@dataclass(slots=True)
class _Plan:
    draft: MemoryDraft
    vector: np.ndarray
    sources: list[str]
    rowid: int = 0
    id: str = ""
    merge_into: int = 0
    edges: list[tuple[int, int, str, float]] = field(default_factory=list)


async def save_many(g: MemoryGraph, items: Sequence[MemoryDraft]) -> list[SaveResult]:
    if not items:
        return []
    for d in items:
        validate_draft(d)
    vecs = await asyncio.to_thread(g.embedder.embed, [d.content for d in items])
    async with g.lock:
        # Checked under the write lock: a forget() cannot slip in between the tombstone
        # check and the write, and a referenced memory cannot vanish before its edge lands.
        await _check_references(g, items)
        plans = await _live_plans(g, items, vecs)
        await _dedupe(g, plans)
        return await _write(g, plans)


async def _check_references(g: MemoryGraph, items: Sequence[MemoryDraft]) -> None:
    refs = {r for d in items for r in (*d.related_to, *([d.supersedes] if d.supersedes else []))}
    if not refs:
        return
    rows = await fetch_all(
        g.db,
        f"SELECT id, rowid, channel, type FROM memory_nodes WHERE id IN ({marks(len(refs))})",
        list(refs),
    )
    known = {i: (r, ch, t) for i, r, ch, t in rows}
    for d in items:
        checks = [("related_to", r) for r in d.related_to]
        if d.supersedes:
            checks.append(("supersedes", d.supersedes))
        for arg, ref in checks:
            hit = known.get(ref)
            if hit is None or not g.visible(d.channel, hit[1]):
                raise _fail(arg, f"no memory with id {ref!r}")
            if arg == "supersedes" and hit[2] == "episode":
                raise _fail(arg, f"{ref!r} is an archived message; only memories can be superseded")


async def _live_plans(
    g: MemoryGraph, items: Sequence[MemoryDraft], vecs: np.ndarray
) -> list[_Plan]:
    """Plans for the drafts, forgotten sources dropped; refuses drafts that were forgotten."""
    stones = await tombstones.tombstoned(
        g, {d.author_id for d in items if d.author_id}, {s for d in items for s in d.sources}
    )
    plans = []
    for d, vec in zip(items, vecs, strict=True):
        if d.author_id and stones.author_forgotten_at(g, d.author_id, d.channel) is not None:
            raise _fail("author_id", f"author {d.author_id!r} was forgotten; nothing is saved")
        live = [s for s in dict.fromkeys(d.sources) if s not in stones.pids]
        if d.sources and not live:
            raise _fail("sources", "every source message was forgotten; nothing is saved")
        plans.append(_Plan(draft=d, vector=vec, sources=live))
    return plans


async def _dedupe(g: MemoryGraph, plans: list[_Plan]) -> None:
    """Point each plan at an existing (or earlier in-batch) near-duplicate to merge into."""
    threshold = g.config.dedupe_threshold
    hashes = {content_hash(p.draft.content): p for p in plans}
    rows = await fetch_all(
        g.db,
        "SELECT rowid, content_hash, channel, type FROM memory_nodes WHERE superseded_by IS NULL "
        f"AND type != 'episode' AND content_hash IN ({marks(len(hashes))})",
        list(hashes),
    )
    exact: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for rowid, h, ch, typ in rows:
        exact[h].append((rowid, ch, typ))

    def knn() -> list[list[tuple[int, float]]]:
        # Unfiltered and batched: a near-duplicate (cosine >= 0.95) is among the few
        # nearest neighbours of the whole index; the scope check happens below.
        vectors = np.stack([p.vector for p in plans]).astype(np.float32)
        labels, sims = g.vectors.search_many(vectors, _DEDUPE_K, ef=_DEDUPE_EF)
        return [
            [(int(lb), float(s)) for lb, s in zip(lrow, srow, strict=True) if lb >= 0]
            for lrow, srow in zip(labels, sims, strict=True)
        ]

    near = await asyncio.to_thread(knn)
    cand = {lb for hits in near for lb, s in hits if s >= threshold}
    info: dict[int, tuple[str, str, str | None]] = {}
    if cand:
        rows = await fetch_all(
            g.db,
            "SELECT rowid, channel, type, superseded_by FROM memory_nodes "
            f"WHERE rowid IN ({marks(len(cand))})",
            list(cand),
        )
        info = {r: (ch, t, sup) for r, ch, t, sup in rows}
    batch_twins = _twins(np.stack([p.vector for p in plans]), threshold)
    for i, p in enumerate(plans):
        d = p.draft
        if d.supersedes:
            continue
        for rowid, ch, typ in exact.get(content_hash(d.content), []):
            if typ == d.memory_type and g.visible(d.channel, ch):
                p.merge_into = rowid
                break
        for lb, sim in near[i]:
            if p.merge_into or sim < threshold or lb not in info:
                continue
            ch, typ, sup = info[lb]
            if typ == d.memory_type and sup is None and g.visible(d.channel, ch):
                p.merge_into = lb
        if p.merge_into:
            continue
        for j in batch_twins[i]:  # an earlier item of the same batch
            q = plans[j]
            if (
                q.draft.memory_type == d.memory_type
                and not q.draft.supersedes
                and g.visible(d.channel, q.draft.channel)
            ):
                p.merge_into = q.merge_into or -(j + 1)
                break


def _twins(vectors: np.ndarray, threshold: float) -> list[list[int]]:
    """For each batch item, the earlier items at least ``threshold`` similar to it."""
    out: list[list[int]] = [[] for _ in range(len(vectors))]
    for start in range(0, len(vectors), 1024):
        sims = vectors[start : start + 1024] @ vectors.T
        for a, b in zip(*np.nonzero(sims >= threshold), strict=True):
            i = start + int(a)
            if int(b) < i:
                out[i].append(int(b))
    return out


async def _write(g: MemoryGraph, plans: list[_Plan]) -> list[SaveResult]:
    now = time.time()
    with g.allocating_rowids() as new_rowid:
        by_ref: dict[int, _Plan] = {}
        for i, p in enumerate(plans):
            if p.merge_into == 0:
                p.rowid = new_rowid()
                prefix = "ent" if p.draft.memory_type == "entity" else "mem"
                p.id = f"{prefix}_{secrets.token_hex(8)}"
            by_ref[-(i + 1)] = p
        for p in plans:  # in-batch merges point at the earlier plan's new row
            if p.merge_into < 0:
                p.merge_into = by_ref[p.merge_into].rowid
        new = [p for p in plans if p.merge_into == 0]
        merges = [p for p in plans if p.merge_into]
        pids_by_channel: dict[str, set[str]] = defaultdict(set)
        for p in new:
            pids_by_channel[p.draft.channel].update(p.sources)
        episodes: dict[tuple[str, str], int] = {}
        for ch, pids in pids_by_channel.items():
            if pids:
                rows = await fetch_all(
                    g.db,
                    "SELECT rowid, platform_id FROM memory_nodes WHERE channel = ? "
                    f"AND platform_id IN ({marks(len(pids))})",
                    [ch, *pids],
                )
                episodes.update({(ch, pid): r for r, pid in rows})
        ref_rows: dict[str, int] = {}
        refs = {r for p in plans for r in (*p.draft.related_to, p.draft.supersedes) if r}
        if refs:
            rows = await fetch_all(
                g.db,
                f"SELECT id, rowid FROM memory_nodes WHERE id IN ({marks(len(refs))})",
                list(refs),
            )
            ref_rows = dict(rows)
        node_rows, fts_rows, src_rows, edge_rows, supersede_rows = [], [], [], [], []
        for p in new:
            d = p.draft
            ws = workspace_of(d.channel)
            imp = DEFAULT_IMPORTANCE[d.memory_type] if d.importance is None else float(d.importance)
            node_rows.append(
                (
                    p.rowid,
                    p.id,
                    d.memory_type,
                    d.content,
                    content_hash(d.content),
                    imp,
                    imp,
                    now,
                    now,
                    now,
                    d.channel,
                    ws,
                    d.author_id,
                    json.dumps(p.sources),
                    p.vector.astype(np.float32).tobytes(),
                    g.embedder.identity,
                )
            )
            fts_rows.append((p.rowid, *fts_tags(ws, d.channel, d.memory_type, d.content, "")))
            src_rows += [(p.rowid, d.channel, s, k) for k, s in enumerate(p.sources)]
            p.edges += [(p.rowid, ref_rows[r], "related_to", 1.0) for r in d.related_to]
            if d.supersedes:
                p.edges.append((p.rowid, ref_rows[d.supersedes], "updates", 1.0))
                supersede_rows.append((p.id, ref_rows[d.supersedes]))
            p.edges += [
                (p.rowid, episodes[(d.channel, s)], "derived_from", 1.0)
                for s in p.sources
                if (d.channel, s) in episodes
            ]
            p.edges += [(p.rowid, e, "mentions", 1.0) for e in _mentioned(g, ws, d.content)]
            edge_rows += [(*e, now) for e in p.edges]
        # The vector index is filled while SQLite writes (both release the GIL).  Should the
        # transaction fail, the labels hold vectors of rows that do not exist: invisible to
        # searches (unregistered) and overwritten when the labels are handed out again.
        adding = None
        if new:
            g.vector_room(len(new))
            labels = np.array([p.rowid for p in new], dtype=np.int64)
            matrix = np.stack([p.vector for p in new]).astype(np.float32)
            adding = asyncio.ensure_future(asyncio.to_thread(g.vectors.add, labels, matrix))
        try:
            async with g.transaction():
                await g.db.executemany(
                    "INSERT INTO memory_nodes (rowid, id, type, content, content_hash, importance, "
                    "current_importance, created_at, updated_at, accessed_at, channel, workspace, "
                    "author_id, sources, embedding, embedder) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    node_rows,
                )
                await g.db.executemany(
                    "INSERT INTO memory_fts (rowid, terms, ws, ch, ty) VALUES (?, ?, ?, ?, ?)",
                    fts_rows,
                )
                await g.db.executemany(
                    "INSERT OR IGNORE INTO memory_sources (node, channel, platform_id, rank) "
                    "VALUES (?, ?, ?, ?)",
                    src_rows,
                )
                await g.db.executemany(
                    "INSERT OR IGNORE INTO memory_edges (src, dst, type, weight, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    edge_rows,
                )
                await g.db.executemany(
                    "UPDATE memory_nodes SET superseded_by = ?, updated_at = updated_at "
                    "WHERE rowid = ?",
                    supersede_rows,
                )
                for p in merges:
                    await _merge(g, p, now)
        finally:
            if adding is not None:
                await adding
    for p, fts_row in zip(new, fts_rows, strict=True):
        g.count_terms(fts_row[1])
        g.register(p.rowid, workspace_of(p.draft.channel), p.draft.channel)
        if p.draft.memory_type == "entity":
            g.add_name(workspace_of(p.draft.channel), p.draft.content, f"#{p.rowid}")
    ids = {p.rowid: p.id for p in new}
    for p in merges:
        if p.merge_into not in ids:
            ids[p.merge_into] = await _id_of(g, p.merge_into)
    return [
        SaveResult(id=ids[p.rowid] if p.rowid else ids[p.merge_into], merged=bool(p.merge_into))
        for p in plans
    ]


async def _id_of(g: MemoryGraph, rowid: int) -> str:
    rows = await fetch_all(g.db, "SELECT id FROM memory_nodes WHERE rowid = ?", [rowid])
    return str(rows[0][0])


async def _merge(g: MemoryGraph, p: _Plan, now: float) -> None:
    """Fold ``p`` into its near-duplicate: raise importance, append new sources."""
    rows = await fetch_all(
        g.db,
        "SELECT importance, sources, channel FROM memory_nodes WHERE rowid = ?",
        [p.merge_into],
    )
    imp, sources_json, channel = rows[0]
    d = p.draft
    mine = DEFAULT_IMPORTANCE[d.memory_type] if d.importance is None else float(d.importance)
    raised = min(1.0, max(float(imp), mine) + _MERGE_BUMP)
    sources = json.loads(sources_json)
    added = [s for s in p.sources if s not in sources]
    await g.db.execute(
        "UPDATE memory_nodes SET importance = ?, current_importance = ?, updated_at = ?, "
        "sources = ? WHERE rowid = ?",
        (raised, raised, now, json.dumps(sources + added), p.merge_into),
    )
    await g.db.executemany(
        "INSERT OR IGNORE INTO memory_sources (node, channel, platform_id, rank) "
        "VALUES (?, ?, ?, ?)",
        [(p.merge_into, channel, s, len(sources) + k) for k, s in enumerate(added)],
    )


def _mentioned(g: MemoryGraph, ws: str, content: str) -> set[int]:
    """Entity rows of ``ws`` whose name terms appear in ``content``."""
    table = g.names.get(ws)
    if not table:
        return set()
    return {
        int(key[1:]) for t in set(terms(content)) for key in table.get(t, ()) if key.startswith("#")
    }
