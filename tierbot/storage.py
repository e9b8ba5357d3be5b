"""The storage protocols: what every layer may ask of tierbot's message store.

:class:`MessageStore` is the message store as channels, workers, the memory
indexer and the application use it; the row values it takes and returns are
defined here, so callers depend on this module, never on an implementation.
SQLite (:class:`tierbot.store.Store`) is the embedded implementation; the contract
suite in ``tests/contracts/`` runs against every implementation.

The promises every implementation keeps (the contract tests check each):

* the message log is append-only: a message only moves from ``live`` to
  ``archived``; deleting happens only when a user is forgotten;
* ``append`` returns once the row is durable; a redelivered
  ``(channel, platform_id)`` comes back as ``None`` (a duplicate) and every other
  failure raises :class:`~tierbot.errors.StoreError`: a constraint error is not a
  duplicate;
* ids are assigned by the store, only grow, and are never reused;
* ``swap`` (archive what a summary covers and insert the summary) is atomic.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tierbot.errors import StoreError
from tierbot.messages import Message, Role, State
from tierbot.vocab import CompactionKind, Outcome

__all__ = ["ChannelState", "CompactionRecord", "MessageStore", "UndeliveredReply"]


@dataclass(frozen=True, slots=True)
class ChannelState:
    """What a restarted channel needs besides its live messages."""

    handled_upto: int = 0
    counters: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """One compaction's outcome, for the operator's history view."""

    channel: str
    tier: CompactionKind
    outcome: Outcome
    started: float
    duration: float
    usage_before: float
    usage_after: float
    covered: int
    tokens_before: int
    tokens_after: int
    memories: int
    reason: str = ""

    @classmethod
    def of_row(cls, channel: str, tier: str, outcome: str, *rest: Any) -> CompactionRecord:
        """A record as stored (older stores wrote ``error`` for a failed pass)."""
        return cls(channel, CompactionKind(tier), Outcome.of(outcome), *rest)


@dataclass(frozen=True, slots=True)
class UndeliveredReply:
    """A reply in a channel's history that its platform has not received yet."""

    id: int
    channel: str
    text: str
    reply_to: str | None
    created: float
    attempts: int
    error: str
    #: When a post of it began, if the process died before the platform's answer was
    #: recorded (the platform may have it): never posted again by itself.
    sending: float | None = None


class MessageStore(Protocol):
    """The message log, channel state, compaction history and kept replies."""

    #: The last batch of writes refused as a whole (a full disk, a lost connection).
    refused: StoreError | None

    # -- the log ------------------------------------------------------------------------

    async def append(self, msg: Message) -> Message | None:
        """Store ``msg``; the stored copy (id assigned), or None for a redelivery."""
        ...

    async def append_many(self, msgs: Sequence[Message]) -> list[Message | None]:
        """:meth:`append` for each, in one commit; None marks each redelivery."""
        ...

    async def load_live(self, channel: str) -> list[Message]:
        """The channel's live context, in context order."""
        ...

    async def messages_after(self, channel: str, after_id: int) -> list[Message]: ...

    async def messages_since(
        self, after_id: int, limit: int, roles: Sequence[Role]
    ) -> tuple[list[Message], int]:
        """Up to ``limit`` messages of ``roles`` after ``after_id`` in every channel, in id
        order, and the highest id the scan covered."""
        ...

    async def count_since(self, after_id: int, roles: Sequence[Role]) -> int: ...

    async def last_message_id(self) -> int: ...

    async def get_messages(self, ids: Sequence[int]) -> list[Message]: ...

    def export(self, channel: str) -> AsyncIterator[Message]:
        """Every conversation message of ``channel`` (live and archived), oldest first."""
        ...

    async def count(self, channel: str, *, state: State | None = None) -> int: ...

    async def channel_keys(self) -> list[str]: ...

    async def swap(
        self,
        channel: str,
        covered: Sequence[int],
        replacement: Message | None,
        *,
        record: CompactionRecord | None = None,
        state: ChannelState | None = None,
        updates: Sequence[Message] = (),
    ) -> Message | None:
        """Atomically archive ``covered`` and insert ``replacement``, linked to them."""
        ...

    async def covered_by(self, summary_id: int) -> list[int]: ...

    async def delete_messages(self, pairs: Sequence[tuple[str, str]]) -> int: ...

    async def count_author_messages(self, author_id: str) -> int: ...

    async def delete_author_messages(
        self, author_id: str, channels: Callable[[str], bool] | None = None
    ) -> int: ...

    # -- channel state and compaction history ------------------------------------------------

    async def channel_state(self, channel: str) -> ChannelState: ...

    async def save_channel_state(self, channel: str, state: ChannelState) -> None: ...

    async def ensure_channel(self, channel: str) -> None: ...

    async def channels_awaiting_reply(self) -> list[str]: ...

    async def record_compaction(self, record: CompactionRecord) -> None: ...

    async def compactions(self, channel: str, limit: int = 100) -> list[CompactionRecord]: ...

    # -- replies the platform has not taken yet ----------------------------------------------

    async def save_undelivered(
        self, channel: str, text: str, reply_to: str | None, error: str
    ) -> int: ...

    async def undelivered(self, prefix: str = "") -> list[UndeliveredReply]: ...

    async def mark_sending(self, reply_id: int) -> None: ...

    async def mark_delivered(self, reply_id: int) -> None: ...

    async def mark_undelivered_again(self, reply_id: int, error: str) -> None: ...

    async def release_undelivered(self, reply_id: int) -> bool: ...

    async def drop_undelivered(self, reply_id: int) -> bool: ...

    # -- lifecycle -----------------------------------------------------------------------

    async def aclose(self) -> None: ...
