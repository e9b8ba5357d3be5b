"""The per-channel compactor: a programmatic monitor, no LLM inside.

The channel actor calls :meth:`Compactor.check` after every message that
enters its history.  The compactor reads the context's running usage (O(1)),
applies the policy, and answers with a :class:`Plan` (or None):

* an **emergency** plan is carried out by the actor at once, before its next
  LLM call, even while a worker runs;
* a **background**, **aggressive**, **meta** or **rescue** plan goes to a
  compaction worker.  Up to ``parallel_compactions`` passes run per channel:
  background/aggressive passes on disjoint ranges of the oldest messages while
  the projected usage stays over the threshold (see :mod:`compactor.scheduler`),
  plus at most one meta or rescue pass.  With ``parallel_compactions = 1`` only
  one pass of any kind runs at a time.  A channel filling faster than its passes
  land starts them early (``predictive_start``); a cut is widened to at least
  twice the channel's last summary, so a pass always frees something.

State it keeps: the in-flight plans (oldest range first), a remembered
aggressive trigger, the loop guard (messages and time since the last
compaction), the message sets that freed nothing (never retried), the failure
backoff, and ``wake_at``: when a pass held back by the guard or the backoff may
go, so the actor can re-check a quiet channel then.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from compactor.cuts import choose_cut
from compactor.policy import choose_tier, fraction_for
from compactor.scheduler import (
    Pace,
    in_flight_ids,
    projected_usage,
    start_threshold,
    summary_budget,
    summary_room,
    uncovered,
)
from tierbot.config import CompactionConfig
from tierbot.messages import Message, Role, SetAside
from tierbot.vocab import COUNTER_KEYS, CompactionKind, Outcome

_RANGE_KINDS = frozenset({CompactionKind.BACKGROUND, CompactionKind.AGGRESSIVE})


@dataclass(frozen=True, slots=True)
class Plan:
    """Exactly which live messages a compaction covers, and why.

    For META the covered items are summaries; for RESCUE they are the marker
    plus the messages it set aside (already archived).
    """

    kind: CompactionKind
    covered: tuple[Message, ...]
    usage: float
    level: int = 1
    marker: Message | None = None
    #: Asked for by ``/compact``: the channel is told how it ended.
    forced: bool = False

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(m.id for m in self.covered)

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.covered)


@dataclass
class Compactor:
    """Compaction state of one channel; owned and driven by its channel actor."""

    channel: str
    in_flight: list[Plan] = field(default_factory=list)
    pending_aggressive: bool = False
    since_last: int = 1_000_000
    last_ended: float = float("-inf")
    failures: int = 0
    retry_at: float = 0.0
    wake_at: float | None = None
    failed_sets: set[frozenset[int]] = field(default_factory=set)
    counters: Counter[str] = field(default_factory=Counter)
    pace: Pace = field(default_factory=Pace)
    summary_size: int = 0  # tokens of the last range summary that landed
    _started_at: dict[int, float] = field(default_factory=dict)
    # Per in-flight range: (tokens covered, tokens of those still live); recounted only
    # after an emergency, so the per-message check stays O(1) while passes run.
    _range_tokens: dict[int, tuple[int, int]] = field(default_factory=dict)

    @property
    def running(self) -> Plan | None:
        """The oldest pass in flight, or None when none runs."""
        return self.in_flight[0] if self.in_flight else None

    @property
    def ranges(self) -> list[Plan]:
        """In-flight background/aggressive passes, oldest range first."""
        return [p for p in self.in_flight if p.kind in _RANGE_KINDS]

    def on_message(self, tokens: int = 0, now: float | None = None) -> None:
        """Count one new message for the loop guard (and its tokens for the pace)."""
        self.since_last += 1
        if tokens:
            self.pace.arrived(tokens, time.monotonic() if now is None else now)

    def check(
        self,
        items: Sequence[Message],
        usage: float,
        window: int,
        config: CompactionConfig,
        now: float | None = None,
        *,
        markers: int | None = None,
        summary_tokens: int | None = None,
        in_flight: Collection[str] = (),
        fixed: int = 0,
    ) -> Plan | None:
        """The next compaction to run for this context, or None.

        ``markers`` and ``summary_tokens`` are the context's running counts; given,
        they spare the scan of ``items`` on the common path (nothing to do).
        ``in_flight`` names running branches: their exchanges stay whole (see cuts).
        ``fixed`` is the prompt's fixed part (system prompt, tool specs): summaries
        get their share of what is left of ``window`` (see ``summary_room``).
        """
        now = time.monotonic() if now is None else now
        self.wake_at = None
        tier = choose_tier(usage, config)
        start = config.background_threshold
        if tier is None and config.predictive_start:
            start = start_threshold(config, self.pace.lead(window, now))
            if usage >= start:
                tier = CompactionKind.BACKGROUND  # passes land one duration later: start early
        if tier is CompactionKind.EMERGENCY:
            covered = choose_cut(items, fraction_for(CompactionKind.EMERGENCY, config), in_flight)
            if covered:
                return Plan(CompactionKind.EMERGENCY, tuple(covered), usage)
            tier = CompactionKind.AGGRESSIVE
        slots = config.parallel_compactions - len(self.in_flight)
        if self.in_flight and (slots <= 0 or config.parallel_compactions == 1):
            if tier is CompactionKind.AGGRESSIVE and any(
                p.kind is CompactionKind.BACKGROUND for p in self.in_flight
            ):
                self.pending_aggressive = True
            return None
        if now < self.retry_at:
            if tier is not None:
                self.wake_at = self.retry_at
            return None
        plan = self._next_range(items, usage, tier, window, config, now, start, in_flight, fixed)
        if plan is not None:
            return plan
        # One meta or rescue pass at a time, beside the ranges.
        if any(p.kind not in _RANGE_KINDS for p in self.in_flight):
            return None
        room = summary_room(config, window, fixed)
        over_share = summary_tokens is None or summary_tokens > room
        meta = self._meta(items, usage, room) if over_share else None
        if meta is not None:
            return meta
        if markers is None or markers > 0:
            return self._rescue(items, usage, window, config, fixed)
        return None

    def _next_range(
        self,
        items: Sequence[Message],
        usage: float,
        tier: CompactionKind | None,
        window: int,
        config: CompactionConfig,
        now: float,
        start: float,
        branches: Collection[str] = (),
        fixed: int = 0,
    ) -> Plan | None:
        """The next background/aggressive range, if the channel needs one now.

        ``branches`` names running branches: their exchanges stay whole (see cuts)."""
        if tier not in (CompactionKind.BACKGROUND, CompactionKind.AGGRESSIVE):
            return None
        budget = summary_budget(config, window, fixed)
        if projected_usage(usage, window, self._range_sizes(items), budget) < start:
            return None  # the passes in flight will bring the channel back under
        ranges = [p.covered for p in self.ranges]
        guard_ends = self.last_ended + config.loop_guard_seconds
        if self.since_last < config.min_messages_between and now < guard_ends:
            self.wake_at = guard_ends
            return None
        pool = uncovered(items, in_flight_ids(ranges))
        fraction = fraction_for(tier, config)
        covered = choose_cut(pool, fraction, branches)
        # A cut hardly larger than the summaries this channel gets frees almost nothing and
        # only makes another pass due: widen it to at least twice a summary.
        while covered and fraction < 1.0 and sum(m.tokens for m in covered) < 2 * self.summary_size:
            fraction = min(1.0, fraction + 0.1)
            covered = choose_cut(pool, fraction, branches)
        # A cut whose summary freed nothing (a noop) is not tried again: widen past it, so
        # a channel left above the threshold by a noop does not wait for its next message.
        while covered and fraction < 1.0 and frozenset(m.id for m in covered) in self.failed_sets:
            fraction = min(1.0, fraction + 0.1)
            covered = choose_cut(pool, fraction, branches)
        if sum(m.tokens for m in covered) <= self.summary_size:
            return None  # not even the widest cut is larger than a summary: wait for more
        ids = frozenset(m.id for m in covered)
        if not covered or ids in self.failed_sets:
            return None
        return Plan(tier, tuple(covered), usage)

    def _range_sizes(self, items: Sequence[Message]) -> list[tuple[int, int]]:
        """(covered, still live) tokens of each in-flight range (see ``_range_tokens``)."""
        ranges = self.ranges
        if any(id(p) not in self._range_tokens for p in ranges):
            live = {m.id for m in items}
            for p in ranges:
                covered = sum(m.tokens for m in p.covered)
                still = sum(m.tokens for m in p.covered if m.id in live)
                self._range_tokens[id(p)] = (covered, still)
        return [self._range_tokens[id(p)] for p in ranges]

    def _rescue(
        self,
        items: Sequence[Message],
        usage: float,
        window: int,
        config: CompactionConfig,
        fixed: int = 0,
    ) -> Plan | None:
        """A rescue of the next chunk an emergency set aside, when its summary has room.

        The worker picks the chunk (it needs the store); ids a range in flight
        already covers are left to that range.
        """
        marker = next((m for m in items if SetAside.of(m)), None)
        if marker is None or frozenset({marker.id}) in self.failed_sets:
            return None
        busy = in_flight_ids(p.covered for p in self.ranges)
        if all(i in busy for i in SetAside.of(marker).ids):
            return None
        room = config.aggressive_threshold - summary_budget(config, window, fixed) / window
        if self.in_flight and usage >= room:
            return None  # the ranges in flight make room first
        return Plan(CompactionKind.RESCUE, (marker,), usage, marker=marker)

    def _meta(self, items: Sequence[Message], usage: float, room: float) -> Plan | None:
        """A merge of the oldest summaries when summaries fill more than ``room`` tokens."""
        summaries = [m for m in items if m.role is Role.SUMMARY]
        if len(summaries) >= 2 and sum(m.tokens for m in summaries) > room:
            oldest = summaries[: max(2, len(summaries) // 2)]
            if frozenset(m.id for m in oldest) not in self.failed_sets:
                level = 1 + max(int(m.meta.get("level", 1)) for m in oldest)
                return Plan(CompactionKind.META, tuple(oldest), usage, level=level)
        return None

    def forced(
        self,
        items: Sequence[Message],
        usage: float,
        config: CompactionConfig,
        in_flight: Collection[str] = (),
    ) -> Plan | None:
        """A background plan now (the ``/compact`` command), ignoring thresholds and guard.

        A cut that already freed nothing (a noop) is widened past, as automatic passes
        do: asked again, ``/compact`` takes more messages instead of failing the same
        way.  None when a pass runs, nothing may be taken, or every cut freed nothing
        (:meth:`only_noops_left` tells the last case apart).
        """
        if self.running is not None:
            return None
        fraction = config.background_fraction
        covered = choose_cut(items, fraction, in_flight)
        while covered and fraction < 1.0 and frozenset(m.id for m in covered) in self.failed_sets:
            fraction = min(1.0, fraction + 0.1)
            covered = choose_cut(items, fraction, in_flight)
        if not covered or frozenset(m.id for m in covered) in self.failed_sets:
            return None
        return Plan(CompactionKind.BACKGROUND, tuple(covered), usage, forced=True)

    def only_noops_left(self, items: Sequence[Message], in_flight: Collection[str] = ()) -> bool:
        """True if the widest cut of ``items`` is one whose summary freed nothing."""
        covered = choose_cut(items, 1.0, in_flight)
        return bool(covered) and frozenset(m.id for m in covered) in self.failed_sets

    # -- bookkeeping --------------------------------------------------------------

    def started(self, plan: Plan) -> None:
        if plan.kind is not CompactionKind.EMERGENCY:
            self.in_flight.append(plan)
            self._started_at[id(plan)] = time.monotonic()
            if plan.kind is CompactionKind.AGGRESSIVE:
                self.pending_aggressive = False

    def emergency_done(self) -> None:
        self._range_tokens.clear()  # some covered messages may have been set aside
        self.counters["emergency"] += 1
        self.since_last = 0
        self.last_ended = time.monotonic()

    def first_range(self, plan: Plan) -> bool:
        """True if no range launched before ``plan`` is still in flight: its summary may be
        swapped in now (ranges are swapped in the order they were launched)."""
        if plan.kind not in _RANGE_KINDS:
            return True
        ranges = self.ranges
        return not ranges or ranges[0] is plan

    def finished(self, plan: Plan, outcome: str, backoff_seconds: float = 0.0) -> None:
        """Record how ``plan`` ended (``outcome`` an :class:`~tierbot.vocab.Outcome` value)."""
        if outcome not in tuple(Outcome):
            raise ValueError(f"outcome must be one of {tuple(Outcome)}, got {outcome!r}")
        self.in_flight = [p for p in self.in_flight if p is not plan]
        began = self._started_at.pop(id(plan), None)
        self._range_tokens.pop(id(plan), None)
        if outcome == "ok" and began is not None and plan.kind in _RANGE_KINDS:
            self.pace.took(time.monotonic() - began)
        self.counters = self.counted(plan, outcome)
        if outcome == "ok":
            self.failures = 0
            self.retry_at = 0.0
            if plan.kind is not CompactionKind.RESCUE:
                self.since_last = 0
                self.last_ended = time.monotonic()
            return
        if outcome == "noop":
            self.failed_sets.add(plan.ids)
        else:
            self.failures += 1
            self.retry_at = time.monotonic() + backoff_seconds

    def counted(self, plan: Plan, outcome: str) -> Counter[str]:
        """The counters as :meth:`finished` leaves them when ``plan`` ends with ``outcome``
        (a swap stores them with its result, before the pass is marked finished)."""
        after = Counter(self.counters)
        after[plan.kind.value if outcome == "ok" else outcome] += 1
        return after

    def snapshot(self) -> dict[str, int]:
        return {k: int(self.counters.get(k, 0)) for k in (*COUNTER_KEYS, "rescue")}


def forced_note(
    plan: Plan, outcome: str, *, freed: int = 0, reason: str = "", wider: bool = True
) -> str:
    """What the channel is told when a ``/compact`` ends (``outcome``: an ``Outcome``);
    ``wider``: a noop's next ``/compact`` may take more messages (see ``forced``)."""
    n = len(plan.covered)
    if outcome == "ok" and freed > 0:
        return f"/compact done: summarized {n} older messages and freed {freed} tokens."
    if outcome == "ok":
        # An emergency truncation set them aside while the summary was being written.
        return (
            f"/compact done: summarized {n} older messages; they had already left the "
            "context, so no further tokens were freed."
        )
    if outcome == "noop":
        then = (
            "Run /compact again to summarize a longer stretch."
            if wider
            else "Keep talking; once the conversation is longer, /compact can summarize more."
        )
        return (
            f"/compact freed nothing (noop): {reason}. The {n} messages stay live as they "
            f"were; automatic compaction will not retry these same messages. {then}"
        )
    return (
        f"/compact failed: {reason}. Nothing changed; the messages stay live and a later "
        "compaction retries."
    )
