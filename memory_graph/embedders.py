"""Embedders: the seam that turns texts into unit vectors.

The default, :class:`HashingEmbedder`, is offline, deterministic and needs no model:
stemmed words and word pairs hashed into signed buckets.  It is lexical, so it is
strong for near-duplicate detection and association edges and weak for paraphrase;
recall leans on full-text BM25 and uses vectors as a second opinion (see
benchmarks/locomo.py for the measured trade-off).  The optional embedders import
their libraries lazily, so tierbot runs without them.
"""

from __future__ import annotations

import itertools
import math
import os
import zlib
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tierbot.config import MemoryConfig
from tierbot.errors import ConfigError, ConfigProblem

from .text import TEXT_VERSION, terms


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to float32 unit vectors of a fixed dimension.

    ``identity`` names the model and every parameter that changes its output; the
    vector index stores it and is rebuilt (every node re-embedded) when it changes.
    ``embed`` is synchronous and may be slow: the graph calls it in a worker thread.
    An embedder may also carry ``recall_weight`` (0..1), the share of vector
    similarity in recall's relevance (default 0.4), ``min_similarity``, the
    cosine below which its hits are noise (default 0.2), and ``inline_chars``: a save
    whose texts hold at most this many characters is embedded on the event loop,
    when that is cheaper than a hand-off to a thread (default 0: never).
    """

    @property
    def identity(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


#: Features whose bucket is cached: bounded, so a long-lived process does not grow with
#: every word pair it has ever seen (crc32 of the rest is cheap).
_CACHE_FEATURES = 32_768


class HashingEmbedder:
    """Signed feature hashing of stemmed words (weight 1+log tf) and adjacent word pairs.

    Lexical like BM25, so it adds little to it: recall gives it a small weight
    (measured on LoCoMo: 0.1 is best, 0.4 costs ~1.5 points of recall@10).
    """

    recall_weight = 0.1
    #: A memory of a line or two is embedded in ~50 us; a hand-off to a worker thread
    #: costs several times that in a busy process.
    inline_chars = 500

    def __init__(self, dim: int = 128, pair_weight: float = 0.5) -> None:
        if dim < 16:
            raise ValueError("dim must be at least 16")
        self._dim = dim
        self._pair_weight = pair_weight
        self._cache: dict[str, tuple[int, float]] = {}

    @property
    def identity(self) -> str:
        return f"hashing:{TEXT_VERSION}:dim={self._dim}:pairs={self._pair_weight}"

    @property
    def dim(self) -> int:
        return self._dim

    def _bucket(self, feature: str) -> tuple[int, float]:
        hit = self._cache.get(feature)
        if hit is None:
            h = zlib.crc32(feature.encode())
            hit = (h % self._dim, 1.0 if (h >> 31) & 1 else -1.0)
            if len(self._cache) < _CACHE_FEATURES:
                self._cache[feature] = hit
        return hit

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            ts = terms(text)
            feats: Counter[str] = Counter(ts)
            for t, count in feats.items():
                idx, sign = self._bucket(t)
                out[row, idx] += sign * (1.0 + math.log(count))
            for a, b in itertools.pairwise(ts):
                idx, sign = self._bucket(a + "_" + b)
                out[row, idx] += sign * self._pair_weight
        return _normalise(out)


class SentenceTransformerEmbedder:
    """A local sentence-transformers model loaded from ``path`` (extra: sentence-transformers)."""

    def __init__(self, path: str) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - depends on the optional extra
            raise ConfigError("tierbot", [_not_installed(exc)]) from None
        self._path = path
        self._model: Any = SentenceTransformer(path, device="cpu")
        self._dim = int(self._model.get_sentence_embedding_dimension())

    @property
    def identity(self) -> str:
        return f"sentence-transformers:{os.path.abspath(self._path)}:dim={self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs = self._model.encode(list(texts), batch_size=64, show_progress_bar=False)
        return _normalise(np.asarray(vecs))


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint through the official SDK (sync client)."""

    def __init__(self, model: str, *, base_url: str = "", api_key: str = "", dim: int = 0) -> None:
        import openai

        self._client = openai.OpenAI(base_url=base_url or None, api_key=api_key or "unused")
        self._model = model
        self._base_url = base_url
        self._dim = dim or len(self.embed(["dimension probe"])[0])

    @property
    def identity(self) -> str:
        return f"openai:{self._base_url or 'default'}:{self._model}:dim={self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out: list[list[float]] = []
        for start in range(0, len(texts), 256):
            batch = [t or " " for t in texts[start : start + 256]]
            resp = self._client.embeddings.create(model=self._model, input=batch)
            out.extend(d.embedding for d in sorted(resp.data, key=lambda d: d.index))
        return _normalise(np.asarray(out, dtype=np.float32))


def _not_installed(exc: ImportError) -> ConfigProblem:
    return ConfigProblem(
        "memory.embedder",
        "sentence-transformers is not installed: install the extra with "
        f"pip install 'tierbot[sentence-transformers]' ({exc})",
    )


def embedder_problems(config: MemoryConfig) -> list[ConfigProblem]:
    """Why the embedder ``config`` names cannot be built in this environment (empty when it
    can, as far as can be told without loading a model or calling a server).

    Asked before the store is opened, so a missing optional extra stops ``run`` before
    anything is written; it imports the extra's library, which building the embedder
    would import anyway.
    """
    if not config.enabled or config.embedder != "sentence-transformers":
        return []
    try:
        import sentence_transformers  # noqa: F401
    except ImportError as exc:
        return [_not_installed(exc)]
    return []


def embedder_from_config(config: MemoryConfig) -> Embedder:
    """The embedder ``[memory] embedder`` names; raises ConfigError when it cannot be built."""
    if config.embedder == "offline":
        return HashingEmbedder()
    if config.embedder == "sentence-transformers":
        return SentenceTransformerEmbedder(config.embedder_model)
    key = os.environ.get(config.embedder_api_key_env, "") if config.embedder_api_key_env else ""
    return OpenAIEmbedder(config.embedder_model, base_url=config.embedder_base_url, api_key=key)
