"""The cyclic collector's schedule while a runtime runs: messages are only ever held up
by young passes; the full pass waits for a quiet moment, or runs at least every
``[runtime] full_collection_seconds``, and reclaims what young passes left."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from bot import collector
from bot.collector import GC_YOUNG_THRESHOLD, FullCollections


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def held() -> Iterator[list[int]]:
    """The collector as a runtime holds it; the generations of the passes that ran."""
    before = gc.get_threshold()
    passes: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "stop":
            passes.append(info["generation"])

    gc.collect()
    collector.hold()
    gc.callbacks.append(seen)
    try:
        yield passes
    finally:
        gc.callbacks.remove(seen)
        collector.release()
        assert gc.get_threshold() == before  # given back as it was found


def _garbage_that_survived_a_young_pass() -> weakref.ref[Cycle]:
    cycle = Cycle()
    gone = weakref.ref(cycle)
    gc.collect(0)  # alive then: it moves to the middle generation
    del cycle
    return gone


def _allocate(young_passes: int) -> None:
    junk = [[] for _ in range(GC_YOUNG_THRESHOLD * young_passes)]
    del junk


def test_a_burst_runs_only_young_passes_and_the_full_pass_waits_for_quiet(
    held: list[int],
) -> None:
    clock = Clock()
    full = FullCollections(lambda: 600.0, quiet=1.0, gap=60.0, clock=clock)
    gone = _garbage_that_survived_a_young_pass()
    held.clear()
    _allocate(15)  # Python's own schedule runs a middle pass every 10 young ones
    assert held and set(held) == {0}
    assert gone() is not None  # left for the full pass
    # Messages keep arriving: nothing is due, before the gap or after it.
    for t in (1010.0, 1030.0, 1061.0, 1061.5):
        clock.now = t
        full.traffic()
        assert not full.due()
    clock.now = 1062.6  # a quiet second after the gap
    assert full.due()
    assert full.collect() >= 1  # the cycle
    assert gone() is None
    assert held[-1] == 2
    assert not full.due()  # nothing survived a young pass since


def test_when_messages_never_stop_the_full_pass_runs_every_full_collection_seconds(
    held: list[int],
) -> None:
    clock = Clock()
    every = [600.0]
    full = FullCollections(lambda: every[0], quiet=1.0, gap=60.0, clock=clock)
    gone = _garbage_that_survived_a_young_pass()
    for step in range(1, 1300):
        clock.now = 1000.0 + step * 0.5
        full.traffic()
        if full.due():
            break
    assert clock.now == 1600.0
    full.collect()
    assert gone() is None
    # The setting is read live: a shorter one applies at the next check.
    gone = _garbage_that_survived_a_young_pass()
    every[0] = 5.0
    clock.now += 4.5
    full.traffic()
    assert not full.due()
    clock.now += 0.5
    full.traffic()
    assert full.due()


def test_a_second_runtime_shares_the_schedule_and_the_last_one_restores_it(
    held: list[int],
) -> None:
    young, middle, old = gc.get_threshold()
    assert young >= GC_YOUNG_THRESHOLD and middle == collector.DEFERRED
    collector.hold()  # a second runtime in the same process
    collector.release()
    assert gc.get_threshold() == (young, middle, old)  # the first one still runs


def test_nothing_is_due_while_the_collector_is_switched_off(held: list[int]) -> None:
    clock = Clock()
    full = FullCollections(lambda: 600.0, clock=clock)
    _garbage_that_survived_a_young_pass()
    clock.now += 3600
    gc.disable()
    try:
        assert not full.due()
    finally:
        gc.enable()
    assert full.due()
