"""Background workers: compaction workers, task workers, their supervision and the pools."""

from workers.compaction import (
    CompactionJob,
    CompactionOutcome,
    CompactionWorker,
    MemoryWriter,
    infer_sources,
    minable,
)
from workers.pool import WorkerPool
from workers.supervisor import LimitReached, Supervisor, TaskFailed, TaskOutcome, TaskPool
from workers.task import TaskWorker, WorkerLimits
from workers.tools import ToolRegistry

__all__ = [
    "CompactionJob",
    "CompactionOutcome",
    "CompactionWorker",
    "LimitReached",
    "MemoryWriter",
    "Supervisor",
    "TaskFailed",
    "TaskOutcome",
    "TaskPool",
    "TaskWorker",
    "ToolRegistry",
    "WorkerLimits",
    "WorkerPool",
    "infer_sources",
    "minable",
]
