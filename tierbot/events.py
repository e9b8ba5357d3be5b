"""Typed domain events and the small synchronous bus that carries them.

Channels, the compactor's actor side, workers and adapters *publish* events;
metrics, ``/status``, the ops endpoint and logging *subscribe*.  An event is a
frozen dataclass: renaming a log field can no longer break a metric, and a test
capturing logs no longer silences one.

The bus is owned by the runtime (one per runtime, so two runtimes in one process
never count each other's events).  ``publish`` calls every handler subscribed to
the event's class or one of its bases, in subscription order, in the caller's
thread, before it returns; a handler that raises is logged and skipped (a
metrics bug must never break a turn).  Handlers must be cheap and must not block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from tierbot.vocab import CompactionKind, Outcome

__all__ = [
    "Bus",
    "CompactionFailed",
    "CompactionFinished",
    "CompactionStarted",
    "ContextOverflow",
    "DeliveryFailed",
    "EmergencyTruncation",
    "Event",
    "MessageReceived",
    "ReplySent",
    "TaskCrashed",
    "TaskFinished",
    "TurnCompleted",
    "TurnFailed",
]

_log = structlog.get_logger("tierbot.events")

E = TypeVar("E", bound="Event")


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened in one channel (``channel`` is its key)."""

    channel: str


@dataclass(frozen=True, slots=True)
class MessageReceived(Event):
    """A user's message was stored and handed to its channel."""


@dataclass(frozen=True, slots=True)
class ReplySent(Event):
    """A reply was delivered to the platform."""


@dataclass(frozen=True, slots=True)
class TurnCompleted(Event):
    """The channel answered one turn; ``duration`` is seconds from first message to reply."""

    duration: float


@dataclass(frozen=True, slots=True)
class TurnFailed(Event):
    """A turn ended without its answer; ``reason`` names why.

    ``by_model`` is True when the provider failed (the channel answered with an
    apology), False when a bug stopped the turn (it is answered after a restart).
    """

    reason: str
    by_model: bool = False


@dataclass(frozen=True, slots=True)
class ContextOverflow(Event):
    """A prompt did not fit the context window: the provider refused it as too long, or it
    left no room for a reply and was not sent; ``source`` is channel, branch or worker."""

    source: str = "channel"


@dataclass(frozen=True, slots=True)
class CompactionStarted(Event):
    """A compaction pass was planned and handed to a worker (or run at once)."""

    kind: CompactionKind


@dataclass(frozen=True, slots=True)
class CompactionFinished(Event):
    """A compaction pass replaced its messages with a summary."""

    kind: CompactionKind
    duration: float
    tokens_before: int
    tokens_after: int
    memories: int = 0


@dataclass(frozen=True, slots=True)
class CompactionFailed(Event):
    """A compaction pass freed nothing (``Outcome.NOOP``) or failed (``Outcome.FAILED``)."""

    kind: CompactionKind
    outcome: Outcome
    reason: str


@dataclass(frozen=True, slots=True)
class EmergencyTruncation(Event):
    """The emergency tier set messages aside at once (they stay archived)."""

    usage_before: float
    usage_after: float
    set_aside: int


@dataclass(frozen=True, slots=True)
class TaskFinished(Event):
    """A branch or worker ended: ``outcome`` is concluded, failed or cancelled."""

    kind: str
    outcome: str
    duration: float
    error: str = ""


@dataclass(frozen=True, slots=True)
class TaskCrashed(Event):
    """A branch or worker raised out of its own error handling (a bug)."""

    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class DeliveryFailed(Event):
    """A reply could not be delivered to the platform (it is kept for retry)."""

    error: str


Handler = Callable[[Any], None]


class Bus:
    """Synchronous publish/subscribe by event class (see the module docstring)."""

    def __init__(self) -> None:
        self._handlers: dict[type[Event], list[Handler]] = {}

    def subscribe(self, kind: type[E], handler: Callable[[E], None]) -> Callable[[], None]:
        """Call ``handler`` with every later event of class ``kind`` (or a subclass).

        Returns a function that unsubscribes; calling it twice is harmless.
        """
        self._handlers.setdefault(kind, []).append(handler)

        def unsubscribe() -> None:
            handlers = self._handlers.get(kind, [])
            if handler in handlers:
                handlers.remove(handler)

        return unsubscribe

    def publish(self, event: Event) -> None:
        """Hand ``event`` to its subscribers now; never raises because of one."""
        for kind in type(event).__mro__:
            for handler in tuple(self._handlers.get(kind, ())):  # type: ignore[arg-type]
                try:
                    handler(event)
                except Exception:
                    _log.exception(
                        "events.handler_failed", kind=type(event).__name__, channel=event.channel
                    )
