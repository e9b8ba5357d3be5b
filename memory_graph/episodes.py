"""Episodes: archived raw messages indexed with their neighbouring turns as context."""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierbot.keys import workspace_of
from tierbot.messages import Message, Role

from . import tombstones
from .storage import EpisodeContext, EpisodeRow
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


@dataclass(slots=True)
class _Plan:
    """One channel's new episodes, prepared off the lock-free path, written in one go."""

    channel: str
    workspace: str
    new: list[Message]
    rows: list[EpisodeRow]
    ctx_rows: list[tuple[str, str, int]]
    edges: list[tuple[int, int, str, float, float]]


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
    # Tombstones are checked under the lock forget() takes.  On a shared store, one
    # process at a time: two processes indexing the same messages would both write
    # their episodes (the live indexers read one log; a compaction job indexes too).
    async with g.lock, g.storage.exclusive("episodes"):
        stones = await tombstones.tombstoned(g, authors, {m.platform_id for m in msgs})
        by_channel: dict[str, list[Message]] = defaultdict(list)
        for m in msgs:
            forgotten_at = stones.author_forgotten_at(g, m.author_id, m.channel)
            if m.platform_id not in stones.pids and m.ts > (
                -math.inf if forgotten_at is None else forgotten_at
            ):
                by_channel[m.channel].append(m)
        drafts = await _read_channels(g, by_channel)
        plans: list[_Plan] = []
        await g.reserve_rowids(sum(len(d.new) for d in drafts))
        with g.allocating_rowids() as new_rowid:
            for draft in drafts:  # rowids in channel order
                plans.append(_plan_channel(g, draft, new_rowid))
            if not plans and indexed_upto is None:
                return 0
            # Every channel's episodes and the mark that covers them commit together: after a
            # crash the mark never claims a message whose episode was not written.
            write = asyncio.ensure_future(
                g.storage.write_episodes(
                    [r for p in plans for r in p.rows],
                    [c for p in plans for c in p.ctx_rows],
                    [e for p in plans for e in p.edges],
                    indexed_upto,
                )
            )
            cancelled = await _settled(write)
        for plan in plans:
            await _apply_plan(g, plan)
        if cancelled:
            raise asyncio.CancelledError
    return sum(len(p.new) for p in plans)


async def _settled(write: asyncio.Future[None]) -> bool:
    """Wait for ``write`` to end even if the caller is cancelled meanwhile (whether it was),
    raising what the write raised.  Once sent, a batch is SQLite's to commit or roll back:
    the rowids handed out and the in-memory views must follow what it did, not the
    caller's cancellation."""
    cancelled = False
    while True:
        try:
            await asyncio.shield(write)
            return cancelled
        except asyncio.CancelledError:
            if write.cancelled():
                raise
            cancelled = True


async def indexed_upto(g: MemoryGraph) -> int:
    """The live indexer's high-water mark (0 when it never ran)."""
    return await g.storage.indexed_upto()


#: An episode's full-text tags: its words, then its workspace, channel and type tags.
Tags = tuple[str, str, str, str]


@dataclass(slots=True)
class _Draft:
    """What one channel's new episodes need from storage and the embedder."""

    channel: str
    new: list[Message]
    prev: list[EpisodeContext]
    contexts: list[tuple[str, str]]
    vecs: np.ndarray
    tags: list[Tags]
    derived: list[tuple[int, str]]


async def _read_channels(g: MemoryGraph, by_channel: dict[str, list[Message]]) -> list[_Draft]:
    """Each channel's messages not indexed yet, with their contexts, vectors and tags
    (channels whose messages are all indexed already are left out).

    Every channel of the batch in one lookup per table and one trip to a thread: a busy
    server's batch spans hundreds of channels, and a few round trips per channel cost
    more than the indexing itself."""
    have = await g.storage.episode_platform_ids(
        [(channel, m.platform_id) for channel, msgs in by_channel.items() for m in msgs]
    )
    fresh_by: dict[str, list[Message]] = {}
    for channel, msgs in by_channel.items():
        fresh: dict[str, Message] = {}
        for m in sorted(msgs, key=lambda m: (m.ts, m.id)):
            if (channel, m.platform_id) not in have and m.platform_id not in fresh:
                fresh[m.platform_id] = m
        if fresh:
            fresh_by[channel] = list(fresh.values())
    if not fresh_by:
        return []
    prev_by = await g.storage.latest_episodes(list(fresh_by), 2 * CONTEXT_REACH)

    def prepare() -> list[tuple[list[tuple[str, str]], np.ndarray, list[Tags]]]:
        # Tokenising, stemming and embedding are CPU work: off the event loop, so
        # indexing never stalls the channels' turns.
        out: list[tuple[list[tuple[str, str]], list[Tags]]] = []
        texts: list[str] = []
        for channel, new in fresh_by.items():
            ws = workspace_of(channel)
            prev = prev_by.get(channel, [])
            seq = [(p.created_at, terms(f"{p.author_name} {p.content}")) for p in prev]
            seq += [(m.ts, terms(f"{m.author_name} {m.text}")) for m in new]
            texts += [embed_text("episode", _truncate(m.text), m.author_name) for m in new]
            tags = [fts_tags(ws, channel, "episode", _truncate(m.text), m.author_name) for m in new]
            out.append((_contexts(seq), tags))
        vecs = g.embedder.embed(texts)
        bounds = np.cumsum([0, *(len(new) for new in fresh_by.values())])
        return [
            (contexts, vecs[bounds[i] : bounds[i + 1]], tags)
            for i, (contexts, tags) in enumerate(out)
        ]

    prepared = await asyncio.to_thread(prepare)
    derived_by: dict[str, list[tuple[int, str]]] = defaultdict(list)
    cited = [(channel, m.platform_id) for channel, new in fresh_by.items() for m in new]
    for node, channel, pid in await g.storage.sources_citing(cited):
        derived_by[channel].append((node, pid))
    return [
        _Draft(channel, new, prev_by.get(channel, []), contexts, vecs, tags, derived_by[channel])
        for (channel, new), (contexts, vecs, tags) in zip(fresh_by.items(), prepared, strict=True)
    ]


def _plan_channel(g: MemoryGraph, draft: _Draft, new_rowid: Callable[[], int]) -> _Plan:
    channel, new, prev, contexts = draft.channel, draft.new, draft.prev, draft.contexts
    ws = workspace_of(channel)
    now = time.time()
    rows = []
    for k, m in enumerate(new):
        near, far = contexts[len(prev) + k]
        text = _truncate(m.text)
        words, ws_tag, ch_tag, ty_tag = draft.tags[k]
        rows.append(
            EpisodeRow(
                rowid=new_rowid(),
                id=episode_id(channel, m.platform_id),
                content=text,
                content_hash=content_hash(text),
                created_at=m.ts,
                indexed_at=now,
                channel=channel,
                workspace=ws,
                author_id=m.author_id,
                author_name=m.author_name,
                platform_id=m.platform_id,
                near=near,
                far=far,
                vector=draft.vecs[k],
                embedder=g.embedder.identity,
                terms=words,
                workspace_tag=ws_tag,
                channel_tag=ch_tag,
                type_tag=ty_tag,
            )
        )
    first = max(0, len(prev) - CONTEXT_REACH)
    ctx_rows = [(*contexts[k], prev[k].rowid) for k in range(first, len(prev))]
    rowid_of = {r.platform_id: r.rowid for r in rows}
    edges = [(node, rowid_of[pid], "derived_from", 1.0, now) for node, pid in draft.derived]
    return _Plan(channel, ws, new, rows, ctx_rows, edges)


async def _apply_plan(g: MemoryGraph, plan: _Plan) -> None:
    """After the commit: the in-memory views learn the new rows.

    Episodes stay out of the in-RAM vector index: one per message, they would make the
    process grow with the whole history.  Their vectors live in SQLite and recall scores
    its text candidates with them (see recall.py)."""
    for m, row in zip(plan.new, plan.rows, strict=True):
        g.count_terms(row.terms, row.near, row.far)
        g.register(row.rowid, plan.workspace, plan.channel, vectorized=False)
        if m.author_name:
            g.add_name(plan.workspace, m.author_name, m.author_id)


async def catch_up_vectors(g: MemoryGraph, since: int, *, stale_only: bool = False) -> None:
    """Add to the in-RAM vector index every memory with rowid > ``since``; re-embed stale
    rows, episodes included (their vectors stay in storage only).  ``stale_only``: only
    re-embed (the storage holds the vector index)."""
    identity = g.embedder.identity
    last = since
    while True:
        rows = await g.storage.embedding_rows(last, identity, 20_000, stale_only=stale_only)
        if not rows:
            return
        last = rows[-1].rowid
        stale = [r for r in rows if r.embedder != identity or r.vector is None]
        fresh: dict[int, np.ndarray] = {}
        if stale:
            texts = [embed_text(r.type, r.content, r.author_name) for r in stale]
            mat = await asyncio.to_thread(g.embedder.embed, texts)
            fresh = {r.rowid: v for r, v in zip(stale, mat, strict=True)}
            if not g.read_only:
                await g.storage.set_embeddings(identity, list(fresh.items()))
        # Every row without a current vector was just embedded: none is None here.
        memories = [r for r in rows if r.type != "episode"]
        if not memories or stale_only:
            continue
        labels = np.array([r.rowid for r in memories], dtype=np.int64)
        matrix = np.stack(
            [fresh[r.rowid] if r.vector is None or r.rowid in fresh else r.vector for r in memories]
        )
        await asyncio.to_thread(g.vectors.add, labels, matrix)


async def recompute_contexts(g: MemoryGraph, channel: str) -> int:
    """Recompute every episode's neighbour context in ``channel`` (after deletions).

    A forgotten message must not live on inside its neighbours' ``near``/``far``
    columns; only rows whose context changed are rewritten.  Runs inside the
    caller's transaction.
    """
    rows = await g.storage.channel_episodes(channel)
    seq = [(r.created_at, terms(f"{r.author_name} {r.content}")) for r in rows]
    changed = [
        (near, far, r.rowid)
        for r, (near, far) in zip(rows, _contexts(seq), strict=True)
        if (near, far) != (r.near, r.far)
    ]
    await g.storage.set_contexts(changed)
    return len(changed)
