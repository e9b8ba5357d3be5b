"""Prometheus metrics of one runtime, in a CollectorRegistry of its own.

Three feeds, none of which makes a turn wait:

* **events**: a structlog sink (:func:`tierbot.logging.add_event_sink`) counts what
  this runtime's channels log: ``turn.completed``, ``compaction.triggered``,
  ``compaction.completed``, ``compaction.failed``, ``compaction.emergency``,
  ``channel.context_overflow``, ``channel.llm_failed`` and ``reply.delivery_failed``.
  An event belongs to this runtime when its bound ``channel`` is one of its actors.
  It also counts branches and task workers (``branch.concluded``, ``worker.failed``
  ...) and context overflows they meet.
* **wrappers** (:mod:`bot.metered`): every LLM call is timed and counted, memory
  recalls are counted; the runtime counts messages in and out.
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
import sys
import time
from collections import deque
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tierbot.logging import add_event_sink, remove_event_sink

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = structlog.get_logger("tierbot.metrics")

TURN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
COMPACTION_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
TIERS = ("background", "aggressive", "emergency")
TASK_KINDS = ("branch", "worker")
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
    """The adapter label of a channel key: its prefix (``discord:1:2`` -> ``discord``)."""
    return channel.split(":", 1)[0] or "unknown"


class Metrics:
    """Every metric of one runtime, plus the recent failures /status shows."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
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
            "Provider context-overflow errors, by where they happened (channel, branch, worker)",
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
        self._handlers = {
            "turn.completed": self._on_turn,
            "compaction.triggered": self._on_triggered,
            "compaction.completed": self._on_completed,
            "compaction.failed": self._on_failed,
            "compaction.emergency": self._on_emergency,
            "channel.context_overflow": self._on_overflow,
            "channel.llm_failed": self._on_problem,
            "channel.turn_failed": self._on_problem,
            "reply.delivery_failed": self._on_delivery_failed,
        }
        for kind in TASK_KINDS:
            for outcome in ("concluded", "failed", "cancelled"):
                self._handlers[f"{kind}.{outcome}"] = self._on_task
            self._handlers[f"{kind}.crashed"] = self._on_problem
            self._handlers[f"{kind}.overflow"] = self._on_task_overflow
        r.register(_ScrapeCollector(self))
        self._attached = False

    # -- lifecycle -------------------------------------------------------------------

    def attach(self) -> None:
        """Start counting this runtime's log events. Safe to call twice."""
        if not self._attached:
            add_event_sink(self.observe)
            self._attached = True

    def detach(self) -> None:
        """Stop counting log events. Safe to call twice."""
        remove_event_sink(self.observe)
        self._attached = False

    def watch_pool(self, name: str, pool: PoolLike) -> None:
        """Report ``pool``'s running, queued and slot counts under ``pool=name``."""
        self.pools[name] = pool

    def pool_counts(self) -> dict[str, dict[str, int]]:
        """Running, queued and slots of every pool: watched ones, branches and task workers."""
        out = {
            name: {"running": p.running, "queued": p.queued, "concurrency": p.concurrency}
            for name, p in self.pools.items()
        }
        registry = getattr(self.runtime, "registry", None)
        if registry is None:
            return out
        workers = self.runtime.config.workers
        tasks = {
            "branch": {"running": 0, "queued": 0, "concurrency": workers.branch_concurrency},
            "worker": {"running": 0, "queued": 0, "concurrency": workers.task_worker_concurrency},
        }
        for actor in registry.actors.values():
            if not actor.delegation.running:
                continue
            for handle in actor.delegation.status():
                row, state = tasks.get(handle["kind"]), handle["status"]
                if row is not None and state in ("running", "queued"):
                    row[state] += 1
        out.update(tasks)
        return out

    # -- direct feeds ------------------------------------------------------------------

    def message_in(self, channel: str) -> None:
        self.messages_in.labels(adapter_of(channel)).inc()

    def message_out(self, channel: str) -> None:
        self.messages_out.labels(adapter_of(channel)).inc()

    # -- the event sink ------------------------------------------------------------------

    def observe(self, method: str, event: MutableMapping[str, Any]) -> None:
        """The structlog sink: count ``event`` if it is one of ours."""
        handler = self._handlers.get(event.get("event", ""))
        if handler is None:
            return
        registry = getattr(self.runtime, "registry", None)
        if registry is None or event.get("channel") not in registry.actors:
            return
        handler(event)

    def _failure(self, event: MutableMapping[str, Any], **fields: Any) -> None:
        self.recent_failures.append(
            {
                "time": time.time(),
                "event": event.get("event"),
                "channel": event.get("channel"),
                **fields,
            }
        )

    def _on_turn(self, ev: MutableMapping[str, Any]) -> None:
        self.turn_seconds.observe(float(ev.get("duration", 0.0)))

    def _on_triggered(self, ev: MutableMapping[str, Any]) -> None:
        self.compactions_started.labels(str(ev.get("tier"))).inc()

    def _on_completed(self, ev: MutableMapping[str, Any]) -> None:
        tier = str(ev.get("tier"))
        self.compactions.labels(tier, "ok").inc()
        self.compaction_seconds.labels(tier).observe(float(ev.get("duration", 0.0)))
        freed = int(ev.get("tokens_before", 0)) - int(ev.get("tokens_after", 0))
        if freed > 0:
            self.tokens_freed.labels(tier).inc(freed)
        memories = int(ev.get("memories", 0) or 0)
        if memories > 0:
            self.memories_saved.inc(memories)

    def _on_failed(self, ev: MutableMapping[str, Any]) -> None:
        outcome = str(ev.get("outcome") or "failed")
        self.compactions.labels(str(ev.get("tier")), outcome).inc()
        self._failure(ev, tier=ev.get("tier"), outcome=outcome, reason=ev.get("reason", ""))

    def _on_emergency(self, ev: MutableMapping[str, Any]) -> None:
        self.compactions.labels("emergency", "ok").inc()
        self.emergencies.inc()
        self.set_aside.inc(int(ev.get("set_aside", 0) or 0))
        self._failure(
            ev,
            tier="emergency",
            reason=f"usage {float(ev.get('usage_before', 0)):.0%} -> "
            f"{float(ev.get('usage_after', 0)):.0%}, {ev.get('set_aside', 0)} messages set aside",
        )

    def _on_overflow(self, ev: MutableMapping[str, Any]) -> None:
        self.context_overflows.labels("channel").inc()
        self._failure(ev, reason="the provider reported a context overflow")

    def _on_task_overflow(self, ev: MutableMapping[str, Any]) -> None:
        self.context_overflows.labels(str(ev.get("event", ".")).split(".")[0]).inc()

    def _on_task(self, ev: MutableMapping[str, Any]) -> None:
        kind, _, outcome = str(ev.get("event")).partition(".")
        self.tasks.labels(kind, outcome).inc()
        self.task_seconds.labels(kind).observe(float(ev.get("duration", 0.0) or 0.0))
        if outcome == "failed":
            self._failure(ev, tier=kind, reason=str(ev.get("error") or ""))

    def _on_problem(self, ev: MutableMapping[str, Any]) -> None:
        reason = ev.get("error") or ev.get("kind")
        if not reason and ev.get("exc_info"):
            # log.exception runs inside the except block: name the exception itself.
            exc = sys.exc_info()[1]
            reason = f"{type(exc).__name__}: {exc}" if exc is not None else "exception"
        self._failure(ev, reason=str(reason or ""))

    def _on_delivery_failed(self, ev: MutableMapping[str, Any]) -> None:
        self.delivery_failures.labels(adapter_of(str(ev.get("channel")))).inc()
        self._failure(ev, reason=str(ev.get("error", "")))


class _ScrapeCollector(Collector):
    """Gauges computed when /metrics is scraped, from the runtime's live state."""

    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        rt = self.m.runtime
        registry = getattr(rt, "registry", None)
        if registry is None:
            return
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
        memory = getattr(rt, "memory", None)
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
        for name, counts in self.m.pool_counts().items():
            for attr, family in families.items():
                family.add_metric([name], float(counts[attr]))
        yield from families.values()
