"""Reading the graph's links from ``memory_edges``, the one place they live.

Links used to be mirrored in an in-RAM networkx graph, about a kilobyte per link,
so a bot grew with every memory it ever made.  Recall needs the links of a few
dozen nodes per question, and both directions are indexed in SQLite (the primary
key leads with ``src``, ``memory_edges_dst`` with ``dst``), so each read below is
one indexed query instead.  Deleting a node deletes its links (ON DELETE CASCADE).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import aiosqlite

from . import schema

__all__ = ["Link", "existing", "links_of", "targets"]

# Far below SQLite's host-parameter limit (32766 since 3.32), and a bound on each query.
_CHUNK = 900


@dataclass(frozen=True, slots=True)
class Link:
    """One link as seen from ``node``: ``other`` is at its far end, either direction."""

    node: int
    other: int
    type: str
    weight: float


def _chunks(rowids: Iterable[int]) -> Iterable[list[int]]:
    ids = sorted(set(rowids))
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


async def links_of(db: aiosqlite.Connection, rowids: Collection[int]) -> list[Link]:
    """Every link touching one of ``rowids``, outgoing and incoming, in a stable order."""
    out: list[Link] = []
    for ids in _chunks(rowids):
        marks = ",".join("?" * len(ids))
        sql = (
            f"SELECT src, dst, type, weight FROM memory_edges WHERE src IN ({marks}) "
            f"UNION ALL SELECT dst, src, type, weight FROM memory_edges WHERE dst IN ({marks}) "
            "ORDER BY 1, 2, 3"
        )
        for node, other, typ, weight in await schema.fetch_all(db, sql, (*ids, *ids)):
            out.append(Link(int(node), int(other), str(typ), float(weight)))
    return out


async def targets(
    db: aiosqlite.Connection, rowids: Collection[int], type_: str
) -> dict[int, set[int]]:
    """``src -> {dst}`` of the outgoing links of type ``type_`` from ``rowids``."""
    out: dict[int, set[int]] = {}
    for ids in _chunks(rowids):
        sql = (
            "SELECT src, dst FROM memory_edges "
            f"WHERE type = ? AND src IN ({','.join('?' * len(ids))})"
        )
        for src, dst in await schema.fetch_all(db, sql, (type_, *ids)):
            out.setdefault(int(src), set()).add(int(dst))
    return out


async def existing(
    db: aiosqlite.Connection, pairs: Collection[tuple[int, int]], type_: str
) -> set[tuple[int, int]]:
    """Which ``(src, dst)`` of ``pairs`` already have a link of type ``type_``."""
    found = await targets(db, {a for a, _ in pairs}, type_)
    return {(a, b) for a, b in pairs if b in found.get(a, ())}
