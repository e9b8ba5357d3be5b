"""Background workers: compaction workers, task workers, their supervision and the pools.

This floor owns work done off a channel's turn: summarizing a compaction plan and
saving its memories (:mod:`workers.compaction`), the per-process pool that runs
those jobs (:mod:`workers.pool`), task workers that run long tool loops in
segments (:mod:`workers.task`, :mod:`workers.tools`), the supervisor that
bounds and times them (:mod:`workers.supervisor`), and their records: the
``tasks`` and ``task_messages`` tables, whose schema (:data:`TASK_TABLES`) and SQL
this floor owns (:mod:`workers.records`).

It may import memory_graph and the kernel (tierbot); never the compactor, branches,
channels or the application.  Today it needs only the kernel: the memory it writes
into is the ``MemoryWriter`` protocol, implemented above it.
"""

from workers.compaction import (
    CompactionJob,
    CompactionOutcome,
    CompactionWorker,
    MemoryWriter,
    Summarizer,
    infer_sources,
    minable,
)
from workers.pool import WorkerPool
from workers.records import TASK_TABLES, TASK_TABLES_PG, TaskRecords
from workers.supervisor import LimitReached, Supervisor, TaskFailed, TaskOutcome, TaskPool
from workers.task import TaskWorker, WorkerLimits
from workers.tools import ToolRegistry

__all__ = [
    "TASK_TABLES",
    "TASK_TABLES_PG",
    "CompactionJob",
    "CompactionOutcome",
    "CompactionWorker",
    "LimitReached",
    "MemoryWriter",
    "Summarizer",
    "Supervisor",
    "TaskFailed",
    "TaskOutcome",
    "TaskPool",
    "TaskRecords",
    "TaskWorker",
    "ToolRegistry",
    "WorkerLimits",
    "WorkerPool",
    "infer_sources",
    "minable",
]
