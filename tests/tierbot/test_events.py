"""The event bus: subscribers see the events of their class, and a broken one breaks nothing."""

from __future__ import annotations

from tierbot.events import Bus, CompactionFailed, Event, TurnCompleted
from tierbot.vocab import CompactionKind, Outcome


def test_a_subscriber_sees_its_events_and_not_others():
    """A handler for TurnCompleted gets turns, not compaction failures."""
    bus = Bus()
    seen: list[Event] = []
    bus.subscribe(TurnCompleted, seen.append)
    bus.publish(TurnCompleted("console:a", duration=0.5))
    bus.publish(CompactionFailed("console:a", CompactionKind.BACKGROUND, Outcome.FAILED, "x"))
    assert seen == [TurnCompleted("console:a", duration=0.5)]


def test_a_subscriber_to_the_base_class_sees_every_event():
    """Subscribing to Event (as a log writer would) sees everything, in order."""
    bus = Bus()
    seen: list[str] = []
    bus.subscribe(Event, lambda e: seen.append(type(e).__name__))
    bus.publish(TurnCompleted("c", duration=1.0))
    bus.publish(CompactionFailed("c", CompactionKind.META, Outcome.NOOP, "nothing to free"))
    assert seen == ["TurnCompleted", "CompactionFailed"]


def test_a_handler_that_raises_neither_stops_publish_nor_the_other_handlers():
    """A metrics bug never breaks the turn that published the event."""
    bus = Bus()
    seen: list[Event] = []

    def broken(_event: Event) -> None:
        raise RuntimeError("boom")

    bus.subscribe(TurnCompleted, broken)
    bus.subscribe(TurnCompleted, seen.append)
    bus.publish(TurnCompleted("c", duration=0.1))
    assert len(seen) == 1


def test_unsubscribe_stops_delivery_and_is_safe_twice():
    """After unsubscribing a handler hears nothing more."""
    bus = Bus()
    seen: list[Event] = []
    stop = bus.subscribe(TurnCompleted, seen.append)
    stop()
    stop()
    bus.publish(TurnCompleted("c", duration=0.1))
    assert seen == []
