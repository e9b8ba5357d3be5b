"""The approximate nearest-neighbour index: hnswlib over unit vectors, persisted beside the db.

The index is a cache of the embeddings stored in SQLite, for memories only: episodes
(one per message) keep their vectors in SQLite, so the process does not grow with the
history it has seen.  ``VectorIndex.load``
returns None and the reason (and the graph rebuilds, logging it) when the files
are missing, unreadable, fail their checksum, or were built by another embedder;
labels added after the last save are caught up from SQLite on open, and labels of
deleted nodes are filtered by the caller, so a crash between a commit and a save
never loses or resurrects a node.

The index may be bounded (``[memory] vector_index_limit``): the graph then evicts the
oldest memories (:meth:`VectorIndex.evict_below`), and ``floor`` records that no label
below it is in the index.  Slots of evicted and removed labels are reused by new ones,
so a bounded index stops growing.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import hnswlib
import numpy as np

_INDEX_FILE = "vectors.hnsw"
_META_FILE = "vectors.json"
_M = 24
_EF_CONSTRUCTION = 48
_EF_SEARCH = 384
#: What the index holds: memories only (episodes' vectors stay in SQLite).  An index
#: saved with another layout is rebuilt.
_LAYOUT = "memories-v1"


def _checksum(path: Path) -> str:
    """blake2b of the file's bytes, hex (about 0.1 s for a 100k-vector index)."""
    digest = hashlib.blake2b(digest_size=32)
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class VectorIndex:
    """An hnswlib inner-product index whose labels are ``memory_nodes.rowid``.

    Thread-safe: hnswlib's ``add_items`` may not run alongside ``knn_query`` (nor may
    ``set_ef`` change under a running query), so every operation holds one lock.
    """

    def __init__(self, dim: int, identity: str, *, capacity: int = 1024) -> None:
        self.dim = dim
        self.identity = identity
        self.max_label = 0
        #: No label below ``floor`` is in the index (evicted as the oldest, see evict_below).
        self.floor = 0
        self._deleted = 0  # slots of removed labels, reused by the next new labels
        self._lock = threading.Lock()
        self._index = hnswlib.Index(space="ip", dim=dim)
        self._index.init_index(
            max_elements=max(capacity, 1024),
            ef_construction=_EF_CONSTRUCTION,
            M=_M,
            allow_replace_deleted=True,
        )
        self._index.set_ef(_EF_SEARCH)

    def __len__(self) -> int:
        """Slots in use, removed labels' slots included until they are reused."""
        return int(self._index.get_current_count())

    @property
    def live(self) -> int:
        """Labels a search can return."""
        return len(self) - self._deleted

    @classmethod
    def load(cls, directory: Path, identity: str, dim: int) -> tuple[VectorIndex | None, str]:
        """(the saved index, "") or (None, why it cannot be used).

        The file is trusted only when its blake2b checksum matches the one saved beside
        it: hnswlib reads a damaged file without checking it (and then crashes the
        process in a search), so a file that is missing, cut short, overwritten or
        another embedder's is reported and rebuilt from the database by the caller.
        """
        try:
            meta = json.loads((directory / _META_FILE).read_text())
        except FileNotFoundError:
            return None, "missing"
        except (OSError, ValueError) as exc:
            return None, f"{_META_FILE} is unreadable: {exc}"
        if not isinstance(meta, dict):  # valid JSON, but not what save() writes
            return None, f"{_META_FILE} is not a JSON object"
        try:
            if meta.get("identity") != identity or int(meta.get("dim", -1)) != dim:
                return None, "built by another embedder"
            if meta.get("layout") != _LAYOUT:
                return None, "built by an older tierbot (it held every episode too)"
            path = directory / _INDEX_FILE
            if path.stat().st_size != int(meta["bytes"]):
                return (
                    None,
                    f"{_INDEX_FILE} has {path.stat().st_size} bytes, expected {meta['bytes']}",
                )
            expected = meta.get("blake2b")
            if not isinstance(expected, str):
                return None, f"{_META_FILE} has no checksum (written by an older tierbot)"
            actual = _checksum(path)
            if actual != expected:
                return (
                    None,
                    f"{_INDEX_FILE} is corrupt: its checksum is {actual[:16]}..., "
                    f"{_META_FILE} says {expected[:16]}...",
                )
            self = cls.__new__(cls)
            self.dim, self.identity = dim, identity
            self.max_label = int(meta["max_label"])
            self.floor = int(meta.get("floor", 0))
            self._deleted = int(meta.get("deleted", 0))
            self._lock = threading.Lock()
            self._index = hnswlib.Index(space="ip", dim=dim)
            self._index.load_index(
                str(path), max_elements=int(meta["capacity"]), allow_replace_deleted=True
            )
            self._index.set_ef(_EF_SEARCH)
            if self._index.get_current_count() != int(meta["count"]):
                return (
                    None,
                    f"{_INDEX_FILE} holds {self._index.get_current_count()} vectors, "
                    f"{_META_FILE} says {meta['count']}",
                )
            return self, ""
        except (OSError, ValueError, KeyError, RuntimeError, TypeError) as exc:
            return None, f"{_INDEX_FILE} is unreadable: {exc}"

    def save(self, directory: Path) -> None:
        """Write the index then its metadata (with the index's checksum), each atomically
        (tmp file + rename)."""
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / (_INDEX_FILE + ".tmp")
        with self._lock:
            self._index.save_index(str(tmp))
            count, capacity = len(self), int(self._index.get_max_elements())
            floor, deleted = self.floor, self._deleted
        size = tmp.stat().st_size
        digest = _checksum(tmp)
        os.replace(tmp, directory / _INDEX_FILE)
        meta = {
            "identity": self.identity,
            "dim": self.dim,
            "count": count,
            "capacity": capacity,
            "max_label": self.max_label,
            "floor": floor,
            "deleted": deleted,
            "bytes": size,
            "blake2b": digest,
            "layout": _LAYOUT,
        }
        tmp_meta = directory / (_META_FILE + ".tmp")
        tmp_meta.write_text(json.dumps(meta))
        os.replace(tmp_meta, directory / _META_FILE)

    def add(self, labels: np.ndarray, vectors: np.ndarray) -> None:
        """Insert vectors of new labels (into removed labels' slots first, growing the
        capacity geometrically when none is free); a label seen before is updated in
        place if it is still in the index, and left out if it was removed or evicted."""
        if len(labels) == 0:
            return
        labels = np.asarray(labels, dtype=np.int64)
        with self._lock:
            kept = labels >= self.floor  # below the floor: evicted, stays out
            labels, vectors = labels[kept], vectors[kept]
            fresh = labels > self.max_label
            for label, vector in zip(labels[~fresh].tolist(), vectors[~fresh], strict=True):
                try:  # hnswlib refuses to update a removed label: it stays out
                    self._index.add_items(vector[None, :], [label], replace_deleted=False)
                except RuntimeError:
                    pass
            if not fresh.any():
                return
            new = int(fresh.sum())
            reused = min(new, self._deleted)
            need = len(self) + new - reused
            cap = int(self._index.get_max_elements())
            if need > cap:
                self._index.resize_index(max(need, cap * 2))
            self._index.add_items(vectors[fresh], labels[fresh], replace_deleted=True)
            self._deleted -= reused
            self.max_label = max(self.max_label, int(labels.max()))

    def remove(self, label: int) -> None:
        """Hide ``label`` from searches and free its slot (no-op when absent)."""
        with self._lock:
            try:
                self._index.mark_deleted(label)
            except RuntimeError:
                return
            self._deleted += 1

    def evict_below(self, floor: int, labels: Sequence[int]) -> None:
        """Remove ``labels`` (the index's labels below ``floor``) and raise the floor."""
        for label in labels:
            self.remove(label)
        with self._lock:
            self.floor = max(self.floor, floor)

    def search_many(
        self, vectors: np.ndarray, k: int, *, ef: int = _EF_SEARCH
    ) -> tuple[np.ndarray, np.ndarray]:
        """(labels, cosines) of the ``k`` nearest neighbours of each row, -1 padded."""
        n = len(self)
        labels = np.full((len(vectors), k), -1, dtype=np.int64)
        sims = np.zeros((len(vectors), k), dtype=np.float32)
        if n == 0 or k <= 0 or len(vectors) == 0:
            return labels, sims
        kk = min(k, n)
        try:
            with self._lock:
                self._index.set_ef(max(ef, kk))
                found, dists = self._index.knn_query(vectors, k=kk)
        except RuntimeError:
            return labels, sims
        labels[:, :kk] = found
        sims[:, :kk] = 1.0 - dists
        return labels, sims

    def search(
        self,
        vector: np.ndarray,
        k: int,
        allowed: Callable[[int], bool] | None = None,
        *,
        ef: int = _EF_SEARCH,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``k`` (labels, cosine similarities), best first, optionally filtered.

        ``ef`` trades speed for recall; near-duplicate checks can afford a small one.
        """
        n = len(self)
        if n == 0 or k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        k = min(k, n)
        while k > 0:
            try:
                with self._lock:
                    self._index.set_ef(max(ef, k))
                    labels, dists = self._index.knn_query(
                        vector, k=k, num_threads=1, filter=allowed
                    )
                return labels[0].astype(np.int64), (1.0 - dists[0]).astype(np.float32)
            except RuntimeError:
                # Fewer than k allowed (or reachable) elements: ask for fewer.
                k //= 2
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
