"""Prometheus metrics of one runtime, in a CollectorRegistry of its own.

Three feeds, none of which makes a turn wait:

* **events**: typed events on the runtime's :class:`~tierbot.events.Bus`, one
  handler per event class: turns, compactions, emergency truncations, context
  overflows, branches and task workers, messages in and out, replies that
  could not be delivered.  The bus is the runtime's own, so two runtimes in one
  process never count each other's events, and no log setting (a level, a test
  capturing logs) changes what is counted.
* **wrappers** (:mod:`bot.metered`): every LLM call is timed and counted, memory
  recalls are counted.
* **scrape time**: gauges read from the channel registry, the worker pools and
  the adapters while ``/metrics`` is served, on the event loop (no locking).

Per-channel usage has bounded cardinality: only the ``[ops] metrics_top_channels``
fullest channels get a labelled series; aggregates cover every live channel.
Each runtime owns its registry (never prometheus-client's global one), so one
process may run several runtimes, as the tests do.  docs/tuning.md lists every
metric.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tierbot.events import (
    Bus,
    CompactionFailed,
    CompactionFinished,
    CompactionStarted,
    ContextOverflow,
    DeliveryFailed,
    EmergencyTruncation,
    Event,
    MessageReceived,
    ReplySent,
    TaskCrashed,
    TaskFinished,
    TurnCompleted,
    TurnFailed,
)
from tierbot.keys import ChannelKey
from tierbot.vocab import TIERS, CompactionKind, Outcome

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = structlog.get_logger("tierbot.metrics")

TURN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
COMPACTION_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
RECENT_FAILURES = 50


class PoolLike(Protocol):
    """What the metrics read from a worker pool (``workers.WorkerPool`` and kin)."""

    @property
    def queued(self) -> int: ...

    @property
    def running(self) -> int: ...

    @property
    def concurrency(self) -> int: ...


def adapter_of(channel: str) -> str:
    """The adapter label of a channel key: its platform (``discord:1:2`` -> ``discord``)."""
    return ChannelKey.parse(channel).platform or "unknown"


class Metrics:
    """Every metric of one runtime, plus the recent failures /status shows.

    Built with the runtime's bus, which it subscribes to at once; :meth:`watch`
    adds the gauges read from the runtime itself when ``/metrics`` is scraped.
    """

    def __init__(self, events: Bus) -> None:
        self.registry = CollectorRegistry()
        self.pools: dict[str, PoolLike] = {}
        self.recent_failures: deque[dict[str, Any]] = deque(maxlen=RECENT_FAILURES)
        self.started = time.time()
        r = self.registry
        self.messages_in = Counter(
            "tierbot_messages_in", "Inbound messages accepted, by adapter", ["adapter"], registry=r
        )
        self.messages_out = Counter(
            "tierbot_messages_out",
            "Replies and notices delivered, by adapter",
            ["adapter"],
            registry=r,
        )
        self.delivery_failures = Counter(
            "tierbot_delivery_failures",
            "Replies an adapter failed to deliver",
            ["adapter"],
            registry=r,
        )
        self.turn_seconds = Histogram(
            "tierbot_turn_duration_seconds",
            "Time from a turn's start to its reply being sent",
            buckets=TURN_BUCKETS,
            registry=r,
        )
        self.context_overflows = Counter(
            "tierbot_context_overflows",
            "Prompts that did not fit the context window (refused by the provider, or not "
            "sent for lack of room for a reply), by where (channel, branch, worker)",
            ["scope"],
            registry=r,
        )
        self.tasks = Counter(
            "tierbot_tasks",
            "Branches and task workers that ended, by kind and outcome "
            "(concluded, failed, cancelled)",
            ["kind", "outcome"],
            registry=r,
        )
        self.task_seconds = Histogram(
            "tierbot_task_duration_seconds",
            "Wall time of a branch or task worker",
            ["kind"],
            buckets=COMPACTION_BUCKETS,
            registry=r,
        )
        self.compactions_started = Counter(
            "tierbot_compactions_started",
            "Background compactions handed to a worker, by tier",
            ["tier"],
            registry=r,
        )
        self.compactions = Counter(
            "tierbot_compactions",
            "Compactions that ended, by tier and outcome (ok, noop, failed)",
            ["tier", "outcome"],
            registry=r,
        )
        self.compaction_seconds = Histogram(
            "tierbot_compaction_duration_seconds",
            "Worker time of a successful compaction",
            ["tier"],
            buckets=COMPACTION_BUCKETS,
            registry=r,
        )
        self.tokens_freed = Counter(
            "tierbot_compaction_tokens_freed",
            "Live-context tokens a compaction removed",
            ["tier"],
            registry=r,
        )
        self.emergencies = Counter(
            "tierbot_emergency_truncations",
            "Emergency truncations (messages set aside, no LLM)",
            registry=r,
        )
        self.set_aside = Counter(
            "tierbot_emergency_messages_set_aside",
            "Messages set aside by emergency truncations",
            registry=r,
        )
        self.memories_saved = Counter(
            "tierbot_memories_saved", "Memories saved by compaction workers", registry=r
        )
        self.memory_recalls = Counter(
            "tierbot_memory_recalls",
            "memory_recall tool calls, by outcome (ok, invalid, error)",
            ["outcome"],
            registry=r,
        )
        self.memories_recalled = Counter(
            "tierbot_memories_recalled", "Memories returned by memory_recall", registry=r
        )
        self.llm_calls = Counter(
            "tierbot_llm_calls",
            "LLM calls, by provider, purpose and outcome (ok, error)",
            ["provider", "purpose", "outcome"],
            registry=r,
        )
        self.llm_errors = Counter(
            "tierbot_llm_errors",
            "Failed LLM calls, by provider and error kind",
            ["provider", "kind"],
            registry=r,
        )
        self.llm_tokens = Counter(
            "tierbot_llm_tokens",
            "Tokens the provider reported, by direction (input, output)",
            ["provider", "purpose", "direction"],
            registry=r,
        )
        self.llm_seconds = Histogram(
            "tierbot_llm_call_duration_seconds",
            "Duration of one LLM call",
            ["provider", "purpose"],
            buckets=TURN_BUCKETS,
            registry=r,
        )
        self.config_reloads = Counter(
            "tierbot_config_reloads",
            "Config reloads, by result (applied, unchanged, rejected)",
            ["result"],
            registry=r,
        )
        self.config_restart_pending = Gauge(
            "tierbot_config_restart_pending",
            "Changed config keys that wait for a restart",
            registry=r,
        )
        self.config_reloaded_at = Gauge(
            "tierbot_config_last_reload_timestamp_seconds",
            "When a config change last applied",
            registry=r,
        )
        handlers: dict[type[Event], Callable[[Any], None]] = {
            MessageReceived: self._on_message_in,
            ReplySent: self._on_message_out,
            DeliveryFailed: self._on_delivery_failed,
            TurnCompleted: self._on_turn,
            TurnFailed: self._on_turn_failed,
            ContextOverflow: self._on_overflow,
            CompactionStarted: self._on_started,
            CompactionFinished: self._on_finished,
            CompactionFailed: self._on_failed,
            EmergencyTruncation: self._on_emergency,
            TaskFinished: self._on_task,
            TaskCrashed: self._on_task_crashed,
        }
        self._unsubscribe = [events.subscribe(kind, h) for kind, h in handlers.items()]

    # -- lifecycle -------------------------------------------------------------------

    def watch(self, runtime: Runtime) -> None:
        """Serve the gauges read from ``runtime`` (channels, pools, adapters) at scrape time."""
        self.registry.register(_ScrapeCollector(self, runtime))

    def close(self) -> None:
        """Stop counting events (the runtime closed). Safe to call twice."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()

    def watch_pool(self, name: str, pool: PoolLike) -> None:
        """Report ``pool``'s running, queued and slot counts under ``pool=name``."""
        self.pools[name] = pool

    def pool_counts(self, runtime: Runtime) -> dict[str, dict[str, int]]:
        """Running, queued and slots of every pool: watched ones, branches and task workers."""
        out = {
            name: {"running": p.running, "queued": p.queued, "concurrency": p.concurrency}
            for name, p in self.pools.items()
        }
        workers = runtime.config.workers
        tasks = {
            "branch": {"running": 0, "queued": 0, "concurrency": workers.branch_concurrency},
            "worker": {"running": 0, "queued": 0, "concurrency": workers.task_worker_concurrency},
        }
        for actor in runtime.registry.actors.values():
            if not actor.delegation.running:
                continue
            for handle in actor.delegation.status():
                row, state = tasks.get(handle["kind"]), handle["status"]
                if row is not None and state in ("running", "queued"):
                    row[state] += 1
        out.update(tasks)
        return out

    # -- event handlers, one per event class ---------------------------------------------

    def _failure(self, event: str, channel: str, **fields: Any) -> None:
        """Remember a failure for /status: its time, what happened, where, and why."""
        self.recent_failures.append(
            {"time": time.time(), "event": event, "channel": channel, **fields}
        )

    def _on_message_in(self, ev: MessageReceived) -> None:
        self.messages_in.labels(adapter_of(ev.channel)).inc()

    def _on_message_out(self, ev: ReplySent) -> None:
        self.messages_out.labels(adapter_of(ev.channel)).inc()

    def _on_delivery_failed(self, ev: DeliveryFailed) -> None:
        self.delivery_failures.labels(adapter_of(ev.channel)).inc()
        self._failure("reply.delivery_failed", ev.channel, reason=ev.error)

    def _on_turn(self, ev: TurnCompleted) -> None:
        self.turn_seconds.observe(ev.duration)

    def _on_turn_failed(self, ev: TurnFailed) -> None:
        what = "channel.llm_failed" if ev.by_model else "channel.turn_failed"
        self._failure(what, ev.channel, reason=ev.reason)

    def _on_overflow(self, ev: ContextOverflow) -> None:
        self.context_overflows.labels(ev.source).inc()
        if ev.source == "channel":
            self._failure(
                "channel.context_overflow",
                ev.channel,
                reason="the prompt did not fit the context window",
            )

    def _on_started(self, ev: CompactionStarted) -> None:
        self.compactions_started.labels(ev.kind.value).inc()

    def _on_finished(self, ev: CompactionFinished) -> None:
        tier = ev.kind.value
        self.compactions.labels(tier, Outcome.OK.value).inc()
        self.compaction_seconds.labels(tier).observe(ev.duration)
        freed = ev.tokens_before - ev.tokens_after
        if freed > 0:
            self.tokens_freed.labels(tier).inc(freed)
        if ev.memories > 0:
            self.memories_saved.inc(ev.memories)

    def _on_failed(self, ev: CompactionFailed) -> None:
        self.compactions.labels(ev.kind.value, ev.outcome.value).inc()
        self._failure(
            "compaction.failed",
            ev.channel,
            tier=ev.kind.value,
            outcome=ev.outcome.value,
            reason=ev.reason,
        )

    def _on_emergency(self, ev: EmergencyTruncation) -> None:
        self.compactions.labels(CompactionKind.EMERGENCY.value, Outcome.OK.value).inc()
        self.emergencies.inc()
        self.set_aside.inc(ev.set_aside)
        self._failure(
            "compaction.emergency",
            ev.channel,
            tier=CompactionKind.EMERGENCY.value,
            reason=f"usage {ev.usage_before:.0%} -> {ev.usage_after:.0%}, "
            f"{ev.set_aside} messages set aside",
        )

    def _on_task(self, ev: TaskFinished) -> None:
        self.tasks.labels(ev.kind, ev.outcome).inc()
        self.task_seconds.labels(ev.kind).observe(ev.duration)
        if ev.outcome == "failed":
            self._failure(f"{ev.kind}.failed", ev.channel, tier=ev.kind, reason=ev.error)

    def _on_task_crashed(self, ev: TaskCrashed) -> None:
        self._failure(f"{ev.kind}.crashed", ev.channel, reason=ev.reason)


class ProcessLabelled:
    """``registry`` as one process of a cluster exposes it: every sample also carries
    ``process="<process id>"``, so a dashboard over every process's ``/metrics`` can tell
    them apart and sum them (a registry-like object for ``generate_latest``)."""

    def __init__(self, registry: CollectorRegistry, process: str) -> None:
        self._registry = registry
        self._process = process

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            out = Metric(family.name, family.documentation, family.type, family.unit)
            out.samples = [
                s._replace(labels={**s.labels, "process": self._process}) for s in family.samples
            ]
            yield out


class _ScrapeCollector(Collector):
    """Gauges computed when /metrics is scraped, from the runtime's live state."""

    def __init__(self, metrics: Metrics, runtime: Runtime) -> None:
        self.m = metrics
        self.rt = runtime

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        rt = self.rt
        registry = rt.registry
        actors = list(registry.actors.values())
        usages = [(a.usage, a.key) for a in actors]
        yield GaugeMetricFamily(
            "tierbot_channels_live", "Channels with a live actor", value=len(actors)
        )
        top_n = rt.config.ops.metrics_top_channels
        per = GaugeMetricFamily(
            "tierbot_context_usage_ratio",
            f"Context usage of the {top_n} fullest live channels (share of the window)",
            labels=["channel"],
        )
        for usage, key in heapq.nlargest(top_n, usages):
            per.add_metric([key], usage)
        yield per
        values = [u for u, _ in usages]
        yield GaugeMetricFamily(
            "tierbot_context_usage_max_ratio",
            "Highest usage of any channel",
            value=max(values, default=0.0),
        )
        yield GaugeMetricFamily(
            "tierbot_context_usage_mean_ratio",
            "Mean usage over live channels",
            value=sum(values) / len(values) if values else 0.0,
        )
        over = GaugeMetricFamily(
            "tierbot_channels_over_threshold",
            "Live channels at or above their own threshold of each tier",
            labels=["tier"],
        )
        counts = dict.fromkeys(TIERS, 0)
        running = 0
        mailbox = []
        for a in actors:
            c = a.settings.compaction
            u = a.usage
            for tier in TIERS:
                if u >= getattr(c, f"{tier}_threshold"):
                    counts[tier] += 1
            running += a.compactor.running is not None
            mailbox.append(a.mailbox_depth)
        for tier in TIERS:
            over.add_metric([tier], counts[tier])
        yield over
        yield GaugeMetricFamily(
            "tierbot_compactions_running", "Channels with a compaction in flight", value=running
        )
        yield GaugeMetricFamily(
            "tierbot_mailbox_messages", "Items waiting in channel mailboxes", value=sum(mailbox)
        )
        yield GaugeMetricFamily(
            "tierbot_mailbox_messages_max",
            "Items waiting in the fullest mailbox",
            value=max(mailbox, default=0),
        )
        yield from self._pools()
        stored = CounterMetricFamily("tierbot_messages_stored", "Messages stored, every path")
        stored.add_metric([], registry.messages_in)
        yield stored
        dup = CounterMetricFamily("tierbot_messages_duplicate", "Inbound duplicates ignored")
        dup.add_metric([], registry.duplicates)
        yield dup
        memory = rt.memory
        if memory is not None:
            yield GaugeMetricFamily(
                "tierbot_memory_index_backlog",
                "Stored messages not yet indexed for memory search (as of the indexer's last look)",
                value=memory.indexer.backlog,
            )
        up = GaugeMetricFamily(
            "tierbot_adapter_connected", "1 when the adapter is connected", labels=["adapter"]
        )
        for name, adapter in rt.adapters.items():
            up.add_metric([name], 1.0 if adapter.connected() else 0.0)
        yield up

    def _pools(self) -> Iterator[Metric]:
        families = {
            "running": GaugeMetricFamily(
                "tierbot_pool_running", "Jobs running, by pool", labels=["pool"]
            ),
            "queued": GaugeMetricFamily(
                "tierbot_pool_queued", "Jobs waiting for a slot, by pool", labels=["pool"]
            ),
            "concurrency": GaugeMetricFamily(
                "tierbot_pool_slots", "Concurrency limit, by pool", labels=["pool"]
            ),
        }
        for name, counts in self.m.pool_counts(self.rt).items():
            for attr, family in families.items():
                family.add_metric([name], float(counts[attr]))
        yield from families.values()
