"""The memory graph as channels and compaction workers use it.

:class:`MemoryService` owns the :class:`~memory_graph.MemoryGraph` of a runtime
and hands out the two narrow views the rest of the code needs: a
:class:`~workers.MemoryWriter` for compaction workers (memory_save with
provenance, episodes) and a :class:`~channels.actor.MemoryAccess` for channel
turns (memory_recall).  It also runs periodic maintenance and the ``/memory``
and ``/forget`` commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

import structlog

from bot.config import Config
from bot.errors import ToolError
from bot.llm.base import ToolSpec
from bot.messages import Message, Role
from memory_graph import MemoryDraft, MemoryGraph, memory_tools, run_memory_tool, save_draft
from workers import infer_sources

log = structlog.get_logger("tierbot.memory")


def _save_spec_with_sources() -> ToolSpec:
    """memory_save as compaction workers offer it: with ``source_ids`` to cite messages."""
    save = memory_tools()[0]
    params = json.loads(json.dumps(save.parameters))
    params["properties"]["source_ids"] = {
        "type": "array",
        "items": {"type": "string"},
        "description": "The [ids] of the transcript messages this memory comes from.",
    }
    return replace(save, parameters=params)


class _Writer:
    """memory_save for compaction workers: sources checked against what the job covers."""

    def __init__(self, graph: MemoryGraph) -> None:
        self.graph = graph
        self._spec = _save_spec_with_sources()

    def save_tool(self) -> ToolSpec:
        return self._spec

    async def save_from_tool(
        self, arguments: dict[str, Any], *, channel: str, covered: Sequence[Message]
    ) -> str:
        args = dict(arguments)
        cited = args.pop("source_ids", None)
        if cited is not None and (
            not isinstance(cited, list) or not all(isinstance(c, str) for c in cited)
        ):
            raise ToolError("source_ids: must be a list of strings", tool="memory_save",
                            argument="source_ids")  # fmt: skip
        by_id = {m.platform_id: m for m in covered if m.role in (Role.USER, Role.ASSISTANT)}
        sources = [c for c in cited or [] if c in by_id]
        if not sources:
            sources = infer_sources(str(args.get("content", "")), covered)
        authors = [by_id[s].author_id for s in sources if s in by_id]
        if sources and await self.graph.is_forgotten(platform_ids=sources):
            return json.dumps({"skipped": "its source messages were forgotten"})
        if authors and await self.graph.is_forgotten(author_id=authors[0]):
            return json.dumps({"skipped": "its author asked to be forgotten"})
        return await run_memory_tool(
            self.graph, "memory_save", args, channel=channel,
            author_id=authors[0] if authors else "", sources=sources,
        )  # fmt: skip

    async def save_many_from_tool(
        self, calls: Sequence[dict[str, Any]], *, channel: str, covered: Sequence[Message]
    ) -> list[str]:
        """:meth:`save_from_tool` for many calls, in one transaction: a result per call, in
        order.  A call with bad arguments gets its own error and does not stop the others.

        One pass of a compaction can save dozens of memories; saving them one by one
        cost a tombstone lookup and a transaction each, most of the pass's time.
        """
        by_id = {m.platform_id: m for m in covered if m.role in (Role.USER, Role.ASSISTANT)}
        results: list[str] = [""] * len(calls)
        ready: list[tuple[int, MemoryDraft]] = []
        for i, arguments in enumerate(calls):
            args = dict(arguments)
            cited = args.pop("source_ids", None)
            if cited is not None and (
                not isinstance(cited, list) or not all(isinstance(c, str) for c in cited)
            ):
                bad = ToolError("source_ids: must be a list of strings", tool="memory_save",
                                argument="source_ids")  # fmt: skip
                results[i] = json.dumps({"error": str(bad)})
                continue
            sources = [c for c in cited or [] if c in by_id]
            if not sources:
                sources = infer_sources(str(args.get("content", "")), covered)
            authors = [by_id[s].author_id for s in sources if s in by_id]
            try:
                draft = save_draft(args, channel=channel, author_id=authors[0] if authors else "",
                                   sources=sources)  # fmt: skip
            except ToolError as exc:
                results[i] = json.dumps({"error": str(exc)})
                continue
            ready.append((i, draft))
        # The common case has nothing forgotten: one lookup for every source and author.
        pids = sorted({s for _, d in ready for s in d.sources})
        authors_all = sorted({d.author_id for _, d in ready if d.author_id})
        if await self.graph.is_forgotten(platform_ids=pids) or any(
            [await self.graph.is_forgotten(author_id=a) for a in authors_all]
        ):
            kept = []
            for i, d in ready:
                if d.sources and await self.graph.is_forgotten(platform_ids=list(d.sources)):
                    results[i] = json.dumps({"skipped": "its source messages were forgotten"})
                elif d.author_id and await self.graph.is_forgotten(author_id=d.author_id):
                    results[i] = json.dumps({"skipped": "its author asked to be forgotten"})
                else:
                    kept.append((i, d))
            ready = kept
        try:
            saved = await self.graph.save_many([d for _, d in ready])
        except ToolError:
            # One invalid draft fails the whole transaction: save one by one to say which.
            for i, d in ready:
                try:
                    r = (await self.graph.save_many([d]))[0]
                    results[i] = json.dumps({"id": r.id, "merged": r.merged})
                except ToolError as exc:
                    results[i] = json.dumps({"error": str(exc)})
            return results
        for (i, _), r in zip(ready, saved, strict=True):
            results[i] = json.dumps({"id": r.id, "merged": r.merged})
        return results

    async def add_episodes(self, messages: Sequence[Message]) -> int:
        return await self.graph.add_episodes(messages)


_INDEXED_ROLES = (Role.USER, Role.ASSISTANT)


class EpisodeIndexer:
    """Indexes messages as episodes shortly after they are stored, in batches, off the turn path.

    So memory search finds what was said a minute ago, not only what compaction has
    archived.  Best effort by design: compaction still indexes everything it archives
    and a restarted channel hands its live messages over again (indexing is idempotent
    per channel and platform id), so a message dropped here (queue over ``max_queued``,
    a crash before its batch ran, an indexing error) is indexed later all the same.
    """

    def __init__(
        self, graph: MemoryGraph, *, batch: int = 64, delay: float = 0.5,
        max_queued: int = 100_000,
    ) -> None:  # fmt: skip
        self.graph = graph
        self.batch = batch
        self.delay = delay
        self.max_queued = max_queued
        self.dropped = 0
        self.indexed = 0
        self._queue: deque[Message] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="memory-episode-indexer")

    def submit(self, messages: Sequence[Message]) -> None:
        """Queue user and bot messages for indexing; never waits."""
        for m in messages:
            if m.role in _INDEXED_ROLES and m.text.strip():
                if len(self._queue) >= self.max_queued:
                    self._queue.popleft()  # compaction indexes it when it archives it
                    self.dropped += 1
                    if self.dropped == 1 or self.dropped % 10_000 == 0:
                        log.warning("memory.index_backlog", dropped=self.dropped)
                self._queue.append(m)
        if self._queue:
            self._idle.clear()
            self._wake.set()

    async def flush(self) -> None:
        """Return once everything submitted so far has been indexed (or has failed)."""
        if self._task is None or self._task.done():
            return
        await self._idle.wait()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(self.delay)  # let a burst gather into one batch
            self._wake.clear()
            while self._queue:
                n = min(self.batch, len(self._queue))
                batch = [self._queue.popleft() for _ in range(n)]
                try:
                    self.indexed += await self.graph.add_episodes(batch)
                except Exception:
                    log.exception("memory.index_failed", messages=len(batch))
            if not self._queue:
                self._idle.set()

    async def aclose(self, drain_seconds: float = 30.0) -> None:
        """Index what is queued (for at most ``drain_seconds``), then stop."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain_seconds):
                await self.flush()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class _Access:
    """memory_recall for channel turns, and the live indexing of their messages."""

    def __init__(self, graph: MemoryGraph, indexer: EpisodeIndexer) -> None:
        self.graph = graph
        self.indexer = indexer
        self._spec = memory_tools()[1]

    def recall_tool(self) -> ToolSpec:
        return self._spec

    async def recall_from_tool(
        self, arguments: dict[str, Any], *, channel: str, exclude: Collection[str] = ()
    ) -> str:
        return await run_memory_tool(
            self.graph, "memory_recall", arguments, channel=channel, exclude=exclude
        )

    def index_later(self, messages: Sequence[Message]) -> None:
        self.indexer.submit(messages)

    async def count(self, channel: str) -> int:
        return await self.graph.count(channel)


class MemoryService:
    """One runtime's memory graph, its views, and its maintenance loop."""

    def __init__(self, graph: MemoryGraph, config: Config) -> None:
        self.graph = graph
        self.config = config
        self._writer = _Writer(graph)
        self.indexer = EpisodeIndexer(graph)
        self._access = _Access(graph, self.indexer)
        self._maintenance: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, config: Config) -> MemoryService:
        graph = await MemoryGraph.open(config.storage_path(), config.memory)
        service = cls(graph, config)
        service.indexer.start()
        service._maintenance = asyncio.create_task(service._maintain(), name="memory-maintenance")
        return service

    def writer(self) -> _Writer:
        return self._writer

    def access(self) -> _Access:
        return self._access

    async def count(self, channel: str) -> int:
        return await self.graph.count(channel)

    async def search(self, query: str, *, channel: str, limit: int = 5) -> list[dict[str, Any]]:
        return [h.to_json() for h in await self.graph.recall(query, channel=channel, limit=limit)]

    async def forget_command(
        self, arg: str, *, channel: str
    ) -> tuple[str, tuple[tuple[str, str], ...]]:
        """``/forget ID`` or ``/forget --author USER``; returns the reply and the
        (channel, platform id) messages the forgetting touched."""
        parts = arg.split()
        if len(parts) == 2 and parts[0] == "--author":
            report = await self.graph.forget_author(parts[1])
            text = (
                f"Forgot {report.memories_deleted} memories and {report.episodes_deleted} "
                f"archived episodes derived from {parts[1]}'s messages."
            )
            return text, report.messages
        if len(parts) == 1:
            # Only what this channel can see: a forget never reaches another workspace.
            ok = await self.graph.forget(parts[0], channel=channel)
            return (f"Forgot memory {parts[0]}." if ok else f"No memory with id {parts[0]}."), ()
        return "Usage: /forget MEMORY_ID  or  /forget --author USER_ID", ()

    async def _maintain(self) -> None:
        while True:
            await asyncio.sleep(self.config.memory.maintenance_interval_seconds)
            try:
                report = await self.graph.maintenance()
                log.info("memory.maintenance", report=report.to_json())
            except Exception:
                log.exception("memory.maintenance_failed")

    async def aclose(self) -> None:
        if self._maintenance is not None:
            self._maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._maintenance
        await self.indexer.aclose()
        await self.graph.aclose()
