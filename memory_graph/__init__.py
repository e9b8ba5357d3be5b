"""The memory graph: typed memories and archived episodes, linked, searchable, forgettable.

Public surface (everything else in this package is private)::

    async with await MemoryGraph.open(db_path, config.memory) as graph:
        await graph.save("Alice prefers tea", "preference", channel=key, sources=["123"])
        hits = await graph.recall("what does Alice drink?", channel=key)
        prompt_block = format_for_prompt(hits)

This floor owns long-term memory and its tables.  The graph keeps its durable state
behind :class:`memory_graph.storage.MemoryStorage` (on SQLite:
:mod:`memory_graph.sqlite_storage` and :mod:`memory_graph.sqlite_search`, tables and
migrations in :mod:`memory_graph.schema`); the in-RAM indexes (hnswlib, scope codes,
term counts) sit above it in the graph.  It may import only the kernel (tierbot) and
third-party libraries; channels and the application reach it through
``channels.memory``.
"""

from .embedders import (
    Embedder,
    HashingEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    embedder_problems,
)
from .graph import MemoryGraph
from .tools import (
    chat_memory_tools,
    fit_hits,
    forget_query,
    format_for_prompt,
    memory_tools,
    run_memory_tool,
    save_draft,
)
from .types import (
    DEFAULT_IMPORTANCE,
    EdgeType,
    ForgetReport,
    MaintenanceReport,
    MemoryDraft,
    MemoryType,
    RecallHit,
    SaveResult,
)

__all__ = [
    "DEFAULT_IMPORTANCE",
    "EdgeType",
    "Embedder",
    "ForgetReport",
    "HashingEmbedder",
    "MaintenanceReport",
    "MemoryDraft",
    "MemoryGraph",
    "MemoryType",
    "OpenAIEmbedder",
    "RecallHit",
    "SaveResult",
    "SentenceTransformerEmbedder",
    "chat_memory_tools",
    "embedder_problems",
    "fit_hits",
    "forget_query",
    "format_for_prompt",
    "memory_tools",
    "run_memory_tool",
    "save_draft",
]
