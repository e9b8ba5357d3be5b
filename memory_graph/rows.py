"""Column lists and row readers both memory storage backends share.

The tables have the same columns on SQLite and PostgreSQL; what a backend reads back
in these column orders becomes the protocol's row types here, once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .storage import AuthoredNode, EpisodeContext, NodeBrief

__all__ = [
    "BRIEF_COLUMNS",
    "EPISODE_CONTEXT_COLUMNS",
    "RECORD_COLUMNS",
    "ROW_COLUMNS",
    "authored",
    "brief",
    "episode_context",
    "record",
]

#: NodeBrief's fields, in order.
BRIEF_COLUMNS = "rowid, id, channel, type, superseded_by, content_hash"
#: NodeRow's fields, in order.
ROW_COLUMNS = (
    "rowid, id, type, content, channel, sources, created_at, updated_at, accessed_at, "
    "current_importance, author_id, superseded_by"
)
#: An export record's fields, in order (``workspace`` becomes ``scope``).
RECORD_COLUMNS = (
    "id, type, content, importance, current_importance, created_at, updated_at, accessed_at, "
    "access_count, channel, workspace, author_id, author_name, platform_id, sources, superseded_by"
)
_RECORD_KEYS = [k.strip() for k in RECORD_COLUMNS.split(",")]
#: EpisodeContext's fields, in order.
EPISODE_CONTEXT_COLUMNS = "rowid, created_at, content, author_name, near_text, far_text"


def brief(row: Sequence[Any]) -> NodeBrief:
    rowid, id_, channel, type_, sup, digest = row
    return NodeBrief(int(rowid), id_, channel, type_, sup, digest)


def episode_context(row: Sequence[Any]) -> EpisodeContext:
    rowid, created, content, name, near, far = row
    return EpisodeContext(int(rowid), float(created), content, name, near, far)


def record(row: Sequence[Any]) -> dict[str, Any]:
    node = dict(zip(_RECORD_KEYS, row, strict=True))
    node["sources"] = json.loads(node["sources"])
    node["scope"] = node.pop("workspace")
    return node


def authored(
    episodes: Sequence[Sequence[Any]],
    own: Sequence[Sequence[Any]],
    derived: Sequence[Sequence[Any]],
) -> list[AuthoredNode]:
    """An author's nodes from three reads: their episodes (rowid, id, channel, platform
    id), memories in their name and memories derived from their episodes (rowid, id,
    channel, sources JSON); a memory both own and derived is listed once, as own."""
    out = [AuthoredNode(int(r), i, ch, pid, (), True) for r, i, ch, pid in episodes]
    own_rows = {int(r) for r, *_ in own}
    out += [AuthoredNode(int(r), i, ch, None, tuple(json.loads(s)), True) for r, i, ch, s in own]
    out += [
        AuthoredNode(int(r), i, ch, None, tuple(json.loads(s)), False)
        for r, i, ch, s in derived
        if int(r) not in own_rows
    ]
    return out
