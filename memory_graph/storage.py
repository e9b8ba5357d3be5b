"""The memory graph's storage protocol: what the graph asks of the database under it.

:class:`MemoryStorage` names operations, never SQL, and takes and returns plain
values (the row types below), so a second backend (PostgreSQL with tsvector and
pgvector) implements the same protocol and passes the same contract suite
(``tests/contracts/test_memory_storage.py``).  The in-RAM indexes (hnswlib, the
scope and term arrays) stay in :class:`~memory_graph.graph.MemoryGraph`, above it.

:mod:`memory_graph.sqlite_storage` is the SQLite implementation.  Today the
protocol covers everything the graph keeps on disk: its lifecycle and the state
it loads at open (scopes, names, private channels, the text index and its term
frequencies), transactions, meta values, tombstones, node deletion, what
forgetting reads, the links between nodes, what decay, pruning and association
read and write, indexing archived messages as episodes, saving, deduplicating,
merging and superseding memories, recall's text and vector candidates, access
counts, and export.  No module above it runs SQL.

Text search is asked for in words, never in a backend's query syntax: a
:class:`TextFilter` (which workspace or channel, which types) and stemmed terms with
the weight recall gives each (:class:`TermWeight`).  How a backend scores one
term in one row (FTS5's bm25 here, ``ts_rank`` over a ``tsvector`` elsewhere) is
its own business, as long as the part it returns saturates as bm25's does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

__all__ = [
    "TF_SATURATION",
    "AuthoredNode",
    "EmbeddingRow",
    "EpisodeContext",
    "EpisodeRow",
    "ImportanceRow",
    "Link",
    "MemoryRow",
    "MemoryStorage",
    "NodeBrief",
    "NodeRef",
    "NodeRow",
    "NodeScope",
    "StoredVector",
    "TermWeight",
    "TextFilter",
    "TombstoneKind",
    "TombstoneRow",
]

TombstoneKind = str  # "message" | "author" | "author_in"

#: The most one term's tf part scores in one row (bm25's k1 + 1, with FTS5's k1 = 1.2):
#: :meth:`MemoryStorage.term_scores` saturates there on every backend.
TF_SATURATION = 2.2


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One node as recall reads it."""

    rowid: int
    id: str
    type: str
    content: str
    channel: str
    sources: str  # JSON list of platform ids
    created_at: float
    updated_at: float
    accessed_at: float
    current_importance: float
    author_id: str
    superseded_by: str | None

    @classmethod
    def of(cls, row: Sequence[Any]) -> NodeRow:
        """The row as a database returned it, in field order."""
        return cls(
            int(row[0]),
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            float(row[6]),
            float(row[7]),
            float(row[8]),
            float(row[9]),
            row[10],
            row[11],
        )


@dataclass(frozen=True, slots=True)
class NodeScope:
    """Where one node was said, as the graph's in-RAM scope arrays need it."""

    rowid: int
    workspace: str
    channel: str
    type: str


@dataclass(frozen=True, slots=True)
class NewNode:
    """A node another process wrote: what this process's in-RAM state needs of it."""

    rowid: int
    workspace: str
    channel: str
    type: str
    content: str
    author_id: str
    author_name: str


@dataclass(frozen=True, slots=True)
class TextFilter:
    """Which rows a text search may return: those of one workspace or one channel
    (``scope`` names which; None: any), of the given types (empty: any)."""

    scope: Literal["workspace", "channel"] | None = None
    value: str = ""
    types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TermWeight:
    """One stemmed query term, how many rows hold it (the graph's running count), and
    the weight (an idf) recall gives a match of it."""

    term: str
    df: int
    weight: float


@dataclass(frozen=True, slots=True)
class EmbeddingRow:
    """A node's stored embedding and what re-embedding it would need."""

    rowid: int
    vector: np.ndarray | None  # None: never embedded
    embedder: str
    type: str
    content: str
    author_name: str


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

    async def episode_platform_ids(self, keys: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which ``(channel, platform id)`` pairs already have an episode.

        Every channel of an indexing batch at once: a busy server's batch spans hundreds
        of channels, and one lookup each was most of the indexer's cost."""
        ...

    async def latest_episodes(
        self, channels: Sequence[str], limit: int
    ) -> dict[str, list[EpisodeContext]]:
        """Each channel's newest ``limit`` episodes, oldest first; a channel with none is
        absent."""
        ...

    async def channel_episodes(self, channel: str) -> list[EpisodeContext]:
        """Every episode of ``channel``, oldest first."""
        ...

    async def sources_citing(self, keys: Sequence[tuple[str, str]]) -> list[tuple[int, str, str]]:
        """``(memory rowid, channel, platform id)`` of memories that cite these
        ``(channel, platform id)`` messages as sources."""
        ...

    async def insert_episodes(self, rows: Sequence[EpisodeRow]) -> None:
        """Insert episode nodes and their text-index rows; inside a transaction."""
        ...

    async def set_contexts(self, changes: Sequence[tuple[str, str, int]]) -> None:
        """``(near, far, rowid)``: rewrite episodes' context columns (and their index)."""
        ...

    async def write_episodes(
        self,
        rows: Sequence[EpisodeRow],
        contexts: Sequence[tuple[str, str, int]],
        links: Sequence[tuple[int, int, str, float, float]],
        indexed_upto: int | None,
    ) -> None:
        """An indexing batch as one transaction of its own: :meth:`insert_episodes`,
        :meth:`set_contexts`, :meth:`add_links`, then :meth:`raise_indexed_upto` (when not
        None).  The batch reads nothing in between, so a backend may send it at once."""
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

    # -- lifecycle and the state the graph loads at open ----------------------------------

    async def close(self) -> None:
        """Release the connection; idempotent."""
        ...

    async def max_rowid(self) -> int:
        """The highest rowid ever assigned (deleted ones count: a label is never reused)."""
        ...

    #: Whether other processes may write the same storage (PostgreSQL).  Rowids then
    #: come from :meth:`take_rowids`, and the graph picks up the others' nodes with
    #: :meth:`rowids_after` and :meth:`new_nodes`.
    shared: bool

    async def raise_rowid_floor(self, floor: int) -> None:
        """Make sure :meth:`take_rowids` hands out nothing at or below ``floor``."""
        ...

    def exclusive(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold the lock ``name`` against every process writing this storage."""
        ...

    async def take_rowids(self, n: int) -> list[int]:
        """``n`` rowids no process of this storage has had (ascending)."""
        ...

    async def rowids_after(self, after: int) -> list[int]:
        """Every node rowid above ``after``, ascending."""
        ...

    async def new_nodes(self, rowids: Collection[int]) -> list[NewNode]:
        """Those of ``rowids`` still stored, for another process's in-RAM state."""
        ...

    async def node_scopes(self) -> list[NodeScope]: ...

    async def author_names(self) -> list[tuple[str, str, str]]:
        """Distinct ``(workspace, author id, author name)`` of named nodes."""
        ...

    async def entity_names(self) -> list[tuple[int, str, str]]:
        """``(rowid, workspace, content)`` of every entity node."""
        ...

    async def private_channels(self) -> set[str]: ...

    async def mark_private(self, channel: str, private: bool, now: float) -> None: ...

    async def channel_tree_scopes(self, channel: str) -> list[NodeScope]:
        """Nodes of ``channel`` and of its threads (``channel:…``)."""
        ...

    async def text_index_state(self, version: str, verify: bool) -> str:
        """``"ok"``, ``"missing"`` or ``"stale"`` (built by another text version, or, with
        ``verify``, failing its integrity check)."""
        ...

    async def rebuild_text_index(self, version: str) -> None:
        """Build the text index afresh from the nodes (stamped ``version``), in a
        transaction of its own."""
        ...

    async def term_frequencies(self) -> dict[str, int]:
        """How many rows hold each indexed term."""
        ...

    # -- recall ----------------------------------------------------------------------------

    async def term_scores(
        self, terms: Sequence[TermWeight], n_rows: int, where: TextFilter
    ) -> list[tuple[int, float]]:
        """``(rowid, score)`` of every row matching a term (and ``where``): the sum, over
        the terms it holds, of a saturating tf part (0 to :data:`TF_SATURATION`, as bm25's)
        times the term's weight.  ``n_rows`` is the graph's row count, for backends whose
        index scores with an idf of its own."""
        ...

    async def newest_matches(
        self, terms: Sequence[TermWeight], where: TextFilter, limit: int, since: float | None
    ) -> list[tuple[float, NodeRow]]:
        """Up to ``limit`` of the newest rows holding any of ``terms`` (and ``where``),
        created at or after ``since``, each with its bm25 score: the terms' tf parts
        times their weights (the text index's own idf, FTS5's formula over ``df``)."""
        ...

    async def node_rows(
        self, rowids: Collection[int], types: Sequence[str] | None, since: float | None
    ) -> list[NodeRow]:
        """The rows of ``rowids`` still present, of ``types`` (None: any), not older than
        ``since``."""
        ...

    async def author_memories(
        self, author_id: str, types: Sequence[str] | None, limit: int
    ) -> list[NodeRow]:
        """Up to ``limit`` memories (not episodes) in ``author_id``'s name, of ``types``
        (None: any), newest first."""
        ...

    async def created_at(self, rowids: Collection[int]) -> dict[int, float]: ...

    async def embedding_matrix(
        self, embedder: str, rowids: Collection[int]
    ) -> tuple[list[int], np.ndarray]:
        """The stored vectors of ``rowids`` made by ``embedder`` (others are left out), as
        (their rowids, one float32 row per rowid)."""
        ...

    async def embedding_rows(
        self, after: int, embedder: str, limit: int, *, stale_only: bool = False
    ) -> list[EmbeddingRow]:
        """Up to ``limit`` rows above rowid ``after``, in rowid order: every memory (not
        with ``stale_only``), and the rows whose vector is missing or was made by another
        embedder."""
        ...

    async def set_embeddings(
        self, embedder: str, vectors: Sequence[tuple[int, np.ndarray]]
    ) -> None:
        """Store ``(rowid, vector)`` as made by ``embedder``."""
        ...

    async def add_access(self, rows: Sequence[tuple[int, float, int]]) -> None:
        """``(count, accessed at, rowid)``: add to access counts; accessed_at only moves up."""
        ...

    # -- vector search ----------------------------------------------------------------------

    #: True when the backend searches memories' vectors itself (an ANN index in the
    #: database, :meth:`nearest`); False when the graph keeps its own in-RAM index.
    vector_index: bool

    async def prepare_vector_index(self, dim: int) -> None:
        """Make the backend's vector index ready for ``dim``-dimensional vectors."""
        ...

    async def nearest(
        self,
        vectors: np.ndarray,
        k: int,
        embedder: str,
        where: TextFilter,
        *,
        exact: bool = False,
        ef: int = 40,
    ) -> list[list[tuple[int, float]]]:
        """Per query vector (one per row of ``vectors``), up to ``k`` (rowid, cosine) of
        memories (never episodes) made by ``embedder`` within ``where``, best first.
        ``exact``: compare with every such vector; otherwise the backend may search an
        approximate index with ``ef`` candidates."""
        ...

    # -- reading nodes out -------------------------------------------------------------------

    async def memory_counts(self) -> dict[str, int]:
        """``channel -> memories`` (episodes left out)."""
        ...

    async def node_record(self, memory_id: str) -> dict[str, Any] | None:
        """One node as its export record (see :meth:`export_nodes`), or None."""
        ...

    def export_nodes(self) -> AsyncIterator[dict[str, Any]]:
        """Every node in rowid order, as JSON-able records: id, type, content, importance,
        current_importance, created_at, updated_at, accessed_at, access_count, channel,
        scope (its workspace), author_id, author_name, platform_id, sources (a list) and
        superseded_by."""
        ...

    def export_edges(self, memory_id: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """Edges (of ``memory_id``, either end, or all) as ``src``, ``dst`` (node ids),
        ``type``, ``weight``, ``created_at``, in creation order."""
        ...
