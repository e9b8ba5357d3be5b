"""The runtime: wires config, store, tokens, LLM, worker pool, channels and adapters.

It is the :class:`~bot.adapters.base.Dispatcher` every adapter talks to, and an
async context manager that shuts down in order: adapters stop taking messages,
channels finish their mailboxes, workers stop, the store flushes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import structlog

from bot.adapters.base import Adapter, Delivery, Dispatcher, Outbound
from bot.commands import run_command
from bot.config import Config, RespondMode
from bot.llm.base import LLMProvider
from bot.llm.factory import make_provider
from bot.messages import InboundMessage
from bot.metered import MeteredMemory, MeteredProvider
from bot.metrics import Metrics
from bot.store import Store
from bot.tokens import TokenCounter, encoding_for_model, get_counter
from channels import ChannelDeps, ChannelRegistry
from workers import CompactionWorker, WorkerPool

log = structlog.get_logger("tierbot.runtime")


@dataclass
class Outbox:
    """Replies to channels that no adapter serves (replay, tests)."""

    sent: list[Outbound] = field(default_factory=list)


class Runtime(Dispatcher):
    """One bot process: every channel, adapter and background worker."""

    def __init__(
        self,
        config: Config,
        *,
        llm: LLMProvider | None = None,
        environ: Mapping[str, str] | None = None,
        respond_override: RespondMode | None = None,
    ) -> None:
        self._config = config
        self._environ = os.environ if environ is None else environ
        self._llm = llm
        self.respond_override = respond_override
        self.adapters: dict[str, Adapter] = {}
        self.outbox = Outbox()
        self.store: Store
        self.counter: TokenCounter
        self.pool: WorkerPool
        self.registry: ChannelRegistry
        self.memory: Any = None
        self.metrics = Metrics(self)
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------

    @property
    def config(self) -> Config:
        return self._config

    def set_config(self, config: Config) -> None:
        """Swap in a new validated config; channels read it at their next check.

        Running adapters get their new section (allow-lists, admins, respond
        mode are read per message); keys only read at start need a restart.
        """
        self._config = config
        self.pool.set_concurrency(config.workers.compaction_concurrency)
        self.registry.deps.worker.timeout = config.workers.compaction_timeout_seconds
        for name, adapter in self.adapters.items():
            section = getattr(config.adapters, name, None)
            if section is not None and hasattr(adapter, "config"):
                adapter.config = section  # type: ignore[attr-defined]

    async def __aenter__(self) -> Runtime:
        cfg = self._config
        encoding = cfg.llm.encoding or encoding_for_model(cfg.llm.model)
        self.counter = get_counter(encoding)
        self.store = await Store.open(
            cfg.storage_path(),
            synchronous=cfg.storage.synchronous,
            commit_batch=cfg.storage.commit_batch,
        )
        if self._llm is None:
            self._llm = make_provider(cfg.llm, self.counter, self._environ)
        self._llm = MeteredProvider(self._llm, self.metrics)
        self.memory = await self._open_memory()
        self.pool = WorkerPool(cfg.workers.compaction_concurrency)
        self.pool.start()
        worker = CompactionWorker(
            self._llm,
            self.counter,
            self.memory.writer() if self.memory is not None else None,
            timeout=cfg.workers.compaction_timeout_seconds,
        )
        deps = ChannelDeps(
            config=lambda: self._config,
            store=self.store,
            llm=self._llm,
            counter=self.counter,
            pool=self.pool,
            worker=worker,
            deliver=self.deliver,
            respond_mode=self.respond_mode,
            memory=MeteredMemory(self.memory.access(), self.metrics)
            if self.memory is not None
            else None,
            progress=self._progress,
        )
        self.registry = ChannelRegistry(deps)
        self.registry.start_sweeper()
        self.metrics.watch_pool("compaction", self.pool)
        self.metrics.attach()
        log.info("runtime.started", provider=self._llm.name, store=str(cfg.storage_path()))
        return self

    async def _open_memory(self) -> Any:
        """The memory graph, when enabled (imported lazily: it loads indexes)."""
        if not self._config.memory.enabled:
            return None
        try:
            from channels.memory import MemoryService
        except ImportError:
            return None
        return await MemoryService.open(
            self._config,
            self.store,
            live_indexing=lambda: self._config.memory.index_live_messages,
        )

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self, drain_seconds: float = 10.0) -> None:
        """Stop adapters, drain channels (for at most ``drain_seconds``), then workers and
        the store. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for name, adapter in list(self.adapters.items()):
            try:
                await adapter.stop()
            except Exception as exc:
                log.warning("adapter.stop_failed", adapter=name, error=str(exc))
        try:
            await asyncio.wait_for(self.registry.aclose(), drain_seconds)
        except TimeoutError:
            log.warning("runtime.drain_timeout", seconds=drain_seconds)
        await self.pool.aclose()
        if self.memory is not None:
            await self.memory.aclose()
        if self._llm is not None:
            await self._llm.aclose()
        await self.store.aclose()
        self.metrics.detach()
        log.info("runtime.stopped")

    # -- adapters --------------------------------------------------------------------

    async def start_adapter(self, adapter: Adapter) -> bool:
        """Start one adapter; a failure is logged and reported, never fatal to the others."""
        try:
            await adapter.start(self)
        except Exception as exc:
            log.error("adapter.start_failed", adapter=adapter.name, error=str(exc))
            return False
        self.adapters[adapter.name] = adapter
        log.info("adapter.started", adapter=adapter.name)
        return True

    def _adapter_for(self, channel: str) -> Adapter | None:
        return self.adapters.get(channel.split(":", 1)[0])

    async def deliver(self, out: Outbound) -> None:
        adapter = self._adapter_for(out.channel)
        if adapter is None:
            self.outbox.sent.append(out)
            self.metrics.message_out(out.channel)
            return
        try:
            await adapter.send(out)
        except Exception as exc:
            log.error("reply.delivery_failed", channel=out.channel, error=str(exc))
            return
        self.metrics.message_out(out.channel)

    async def _progress(self, channel: str, message_id: str | None) -> Any:
        adapter = self._adapter_for(channel)
        if adapter is None:
            return None
        try:
            return await adapter.progress(channel, message_id)
        except Exception as exc:
            log.warning("progress.failed", channel=channel, error=str(exc))
            return None

    def respond_mode(self, channel: str) -> RespondMode:
        return self.respond_override or self._config.respond_for(channel)

    # -- Dispatcher --------------------------------------------------------------------

    async def submit(self, message: InboundMessage) -> Delivery:
        delivery = await self.registry.submit(message)
        if delivery.accepted:
            self.metrics.message_in(message.channel)
        return delivery

    async def command(self, message: InboundMessage, *, is_admin: bool) -> str | None:
        return await run_command(self, message, is_admin=is_admin)

    async def drain(self) -> None:
        await self.registry.drain()


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
