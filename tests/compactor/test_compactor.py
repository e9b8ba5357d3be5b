"""Compactor.check: the per-channel decision, driven with plain values and a fixed clock."""

from __future__ import annotations

from compactor import Compactor
from tests.compactor.test_cuts import turns
from tierbot.config import CompactionConfig
from tierbot.vocab import CompactionKind, Outcome

WINDOW = 1000
CFG = CompactionConfig(predictive_start=False, min_messages_between=0, loop_guard_seconds=0)


def test_below_the_background_threshold_nothing_is_planned() -> None:
    c = Compactor("c:1")
    assert c.check(turns(10), 0.79, WINDOW, CFG, now=100.0) is None


def test_at_the_background_threshold_the_oldest_share_is_planned() -> None:
    items = turns(10)
    plan = Compactor("c:1").check(items, 0.80, WINDOW, CFG, now=100.0)
    assert plan is not None and plan.kind is CompactionKind.BACKGROUND
    assert list(plan.covered) == items[: len(plan.covered)] and len(plan.covered) == 6


def test_at_the_aggressive_threshold_a_larger_share_is_planned() -> None:
    plan = Compactor("c:1").check(turns(10), 0.86, WINDOW, CFG, now=100.0)
    assert plan is not None and plan.kind is CompactionKind.AGGRESSIVE
    assert len(plan.covered) == 10


def test_at_the_emergency_threshold_an_emergency_is_planned_at_once() -> None:
    c = Compactor("c:1")
    plan = c.check(turns(10), 0.96, WINDOW, CFG, now=100.0)
    assert plan is not None and plan.kind is CompactionKind.EMERGENCY


def test_a_second_pass_never_covers_what_a_running_pass_covers() -> None:
    items = turns(20)
    c = Compactor("c:1")
    cfg = CFG.model_copy(update={"parallel_compactions": 2})
    first = c.check(items, 0.81, WINDOW, cfg, now=100.0)
    assert first is not None
    c.started(first)
    assert c.check(items, 0.84, WINDOW, cfg, now=101.0) is None, (
        "the running pass frees 120 of 1,000 tokens: it brings 84 % back under 80 %"
    )
    second = c.check(items, 0.94, WINDOW, cfg, now=101.0)
    assert second is not None
    assert not first.ids & second.ids


def test_with_one_pass_allowed_a_busy_channel_waits_and_remembers_it_needs_more() -> None:
    items = turns(10)
    c = Compactor("c:1")
    first = c.check(items, 0.81, WINDOW, CFG.model_copy(update={"parallel_compactions": 1}))
    assert first is not None
    c.started(first)
    cfg = CFG.model_copy(update={"parallel_compactions": 1})
    assert c.check(items, 0.90, WINDOW, cfg, now=101.0) is None
    assert c.pending_aggressive


def test_the_loop_guard_holds_off_a_new_pass_until_enough_messages_or_time() -> None:
    items = turns(10)
    c = Compactor("c:1")
    cfg = CFG.model_copy(update={"min_messages_between": 4, "loop_guard_seconds": 30.0})
    plan = c.check(items, 0.81, WINDOW, cfg, now=100.0)
    assert plan is not None
    c.started(plan)
    c.finished(plan, Outcome.OK)
    ended = c.last_ended
    assert c.check(items, 0.81, WINDOW, cfg, now=ended + 1) is None
    assert c.wake_at == ended + 30.0, "the actor is told when to look again"
    for _ in range(4):
        c.on_message()
    assert c.check(items, 0.81, WINDOW, cfg, now=ended + 1) is not None


def test_a_cut_whose_summary_freed_nothing_is_widened_not_planned_again() -> None:
    items = turns(10)
    c = Compactor("c:1")
    plan = c.check(items, 0.81, WINDOW, CFG, now=100.0)
    assert plan is not None
    c.started(plan)
    c.finished(plan, Outcome.NOOP)
    again = c.check(items, 0.81, WINDOW, CFG, now=10_000.0)
    assert again is not None, "a channel left over the threshold by a noop compacts again"
    assert again.ids > plan.ids, "the next pass covers the noop's messages and more"
    c.started(again)
    c.finished(again, Outcome.NOOP)
    third = c.check(items, 0.81, WINDOW, CFG, now=20_000.0)
    assert third is None or third.ids > again.ids


def test_when_every_cut_freed_nothing_no_pass_is_planned_until_the_channel_changes() -> None:
    items = turns(10)
    c = Compactor("c:1")
    while (plan := c.check(items, 0.81, WINDOW, CFG, now=100.0)) is not None:
        c.started(plan)
        c.finished(plan, Outcome.NOOP)
    assert c.counters["noop"] >= 2
    assert c.check(turns(12), 0.81, WINDOW, CFG, now=100.0) is not None


def test_compact_after_a_noop_takes_a_wider_cut_then_none_when_every_cut_freed_nothing() -> None:
    items = turns(10)
    c = Compactor("c:1")
    seen: list[frozenset[int]] = []
    while (plan := c.forced(items, 0.1, CFG)) is not None:
        assert plan.ids not in seen, "/compact never repeats a cut that freed nothing"
        seen.append(plan.ids)
        c.started(plan)
        c.finished(plan, Outcome.NOOP)
    assert len(seen) >= 2 and seen[-1] > seen[0]
    assert c.only_noops_left(items)
    assert not c.only_noops_left(turns(12)), "a longer conversation has a new cut"
