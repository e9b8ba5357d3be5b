"""The graph's links: read from storage, never mirrored in RAM.

Links used to be mirrored in an in-RAM networkx graph, about a kilobyte per link,
so a bot grew with every memory it ever made.  Recall needs the links of a few
dozen nodes per question, and the storage indexes both directions
(:meth:`~memory_graph.storage.MemoryStorage.links_of`), so each read is one
indexed query instead.  Deleting a node deletes its links.
"""

from __future__ import annotations

from collections.abc import Collection

from .storage import Link, MemoryStorage

__all__ = ["Link", "existing"]


async def existing(
    storage: MemoryStorage, pairs: Collection[tuple[int, int]], type_: str
) -> set[tuple[int, int]]:
    """Which ``(src, dst)`` of ``pairs`` already have a link of type ``type_``."""
    found = await storage.link_targets({a for a, _ in pairs}, type_)
    return {(a, b) for a, b in pairs if b in found.get(a, ())}
