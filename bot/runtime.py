"""The runtime: wires config, store, tokens, LLM, worker pool, channels and adapters.

It is the :class:`~bot.adapters.base.Dispatcher` every adapter talks to.
:meth:`Runtime.open` builds it whole (store, provider, memory graph, worker
pool, channels), closing what it opened if a step fails, and returns it ready::

    async with Runtime.open(config) as rt:   # or: rt = await Runtime.open(config)
        ...

It shuts down (``aclose``, or leaving the ``async with``) in order: no new turns start (messages
that still arrive are stored and answered after the restart), channels finish
their turns and deliver the replies while the adapters are still connected
(for at most ``[runtime] drain_seconds``), then the adapters disconnect,
workers stop and the store flushes.

A reply the platform did not take is kept in the store and posted when its
adapter next connects (in this process or the next one), once.  An adapter
whose platform cannot be reached at startup is retried with capped backoff;
one whose token is refused raises :class:`~tierbot.errors.FatalAdapterError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

import structlog

from bot import collector
from bot.adapters.base import Adapter, Delivery, Dispatcher, Outbound
from bot.cluster import ClusterMember
from bot.collector import FullCollections
from bot.commands import run_command
from bot.metered import MeteredMemory, MeteredProvider
from bot.metrics import Metrics
from channels import ChannelDeps, ChannelRegistry, to_message, window_problems
from channels.memory import MemoryService
from memory_graph import embedder_problems
from tierbot.backends import AnyStore, open_store
from tierbot.config import Config, RespondMode
from tierbot.errors import ConfigError, FatalAdapterError
from tierbot.events import Bus, DeliveryFailed, MessageReceived, ReplySent
from tierbot.keys import ChannelKey
from tierbot.llm.base import LLMProvider
from tierbot.llm.factory import make_provider
from tierbot.messages import InboundMessage, too_long
from tierbot.pg.cluster import CLUSTER_TABLES, default_process_id
from tierbot.pg.connect import dsn_from_env
from tierbot.pg.jobs import job_tables
from tierbot.pg.store import PostgresStore
from tierbot.retry import Backoff, retry_forever
from tierbot.storage import UndeliveredReply
from tierbot.tokens import TokenCounter, encoding_for_model, get_counter
from workers import (
    TASK_TABLES,
    TASK_TABLES_PG,
    CompactionWorker,
    Summarizer,
    TaskPool,
    TaskRecords,
    WorkerPool,
)

if TYPE_CHECKING:  # procrastinate and psycopg load only for [workers] queue = "shared"
    from workers.shared import JobRunner, SharedQueue

log = structlog.get_logger("tierbot.runtime")

#: Reconnecting an adapter whose platform was unreachable: 1 s, 2 s, 4 s ... at most 60 s.
RECONNECT_BACKOFF = Backoff(base=1.0, cap=60.0)
#: Posting kept replies again while the process runs: 5 s, 10 s ... at most 5 minutes.
REDELIVER_BACKOFF = Backoff(base=5.0, cap=300.0)
#: A kept reply the platform refused this often is given up (logged with its text).
MAX_DELIVERY_ATTEMPTS = 10


#: Channels whose respond mode is remembered at once (the cache starts over past it).
_RESOLVED_KEEP = 4096


@dataclass
class LiveConfig:
    """The config in force: a reload swaps ``current``; every reader calls it at its next look."""

    current: Config

    def __call__(self) -> Config:
        return self.current


@dataclass
class Outbox:
    """Replies to channels that no adapter serves (replay, tests)."""

    sent: list[Outbound] = field(default_factory=list)


class Runtime(Dispatcher):
    """One bot process: every channel, adapter and background worker.

    Build it with :meth:`open`; ``__init__`` only wires parts that are already open.
    """

    def __init__(
        self,
        config: LiveConfig,
        *,
        events: Bus,
        metrics: Metrics,
        store: AnyStore,
        counter: TokenCounter,
        llm: MeteredProvider,
        memory: MemoryService | None,
        respond_override: RespondMode | None = None,
        jobs: SharedQueue | None = None,
    ) -> None:
        self._live = config
        self.respond_override = respond_override
        self._respond_modes: tuple[object, dict[str, RespondMode]] = (None, {})
        #: The runtime's event bus: channels, workers and adapters publish, metrics subscribe.
        self.events = events
        self.metrics = metrics
        self.store = store
        self.counter = counter
        self.llm = llm
        self.memory = memory
        self.adapters: dict[str, Adapter] = {}
        self.outbox = Outbox()
        cfg = config.current
        self.pool = WorkerPool(cfg.workers.compaction_concurrency)
        #: Summarizes in this process: the channels' own jobs, or (``[workers] queue =
        #: "shared"``) the queued jobs this process's :attr:`job_runner` takes.
        self.compaction_worker = CompactionWorker(
            llm,
            counter,
            memory.writer() if memory is not None else None,
            timeout=cfg.workers.compaction_timeout_seconds,
        )
        #: The shared job queue (``[workers] queue = "shared"``), else None.
        self.jobs = jobs
        #: Runs queued jobs in this process (``run_jobs``, or ``tierbot worker``).
        self.job_runner: JobRunner | None = None
        worker: Summarizer = self.compaction_worker
        if jobs is not None:
            from workers.shared import SharedCompaction

            worker = SharedCompaction(jobs, self.compaction_worker)
        deps = ChannelDeps(
            config=config,
            store=store,
            llm=llm,
            counter=counter,
            pool=self.pool,
            worker=worker,
            deliver=self.deliver,
            respond_mode=self.respond_mode,
            memory=MeteredMemory(memory.access(), metrics) if memory is not None else None,
            progress=self._progress,
            tasks=TaskPool(TaskRecords(store), events=events),
            events=events,
        )
        self.registry = ChannelRegistry(deps)
        metrics.watch_pool("compaction", self.pool)
        metrics.watch(self)
        self._closed = False
        self._draining = False
        #: Adapters that are not connected yet, and why (``/health`` shows it).
        self.adapter_problems: dict[str, str] = {}
        #: Set when an adapter's retries end in a refusal retrying cannot fix.
        self.fatal = asyncio.Event()
        self.fatal_error: FatalAdapterError | None = None
        self.parked = 0  # messages stored during shutdown, answered after the restart
        self.kept = 0  # replies this process could not deliver and kept for later
        self._background: dict[str, asyncio.Task[None]] = {}  # reconnects and redeliveries
        #: The cyclic collector's full pass, run when no message is arriving (bot.collector).
        self.collections = FullCollections(lambda: self.config.runtime.full_collection_seconds)
        self._holds_collector = False
        self._retrying: dict[str, Adapter] = {}  # adapters reconnecting in the background
        self._redelivering: dict[str, asyncio.Lock] = {}
        self._uncertain_reported: set[int] = set()
        #: This process's part in a cluster (``[cluster] enabled``), else None.
        self.cluster: ClusterMember | None = None

    @classmethod
    def open(
        cls,
        config: Config,
        *,
        llm: LLMProvider | None = None,
        environ: Mapping[str, str] | None = None,
        respond_override: RespondMode | None = None,
        jobs_only: bool = False,
    ) -> Opening:
        """Open everything ``config`` names and return the running runtime.

        ``llm`` replaces the configured provider (tests, benchmarks); ``environ``
        is where API keys are read (default ``os.environ``).  Await it, or use it
        in ``async with`` to close the runtime on the way out.  When a step fails,
        what the earlier steps opened is closed and the error raised: aiosqlite's
        threads would otherwise keep a process that cannot run alive forever
        instead of letting it exit with its reason.

        ``jobs_only`` opens a ``tierbot worker``: it runs the shared queue's jobs and
        never joins the cluster, so it owns no channel.
        """
        return Opening(
            cls._build(
                config,
                llm=llm,
                environ=os.environ if environ is None else environ,
                respond_override=respond_override,
                jobs_only=jobs_only,
            )
        )

    @classmethod
    async def _build(
        cls,
        config: Config,
        *,
        llm: LLMProvider | None,
        environ: Mapping[str, str],
        respond_override: RespondMode | None,
        jobs_only: bool = False,
    ) -> Runtime:
        cfg = config
        live = LiveConfig(config)
        events = Bus()
        metrics = Metrics(events)
        async with contextlib.AsyncExitStack() as opened:
            opened.callback(metrics.close)
            encoding = cfg.llm.encoding or encoding_for_model(cfg.llm.model)
            counter = get_counter(encoding)
            # Refused before the store is opened: a bot that cannot run writes nothing.
            problems = window_problems(cfg, counter) + embedder_problems(cfg.memory)
            if problems:
                raise ConfigError(cfg.source, problems)
            shared = cfg.workers.queue == "shared"
            pg_tables = (TASK_TABLES_PG, CLUSTER_TABLES, *([job_tables()] if shared else []))
            store = await open_store(
                cfg, environ=environ, components={"sqlite": (TASK_TABLES,), "postgres": pg_tables}
            )
            opened.push_async_callback(store.aclose)
            jobs: SharedQueue | None = None
            if shared:
                from workers.shared import SharedQueue

                assert isinstance(store, PostgresStore)  # the config refuses SQLite
                jobs = SharedQueue(
                    dsn_from_env(cfg.storage, environ),
                    store.pool,
                    where=store.where,
                    wait_seconds=cfg.workers.queue_wait_seconds,
                    stalled_seconds=cfg.workers.stalled_job_seconds,
                    connect_timeout=cfg.storage.connect_timeout_seconds,
                )
                await jobs.open()
                opened.push_async_callback(jobs.aclose)
            provider = MeteredProvider(
                llm if llm is not None else make_provider(cfg.llm, counter, environ), metrics
            )
            opened.push_async_callback(provider.aclose)
            memory: MemoryService | None = None
            if cfg.memory.enabled:
                memory = await MemoryService.open(
                    cfg,
                    store,
                    live_indexing=lambda: live().memory.index_live_messages,
                    index_max_lag=lambda: live().memory.index_max_lag_seconds,
                )
                opened.push_async_callback(memory.aclose)
            rt = cls(
                live,
                events=events,
                metrics=metrics,
                store=store,
                counter=counter,
                llm=provider,
                memory=memory,
                respond_override=respond_override,
                jobs=jobs,
            )
            if memory is not None:
                # Under a burst, acknowledging messages goes before indexing them.
                registry = rt.registry
                memory.indexer.busy = lambda: registry.acking > 0
            rt.pool.start()
            opened.push_async_callback(rt.pool.aclose)
            rt.registry.start_sweeper()
            opened.push_async_callback(rt.registry.aclose)
            tasks = rt.registry.deps.tasks
            tasks.remote = jobs
            if jobs is not None and (cfg.workers.run_jobs or jobs_only):
                from workers.shared import JobRunner, TaskKit

                runner = JobRunner(
                    jobs,
                    store,
                    rt.compaction_worker,
                    TaskKit(tasks.records, rt.registry.deps.memory, tasks.tools),
                    concurrency=cfg.workers.compaction_concurrency,
                    task_concurrency=cfg.workers.task_worker_concurrency,
                    stalled_seconds=cfg.workers.stalled_job_seconds,
                    drain_seconds=cfg.runtime.drain_seconds,
                    name=cfg.cluster.process_id or default_process_id(),
                )
                runner.start()
                opened.push_async_callback(runner.aclose)
                rt.job_runner = runner
            if cfg.cluster.enabled and not jobs_only:
                assert isinstance(store, PostgresStore)  # the config refuses SQLite
                member = ClusterMember(
                    store,
                    rt.registry,
                    cfg.cluster,
                    dsn_from_env(cfg.storage, environ),
                    connect_timeout=cfg.storage.connect_timeout_seconds,
                )
                opened.push_async_callback(member.leave)
                await member.join()
                rt.cluster = member
            opened.pop_all()  # from here on aclose() owns them
        collector.freeze_startup_heap()
        collector.hold()
        rt._holds_collector = True
        rt._spawn("full collections", rt.collections.run())
        _tune_malloc()
        for line in cfg.deprecations:
            log.warning("config.deprecated", source=cfg.source, detail=line)
        where = store.where if isinstance(store, PostgresStore) else str(cfg.storage_path())
        log.info("runtime.started", provider=provider.name, store=where)
        return rt

    @property
    def config(self) -> Config:
        return self._live.current

    @property
    def draining(self) -> bool:
        """True once shutdown began: new messages are stored but start no turn."""
        return self._draining

    def set_config(self, config: Config) -> None:
        """Swap in a new validated config; channels read it at their next check.

        Running adapters get their new section (allow-lists, admins, respond
        mode are read per message); keys only read at start need a restart.
        """
        self._live.current = config
        self.pool.set_concurrency(config.workers.compaction_concurrency)
        self.compaction_worker.timeout = config.workers.compaction_timeout_seconds
        if self.jobs is not None:
            self.jobs.wait_seconds = config.workers.queue_wait_seconds
        for name, adapter in self.adapters.items():
            section = getattr(config.adapters, name, None)
            if section is not None and hasattr(adapter, "config"):
                adapter.config = section  # type: ignore[attr-defined]

    async def __aenter__(self) -> Runtime:
        """The runtime is already open: ``async with await Runtime.open(...)`` works too."""
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self, drain_seconds: float | None = None) -> None:
        """Drain, then disconnect, then stop workers and the store.  Safe to call twice.

        Draining: new messages are stored but start no turn (``submit`` parks
        them); the channels finish their mailboxes and deliver their replies
        through the still-connected adapters, for at most ``drain_seconds``
        (default ``[runtime] drain_seconds``).  A turn cut off by that limit
        leaves its messages unanswered, and they are answered after the
        restart.  Replies that could not be delivered are kept in the store.
        """
        if self._closed:
            return
        self._closed = True
        self._draining = True
        limit = self.config.runtime.drain_seconds if drain_seconds is None else drain_seconds
        for task in list(self._background.values()):
            task.cancel()
        for task in list(self._background.values()):
            with contextlib.suppress(BaseException):
                await task
        if self._holds_collector:
            self._holds_collector = False
            collector.release()
        started = time.monotonic()
        busy = sum(not a.idle() for a in self.registry.actors.values())
        log.info("runtime.draining", seconds=limit, busy_channels=busy)
        drained = True
        try:
            await asyncio.wait_for(self.registry.aclose(), limit)
        except TimeoutError:
            drained = False
            log.warning(
                "runtime.drain_timeout",
                seconds=limit,
                hint="turns still running were stopped; their messages are answered after "
                "the restart ([runtime] drain_seconds)",
            )
        # A reconnect cut off above may have left a half-open client behind.
        for name, adapter in [*self.adapters.items(), *self._retrying.items()]:
            try:
                await adapter.stop()
            except Exception as exc:
                log.warning("adapter.stop_failed", adapter=name, error=str(exc))
        if self.cluster is not None:
            # After the actors stopped: their channels move to live processes at once.
            await self.cluster.leave()
        pending = await self._count_undelivered()
        if pending:
            log.error(
                "runtime.replies_undelivered",
                count=pending,
                this_run=self.kept,
                hint="kept in the store; posted when their adapter next connects",
            )
        # Each owner closes even when the one before it failed: an unclosed database
        # connection's thread would keep a process that is stopping alive forever.
        closers: list[tuple[str, Callable[[], Awaitable[None]]]] = [("workers", self.pool.aclose)]
        if self.job_runner is not None:
            closers.append(("job runner", self.job_runner.aclose))
        if self.jobs is not None:
            closers.append(("job queue", self.jobs.aclose))
        if self.memory is not None:
            closers.append(("memory", self.memory.aclose))
        closers.append(("llm", self.llm.aclose))
        closers.append(("store", self.store.aclose))
        for name, close in closers:
            try:
                await close()
            except Exception as exc:
                log.error("runtime.close_failed", part=name, error=str(exc))
        self.metrics.close()
        log.info(
            "runtime.stopped",
            drained=drained,
            seconds=round(time.monotonic() - started, 3),
            undelivered=pending,
            parked=self.parked,
        )

    async def _count_undelivered(self) -> int:
        try:
            return len(await self.store.undelivered())
        except Exception as exc:
            log.error("runtime.undelivered_unknown", error=str(exc))
            return 0

    # -- adapters --------------------------------------------------------------------

    async def start_adapter(self, adapter: Adapter, *, retry: bool = True) -> bool:
        """Start one adapter; True once it is connected.

        A :class:`FatalAdapterError` (a refused token, a missing variable)
        propagates: retrying cannot fix it.  Any other failure means the
        platform cannot be reached for now: it is logged, ``/health`` reports
        the adapter as retrying, and (with ``retry``) it reconnects in the
        background with capped backoff.  Either way the other adapters go on.
        Once connected, the adapter posts the replies kept for its channels and
        the channels with unanswered messages are resumed.
        """
        try:
            await adapter.start(self)
        except FatalAdapterError as exc:
            log.error("adapter.refused", adapter=adapter.name, error=str(exc), fix=exc.setting)
            raise
        except Exception as exc:
            log.error("adapter.start_failed", adapter=adapter.name, error=_why(exc), retrying=retry)
            self.adapter_problems[adapter.name] = f"not connected: {_why(exc)}"
            if retry and not self._closed:
                self.adapter_problems[adapter.name] = f"retrying: {_why(exc)}"
                self._retrying[adapter.name] = adapter
                self._spawn(f"reconnect:{adapter.name}", self._reconnect(adapter))
            return False
        self._connected(adapter)
        return True

    def _connected(self, adapter: Adapter) -> None:
        self.adapters[adapter.name] = adapter
        self._retrying.pop(adapter.name, None)
        self.adapter_problems.pop(adapter.name, None)
        log.info("adapter.started", adapter=adapter.name)
        self._spawn(f"redeliver:{adapter.name}", self._after_connect(adapter))

    async def _reconnect(self, adapter: Adapter) -> None:
        name = adapter.name

        def failed(attempt: int, wait: float, exc: Exception) -> None:
            self.adapter_problems[name] = (
                f"retrying: attempt {attempt + 1} failed ({_why(exc)}); next in {wait:.0f} s"
            )

        await asyncio.sleep(RECONNECT_BACKOFF.delay(0))
        try:
            await retry_forever(
                lambda: adapter.start(self),
                backoff=RECONNECT_BACKOFF,
                what=f"adapter {name}",
                fatal=(FatalAdapterError,),
                on_failure=failed,
            )
        except FatalAdapterError as exc:
            log.error("adapter.refused", adapter=name, error=str(exc), fix=exc.setting)
            self.adapter_problems[name] = f"refused: {exc}"
            self.fatal_error = exc
            self.fatal.set()
            return
        self._connected(adapter)

    def _spawn(self, key: str, work: Any) -> None:
        old = self._background.get(key)
        if old is not None and not old.done():
            work.close()
            return
        task = asyncio.create_task(work, name=key)
        self._background[key] = task
        task.add_done_callback(lambda t: self._done(key, t))

    def _done(self, key: str, task: asyncio.Task[None]) -> None:
        if self._background.get(key) is task:
            del self._background[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("runtime.task_failed", task=key, error=_why(task.exception()))

    async def _after_connect(self, adapter: Adapter) -> None:
        """Post the replies kept for the adapter's channels, then resume its channels."""
        await self.redeliver(adapter)
        prefix = f"{adapter.name}:"
        keys = [k for k in await self.store.channels_awaiting_reply() if k.startswith(prefix)]
        if keys and not self._draining:
            log.info("channels.resumed", adapter=adapter.name, channels=len(keys))
            await self.registry.resume(keys)

    async def redeliver(self, adapter: Adapter) -> int:
        """Post every reply kept for ``adapter``'s channels, oldest first; return how many
        are still kept.  Each is deleted once the platform took it, so it is posted once."""
        lock = self._redelivering.setdefault(adapter.name, asyncio.Lock())
        async with lock:
            kept = await self.store.undelivered(f"{adapter.name}:")
            left = 0
            uncertain = [r for r in kept if r.sending is not None]
            kept = [r for r in kept if r.sending is None]
            for reply in uncertain:
                self._report_uncertain(reply)
            for reply in kept:
                out = Outbound(reply.channel, reply.text, reply_to=reply.reply_to)
                # Committed before the post: a crash from here until mark_delivered leaves
                # the row marked, and the next start reports it instead of posting it twice.
                await self.store.mark_sending(reply.id)
                try:
                    await adapter.send(out)
                except Exception as exc:
                    left += await self._still_undelivered(reply.id, reply.attempts, out, exc)
                    continue
                await self.store.mark_delivered(reply.id)
                self.events.publish(ReplySent(reply.channel))
                log.info(
                    "reply.delivered_late",
                    channel=reply.channel,
                    reply_to=reply.reply_to,
                    attempts=reply.attempts + 1,
                    late_seconds=round(time.time() - reply.created, 1),
                )
            if kept:
                log.info(
                    "replies.redelivered",
                    adapter=adapter.name,
                    posted=len(kept) - left,
                    still_kept=left,
                )
        if left and not self._draining:
            # A no-op when called from that very task: it goes on by itself.
            self._spawn(f"retry:{adapter.name}", self._redeliver_later(adapter))
        return left

    def _report_uncertain(self, reply: UndeliveredReply) -> None:
        """A kept reply whose post was cut off by a crash: the platform may have it.

        It is not posted again (a double post cannot be taken back; a missing reply can
        be posted by hand): logged once per process with its text, and left in the store
        until an operator deals with it (docs/operations.md, "Replies that could not be
        posted").
        """
        if reply.id in self._uncertain_reported:
            return
        self._uncertain_reported.add(reply.id)
        log.error(
            "reply.delivery_uncertain",
            channel=reply.channel,
            reply_to=reply.reply_to,
            reply_id=reply.id,
            posting_since=reply.sending,
            text=reply.text,
            hint="the process stopped while this reply was being posted; check the "
            "channel, then 'tierbot replies drop ID' or 'tierbot replies retry ID'",
        )

    async def _still_undelivered(
        self, reply_id: int, attempts: int, out: Outbound, exc: Exception
    ) -> int:
        if attempts + 1 >= MAX_DELIVERY_ATTEMPTS:
            log.error(
                "reply.abandoned",
                channel=out.channel,
                reply_to=out.reply_to,
                attempts=attempts + 1,
                error=_why(exc),
                text=out.text,
            )
            await self.store.mark_delivered(reply_id)
            return 0
        log.warning(
            "reply.still_undelivered",
            channel=out.channel,
            reply_to=out.reply_to,
            attempts=attempts + 1,
            error=_why(exc),
        )
        await self.store.mark_undelivered_again(reply_id, _why(exc))
        return 1

    async def _redeliver_later(self, adapter: Adapter) -> None:
        """Post the kept replies again, with backoff, until none is left."""
        attempt = 0
        while True:
            await asyncio.sleep(REDELIVER_BACKOFF.delay(attempt))
            attempt += 1
            if adapter.connected() and await self.redeliver(adapter) == 0:
                return

    def _adapter_for(self, channel: str) -> Adapter | None:
        return self.adapters.get(ChannelKey.parse(channel).platform)

    async def deliver(self, out: Outbound) -> None:
        """Send a reply; one the platform did not take is kept and posted later, never dropped.

        Channels of no adapter of this runtime (replay, tests) go to :attr:`outbox`.
        """
        platform = ChannelKey.parse(out.channel).platform
        adapter = self.adapters.get(platform)
        if adapter is None:
            if platform in self.adapter_problems:
                await self._keep(out, platform, f"the {platform} adapter is not connected")
                return
            self.outbox.sent.append(out)
            self.events.publish(ReplySent(out.channel))
            return
        try:
            await adapter.send(out)
        except Exception as exc:
            await self._keep(out, platform, _why(exc))
            return
        self.events.publish(ReplySent(out.channel))

    async def _keep(self, out: Outbound, platform: str, error: str) -> None:
        try:
            await self.store.save_undelivered(out.channel, out.text, out.reply_to, error)
        except Exception as exc:
            log.error(
                "reply.lost",
                channel=out.channel,
                reply_to=out.reply_to,
                error=error,
                store_error=_why(exc),
                text=out.text,
            )
            return
        self.kept += 1
        log.error(
            "reply.delivery_failed",
            channel=out.channel,
            reply_to=out.reply_to,
            error=error,
            kept=True,
            hint="posted when the adapter is connected again (at the latest after a restart)",
        )
        self.events.publish(DeliveryFailed(out.channel, error))
        adapter = self.adapters.get(platform)
        if adapter is not None and not self._draining:
            self._spawn(f"retry:{platform}", self._redeliver_later(adapter))

    async def _progress(self, channel: str, message_id: str | None) -> Any:
        adapter = self._adapter_for(channel)
        if adapter is None:
            return None
        try:
            handle = await adapter.progress(channel, message_id)
        except Exception as exc:
            log.warning("progress.failed", channel=channel, error=str(exc))
            return None
        return _QuietProgress(handle, channel)

    def respond_mode(self, channel: str) -> RespondMode:
        if self.respond_override:
            return self.respond_override
        # Asked several times a message: resolved once per channel and config.
        config = self.config
        if self._respond_modes[0] is not config:
            self._respond_modes = (config, {})
        modes = self._respond_modes[1]
        mode = modes.get(channel)
        if mode is None:
            if len(modes) >= _RESOLVED_KEEP:  # bounded: evicted channels cost nothing
                modes.clear()
            mode = modes[channel] = config.respond_for(channel)
        return mode

    # -- Dispatcher --------------------------------------------------------------------

    async def submit(self, message: InboundMessage) -> Delivery:
        limit = self.config.runtime.max_message_chars
        if len(message.text) > limit:
            # Refused before anything counts or stores it: a 20 MB paste must cost nothing.
            log.warning(
                "message.too_large",
                channel=message.channel,
                platform_id=message.platform_id,
                chars=len(message.text),
                limit=limit,
            )
            return Delivery(False, too_long(len(message.text), limit), limit=limit)
        if self.memory is not None:
            # Before the message is stored: whatever indexes or mines it must find the
            # channel's privacy already recorded.
            await self.memory.note_privacy(message.channel, message.private)
        self.collections.traffic()
        if self._draining:
            return await self._park(message)
        delivery = await self.registry.submit(message)
        if delivery.accepted:
            self.events.publish(MessageReceived(message.channel))
        return delivery

    async def _park(self, message: InboundMessage) -> Delivery:
        """Shutting down: store ``message`` (the adapter may acknowledge it) but start no turn.

        Its channel has a message after ``handled_upto``, so the next start
        resumes the channel and answers it.
        """
        msg = to_message(message, self.counter.count_message(message.text))
        await self.store.ensure_channel(message.channel)
        stored = await self.store.append_many([msg])
        if stored[0] is None:
            return Delivery(False, "duplicate")
        self.parked += 1
        self.events.publish(MessageReceived(message.channel))
        log.info(
            "message.parked",
            channel=message.channel,
            platform_id=message.platform_id,
            reason="shutting down: stored, answered after the restart",
        )
        return Delivery(True)

    async def command(self, message: InboundMessage, *, is_admin: bool) -> str | None:
        """The command's answer; a command that fails answers with the reason (logged as
        ``command.failed``) rather than raising into the adapter, where it would end the
        console's input loop or leave a platform user with no answer at all."""
        try:
            return await run_command(self, message, is_admin=is_admin)
        except Exception as exc:
            name = message.text.split(maxsplit=1)[0]
            log.exception("command.failed", channel=message.channel, command=name, error=_why(exc))
            return f"{name} failed: {_why(exc)}"

    async def drain(self) -> None:
        await self.registry.drain()


class Opening:
    """What :meth:`Runtime.open` returns: await it for the runtime, or use it in
    ``async with`` to have the runtime closed on the way out (as aiosqlite's
    ``connect`` does for a connection)."""

    def __init__(self, building: Awaitable[Runtime]) -> None:
        self._building = building
        self._runtime: Runtime | None = None

    def __await__(self) -> Generator[Any, None, Runtime]:
        return self._building.__await__()

    async def __aenter__(self) -> Runtime:
        self._runtime = await self._building
        return self._runtime

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runtime is not None:
            await self._runtime.aclose()


class _QuietProgress:
    """An adapter's progress handle whose ``done`` never fails the turn it belongs to.

    The turn's reply is already stored and handed over when ``done`` runs; a
    platform gone meanwhile must not mark the turn failed (it would be answered twice).
    """

    def __init__(self, handle: Any, channel: str) -> None:
        self._handle = handle
        self._channel = channel

    async def done(self) -> None:
        try:
            await self._handle.done()
        except Exception as exc:
            log.warning("progress.done_failed", channel=self._channel, error=_why(exc))


#: glibc's M_TRIM_THRESHOLD (mallopt's parameter number) and the value the runtime sets.
M_TRIM_THRESHOLD, TRIM_THRESHOLD = -1, 128 * 1024


def _tune_malloc() -> None:
    """Make glibc's malloc give freed memory back after a burst, as it does by default
    until a program frees one large block.

    glibc serves blocks of 128 KB and more straight from the system, until one is freed:
    then it raises that bar to the block's size (up to 32 MB) and serves the next ones
    from its heap, where a freed block stays in the RSS whenever anything smaller
    allocated after it is still alive.  A burst's batches (a few hundred rows, their
    parameters, the rows read back) freed such blocks all the time: a 10,000-channel run
    kept 2-3 KB a channel of freed memory, 20.2 KB RSS a channel against 16.8 KB with
    the bar kept fixed.  Setting the trim threshold keeps it fixed (mallopt(3)).

    Only on glibc, and not when the operator set ``MALLOC_TRIM_THRESHOLD_`` or
    ``MALLOC_MMAP_THRESHOLD_`` themselves.
    """
    if os.environ.get("MALLOC_TRIM_THRESHOLD_") or os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return  # not glibc (musl, macOS): its own allocator's rules apply
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def _why(exc: BaseException | None) -> str:
    return (str(exc) or repr(exc)) if exc is not None else ""


def install_signal_handlers(stop: asyncio.Event, reload: Callable[[], None] | None = None) -> None:
    """SIGINT/SIGTERM set ``stop``; SIGHUP calls ``reload``. Only the top-level runner calls it."""
    import signal

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    if reload is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
            loop.add_signal_handler(signal.SIGHUP, reload)
