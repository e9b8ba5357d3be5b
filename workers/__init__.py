"""Background workers: compaction workers (summaries and memories) and the shared pool."""

from workers.compaction import (
    CompactionJob,
    CompactionOutcome,
    CompactionWorker,
    MemoryWriter,
    infer_sources,
)
from workers.pool import WorkerPool

__all__ = [
    "CompactionJob",
    "CompactionOutcome",
    "CompactionWorker",
    "MemoryWriter",
    "WorkerPool",
    "infer_sources",
]
