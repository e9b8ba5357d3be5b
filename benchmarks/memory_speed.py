"""Memory graph speed at scale: batched saves, recall latency, reopen time, ANN quality.

Targets at 100k memories: recall p50 <= 5 ms and p99 <= 20 ms, save >= 2,000/s batched,
reopen < 2 s, approximate vector search recall@10 >= 0.95 against exact search.

Usage: python -m benchmarks.memory_speed [--sizes 100000,1000000] [--queries 1000] [--quick]
Memories are synthetic sentences (see Corpus) spread over several workspaces.  A size
is skipped, with the reason printed, when filling it is estimated to take longer than
--max-seconds.  Writes benchmarks/results/memory_speed.json (targets on the 100k rows).
Latencies are percentiles over --queries recalls after a warm-up; the save rate is
memories over the seconds spent inside save_many (text generation excluded).

The in-RAM vector index holds every memory here (``--vector-index-limit 0``): the
figures are those of a bot whose operator lifted ``[memory] vector_index_limit``.  With
the default limit (5,000) the index holds the newest 5,000 and the ANN row compares
that index with exact search over all memories, so it is reported without a target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import Row, machine_meta, print_table, row, write_results  # noqa: E402
from memory_graph import MemoryDraft, MemoryGraph  # noqa: E402
from tierbot.config import MemoryConfig  # noqa: E402

TYPES = ("fact", "preference", "decision", "event", "observation", "goal", "todo")
SYLLABLES = "ka lo mi ne ru sa te vo zi pa do fe gu hi ja".split()


def vocabulary(n: int, rng: np.random.Generator) -> list[str]:
    words: set[str] = set()
    while len(words) < n:
        k = int(rng.integers(2, 5))
        words.add("".join(rng.choice(SYLLABLES, size=k)))
    return sorted(words)


class Corpus:
    """Synthetic sentences over a Zipf-distributed vocabulary.

    ``topical`` (the default) draws about 60% of a sentence's words from one of 2,000
    topics (40 words each), the rest from the whole vocabulary: like real memories,
    texts about one subject share words.  ``zipf`` draws every word independently, the
    worst case for approximate search (near-isotropic vectors).
    """

    def __init__(self, seed: int = 7, vocab_size: int = 30_000, kind: str = "topical") -> None:
        self.rng = np.random.default_rng(seed)
        self.vocab = vocabulary(vocab_size, self.rng)
        ranks = np.arange(1, vocab_size + 1, dtype=np.float64)
        self.p = (1.0 / ranks) / (1.0 / ranks).sum()
        self.kind = kind
        self.topics = np.random.default_rng(1).integers(0, vocab_size, size=(2_000, 40))
        self._pool = np.empty(0, dtype=np.int64)

    def _words(self, n: int) -> np.ndarray:
        if len(self._pool) < n:
            self._pool = self.rng.choice(len(self.vocab), size=200_000, p=self.p)
        idx, self._pool = self._pool[:n], self._pool[n:]
        return idx

    def sentence(self, lo: int = 8, hi: int = 20) -> str:
        n = int(self.rng.integers(lo, hi))
        idx = self._words(n)
        if self.kind == "topical":
            topic = self.topics[int(self.rng.integers(0, len(self.topics)))]
            own = self.rng.random(n) < 0.6
            idx = np.where(own, self.rng.choice(topic, size=n), idx)
        return " ".join(self.vocab[i] for i in idx)


def channel_of(i: int, workspaces: int) -> str:
    return f"discord:{i % workspaces}:{(i // workspaces) % 8}"


async def fill(graph: MemoryGraph, corpus: Corpus, n: int, workspaces: int, batch: int) -> float:
    """Save ``n`` memories in batches; returns memories per second (text generation excluded)."""
    spent = 0.0
    for start in range(0, n, batch):
        items = [
            MemoryDraft(
                content=corpus.sentence(),
                memory_type=TYPES[i % len(TYPES)],
                channel=channel_of(i, workspaces),
                sources=(f"m{i}",),
            )
            for i in range(start, min(n, start + batch))
        ]
        t0 = time.perf_counter()
        await graph.save_many(items)
        spent += time.perf_counter() - t0
        done = min(n, start + batch)
        if done % (batch * 20) == 0 or done == n:
            rate = done / spent
            print(f"\r  saved {done:,} ({rate:,.0f}/s)", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return n / spent


async def latencies(
    graph: MemoryGraph, corpus: Corpus, queries: int, workspaces: int
) -> list[float]:
    out = []
    for i in range(queries):
        q = corpus.sentence(3, 7)
        t0 = time.perf_counter()
        await graph.recall(q, channel=channel_of(i, workspaces), limit=10)
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


async def ann_quality(graph: MemoryGraph, corpus: Corpus, samples: int, workspaces: int) -> float:
    """Mean overlap of the index's top 10 with exact top 10, within one workspace's scope."""
    channel = channel_of(0, workspaces)
    in_scope = np.flatnonzero(graph.ws_of == graph.codes["discord:0"]).tolist()
    found, matrix = await graph.storage.embedding_matrix(graph.embedder.identity, in_scope)
    labels = np.array(found, dtype=np.int64)
    overlaps = []
    for _ in range(samples):
        qv = graph.embedder.embed([corpus.sentence(3, 7)])[0]
        exact = set(labels[np.argsort(-(matrix @ qv))[:10]].tolist())
        approx, _ = await graph.nearest(qv, 10, channel)
        overlaps.append(len(exact & set(approx.tolist())) / 10)
    return float(np.mean(overlaps))


def _size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


class _Opener:
    """Opens the graph under test on one backend: a SQLite file, or a database of a
    private PostgreSQL server (the pgserver wheel) started for the run."""

    def __init__(self, backend: str, work: Path, config: MemoryConfig) -> None:
        self.backend = backend
        self.work = work
        self.config = config
        self.server: Any = None
        self.env: dict[str, str] = {}

    def start(self) -> None:
        if self.backend == "postgres":
            from tierbot.testing.postgres import PostgresServer

            self.server = PostgresServer.start()
            self.env = {"TIERBOT_DATABASE_URL": self.server.create_database()}

    async def open(self) -> MemoryGraph:
        if self.backend == "sqlite":
            return await MemoryGraph.open(self.work / "tierbot.db", self.config)
        from memory_graph.backends import open_graph
        from tierbot.config import Config

        memory = self.config.model_dump() | {"index_dir": str(self.work / "index")}
        cfg = Config.model_validate({"storage": {"backend": "postgres"}, "memory": memory})
        return await open_graph(cfg, environ=self.env)

    async def size_mb(self, graph: MemoryGraph) -> float:
        if self.server is None:
            return _size_mb(self.work)
        pool = graph.storage.pool  # type: ignore[attr-defined]
        return float(await pool.fetchval("SELECT pg_database_size(current_database())")) / 1e6

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


async def run_size(n: int, args: argparse.Namespace, backend: str) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="tierbot-memspeed-"))
    corpus = Corpus(kind=args.corpus)
    settings: dict[str, Any] = {"vector_index_limit": args.vector_index_limit}
    if backend == "postgres":
        settings["vector_search"] = args.vector_search
    config = MemoryConfig.model_validate(settings)
    opener = _Opener(backend, work, config)
    opener.start()
    try:
        graph = await opener.open()
        save_rate = await fill(graph, corpus, n, args.workspaces, args.batch)
        t0 = time.perf_counter()
        await graph.aclose()
        close_s = time.perf_counter() - t0
        reopen = []
        for _ in range(3):
            t0 = time.perf_counter()
            graph = await opener.open()
            reopen.append(time.perf_counter() - t0)
            if len(reopen) < 3:
                await graph.aclose()
        try:
            await latencies(graph, corpus, 50, args.workspaces)  # warm caches
            lat = await latencies(graph, corpus, args.queries, args.workspaces)
            quality = await ann_quality(graph, corpus, 200, args.workspaces)
            size = await opener.size_mb(graph)
        finally:
            await graph.aclose()
        lat.sort()
        return {
            "backend": backend
            + (", pgvector search" if config.vector_search == "database" else ""),
            "memories": n,
            "vector_index_limit": args.vector_index_limit,
            "corpus": args.corpus,
            "workspaces": args.workspaces,
            "save_per_second": round(save_rate),
            "recall_p50_ms": round(statistics.median(lat), 3),
            "recall_p99_ms": round(lat[int(0.99 * (len(lat) - 1))], 3),
            "reopen_seconds_median": round(statistics.median(reopen), 3),
            "close_seconds": round(close_s, 3),
            "ann_recall_at_10": round(quality, 4),
            "db_mb": round(size),
        }
    finally:
        opener.stop()
        shutil.rmtree(work, ignore_errors=True)


TARGETS = {
    "save_per_second": ("saves", "/s", ">= 2000"),
    "recall_p50_ms": ("recall p50", "ms", "<= 5"),
    "recall_p99_ms": ("recall p99", "ms", "<= 20"),
    "reopen_seconds_median": ("reopen", "s", "< 2"),
    "ann_recall_at_10": ("ANN recall@10 vs exact", "recall", ">= 0.95"),
}


#: On PostgreSQL every search and save is a round trip to the server (issue targets);
#: reopening reads no index file, so it has no target of its own.
TARGETS_PG = {
    "save_per_second": ("saves", "/s", ">= 2000"),
    "recall_p50_ms": ("recall p50", "ms", "<= 10"),
    "recall_p99_ms": ("recall p99", "ms", "<= 40"),
    "reopen_seconds_median": ("reopen", "s", ""),
    "ann_recall_at_10": ("ANN recall@10 vs exact", "recall", ">= 0.95"),
}


def rows_of(result: dict[str, Any]) -> list[Row]:
    """Rows of one size; targets apply at 100k with every memory in the vector index,
    other sizes and a bounded index are reported without."""
    n = result["memories"]
    label = f"{n // 1000}k" if n < 1_000_000 else f"{n / 1e6:g}M"
    label += f", {result['backend']}"
    if result["vector_index_limit"]:
        label += f", index limit {result['vector_index_limit']:,}"
    targeted = n == 100_000 and not result["vector_index_limit"]
    targets = TARGETS_PG if result["backend"].startswith("postgres") else TARGETS
    return [
        row(f"{name} @{label}", result[key], unit, target if targeted else "")
        for key, (name, unit, target) in targets.items()
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000", help="comma-separated memory counts")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--workspaces", type=int, default=4)
    ap.add_argument("--corpus", choices=["topical", "zipf"], default="topical")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument(
        "--max-seconds", type=float, default=1200.0, help="skip a size estimated to fill slower"
    )
    ap.add_argument(
        "--vector-search",
        choices=["memory", "database"],
        default="memory",
        help="[memory] vector_search on postgres (database: pgvector's HNSW index)",
    )
    ap.add_argument(
        "--backend",
        default="sqlite",
        help="sqlite, postgres, or both (comma-separated): each size runs on each",
    )
    ap.add_argument("--quick", action="store_true", help="20k memories, 200 queries")
    ap.add_argument(
        "--vector-index-limit",
        type=int,
        default=0,
        help="[memory] vector_index_limit (0: every memory in the index, as targeted)",
    )
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.queries = "20000", 200
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results: list[dict[str, Any]] = []
    skipped = []
    backends = ["sqlite", "postgres"] if args.backend == "both" else args.backend.split(",")
    for backend, n in [(b, n) for b in backends for n in sizes]:
        done = [r for r in results if r["backend"] == backend]
        if done:
            prev = done[-1]
            # Saves slow down as the indexes grow: twice the smaller size's time per item.
            estimate = n / prev["save_per_second"] * 2.0
            if estimate > args.max_seconds:
                reason = (
                    f"estimated {estimate:.0f} s to fill > --max-seconds {args.max_seconds:.0f}"
                )
                print(f"skipping {n:,} memories: {reason}")
                skipped.append({"memories": n, "reason": reason})
                continue
        print(f"{n:,} memories on {backend} ...", file=sys.stderr)
        results.append(asyncio.run(run_size(n, args, backend)))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    rows = [r for result in results for r in rows_of(result)]
    print_table(f"memory graph speed ({args.corpus} corpus, {args.workspaces} workspaces)", rows)
    meta = machine_meta(
        results=results,
        skipped=skipped,
        corpus=args.corpus,
        workspaces=args.workspaces,
        queries=args.queries,
    )
    out = write_results("memory_speed", rows, meta)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
