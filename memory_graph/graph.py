"""MemoryGraph: the resource that owns the memory tables, the vector index and the scope views.

One instance per process and database.  Writes are serialised by one lock; reads
run concurrently with them through the graph's storage (:attr:`MemoryGraph.storage`,
a :class:`~memory_graph.storage.MemoryStorage`; no SQL here).  The stored nodes are
the source of truth: the text index and the hnswlib file are rebuilt from them
whenever they are missing, corrupt or built by another embedder.

Scope: under ``[memory] scope = "workspace"`` a node is visible from every channel
of its workspace, except a node of a *private* channel (``set_private``; the fact
is kept in ``memory_private_channels``): its scope is the private channel (with
its threads) alone, unless ``private_scope = "workspace"``.  Scope lives in the
in-memory codes (``ws_of``) every search path checks, not in the stored rows, so
marking a channel private (or public again) re-scopes the nodes it already has.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite
import numpy as np
import structlog

from tierbot.config import MemoryConfig
from tierbot.errors import StoreError
from tierbot.keys import ChannelKey, workspace_of
from tierbot.messages import Message

from . import background, episodes, forgetting, maintenance, recall, tombstones, writing
from .embedders import Embedder, embedder_from_config
from .sqlite_storage import SQLiteMemoryStorage
from .storage import MemoryStorage, TextFilter
from .text import TEXT_VERSION, embed_text, terms
from .types import (
    ForgetReport,
    MaintenanceReport,
    MemoryDraft,
    RecallHit,
    SaveResult,
)
from .vectors import VectorIndex

log = structlog.get_logger("tierbot.memory")

#: How far below the highest rowid seen a look for other processes' nodes goes back: a
#: save drawn before a later one may commit after it.
SYNC_WINDOW = 10_000

_ACCESS_FLUSH_SECONDS = 2.0
#: Candidates pgvector's HNSW search visits at least (its hnsw.ef_search): the offline
#: embedder's sparse vectors need a wide search to find the exact top 10.
_DB_EF_SEARCH = 400


class MemoryGraph:
    """Typed memories and archived episodes of every channel, searchable and linked.

    Use ``async with await MemoryGraph.open(...)`` or call :meth:`aclose`; closing
    saves the vector index and flushes pending access counts.
    """

    def __init__(
        self,
        storage: MemoryStorage,
        config: MemoryConfig,
        embedder: Embedder,
        index_dir: Path,
    ) -> None:
        #: The graph's durable state behind the storage protocol (see memory_graph.storage).
        self.storage = storage
        self.config = config
        self.embedder = embedder
        self.index_dir = index_dir
        self.lock = asyncio.Lock()
        #: Saves waiting for ``lock``, written together by whoever holds it (writing.py).
        self.pending_saves: list[writing.PendingSave] = []
        self.vectors = VectorIndex(embedder.dim, embedder.identity)
        self.next_rowid = 1
        # Rowids drawn from a shared storage's sequence and not used yet; the highest
        # rowid up to which other processes' nodes were picked up (see sync_others).
        self._rowid_pool: list[int] = []
        self._synced_upto = 0
        self._sync_task: asyncio.Task[None] | None = None
        # rowid -> scope codes (-1: deleted or unknown), for filtered vector search.
        self.ws_of = np.full(1024, -1, dtype=np.int32)
        self.ch_of = np.full(1024, -1, dtype=np.int32)
        self.codes: dict[str, int] = {}
        # scope code -> nodes of that scope in the vector index (memories, not episodes).
        self.code_counts: dict[int, int] = {}
        # rowid -> whether the node is in the vector index (a byte a row, not a set entry).
        self.vectorized = np.zeros(1024, dtype=np.bool_)
        # Rows in the index (FTS5's N, for recall's idf) and, per rowid, how many index
        # terms its own text has (-1: not computed yet; recall fills it on first use).
        self.n_rows = 0
        self.term_counts = np.full(1024, -1, dtype=np.int32)
        # workspace -> stemmed name term -> author ids / entity rowids carrying that name.
        self.names: dict[str, dict[str, set[str]]] = {}
        # author id -> the name they last went by (recall hits say who said what).
        self.display_names: dict[str, str] = {}
        # term -> rows holding it (approximate between opens): recall's cost budget.
        self.df: dict[str, int] = {}
        # Channel keys whose conversations not everyone in the workspace can read,
        # and the scope key each channel resolves to (cleared when that set changes).
        self.private: set[str] = set()
        self._scope_keys: dict[str, str] = {}
        self.pending_access: dict[int, float] = {}
        self.pending_counts: dict[int, int] = {}
        self._last_flush = time.monotonic()
        self._closed = False
        self.read_only = False

    # --- lifecycle ---------------------------------------------------------

    @classmethod
    async def open(
        cls,
        db_path: Path,
        config: MemoryConfig,
        *,
        index_dir: Path | None = None,
        embedder: Embedder | None = None,
        read_only: bool = False,
    ) -> MemoryGraph:
        """Open (creating if needed) the graph in ``db_path``; rebuild stale indexes.

        ``read_only``: safe beside a running bot: nothing is created, migrated, rebuilt
        on disk or saved on close (a missing vector index is built in memory only).
        Raises StoreError naming the database or index directory when it cannot open.
        """
        db_path = Path(db_path)
        if index_dir is None:
            index_dir = (
                Path(config.index_dir)
                if config.index_dir
                else db_path.parent / (db_path.name + ".memory-index")
            )
        storage = await SQLiteMemoryStorage.open(db_path, read_only=read_only)
        return await cls.open_storage(
            storage,
            config,
            index_dir=Path(index_dir),
            embedder=embedder,
            read_only=read_only,
            where=f" in {db_path} (index {index_dir})",
        )

    @classmethod
    async def open_storage(
        cls,
        storage: MemoryStorage,
        config: MemoryConfig,
        *,
        index_dir: Path,
        embedder: Embedder | None = None,
        read_only: bool = False,
        where: str = "",
    ) -> MemoryGraph:
        """Open the graph on an opened ``storage`` (closed again if this fails); the
        vector index lives in ``index_dir`` unless the storage searches vectors itself."""
        try:
            if embedder is None:
                embedder = await asyncio.to_thread(embedder_from_config, config)
        except BaseException:
            await storage.close()
            raise
        self = cls(storage, config, embedder, Path(index_dir))
        self.read_only = read_only
        try:
            await self._load_state()
            await self._ensure_fts()
            await self._ensure_vectors()
            if config.background_rows:  # load the word frequencies now, not in a first recall
                await asyncio.to_thread(background.table)
            if not read_only:
                await storage.set_meta("clean_shutdown", "0")
        except BaseException as exc:
            await storage.close()
            if isinstance(exc, OSError | aiosqlite.Error):
                raise StoreError(f"cannot open the memory graph{where}: {exc}") from exc
            raise
        return self

    async def __aenter__(self) -> MemoryGraph:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Flush access counts, save the vector index, close the connection; idempotent."""
        if self._sync_task is not None:
            self._sync_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sync_task
            self._sync_task = None
        if self._closed:
            return
        self._closed = True
        if self.read_only:
            await self.storage.close()
            return
        try:
            async with self.lock:
                await self.flush_access()
                await self.save_vectors()
                await self.storage.set_meta("clean_shutdown", "1")
        finally:
            await self.storage.close()

    async def _load_state(self) -> None:
        storage = self.storage
        self.next_rowid = await storage.max_rowid() + 1
        self._synced_upto = self.next_rowid - 1
        if storage.shared and not self.read_only:
            await storage.raise_rowid_floor(self.next_rowid - 1)
        self._grow(self.next_rowid)
        self.private = await storage.private_channels()
        for n in await storage.node_scopes():
            self.register(n.rowid, n.workspace, n.channel, vectorized=n.type != "episode")
        for ws, author_id, author_name in await storage.author_names():
            self.add_name(ws, author_name, author_id)
        for rowid, ws, content in await storage.entity_names():
            self.add_name(ws, content, f"#{rowid}")

    async def _ensure_fts(self) -> None:
        storage = self.storage
        # After an unclean shutdown the index is checked, not trusted.
        verify = not self.read_only and await storage.get_meta("clean_shutdown") != "1"
        state = await storage.text_index_state(TEXT_VERSION, verify)
        if state != "ok":
            if self.read_only:
                raise StoreError(
                    "the memory search index is missing or was built by another tierbot "
                    "version; start the bot once (it rebuilds the index), then search again"
                )
            reason = "missing" if state == "missing" else "stale or corrupt"
            log.info("memory.fts_rebuild", reason=reason)
            await storage.rebuild_text_index(TEXT_VERSION)
        self.df = await storage.term_frequencies()

    def count_terms(self, *texts: str) -> None:
        """Note one new row holding the (space-separated) terms of ``texts``."""
        df = self.df
        for t in set(" ".join(texts).split()):
            df[t] = df.get(t, 0) + 1

    @property
    def vectors_in_storage(self) -> bool:
        """Whether the storage searches memories' vectors (no in-RAM index here)."""
        return bool(self.storage.vector_index)

    async def save_vectors(self) -> None:
        """Write the in-RAM vector index to ``index_dir`` (nothing to do when the
        storage holds the index)."""
        if not self.vectors_in_storage:
            await asyncio.to_thread(self.vectors.save, self.index_dir)

    async def _ensure_vectors(self) -> None:
        identity = self.embedder.identity
        if self.vectors_in_storage:
            # Rows made by another embedder are embedded again; the index is the database's.
            await episodes.catch_up_vectors(self, 0, stale_only=True)
            if not self.read_only:
                await self.storage.prepare_vector_index(self.embedder.dim)
                await self.storage.set_meta("embedder", identity)
            return
        loaded, reason = await asyncio.to_thread(
            VectorIndex.load, self.index_dir, identity, self.embedder.dim
        )
        if loaded is None:
            # A damaged file is worth a warning; a first start or a new embedder is not.
            level = log.info if reason.startswith(("missing", "built by")) else log.warning
            level(
                "memory.vector_rebuild",
                reason=reason,
                embedder=identity,
                index_dir=str(self.index_dir),
            )
            limit = self.config.vector_index_limit
            capacity = min(self.next_rowid, limit) if limit else self.next_rowid
            self.vectors = VectorIndex(self.embedder.dim, identity, capacity=capacity)
            since = 0
        else:
            self.vectors = loaded
            since = loaded.max_label
        # The memories the index should hold: none below its floor, at most the limit.
        for rowid in np.flatnonzero(self.vectorized[: self.vectors.floor]).tolist():
            self._unvectorize(rowid)
        self.vector_room(0)
        await episodes.catch_up_vectors(self, since)
        if self.read_only:
            return
        await self.storage.set_meta("embedder", identity)
        if loaded is None:
            await asyncio.to_thread(self.vectors.save, self.index_dir)

    # --- in-memory bookkeeping ------------------------------------------------

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        """``async with g.transaction():`` one write transaction of the graph's storage."""
        return self.storage.transaction()

    async def reserve_rowids(self, n: int) -> None:
        """Before :meth:`allocating_rowids` hands out up to ``n``: on a storage other
        processes write too, draw them from its sequence.  Whatever the block leaves
        unused is dropped: a rowid kept for later would commit long after the rowids
        drawn since, below where other processes look for new nodes."""
        if self.storage.shared and len(self._rowid_pool) < n:
            self._rowid_pool += await self.storage.take_rowids(n - len(self._rowid_pool))

    @contextlib.contextmanager
    def allocating_rowids(self) -> Iterator[Callable[[], int]]:
        """Hand out new node rowids; if the block fails, they are handed out again later
        (the rows were never written).  On a shared storage, :meth:`reserve_rowids`
        first."""
        start = self.next_rowid
        pool = self._rowid_pool

        def take() -> int:
            if self.storage.shared:
                rowid = pool.pop(0)  # IndexError: reserve_rowids was not called
                self.next_rowid = max(self.next_rowid, rowid + 1)
                return rowid
            rowid = self.next_rowid
            self.next_rowid += 1
            return rowid

        try:
            yield take
        except BaseException:
            self.next_rowid = start
            raise
        finally:
            pool.clear()

    # --- other processes' nodes (a shared storage) ----------------------------

    def start_sync(self, interval: float) -> None:
        """Pick up other processes' nodes every ``interval`` seconds (shared storage)."""
        if self.storage.shared and self._sync_task is None:
            self._sync_task = asyncio.create_task(self._sync_loop(interval), name="memory-sync")

    async def _sync_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sync_others()
            except Exception as exc:  # the database is away: the next round catches up
                log.warning("memory.sync_failed", error=str(exc))

    async def sync_others(self) -> int:
        """Take into this process's scope arrays, names and vector index the nodes that
        other processes wrote since the last look, and their channels' privacy; the
        number of nodes picked up.

        Recall checks every candidate against the scope arrays, so a node saved by
        another process (a compaction job's memories, the other owner's channel) is
        found only once it is here.  Rowids are drawn before commit, so a late commit
        can land below rows already seen: the look goes back ``SYNC_WINDOW`` rowids.
        """
        if not self.storage.shared or self._closed:
            return 0
        async with self.lock:
            private = await self.storage.private_channels()
            for channel in private ^ self.private:
                await self._apply_private(channel, channel in private)
            rowids = await self.storage.rowids_after(max(0, self._synced_upto - SYNC_WINDOW))
            known = len(self.ws_of)
            unknown = [r for r in rowids if r >= known or self.ws_of[r] < 0]
            nodes = await self.storage.new_nodes(unknown)
            memories = []
            for n in nodes:
                self.next_rowid = max(self.next_rowid, n.rowid + 1)
                self.register(n.rowid, n.workspace, n.channel, vectorized=n.type != "episode")
                if n.author_name:
                    self.add_name(n.workspace, n.author_name, n.author_id)
                if n.type == "entity":
                    self.add_name(n.workspace, n.content, f"#{n.rowid}")
                if n.type != "episode":
                    memories.append(n)
            if memories and not self.vectors_in_storage:
                self.vector_room(len(memories))
                texts = [embed_text(n.type, n.content, n.author_name) for n in memories]
                matrix = await asyncio.to_thread(self.embedder.embed, texts)
                labels = np.array([n.rowid for n in memories], dtype=np.int64)
                await asyncio.to_thread(self.vectors.add, labels, matrix.astype(np.float32))
            if rowids:
                self._synced_upto = max(self._synced_upto, rowids[-1])
        if nodes:
            log.debug("memory.synced", nodes=len(nodes), memories=len(memories))
        return len(nodes)

    def note_term_count(self, rowid: int, n: int) -> None:
        """Cache how many index terms node ``rowid`` has (recall's length prior)."""
        if rowid < len(self.term_counts):
            self.term_counts[rowid] = n

    def code(self, key: str) -> int:
        c = self.codes.get(key)
        if c is None:
            c = self.codes[key] = len(self.codes)
        return c

    def _grow(self, n: int) -> None:
        if n >= len(self.ws_of):
            size = max(n + 1, len(self.ws_of) * 2)
            for name in ("ws_of", "ch_of", "term_counts", "vectorized"):
                old = getattr(self, name)
                new = np.full(size, -1 if old.dtype == np.int32 else 0, dtype=old.dtype)
                new[: len(old)] = old
                setattr(self, name, new)

    def register(
        self, rowid: int, workspace: str, channel: str, *, vectorized: bool = True
    ) -> None:
        """Note node ``rowid`` of ``channel`` for scoped search (its scope is ``workspace``
        unless the channel is private); ``vectorized``: it is in the vector index
        (memories are, episodes are not: their vectors stay in SQLite, see :mod:`.vectors`)."""
        self._grow(rowid + 1)
        if self.ws_of[rowid] < 0:
            self.n_rows += 1
        scope = self._private_scope(channel) or workspace
        for arr, key in ((self.ws_of, scope), (self.ch_of, channel)):
            code = arr[rowid] = self.code(key)
            if vectorized:
                self.code_counts[code] = self.code_counts.get(code, 0) + 1
        if vectorized:
            self.vectorized[rowid] = True

    def _private_scope(self, channel: str) -> str | None:
        """The private channel whose scope ``channel`` falls in, or None.

        The shortest marked prefix of the key: a thread of a private channel shares
        the channel's scope; a private thread of a public channel is its own.
        """
        if not self.private or self.config.private_scope != "channel":
            return None
        found = self._scope_keys.get(channel)
        if found is None:
            prefixes = ChannelKey.parse(channel).prefixes()
            found = next((p for p in prefixes if p in self.private), "")
            if len(self._scope_keys) > 100_000:
                self._scope_keys.clear()
            self._scope_keys[channel] = found
        return found or None

    def scope_key(self, channel: str) -> str:
        """What ``channel`` shares memories with: itself under ``scope = "channel"``,
        its private channel when it is (in) one, else its workspace."""
        if self.config.scope == "channel":
            return channel
        return self._private_scope(channel) or workspace_of(channel)

    def is_private(self, channel: str) -> bool:
        """Whether ``channel`` was marked private (by itself, not through a parent)."""
        return channel in self.private

    async def set_private(self, channel: str, private: bool) -> bool:
        """Record whether ``channel`` is private; returns True when that changed.

        Persisted, so it holds after a restart and for nodes written later (compaction
        workers, the indexer).  The channel's existing nodes, and those of its threads,
        are re-scoped at once.  Cheap when nothing changes (no database access).
        """
        if (channel in self.private) == private:
            return False
        async with self.lock:
            if (channel in self.private) == private:
                return False
            await self.storage.mark_private(channel, private, time.time())
            n = await self._apply_private(channel, private)
        log.info("memory.channel_privacy", channel=channel, private=private, nodes=n)
        return True

    async def _apply_private(self, channel: str, private: bool) -> int:
        """Scope ``channel``'s nodes (and its threads') as private or not; how many."""
        if private:
            self.private.add(channel)
        else:
            self.private.discard(channel)
        self._scope_keys.clear()
        # The set changes first: a node registered while this reads is scoped anew
        # by register() and again (identically) here.  A channel with no node yet
        # (nor its threads: every registered channel has a code) needs no scan.
        prefix = channel + ":"
        rows = []
        if any(k == channel or k.startswith(prefix) for k in self.codes):
            rows = await self.storage.channel_tree_scopes(channel)
        for n in rows:
            self._rescope(n.rowid, self._private_scope(n.channel) or n.workspace)
        return len(rows)

    def _rescope(self, rowid: int, scope: str) -> None:
        if rowid >= len(self.ws_of) or self.ws_of[rowid] < 0:
            return  # deleted meanwhile, or not registered yet (register() scopes it)
        old = int(self.ws_of[rowid])
        new = self.code(scope)
        if old != new:
            if self.vectorized[rowid]:  # code_counts count what the vector index holds
                self.code_counts[old] -= 1
                self.code_counts[new] = self.code_counts.get(new, 0) + 1
            self.ws_of[rowid] = new

    def vector_room(self, new: int) -> None:
        """Make room for ``new`` memories in a bounded vector index (``[memory]
        vector_index_limit``) by evicting the oldest; ``new=0`` trims to the limit.

        Evicted memories keep their stored vectors: recall still finds them by text and
        scores them exactly (see recall.py); only pure vector matches miss them."""
        limit = self.config.vector_index_limit
        if limit <= 0:
            return
        live = np.flatnonzero(self.vectorized)
        excess = len(live) + new - limit
        if excess <= 0:
            return
        gone = live[: min(excess, len(live))].tolist()
        for rowid in gone:
            self._unvectorize(rowid)
        self.vectors.evict_below(gone[-1] + 1, gone)

    def _unvectorize(self, rowid: int) -> None:
        """Note that node ``rowid`` left the vector index (it stays in the graph)."""
        if rowid < len(self.vectorized) and self.vectorized[rowid]:
            self.vectorized[rowid] = False
            for arr in (self.ws_of, self.ch_of):
                code = int(arr[rowid])
                if code >= 0:
                    self.code_counts[code] -= 1

    def unregister(self, rowid: int) -> None:
        if rowid < len(self.ws_of):
            if self.ws_of[rowid] >= 0:
                self.n_rows -= 1
            self.term_counts[rowid] = -1
            self._unvectorize(rowid)
            for arr in (self.ws_of, self.ch_of):
                arr[rowid] = -1
        self.vectors.remove(rowid)

    def add_name(self, workspace: str, name: str, key: str) -> None:
        table = self.names.setdefault(workspace, {})
        if not key.startswith("#"):
            self.display_names[key] = name
        for t in terms(name)[:4]:
            table.setdefault(t, set()).add(key)

    def _scope(self, channel: str) -> tuple[TextFilter, np.ndarray, int]:
        if self.config.scope == "channel":
            where = TextFilter("channel", channel)
            return where, self.ch_of, self.codes.get(channel, -2)
        # The text filter is the real workspace (rows do not store privacy): a superset of
        # a private scope, narrowed by the codes (recall checks them on every candidate).
        ws = workspace_of(channel)
        key = self._private_scope(channel) or ws
        return TextFilter("workspace", ws), self.ws_of, self.codes.get(key, -2)

    def text_scope(self, channel: str) -> TextFilter:
        """A text-search filter matching at least what ``channel`` may see (check
        :meth:`scope_codes` too: a private scope is narrower than its filter)."""
        return self._scope(channel)[0]

    def scope_codes(self, channel: str) -> tuple[np.ndarray, int]:
        """(rowid -> scope code array, the code ``channel`` may see)."""
        _, arr, code = self._scope(channel)
        return arr, code

    def vector_search(
        self, vector: np.ndarray, k: int, channel: str, *, ef: int = 384
    ) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``k`` (labels, cosines) visible from ``channel``; call from a worker thread.

        A scope holding a fair share of the index is searched unfiltered with a wider
        k and filtered afterwards (no Python callback per visited node); a small scope,
        or an unlucky draw, falls back to hnswlib's filtered search.
        """
        _, arr, code = self._scope(channel)
        allowed_n = self.code_counts.get(code, 0)
        total = self.vectors.live
        if allowed_n == 0 or total == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        want = min(k, allowed_n)
        share = allowed_n / total
        if share >= 0.05:
            labels, sims = self.vectors.search(vector, min(total, int(k / share * 1.5) + 8), ef=ef)
            inside = labels < len(arr)
            labels, sims = labels[inside], sims[inside]
            keep = arr[labels] == code
            if int(keep.sum()) >= want:
                return labels[keep][:k], sims[keep][:k]
        return self.vectors.search(
            vector, k, lambda label: label < len(arr) and arr[label] == code, ef=ef
        )

    async def nearest(
        self, vector: np.ndarray, k: int, channel: str, *, ef: int = 384
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`vector_search` from the event loop, on whichever index holds the vectors.

        In the database's index the same strategy holds: a scope holding a fair share of
        the memories is searched unfiltered, wider, and filtered by the scope codes; a
        small scope (or an unlucky draw) is searched exactly within its workspace or
        channel, then filtered by the codes (a private scope is narrower)."""
        if not self.vectors_in_storage:
            return await asyncio.to_thread(self.vector_search, vector, k, channel, ef=ef)
        where, arr, code = self._scope(channel)
        allowed_n = self.code_counts.get(code, 0)
        total = int(np.count_nonzero(self.vectorized))
        empty = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        if allowed_n == 0 or total == 0:
            return empty
        want = min(k, allowed_n)
        share = allowed_n / total
        identity = self.embedder.identity
        query = np.asarray(vector, dtype=np.float32)[None, :]
        hits: list[tuple[int, float]] = []
        if share >= 0.05:
            n = min(total, int(k / share * 1.5) + 8, 1000)
            [found] = await self.storage.nearest(
                query, n, identity, TextFilter(), ef=max(n, _DB_EF_SEARCH)
            )
            hits = [(r, s) for r, s in found if r < len(arr) and arr[r] == code]
        if len(hits) < want:
            wide = k if where.scope == "channel" else max(4 * k, 64)
            [found] = await self.storage.nearest(query, wide, identity, where, exact=True)
            hits = [(r, s) for r, s in found if r < len(arr) and arr[r] == code]
        hits = hits[:k]
        if not hits:
            return empty
        return (
            np.array([r for r, _ in hits], dtype=np.int64),
            np.array([s for _, s in hits], dtype=np.float32),
        )

    def visible(self, channel: str, node_channel: str) -> bool:
        """Whether a node said in ``node_channel`` may be recalled, merged into or
        forgotten from ``channel``."""
        if self.config.scope == "channel":
            return node_channel == channel
        return self.scope_key(node_channel) == self.scope_key(channel)

    async def flush_access(self) -> None:
        """Write deferred access counts (recall defers them to stay off the write path)."""
        if self.read_only:  # recall counts accesses only in the process that owns the graph
            self.pending_counts, self.pending_access = {}, {}
            return
        if not self.pending_counts:
            return
        rows = [(self.pending_counts[r], self.pending_access[r], r) for r in self.pending_counts]
        self.pending_counts, self.pending_access = {}, {}
        self._last_flush = time.monotonic()
        await self.storage.add_access(rows)

    def note_access(self, rowids: Sequence[int], now: float) -> bool:
        for r in rowids:
            self.pending_counts[r] = self.pending_counts.get(r, 0) + 1
            self.pending_access[r] = now
        return time.monotonic() - self._last_flush > _ACCESS_FLUSH_SECONDS

    # --- public API ------------------------------------------------------------

    async def save(
        self,
        content: str,
        memory_type: str,
        *,
        importance: float | None = None,
        related_to: Sequence[str] = (),
        supersedes: str | None = None,
        channel: str,
        author_id: str = "",
        sources: Sequence[str] = (),
    ) -> SaveResult:
        """Save one memory, or merge it into a near-duplicate; raises ToolError on bad input."""
        draft = MemoryDraft(
            content=content,
            memory_type=memory_type,
            channel=channel,
            importance=importance,
            related_to=tuple(related_to),
            supersedes=supersedes,
            author_id=author_id,
            sources=tuple(sources),
        )
        return (await writing.save_many(self, [draft]))[0]

    async def save_many(self, items: Sequence[MemoryDraft]) -> list[SaveResult]:
        """Save many memories in one transaction; all are validated before any is written."""
        return await writing.save_many(self, items)

    async def add_episodes(
        self, messages: Sequence[Message], *, indexed_upto: int | None = None
    ) -> int:
        """Index raw messages as episodes; returns how many were new.

        Skips summaries, markers, system messages, tool calls and results, the bot's
        progress notes, messages already indexed (idempotent per channel and platform
        id) and forgotten ones.  With ``indexed_upto`` (a store message id), the live
        indexer's high-water mark is raised to it in the same transaction as the
        episodes: the mark never runs ahead of what is written, and never moves back.
        """
        return await episodes.add_episodes(self, messages, indexed_upto=indexed_upto)

    async def indexed_upto(self) -> int:
        """The live indexer's high-water mark: the store message id indexed up to (0: none)."""
        return await episodes.indexed_upto(self)

    async def recall(
        self,
        query: str,
        *,
        channel: str,
        limit: int = 5,
        types: Sequence[str] | None = None,
        since: float | None = None,
        exclude: Collection[str] = (),
        exclude_authors: Collection[str] = (),
    ) -> list[RecallHit]:
        """Hybrid search of what ``channel`` may see, best first, scores in 0..1.

        ``exclude``: platform ids of ``channel`` whose episodes are left out (the
        messages it already has in its live context); other channels' are kept.
        ``exclude_authors``: authors whose messages (episodes) are left out, e.g. the
        bot's own replies, which only repeat what people said.
        """
        return await recall.recall(
            self,
            query,
            channel=channel,
            limit=limit,
            types=types,
            since=since,
            exclude=exclude,
            exclude_authors=exclude_authors,
        )

    async def memories_of(
        self,
        author_id: str,
        *,
        channel: str,
        limit: int = 20,
        types: Sequence[str] | None = None,
    ) -> list[RecallHit]:
        """The memories in ``author_id``'s name that ``channel`` may see, the most
        important first (who they are before a passing fact), then the newest, those a
        newer one replaced left out: the list "what do you know about me?" asks for,
        which a search by the question's words cannot find (it names nothing).  Scores
        are 0: nothing was matched."""
        rows = await self.storage.author_memories(author_id, types, max(limit * 4, 100))
        hits = [
            recall.hit_of(self, row, 0.0)
            for row in sorted(rows, key=lambda r: (-r.current_importance, -r.created_at))
            if row.superseded_by is None and self.visible(channel, row.channel)
        ]
        return hits[:limit]

    async def get(self, memory_id: str) -> dict[str, Any] | None:
        """One node as a JSON-able dict (with its edges), or None."""
        await self.flush_access()
        node = await self.storage.node_record(memory_id)
        if node is None:
            return None
        node["edges"] = [e async for e in self.storage.export_edges(memory_id)]
        return node

    async def forget(self, memory_id: str, *, channel: str | None = None) -> bool:
        """Delete one node and tombstone its sources; False if there is no such node.

        With ``channel``, only a node visible from that channel is forgotten (a user's
        ``/forget`` cannot reach into another workspace); without it, any node (operator).
        """
        return await forgetting.forget(self, memory_id, channel=channel)

    async def forget_messages(self, channel: str, platform_ids: Sequence[str]) -> int:
        """Tombstone messages of ``channel`` and delete their episodes: nothing derived
        from them is indexed again.  Returns the number of episodes deleted."""
        return await forgetting.forget_messages(self, channel, platform_ids)

    async def forget_author(
        self, author_id: str, *, channel: str | None = None, dry_run: bool = False
    ) -> ForgetReport:
        """Delete every node derived from ``author_id``'s messages and tombstone the author.

        With ``channel`` (an admin's ``/forget --author``), only nodes visible from that
        channel go and the tombstone holds only there: another workspace, or the user's
        DM, is untouched and uncounted.  Without it, everywhere (the operator's CLI).
        ``dry_run`` returns the same report and deletes nothing.
        """
        return await forgetting.forget_author(self, author_id, channel=channel, dry_run=dry_run)

    async def is_forgotten(
        self, *, author_id: str = "", platform_ids: Sequence[str] = (), channel: str | None = None
    ) -> bool:
        """True when the author (as seen from ``channel``), or any of the messages, was
        forgotten: skip the work."""
        return await tombstones.is_forgotten(
            self, author_id=author_id, platform_ids=platform_ids, channel=channel
        )

    async def forgotten_messages(
        self, channel: str, messages: Sequence[tuple[str, str, float]]
    ) -> set[str]:
        """Which of these (platform id, author id, ts) messages were forgotten as seen from
        ``channel``: by id, or with their author."""
        return await tombstones.forgotten_messages(self, channel, messages)

    async def maintenance(self, now: float | None = None) -> MaintenanceReport:
        """Decay, prune and associate; safe to run any number of times."""
        return await maintenance.run(self, time.time() if now is None else now)

    async def count(self, channel: str | None = None) -> int:
        """Memories (not episodes) visible from ``channel``, or all of them."""
        counts = await self.storage.memory_counts()
        return sum(n for ch, n in counts.items() if channel is None or self.visible(channel, ch))

    async def export(self) -> AsyncIterator[dict[str, Any]]:
        """Every node then every edge, as JSON-able dicts (``kind`` tells them apart)."""
        await self.flush_access()
        async for node in self.storage.export_nodes():
            yield {"kind": "node", **node}
        async for edge in self.storage.export_edges():
            yield {"kind": "edge", **edge}
