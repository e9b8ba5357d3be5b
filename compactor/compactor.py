"""The per-channel compactor: a programmatic monitor, no LLM inside.

The channel actor calls :meth:`Compactor.check` after every message that
enters its history.  The compactor reads the context's running usage (O(1)),
applies the policy, and answers with a :class:`Plan` (or None):

* an **emergency** plan is carried out by the actor at once, before its next
  LLM call, even while a worker runs;
* a **background**, **aggressive**, **meta** or **rescue** plan goes to a
  compaction worker; only one runs per channel at a time.

State it keeps: the running plan, a remembered aggressive trigger, the loop
guard (messages since the last compaction), the message sets that freed
nothing (never retried), and the failure backoff.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from bot.config import CompactionConfig
from bot.messages import Message, Role
from compactor.cuts import choose_cut
from compactor.policy import Tier, choose_tier, fraction_for

COUNTER_KEYS = ("background", "aggressive", "emergency", "meta", "noop", "failed")
#: How a compaction ended, the one vocabulary of /status, ``channel show`` and the logs:
#: ``ok`` (the summary replaced its messages), ``noop`` (it ran but would free nothing,
#: so nothing changed and those messages are not tried again) or ``failed`` (an error:
#: the model, a timeout, an unusable summary; retried on a later trigger).
OUTCOMES = ("ok", "noop", "failed")


class Kind(StrEnum):
    """What a plan does."""

    BACKGROUND = "background"
    AGGRESSIVE = "aggressive"
    EMERGENCY = "emergency"
    META = "meta"
    RESCUE = "rescue"


@dataclass(frozen=True, slots=True)
class Plan:
    """Exactly which live messages a compaction covers, and why.

    For META the covered items are summaries; for RESCUE they are the marker
    plus the messages it set aside (already archived).
    """

    kind: Kind
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
    running: Plan | None = None
    pending_aggressive: bool = False
    since_last: int = 1_000_000
    failures: int = 0
    retry_at: float = 0.0
    failed_sets: set[frozenset[int]] = field(default_factory=set)
    counters: Counter[str] = field(default_factory=Counter)

    def on_message(self) -> None:
        """Count one new message for the loop guard."""
        self.since_last += 1

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
    ) -> Plan | None:
        """The next compaction to run for this context, or None.

        ``markers`` and ``summary_tokens`` are the context's running counts; given,
        they spare the scan of ``items`` on the common path (nothing to do).
        ``in_flight`` names running branches: their exchanges stay whole (see cuts).
        """
        now = time.monotonic() if now is None else now
        tier = choose_tier(usage, config)
        if tier is Tier.EMERGENCY:
            covered = choose_cut(items, fraction_for(Tier.EMERGENCY, config), in_flight)
            if covered:
                return Plan(Kind.EMERGENCY, tuple(covered), usage)
            tier = Tier.AGGRESSIVE
        if self.running is not None:
            if tier is Tier.AGGRESSIVE and self.running.kind is Kind.BACKGROUND:
                self.pending_aggressive = True
            return None
        if now < self.retry_at:
            return None
        if tier in (Tier.BACKGROUND, Tier.AGGRESSIVE) and self.since_last >= (
            config.min_messages_between
        ):
            covered = choose_cut(items, fraction_for(tier, config), in_flight)
            ids = frozenset(m.id for m in covered)
            if covered and ids not in self.failed_sets:
                kind = Kind.AGGRESSIVE if tier is Tier.AGGRESSIVE else Kind.BACKGROUND
                return Plan(kind, tuple(covered), usage)
        if markers is None or markers > 0:
            marker = next(
                (m for m in items if m.role is Role.MARKER and m.meta.get("set_aside")), None
            )
            if marker is not None and frozenset({marker.id}) not in self.failed_sets:
                return Plan(Kind.RESCUE, (marker,), usage, marker=marker)
        if summary_tokens is not None and summary_tokens <= config.summary_share * window:
            return None
        summaries = [m for m in items if m.role is Role.SUMMARY]
        if len(summaries) >= 2 and sum(m.tokens for m in summaries) > config.summary_share * window:
            oldest = summaries[: max(2, len(summaries) // 2)]
            if frozenset(m.id for m in oldest) not in self.failed_sets:
                level = 1 + max(int(m.meta.get("level", 1)) for m in oldest)
                return Plan(Kind.META, tuple(oldest), usage, level=level)
        return None

    def forced(
        self,
        items: Sequence[Message],
        usage: float,
        config: CompactionConfig,
        in_flight: Collection[str] = (),
    ) -> Plan | None:
        """A background plan now (the ``/compact`` command), ignoring thresholds and guard."""
        if self.running is not None:
            return None
        covered = choose_cut(items, config.background_fraction, in_flight)
        return Plan(Kind.BACKGROUND, tuple(covered), usage, forced=True) if covered else None

    # -- bookkeeping --------------------------------------------------------------

    def started(self, plan: Plan) -> None:
        if plan.kind is not Kind.EMERGENCY:
            self.running = plan
            if plan.kind is Kind.AGGRESSIVE:
                self.pending_aggressive = False

    def emergency_done(self) -> None:
        self.counters["emergency"] += 1
        self.since_last = 0

    def finished(self, plan: Plan, outcome: str, backoff_seconds: float = 0.0) -> None:
        """Record how ``plan`` ended, one of :data:`OUTCOMES`."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        if self.running is plan:
            self.running = None
        if outcome == "ok":
            self.failures = 0
            self.retry_at = 0.0
            self.counters[plan.kind.value] += 1
            if plan.kind is not Kind.RESCUE:
                self.since_last = 0
            return
        self.counters[outcome] += 1
        if outcome == "noop":
            self.failed_sets.add(plan.ids)
        else:
            self.failures += 1
            self.retry_at = time.monotonic() + backoff_seconds

    def snapshot(self) -> dict[str, int]:
        return {k: int(self.counters.get(k, 0)) for k in (*COUNTER_KEYS, "rescue")}


def outcome_label(outcome: str) -> str:
    """The :data:`OUTCOMES` word for a stored outcome (older stores wrote ``error``)."""
    return "failed" if outcome == "error" else outcome


def forced_note(plan: Plan, outcome: str, *, freed: int = 0, reason: str = "") -> str:
    """What the channel is told when a ``/compact`` ends (``outcome`` from :data:`OUTCOMES`)."""
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
        return (
            f"/compact freed nothing (noop): {reason}. The {n} messages stay live as they "
            "were; automatic compaction will not retry these same messages."
        )
    return (
        f"/compact failed: {reason}. Nothing changed; the messages stay live and a later "
        "compaction retries."
    )
