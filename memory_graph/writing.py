"""Writes: validated memory saves (with near-duplicate merging) and episode indexing."""

from __future__ import annotations

import asyncio
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
from .storage import MemoryRow, TextFilter
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
    if d.created_at is not None and (
        isinstance(d.created_at, bool)
        or not isinstance(d.created_at, int | float)
        or not math.isfinite(d.created_at)
        or not 0 < d.created_at <= time.time() + 60
    ):
        raise _fail("created_at", f"must be a time in the past, got {d.created_at!r}")


@dataclass(slots=True)
class _Plan:
    draft: MemoryDraft
    vector: np.ndarray
    sources: list[str]
    rowid: int = 0
    id: str = ""
    merge_into: int = 0
    edges: list[tuple[int, int, str, float]] = field(default_factory=list)


@dataclass(slots=True)
class PendingSave:
    """One caller's drafts waiting for the write lock (see :func:`save_many`)."""

    items: Sequence[MemoryDraft]
    vectors: np.ndarray
    result: list[SaveResult] | None = None
    error: Exception | None = None
    done: bool = False


async def save_many(g: MemoryGraph, items: Sequence[MemoryDraft]) -> list[SaveResult]:
    """Save ``items`` (one caller's drafts: all saved, or none and the error raised).

    Saves queue for the graph's write lock; whoever gets it writes every save queued
    by then in one transaction, and the others find theirs done.  Under a burst (many
    channels saving at once) that is one commit for the lot instead of one each.  A
    group that fails is written again caller by caller, so one caller's bad draft (a
    forgotten author, an unknown reference) never fails another's save.
    """
    if not items:
        return []
    for d in items:
        validate_draft(d)
    texts = [d.content for d in items]
    if sum(map(len, texts)) <= getattr(g.embedder, "inline_chars", 0):
        vecs = g.embedder.embed(texts)  # cheaper here than the hand-off (see Embedder)
    else:
        vecs = await asyncio.to_thread(g.embedder.embed, texts)
    mine = PendingSave(items, vecs)
    g.pending_saves.append(mine)
    try:
        async with g.lock:
            if not mine.done:
                await _save_group(g)
    finally:
        if not mine.done and mine in g.pending_saves:  # cancelled while it waited
            g.pending_saves.remove(mine)
    if mine.error is not None:
        raise mine.error
    assert mine.result is not None
    return mine.result


async def _save_group(g: MemoryGraph) -> None:
    """Under the write lock: write every queued save, together when they can be."""
    group = list(g.pending_saves)
    g.pending_saves.clear()
    try:
        if len(group) > 1 and await _save_together(g, group):
            return
        for p in group:
            try:
                p.result = await _save_locked(g, p.items, p.vectors)
            except Exception as exc:
                p.error = exc
            p.done = True
    except BaseException:
        # Cancelled mid-write (rolled back): the next holder of the lock writes the rest.
        g.pending_saves[:0] = [p for p in group if not p.done]
        raise


async def _save_together(g: MemoryGraph, group: list[PendingSave]) -> bool:
    """Write the whole group in one transaction; False (nothing written) if it failed."""
    try:
        results = await _save_locked(
            g, [d for p in group for d in p.items], np.concatenate([p.vectors for p in group])
        )
    except Exception:  # someone's draft is refused, or the write failed: one by one
        return False
    for p in group:
        p.result, results = results[: len(p.items)], results[len(p.items) :]
        p.done = True
    return True


async def _save_locked(
    g: MemoryGraph, items: Sequence[MemoryDraft], vecs: np.ndarray
) -> list[SaveResult]:
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
    known = await g.storage.briefs_by_id(refs)
    for d in items:
        checks = [("related_to", r) for r in d.related_to]
        if d.supersedes:
            checks.append(("supersedes", d.supersedes))
        for arg, ref in checks:
            hit = known.get(ref)
            if hit is None or not g.visible(d.channel, hit.channel):
                raise _fail(arg, f"no memory with id {ref!r}")
            if arg == "supersedes" and hit.type == "episode":
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
    exact: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for b in await g.storage.current_memories_by_hash(list(hashes)):
        exact[b.content_hash].append((b.rowid, b.channel, b.type))

    def knn() -> list[list[tuple[int, float]]]:
        # Unfiltered and batched: a near-duplicate (cosine >= 0.95) is among the few
        # nearest neighbours of the whole index; the scope check happens below.
        vectors = np.stack([p.vector for p in plans]).astype(np.float32)
        labels, sims = g.vectors.search_many(vectors, _DEDUPE_K, ef=_DEDUPE_EF)
        return [
            [(int(lb), float(s)) for lb, s in zip(lrow, srow, strict=True) if lb >= 0]
            for lrow, srow in zip(labels, sims, strict=True)
        ]

    if g.vectors_in_storage:
        found = await g.storage.nearest(
            np.stack([p.vector for p in plans]).astype(np.float32),
            _DEDUPE_K,
            g.embedder.identity,
            TextFilter(),
            ef=_DEDUPE_EF,
        )
        near = [[(lb, s) for lb, s in hits] for hits in found]
    else:
        near = await asyncio.to_thread(knn)
    cand = {lb for hits in near for lb, s in hits if s >= threshold}
    info: dict[int, tuple[str, str, str | None]] = {}
    if cand:
        briefs = await g.storage.briefs_by_rowid(cand)
        info = {r: (b.channel, b.type, b.superseded_by) for r, b in briefs.items()}
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
    await g.reserve_rowids(sum(p.merge_into == 0 for p in plans))
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
                found = await g.storage.episode_rowids(ch, pids)
                episodes.update({(ch, pid): r for pid, r in found.items()})
        ref_rows: dict[str, int] = {}
        refs = {r for p in plans for r in (*p.draft.related_to, p.draft.supersedes) if r}
        if refs:
            ref_rows = {i: b.rowid for i, b in (await g.storage.briefs_by_id(refs)).items()}
        rows: list[MemoryRow] = []
        edge_rows, supersede_rows = [], []
        for p in new:
            d = p.draft
            ws = workspace_of(d.channel)
            imp = DEFAULT_IMPORTANCE[d.memory_type] if d.importance is None else float(d.importance)
            words, ws_tag, ch_tag, ty_tag = fts_tags(ws, d.channel, d.memory_type, d.content, "")
            rows.append(
                MemoryRow(
                    rowid=p.rowid,
                    id=p.id,
                    type=d.memory_type,
                    content=d.content,
                    content_hash=content_hash(d.content),
                    importance=imp,
                    created_at=now if d.created_at is None else float(d.created_at),
                    channel=d.channel,
                    workspace=ws,
                    author_id=d.author_id,
                    sources=tuple(p.sources),
                    vector=p.vector,
                    embedder=g.embedder.identity,
                    terms=words,
                    workspace_tag=ws_tag,
                    channel_tag=ch_tag,
                    type_tag=ty_tag,
                )
            )
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
        if new and not g.vectors_in_storage:
            g.vector_room(len(new))
            labels = np.array([p.rowid for p in new], dtype=np.int64)
            matrix = np.stack([p.vector for p in new]).astype(np.float32)
            adding = asyncio.ensure_future(asyncio.to_thread(g.vectors.add, labels, matrix))
        try:
            async with g.transaction():
                await g.storage.insert_memories(rows)
                await g.storage.add_links(edge_rows)
                await g.storage.supersede(supersede_rows)
                for p in merges:
                    await _merge(g, p, now)
        finally:
            if adding is not None:
                await adding
    for p, row in zip(new, rows, strict=True):
        g.count_terms(row.terms)
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
    return (await g.storage.briefs_by_rowid([rowid]))[rowid].id


async def _merge(g: MemoryGraph, p: _Plan, now: float) -> None:
    """Fold ``p`` into its near-duplicate: raise importance, append new sources."""
    d = p.draft
    mine = DEFAULT_IMPORTANCE[d.memory_type] if d.importance is None else float(d.importance)
    await g.storage.merge_into(
        p.merge_into, lambda stored: min(1.0, max(stored, mine) + _MERGE_BUMP), p.sources, now
    )


def _mentioned(g: MemoryGraph, ws: str, content: str) -> set[int]:
    """Entity rows of ``ws`` whose name terms appear in ``content``."""
    table = g.names.get(ws)
    if not table:
        return set()
    return {
        int(key[1:]) for t in set(terms(content)) for key in table.get(t, ()) if key.startswith("#")
    }
