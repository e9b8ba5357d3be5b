"""Tierbot's own message types: what the core sees instead of platform payloads.

``InboundMessage`` is what an adapter hands the runtime; ``Message`` is one row of
a channel's history as the store keeps it.  Both are frozen values.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from operator import attrgetter
from typing import Any, Protocol


class Role(StrEnum):
    """Who produced a history entry."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    SUMMARY = "summary"
    MARKER = "marker"


class State(StrEnum):
    """Whether a message is part of the channel's live context."""

    LIVE = "live"
    ARCHIVED = "archived"


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A message received from a platform, already turned into tierbot's terms.

    ``addressed`` is true when the bot was mentioned, replied to, or the message
    is a DM: it drives the ``mention`` respond mode.  ``private`` is true when not
    everyone in the workspace can read the conversation (a DM, a group DM, a
    private channel or thread, or a conversation the adapter cannot yet tell is
    public): its memories stay in it (``[memory] private_scope``).
    """

    channel: str
    platform_id: str
    author_id: str
    author_name: str
    text: str
    ts: float = field(default_factory=time.time)
    addressed: bool = False
    is_dm: bool = False
    thread: str | None = None
    reply_to: str | None = None
    private: bool = False


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of a channel's history, as stored.

    ``id`` is tierbot's internal, monotonically increasing id (0 until stored);
    ``platform_id`` is the platform's own id, unique within the channel.
    ``pos`` orders the live context: a summary takes the position of the first
    message it replaces, so summaries stack chronologically at the head.
    """

    channel: str
    platform_id: str
    role: Role
    text: str
    author_id: str = ""
    author_name: str = ""
    ts: float = 0.0
    tokens: int = 0
    id: int = 0
    state: State = State.LIVE
    pos: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def with_(self, **changes: Any) -> Message:
        """Return a copy with ``changes`` applied (``dataclasses.replace``, without its
        per-call look at the fields: every stored message passes here, some twice)."""
        if type(self) is not Message or not changes.keys() <= _MESSAGE_FIELDS:
            return replace(self, **changes)  # a subclass; or raises naming the unknown field
        new = object.__new__(Message)
        for name, value in zip(_MESSAGE_FIELD_NAMES, _message_values(self), strict=True):
            _set(new, name, value)
        for name, value in changes.items():
            _set(new, name, value)
        return new

    @property
    def pinned(self) -> bool:
        return bool(self.meta.get("pinned"))


_MESSAGE_FIELD_NAMES = tuple(f.name for f in fields(Message))
_MESSAGE_FIELDS = frozenset(_MESSAGE_FIELD_NAMES)
_message_values = attrgetter(*_MESSAGE_FIELD_NAMES)
_set = object.__setattr__


@dataclass(frozen=True, slots=True)
class SetAside:
    """What an emergency marker stands for: the archived messages it set aside.

    A truncation replaces the oldest live messages by one ``Role.MARKER`` entry whose
    ``meta["set_aside"]`` lists their ids in history order; rescues summarize them
    chunk by chunk and shrink the list.  This is the one place that reads or writes
    that meta key, so the on-disk JSON stays the same while code handles a value.
    """

    ids: tuple[int, ...] = ()

    @classmethod
    def of(cls, msg: Message) -> SetAside:
        """The ids ``msg`` set aside: none unless it is a marker with some left."""
        if msg.role is not Role.MARKER:
            return cls()
        return cls(tuple(int(i) for i in msg.meta.get("set_aside", [])))

    def __len__(self) -> int:
        return len(self.ids)

    def __bool__(self) -> bool:
        return bool(self.ids)

    def without(self, ids: Collection[int]) -> SetAside:
        """The ids still set aside once ``ids`` were summarized or found gone."""
        return SetAside(tuple(i for i in self.ids if i not in ids))

    def meta(self) -> dict[str, Any]:
        """The marker's stored meta for these ids."""
        return {"set_aside": list(self.ids)}


@dataclass(frozen=True, slots=True)
class Outbound:
    """A reply to deliver: which channel, what text, and which message it answers."""

    channel: str
    text: str
    reply_to: str | None = None


@dataclass(frozen=True, slots=True)
class Delivery:
    """Whether the runtime accepted an inbound message, and why not."""

    accepted: bool
    reason: str = ""
    #: Set when the message was refused for its length: the limit it broke.
    limit: int = 0

    @property
    def too_long(self) -> bool:
        return not self.accepted and self.limit > 0


TOO_LONG = "too long"


def too_long(chars: int, limit: int) -> str:
    """Why a message over ``[runtime] max_message_chars`` was refused (a Delivery reason)."""
    return f"{TOO_LONG}: {chars:,} characters; the limit is {limit:,} ([runtime] max_message_chars)"


def too_long_reply(chars: int, limit: int) -> str:
    """What the author of a refused message is told."""
    return (
        f"That message is {chars:,} characters long; I take at most {limit:,}, so I did not "
        "read it. Please send it in smaller parts."
    )


class ProgressHandle(Protocol):
    """A platform's "the bot is working" indicator; ``done`` takes it away."""

    async def done(self) -> None: ...
