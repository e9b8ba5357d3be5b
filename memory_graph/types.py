"""Values the memory graph hands out and takes in: node and edge kinds, drafts, hits, reports."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class MemoryType(StrEnum):
    """What a memory node holds; ``EPISODE`` is an archived raw message, never saved by a tool."""

    FACT = "fact"
    PREFERENCE = "preference"
    DECISION = "decision"
    IDENTITY = "identity"
    EVENT = "event"
    OBSERVATION = "observation"
    GOAL = "goal"
    TODO = "todo"
    ENTITY = "entity"
    EPISODE = "episode"


#: Types a tool or worker may save (everything but episodes, which come from the archive).
SAVABLE_TYPES: tuple[str, ...] = tuple(t.value for t in MemoryType if t is not MemoryType.EPISODE)

DEFAULT_IMPORTANCE: dict[str, float] = {
    "fact": 0.6,
    "preference": 0.7,
    "decision": 0.8,
    "identity": 1.0,
    "event": 0.4,
    "observation": 0.3,
    "goal": 0.9,
    "todo": 0.8,
    "entity": 0.85,
    "episode": 0.5,
}


class EdgeType(StrEnum):
    """A typed relation between two nodes; ``DERIVED_FROM`` links a memory to its episodes."""

    RELATED_TO = "related_to"
    UPDATES = "updates"
    CONTRADICTS = "contradicts"
    CAUSED_BY = "caused_by"
    RESULT_OF = "result_of"
    PART_OF = "part_of"
    MENTIONS = "mentions"
    DERIVED_FROM = "derived_from"


#: How much of a seed's score flows along each relation during graph expansion.
EDGE_MULTIPLIER: dict[str, float] = {
    "updates": 1.5,
    "caused_by": 1.3,
    "result_of": 1.3,
    "related_to": 1.0,
    "derived_from": 1.0,
    "mentions": 0.9,
    "part_of": 0.8,
    "contradicts": 0.5,
}

MAX_CONTENT_BYTES = 50_000
MAX_RECALL_LIMIT = 20


@dataclass(frozen=True, slots=True)
class MemoryDraft:
    """One memory to save with :meth:`MemoryGraph.save_many`; same fields as ``save``."""

    content: str
    memory_type: str
    channel: str
    importance: float | None = None
    related_to: Sequence[str] = ()
    supersedes: str | None = None
    author_id: str = ""
    sources: Sequence[str] = ()
    #: When what it says was said (epoch seconds); None: now.  What a forget keeps of a
    #: sentence is dated as the sentence was, so what was said after it stays later.
    created_at: float | None = None


@dataclass(frozen=True, slots=True)
class SaveResult:
    """The id a save landed on; ``merged`` when it folded into an existing near-duplicate."""

    id: str
    merged: bool = False


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One recalled node, ranked; ``to_json`` is the wire shape of the memory_recall tool."""

    id: str
    type: str
    content: str
    score: float
    channel: str
    source_message_ids: tuple[str, ...]
    created_at: float
    author_id: str = ""
    #: The name the author last went by ("" when unknown).
    author: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "content": self.content,
            "score": round(self.score, 4),
            "channel": self.channel,
            "source_message_ids": list(self.source_message_ids),
            "created_at": self.created_at,
        }
        if self.author:
            out["author"] = self.author
        return out


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What ``forget_author`` removed (or, in a dry run, would remove); ``messages`` are
    (channel, platform_id) pairs it touched.

    The store applies ``keep_messages_on_forget`` to ``messages``: the graph itself
    never deletes archived messages, only the nodes derived from them.
    """

    author_id: str
    memories_deleted: int
    episodes_deleted: int
    messages: tuple[tuple[str, str], ...] = ()
    #: (channel, memories, episodes, messages) for every channel touched.
    per_channel: tuple[tuple[str, int, int, int], ...] = ()
    #: The channel whose view the forget was limited to; None when it reached everywhere.
    scope: str | None = None

    @property
    def platform_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(pid for _, pid in self.messages))


@dataclass(frozen=True, slots=True)
class MaintenanceReport:
    """What one maintenance pass changed."""

    decayed: int = 0
    pruned: int = 0
    associated: int = 0
    index_saved: bool = False
    pruned_ids: tuple[str, ...] = field(default=())

    def to_json(self) -> str:
        return json.dumps(
            {
                "decayed": self.decayed,
                "pruned": self.pruned,
                "associated": self.associated,
                "index_saved": self.index_saved,
            }
        )
