"""The memory graph's storage protocol: what the graph asks of the database under it.

:class:`MemoryStorage` names operations, never SQL, and takes and returns plain
values (the row types below), so a second backend (PostgreSQL with tsvector and
pgvector) implements the same protocol and passes the same contract suite
(``tests/contracts/test_memory_storage.py``).  The in-RAM indexes (hnswlib, the
scope and term arrays) stay in :class:`~memory_graph.graph.MemoryGraph`, above it.

:mod:`memory_graph.sqlite_storage` is the SQLite implementation.  Today the
protocol covers the graph's bookkeeping, forgetting, links, upkeep, episodes and
saved memories: transactions, meta values, tombstones, node deletion, what
forgetting reads, the links between nodes, what decay, pruning and association
read and write, indexing archived messages as episodes, and saving, deduplicating,
merging and superseding memories.  Recall's candidate queries and the graph's own
state loading still run their SQL on the graph's connection; they move behind
this protocol next.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = [
    "AuthoredNode",
    "EpisodeContext",
    "EpisodeRow",
    "ImportanceRow",
    "Link",
    "MemoryRow",
    "MemoryStorage",
    "NodeBrief",
    "NodeRef",
    "StoredVector",
    "TombstoneKind",
    "TombstoneRow",
]

TombstoneKind = str  # "message" | "author" | "author_in"


@dataclass(frozen=True, slots=True)
class NodeRef:
    """Enough of one node to forget it: its label, id, type, channel and source ids."""

    rowid: int
    id: str
    type: str
    channel: str
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuthoredNode:
    """A node that came from an author: an episode (``platform_id`` set) or a memory
    (``sources`` set) in their name, or a memory derived from one of their episodes."""

    rowid: int
    id: str
    channel: str
    platform_id: str | None
    sources: tuple[str, ...]
    own: bool  # in the author's own name (not merely derived from their words)


@dataclass(frozen=True, slots=True)
class TombstoneRow:
    """A tombstone found: its kind, its key (an author id, a platform id, or
    ``author id \\n channel`` for a scoped author forget) and when it was laid."""

    kind: TombstoneKind
    key: str
    created_at: float


@dataclass(frozen=True, slots=True)
class Link:
    """One link as seen from ``node``: ``other`` is at its far end, either direction."""

    node: int
    other: int
    type: str
    weight: float


@dataclass(frozen=True, slots=True)
class ImportanceRow:
    """What decay needs of one node."""

    rowid: int
    importance: float
    accessed_at: float
    current_importance: float


@dataclass(frozen=True, slots=True)
class StoredVector:
    """A node's stored embedding (float32), with the channel that scopes it."""

    rowid: int
    channel: str
    vector: np.ndarray


@dataclass(frozen=True, slots=True)
class EpisodeRow:
    """One archived message as an episode node, with its text-index fields.

    ``terms`` and the ``*_tag`` fields are what :func:`memory_graph.text.fts_tags` makes
    of it (stemmed words; workspace, channel and type tags); ``near``/``far`` are the
    words of its neighbouring turns.
    """

    rowid: int
    id: str
    content: str
    content_hash: str
    created_at: float
    indexed_at: float
    channel: str
    workspace: str
    author_id: str
    author_name: str
    platform_id: str
    near: str
    far: str
    vector: np.ndarray
    embedder: str
    terms: str
    workspace_tag: str
    channel_tag: str
    type_tag: str


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One saved memory node, with its text-index fields (see :class:`EpisodeRow`)."""

    rowid: int
    id: str
    type: str
    content: str
    content_hash: str
    importance: float
    created_at: float
    channel: str
    workspace: str
    author_id: str
    sources: tuple[str, ...]
    vector: np.ndarray
    embedder: str
    terms: str
    workspace_tag: str
    channel_tag: str
    type_tag: str


@dataclass(frozen=True, slots=True)
class NodeBrief:
    """What saving needs to know of an existing node."""

    rowid: int
    id: str
    channel: str
    type: str
    superseded_by: str | None
    content_hash: str


@dataclass(frozen=True, slots=True)
class EpisodeContext:
    """What an episode's neighbours need of it to rebuild their context columns."""

    rowid: int
    created_at: float
    content: str
    author_name: str
    near: str
    far: str


class MemoryStorage(Protocol):
    """Durable state of one memory graph (see the module docstring for its scope)."""

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        """One write transaction: committed when the block ends, rolled back (and the
        error re-raised) when it raises or is cancelled."""
        ...

    async def get_meta(self, key: str) -> str | None: ...

    async def set_meta(self, key: str, value: str) -> None: ...

    async def add_tombstones(self, kind: TombstoneKind, keys: Iterable[str], now: float) -> None:
        """Lay (or move forward to ``now``) a tombstone per non-empty key."""
        ...

    async def find_tombstones(
        self, authors: Sequence[str], platform_ids: Sequence[str]
    ) -> list[TombstoneRow]:
        """Every tombstone of these authors (global and scoped) and platform ids."""
        ...

    async def node_ref(self, memory_id: str) -> NodeRef | None: ...

    async def authored_nodes(self, author_id: str) -> list[AuthoredNode]:
        """The author's episodes and memories, and memories derived from their episodes."""
        ...

    async def author_workspaces(self, author_id: str) -> set[str]:
        """Workspaces where nodes in ``author_id``'s name remain."""
        ...

    async def delete_nodes(self, rowids: Sequence[int], ids: Sequence[str]) -> None:
        """Delete nodes with their edges, sources and text-index rows; a memory whose
        successor is deleted is current again.  Inside the caller's transaction."""
        ...

    # -- links ------------------------------------------------------------------------------

    async def links_of(self, rowids: Collection[int]) -> list[Link]:
        """Every link touching one of ``rowids``, outgoing and incoming, in a stable order."""
        ...

    async def link_targets(self, rowids: Collection[int], type_: str) -> dict[int, set[int]]:
        """``src -> {dst}`` of the outgoing links of type ``type_`` from ``rowids``."""
        ...

    async def add_links(self, links: Sequence[tuple[int, int, str, float, float]]) -> None:
        """Add ``(src, dst, type, weight, created_at)`` links; an existing one stays."""
        ...

    # -- upkeep -------------------------------------------------------------------------------

    async def importance_rows(self, except_types: Sequence[str]) -> list[ImportanceRow]: ...

    async def set_current_importance(self, values: Sequence[tuple[float, int]]) -> None:
        """``(current importance, rowid)`` pairs."""
        ...

    async def prunable(
        self, except_types: Sequence[str], below: float, idle_before: float
    ) -> list[tuple[int, str]]:
        """``(rowid, id)`` of nodes under ``below`` importance, neither accessed nor created
        since ``idle_before``."""
        ...

    async def memory_vectors_since(self, since: float) -> list[StoredVector]:
        """Stored vectors of memories (not episodes) updated at or after ``since``."""
        ...

    async def memory_rowids(self, rowids: Collection[int]) -> set[int]:
        """Which of ``rowids`` are memories (not episodes)."""
        ...

    # -- episodes -----------------------------------------------------------------------------

    async def indexed_upto(self) -> int:
        """The live indexer's high-water mark (0 when it never ran)."""
        ...

    async def raise_indexed_upto(self, message_id: int) -> None:
        """Move the mark up to ``message_id`` (never down); inside a transaction."""
        ...

    async def episode_platform_ids(self, channel: str, platform_ids: Sequence[str]) -> set[str]:
        """Which of ``platform_ids`` already have an episode in ``channel``."""
        ...

    async def latest_episodes(self, channel: str, limit: int) -> list[EpisodeContext]:
        """The channel's newest ``limit`` episodes, oldest first."""
        ...

    async def channel_episodes(self, channel: str) -> list[EpisodeContext]:
        """Every episode of ``channel``, oldest first."""
        ...

    async def sources_citing(
        self, channel: str, platform_ids: Sequence[str]
    ) -> list[tuple[int, str]]:
        """``(memory rowid, platform id)`` of memories that cite these messages as sources."""
        ...

    async def insert_episodes(self, rows: Sequence[EpisodeRow]) -> None:
        """Insert episode nodes and their text-index rows; inside a transaction."""
        ...

    async def set_contexts(self, changes: Sequence[tuple[str, str, int]]) -> None:
        """``(near, far, rowid)``: rewrite episodes' context columns (and their index)."""
        ...

    # -- saving memories --------------------------------------------------------------------

    async def briefs_by_id(self, ids: Collection[str]) -> dict[str, NodeBrief]: ...

    async def briefs_by_rowid(self, rowids: Collection[int]) -> dict[int, NodeBrief]: ...

    async def current_memories_by_hash(self, hashes: Collection[str]) -> list[NodeBrief]:
        """Memories (not episodes, not superseded) whose content hash is one of ``hashes``."""
        ...

    async def episode_rowids(self, channel: str, platform_ids: Collection[str]) -> dict[str, int]:
        """``platform id -> episode rowid`` in ``channel``."""
        ...

    async def insert_memories(self, rows: Sequence[MemoryRow]) -> None:
        """Insert memory nodes, their text-index rows and their sources (ranked in order);
        inside a transaction."""
        ...

    async def supersede(self, pairs: Sequence[tuple[str, int]]) -> None:
        """``(successor id, rowid)``: mark each node superseded by that memory."""
        ...

    async def merge_into(
        self,
        rowid: int,
        importance: Callable[[float], float],
        sources: Sequence[str],
        now: float,
    ) -> None:
        """Fold a duplicate into node ``rowid``: its importance becomes
        ``importance(stored importance)``, ``sources`` are appended (new ones only, ranked
        after the existing), and it is updated ``now``.  Inside a transaction."""
        ...
