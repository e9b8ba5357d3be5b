"""Episodes: archived raw messages indexed with their neighbouring turns as context."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tierbot.keys import workspace_of
from tierbot.messages import Message, Role

from . import tombstones
from .schema import fetch_all, marks
from .text import content_hash, embed_text, fts_tags, terms
from .types import MAX_CONTENT_BYTES

if TYPE_CHECKING:
    from .graph import MemoryGraph

# Tool calls and results (branch conclusions included) are the bot's machinery, not
# conversation: never episodes, like its progress notes (meta "progress").
_SKIPPED_ROLES = frozenset(
    {Role.SUMMARY, Role.MARKER, Role.SYSTEM, Role.TOOL_CALL, Role.TOOL_RESULT}
)
#: Neighbouring turns further apart than this are another conversation, not context.
CONTEXT_GAP_SECONDS = 6 * 3600.0
#: Turns on each side that an episode's context columns cover (1 "near", the rest "far").
CONTEXT_REACH = 4


def episode_id(channel: str, platform_id: str) -> str:
    digest = hashlib.blake2b(f"{channel}\0{platform_id}".encode(), digest_size=8).hexdigest()
    return f"ep_{digest}"


def _truncate(text: str) -> str:
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_CONTENT_BYTES:
        return text
    return data[:MAX_CONTENT_BYTES].decode("utf-8", "ignore")


def _contexts(seq: list[tuple[float, list[str]]]) -> list[tuple[str, str]]:
    """(near, far) term strings per turn: +-1 turn, and +-2..CONTEXT_REACH, within the gap."""
    out = []
    for i, (ts, _) in enumerate(seq):
        near: list[str] = []
        far: list[str] = []
        for off in range(-CONTEXT_REACH, CONTEXT_REACH + 1):
            if off == 0:
                continue
            j = i + off
            if 0 <= j < len(seq) and abs(seq[j][0] - ts) <= CONTEXT_GAP_SECONDS:
                (near if abs(off) == 1 else far).extend(seq[j][1])
        out.append((" ".join(near), " ".join(far)))
    return out


#: memory_meta key of the live indexer's high-water mark: every stored message with an id
#: at or below it has been considered for indexing (indexed, or skipped by rule).
INDEXED_UPTO = "indexed_upto"


@dataclass(slots=True)
class _Plan:
    """One channel's new episodes, prepared off the lock-free path, written in one go."""

    channel: str
    workspace: str
    new: list[Message]
    rowids: list[int]
    node_rows: list[tuple[Any, ...]]
    fts_rows: list[tuple[Any, ...]]
    ctx_rows: list[tuple[str, str, int]]
    edges: list[tuple[int, int, str, float, float]]
    vecs: np.ndarray


async def add_episodes(
    g: MemoryGraph, messages: Sequence[Message], *, indexed_upto: int | None = None
) -> int:
    msgs = [
        m
        for m in messages
        if m.role not in _SKIPPED_ROLES and m.text.strip() and not m.meta.get("progress")
    ]
    if not msgs and indexed_upto is None:
        return 0
    authors = {m.author_id for m in msgs if m.author_id}
    async with g.lock:  # tombstones checked under the lock forget() takes
        stones = await tombstones.tombstoned(g, authors, {m.platform_id for m in msgs})
        by_channel: dict[str, list[Message]] = defaultdict(list)
        for m in msgs:
            forgotten_at = stones.author_forgotten_at(g, m.author_id, m.channel)
            if m.platform_id not in stones.pids and m.ts > (
                -math.inf if forgotten_at is None else forgotten_at
            ):
                by_channel[m.channel].append(m)
        plans: list[_Plan] = []
        with g.allocating_rowids() as new_rowid:
            for channel, group in by_channel.items():
                plan = await _plan_channel(g, channel, group, new_rowid)
                if plan is not None:
                    plans.append(plan)
            if not plans and indexed_upto is None:
                return 0
            # Every channel's episodes and the mark that covers them commit together: after a
            # crash the mark never claims a message whose episode was not written.
            async with g.transaction():
                for plan in plans:
                    await _write_plan(g, plan)
                if indexed_upto is not None:
                    await g.db.execute(
                        "INSERT INTO memory_meta (key, value) VALUES (?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = "
                        "MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                        (INDEXED_UPTO, int(indexed_upto)),
                    )
        for plan in plans:
            await _apply_plan(g, plan)
    return sum(len(p.new) for p in plans)


async def indexed_upto(g: MemoryGraph) -> int:
    """The live indexer's high-water mark (0 when it never ran)."""
    async with g.db.execute("SELECT value FROM memory_meta WHERE key = ?", (INDEXED_UPTO,)) as cur:
        row = await cur.fetchone()
    return int(row[0]) if row is not None else 0


async def _plan_channel(
    g: MemoryGraph, channel: str, msgs: list[Message], new_rowid: Callable[[], int]
) -> _Plan | None:
    pids = list(dict.fromkeys(m.platform_id for m in msgs))
    have: set[str] = set()
    for start in range(0, len(pids), 500):
        chunk = pids[start : start + 500]
        rows = await fetch_all(
            g.db,
            "SELECT platform_id FROM memory_nodes WHERE channel = ? "
            f"AND platform_id IN ({marks(len(chunk))})",
            [channel, *chunk],
        )
        have.update(r[0] for r in rows)
    fresh: dict[str, Message] = {}
    for m in sorted(msgs, key=lambda m: (m.ts, m.id)):
        if m.platform_id not in have and m.platform_id not in fresh:
            fresh[m.platform_id] = m
    if not fresh:
        return None
    new = list(fresh.values())
    prev = await fetch_all(
        g.db,
        "SELECT rowid, created_at, content, author_name FROM memory_nodes "
        "WHERE channel = ? AND type = 'episode' ORDER BY rowid DESC LIMIT ?",
        [channel, 2 * CONTEXT_REACH],
    )
    prev.reverse()
    ws = workspace_of(channel)

    def prepare() -> tuple[list[tuple[str, str]], np.ndarray, list[tuple[str, str, str, str]]]:
        # Tokenising, stemming and embedding are CPU work: off the event loop, so
        # indexing never stalls the channels' turns.
        seq = [(ts, terms(f"{name} {content}")) for _, ts, content, name in prev]
        seq += [(m.ts, terms(f"{m.author_name} {m.text}")) for m in new]
        texts = [embed_text("episode", _truncate(m.text), m.author_name) for m in new]
        tags = [fts_tags(ws, channel, "episode", _truncate(m.text), m.author_name) for m in new]
        return _contexts(seq), g.embedder.embed(texts), tags

    contexts, vecs, tags = await asyncio.to_thread(prepare)
    now = time.time()
    node_rows, fts_rows = [], []
    rowids = []
    for k, m in enumerate(new):
        rowid = new_rowid()
        rowids.append(rowid)
        near, far = contexts[len(prev) + k]
        text = _truncate(m.text)
        node_rows.append(
            (
                rowid,
                episode_id(channel, m.platform_id),
                text,
                content_hash(text),
                m.ts,
                m.ts,
                now,
                channel,
                ws,
                m.author_id,
                m.author_name,
                m.platform_id,
                json.dumps([m.platform_id]),
                near,
                far,
                vecs[k].tobytes(),
                g.embedder.identity,
            )
        )
        fts_rows.append((rowid, *tags[k], near, far))
    first = max(0, len(prev) - CONTEXT_REACH)
    ctx_rows = [(*contexts[k], prev[k][0]) for k in range(first, len(prev))]
    derived = []
    for part in chunked(list(fresh), 500):
        chunk = list(part)
        derived += await fetch_all(
            g.db,
            "SELECT node, platform_id FROM memory_sources WHERE channel = ? "
            f"AND platform_id IN ({marks(len(chunk))})",
            [channel, *chunk],
        )
    rowid_of = {m.platform_id: r for m, r in zip(new, rowids, strict=True)}
    edges = [(node, rowid_of[pid], "derived_from", 1.0, now) for node, pid in derived]
    return _Plan(channel, ws, new, rowids, node_rows, fts_rows, ctx_rows, edges, vecs)


async def _write_plan(g: MemoryGraph, plan: _Plan) -> None:
    """The plan's rows, inside the caller's transaction."""
    await g.db.executemany(
        "INSERT INTO memory_nodes (rowid, id, type, content, content_hash, importance, "
        "current_importance, created_at, updated_at, accessed_at, channel, workspace, "
        "author_id, author_name, platform_id, sources, near_text, far_text, embedding, "
        "embedder) VALUES (?, ?, 'episode', ?, ?, 0.5, 0.5, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?)",
        plan.node_rows,
    )
    await g.db.executemany(
        "INSERT INTO memory_fts (rowid, terms, ws, ch, ty, near, far) VALUES (?, ?, ?, ?, ?, ?, ?)",
        plan.fts_rows,
    )
    await g.db.executemany(
        "UPDATE memory_nodes SET near_text = ?, far_text = ? WHERE rowid = ?", plan.ctx_rows
    )
    await g.db.executemany("UPDATE memory_fts SET near = ?, far = ? WHERE rowid = ?", plan.ctx_rows)
    await g.db.executemany(
        "INSERT OR IGNORE INTO memory_edges (src, dst, type, weight, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        plan.edges,
    )


async def _apply_plan(g: MemoryGraph, plan: _Plan) -> None:
    """After the commit: the in-memory views learn the new rows.

    Episodes stay out of the in-RAM vector index: one per message, they would make the
    process grow with the whole history.  Their vectors live in SQLite and recall scores
    its text candidates with them (see recall.py)."""
    for m, rowid, fts_row in zip(plan.new, plan.rowids, plan.fts_rows, strict=True):
        g.count_terms(fts_row[1], fts_row[5], fts_row[6])
        g.register(rowid, plan.workspace, plan.channel, vectorized=False)
        if m.author_name:
            g.add_name(plan.workspace, m.author_name, m.author_id)


async def catch_up_vectors(g: MemoryGraph, since: int) -> None:
    """Add to the vector index every memory with rowid > ``since``; re-embed stale rows,
    episodes included (their vectors stay in SQLite only)."""
    identity = g.embedder.identity
    last = since
    while True:
        rows = await fetch_all(
            g.db,
            "SELECT rowid, embedding, embedder, type, content, author_name FROM memory_nodes "
            "WHERE rowid > ? AND (type != 'episode' OR embedder != ? OR embedding IS NULL) "
            "ORDER BY rowid LIMIT 20000",
            [last, identity],
        )
        if not rows:
            return
        last = rows[-1][0]
        stale = [r for r in rows if r[2] != identity or r[1] is None]
        fresh_vecs: dict[int, np.ndarray] = {}
        if stale:
            texts = [embed_text(t, c, n) for _, _, _, t, c, n in stale]
            mat = await asyncio.to_thread(g.embedder.embed, texts)
            fresh_vecs = {r[0]: v for r, v in zip(stale, mat, strict=True)}
            if not g.read_only:
                await g.db.executemany(
                    "UPDATE memory_nodes SET embedding = ?, embedder = ? WHERE rowid = ?",
                    [(v.tobytes(), identity, r) for r, v in fresh_vecs.items()],
                )
        rows = [r for r in rows if r[3] != "episode"]
        if not rows:
            continue
        labels = np.array([r[0] for r in rows], dtype=np.int64)
        matrix = np.stack([fresh_vecs[r[0]] if r[0] in fresh_vecs else _vec(r[1]) for r in rows])
        await asyncio.to_thread(g.vectors.add, labels, matrix)


def _vec(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32)


def chunked(seq: Sequence[Any], n: int) -> Iterable[Sequence[Any]]:
    """Consecutive slices of ``seq`` of at most ``n`` items."""
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


async def recompute_contexts(g: MemoryGraph, channel: str) -> int:
    """Recompute every episode's neighbour context in ``channel`` (after deletions).

    A forgotten message must not live on inside its neighbours' ``near``/``far``
    columns; only rows whose context changed are rewritten.  Runs inside the
    caller's transaction.
    """
    rows = await fetch_all(
        g.db,
        "SELECT rowid, created_at, content, author_name, near_text, far_text FROM memory_nodes "
        "WHERE channel = ? AND type = 'episode' ORDER BY rowid",
        [channel],
    )
    seq = [(ts, terms(f"{name} {content}")) for _, ts, content, name, _, _ in rows]
    changed = [
        (near, far, row[0])
        for row, (near, far) in zip(rows, _contexts(seq), strict=True)
        if (near, far) != (row[4], row[5])
    ]
    await g.db.executemany(
        "UPDATE memory_nodes SET near_text = ?, far_text = ? WHERE rowid = ?", changed
    )
    await g.db.executemany("UPDATE memory_fts SET near = ?, far = ? WHERE rowid = ?", changed)
    return len(changed)
