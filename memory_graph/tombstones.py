"""Tombstones and node deletion: the low-level half of forgetting.

Episodes, writing and maintenance ask here whether something was forgotten and
delete nodes; :mod:`memory_graph.forgetting` decides *what* to forget.  See
that module for what the tombstone kinds mean.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import MemoryGraph

__all__ = [
    "Tombstones",
    "delete_nodes",
    "forgotten_messages",
    "is_forgotten",
    "scoped_key",
    "tombstoned",
]


@dataclass(frozen=True, slots=True)
class Tombstones:
    """The tombstones found for some authors and platform ids.

    ``authors`` maps an author id to its tombstones: (the channel a scoped forget was
    issued from, or None for everywhere; when).
    """

    authors: dict[str, list[tuple[str | None, float]]]
    pids: frozenset[str]

    def author_forgotten_at(self, g: MemoryGraph, author_id: str, channel: str) -> float | None:
        """When ``author_id`` was last forgotten as seen from ``channel``; None if never."""
        times = [
            when
            for origin, when in self.authors.get(author_id, ())
            if origin is None or g.visible(channel, origin)
        ]
        return max(times, default=None)


def scoped_key(author_id: str, channel: str) -> str:
    return f"{author_id}\n{channel}"


async def tombstoned(g: MemoryGraph, authors: Iterable[str], pids: Iterable[str]) -> Tombstones:
    """The tombstones of the given authors (global and scoped) and platform ids."""
    dead_authors: dict[str, list[tuple[str | None, float]]] = {}
    dead_pids: set[str] = set()
    for stone in await g.storage.find_tombstones(list(set(authors)), list(set(pids))):
        if stone.kind == "message":
            dead_pids.add(stone.key)
        elif stone.kind == "author":
            dead_authors.setdefault(stone.key, []).append((None, stone.created_at))
        else:
            author, _, origin = stone.key.partition("\n")
            dead_authors.setdefault(author, []).append((origin, stone.created_at))
    return Tombstones(dead_authors, frozenset(dead_pids))


async def is_forgotten(
    g: MemoryGraph, *, author_id: str, platform_ids: Sequence[str], channel: str | None = None
) -> bool:
    """Any tombstone of the messages, or of the author as seen from ``channel`` (without a
    channel, a scoped tombstone anywhere counts: that errs on the side of forgetting)."""
    stones = await tombstoned(g, [author_id] if author_id else [], platform_ids)
    if stones.pids:
        return True
    if channel is None:
        return bool(stones.authors)
    return stones.author_forgotten_at(g, author_id, channel) is not None


async def forgotten_messages(
    g: MemoryGraph, channel: str, messages: Sequence[tuple[str, str, float]]
) -> set[str]:
    """The platform ids, among (platform id, author id, ts), of the messages forgotten as
    seen from ``channel``: the message itself, or its author after it was said."""
    stones = await tombstoned(g, {a for _, a, _ in messages if a}, [p for p, _, _ in messages])
    out = set()
    for pid, author, ts in messages:
        if pid in stones.pids:
            out.add(pid)
        elif author and stones.authors:
            at = stones.author_forgotten_at(g, author, channel)
            if at is not None and ts <= at:
                out.add(pid)
    return out


async def delete_nodes(g: MemoryGraph, rowids: list[int], ids: list[str]) -> None:
    """Delete nodes (edges and sources go with them) and their text-index rows; inside a
    transaction."""
    await g.storage.delete_nodes(rowids, ids)
