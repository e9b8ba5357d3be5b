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
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog

from channels.history import BOT_AUTHOR
from channels.memory_access import ChannelMemoryAccess
from memory_graph import MemoryDraft, MemoryGraph, memory_tools, run_memory_tool, save_draft
from memory_graph.backends import open_graph
from memory_graph.episodes import episode_id
from tierbot.config import Config
from tierbot.errors import ToolError
from tierbot.llm.base import ToolSpec
from tierbot.llm.text import names, sentences, stems, without_author
from tierbot.messages import Message, Role
from workers import infer_sources, minable

log = structlog.get_logger("tierbot.memory")


@dataclass(frozen=True, slots=True)
class ForgetOutcome:
    """What ``/forget`` did: the reply, the (channel, platform id) messages it touched,
    and, for one memory, what it said, the channel it was saved in and whose it was."""

    text: str
    messages: tuple[tuple[str, str], ...] = ()
    said: str = ""
    channel: str = ""
    author_id: str = ""


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


#: How often a process on a shared store picks up the memories other processes saved
#: (a compaction job's, another owner's channel's): recall finds them within this long.
SYNC_SECONDS = 1.0


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
            raise ToolError(
                "source_ids: must be a list of strings", tool="memory_save", argument="source_ids"
            )
        by_id = _minable_by_id(covered)
        vetted = _vet(args, cited, covered, by_id)
        if isinstance(vetted, str):
            return vetted
        sources = vetted
        authors = [by_id[s].author_id for s in sources if s in by_id]
        if sources and await self.graph.is_forgotten(platform_ids=sources):
            return json.dumps({"skipped": "its source messages were forgotten"})
        if authors and await self.graph.is_forgotten(author_id=authors[0], channel=channel):
            return json.dumps({"skipped": "its author asked to be forgotten"})
        return await run_memory_tool(
            self.graph,
            "memory_save",
            args,
            channel=channel,
            author_id=authors[0] if authors else "",
            sources=sources,
        )

    async def save_many_from_tool(
        self, calls: Sequence[dict[str, Any]], *, channel: str, covered: Sequence[Message]
    ) -> list[str]:
        """:meth:`save_from_tool` for many calls, in one transaction: a result per call, in
        order.  A call with bad arguments gets its own error and does not stop the others.

        One pass of a compaction can save dozens of memories; saving them one by one
        cost a tombstone lookup and a transaction each, most of the pass's time.
        """
        by_id = _minable_by_id(covered)
        results: list[str] = [""] * len(calls)
        ready: list[tuple[int, MemoryDraft]] = []
        for i, arguments in enumerate(calls):
            args = dict(arguments)
            cited = args.pop("source_ids", None)
            if cited is not None and (
                not isinstance(cited, list) or not all(isinstance(c, str) for c in cited)
            ):
                bad = ToolError(
                    "source_ids: must be a list of strings",
                    tool="memory_save",
                    argument="source_ids",
                )
                results[i] = json.dumps({"error": str(bad)})
                continue
            vetted = _vet(args, cited, covered, by_id)
            if isinstance(vetted, str):
                results[i] = vetted
                continue
            sources = vetted
            authors = [by_id[s].author_id for s in sources if s in by_id]
            try:
                draft = save_draft(
                    args, channel=channel, author_id=authors[0] if authors else "", sources=sources
                )
            except ToolError as exc:
                results[i] = json.dumps({"error": str(exc)})
                continue
            ready.append((i, draft))
        # The common case has nothing forgotten: one lookup for every source and author.
        pids = sorted({s for _, d in ready for s in d.sources})
        authors_all = sorted({d.author_id for _, d in ready if d.author_id})
        if await self.graph.is_forgotten(platform_ids=pids) or any(
            [await self.graph.is_forgotten(author_id=a, channel=channel) for a in authors_all]
        ):
            kept = []
            for i, d in ready:
                if d.sources and await self.graph.is_forgotten(platform_ids=list(d.sources)):
                    results[i] = json.dumps({"skipped": "its source messages were forgotten"})
                elif d.author_id and await self.graph.is_forgotten(
                    author_id=d.author_id, channel=channel
                ):
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


def _minable_by_id(covered: Sequence[Message]) -> dict[str, Message]:
    """The covered messages a memory may cite: user and bot messages, no tool traffic or
    progress notes."""
    return {
        m.platform_id: m for m in covered if m.role in (Role.USER, Role.ASSISTANT) and minable(m)
    }


def _vet(
    args: dict[str, Any], cited: Any, covered: Sequence[Message], by_id: dict[str, Message]
) -> list[str] | str:
    """The sources of one memory_save call, or the JSON result that skips it.

    A memory drawn only from the bot's replies may hold what the bot decided or
    promised, never a second copy of what a user said.
    """
    sources = [c for c in cited or [] if c in by_id]
    if not sources:
        sources = infer_sources(str(args.get("content", "")), covered)
    if sources and all(by_id[s].role is Role.ASSISTANT for s in sources if s in by_id):
        if _repeats_a_user(str(args.get("content", "")), covered):
            return json.dumps(
                {"skipped": "it repeats what a user said; save it from the user's own message"}
            )
    return sources


def _repeats_a_user(content: str, covered: Sequence[Message]) -> bool:
    """True when ``content`` (from the bot's replies) holds a whole sentence a user said:
    the bot quoting someone is never a memory of its own."""
    said = set(stems(content))
    return any(
        len(part) >= 3 and part <= said
        for m in covered
        if m.role is Role.USER
        for sentence in sentences(m.text)
        if (part := set(stems(sentence)))
    )


_INDEXED_ROLES = (Role.USER, Role.ASSISTANT)


class MessageSource(Protocol):
    """The message store as the indexer reads it (:class:`tierbot.store.Store` is one)."""

    async def messages_since(
        self, after_id: int, limit: int, roles: Sequence[Role]
    ) -> tuple[list[Message], int]: ...

    async def count_since(self, after_id: int, roles: Sequence[Role]) -> int: ...

    async def last_message_id(self) -> int: ...


class EpisodeIndexer:
    """Indexes stored messages as episodes shortly after they arrive, in batches, off the
    turn path: memory search finds what was said a minute ago, not only what compaction
    has archived.

    It reads the message store from a high-water mark (the store's message id) that the
    memory graph persists in the same transaction as the episodes it covers, so nothing
    is held in memory between a message's arrival and its indexing, and whatever was
    stored but not indexed when the process stopped (or crashed) is indexed after the
    next start, without waiting for the channel to speak again.  Channels only wake it.
    A batch that keeps failing is retried message by message; a message that still
    fails is logged and passed over (compaction indexes it again when it archives it).

    Under a burst it comes last: while ``busy()`` says messages wait for their
    acknowledgement, it waits too, unless the oldest message it has not indexed has
    waited ``max_lag()`` seconds; from then on it indexes without yielding until it has
    caught up.  Indexing costs more CPU than storing a message (0.4 ms against 0.25 ms),
    so a process that indexed alongside a burst would acknowledge half as fast.
    """

    def __init__(
        self,
        graph: MemoryGraph,
        source: MessageSource,
        *,
        batch: int = 256,
        delay: float = 0.5,
        enabled: Callable[[], bool] = lambda: True,
        busy: Callable[[], bool] = lambda: False,
        max_lag: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.graph = graph
        self.source = source
        self.batch = batch
        self.delay = delay
        self.enabled = enabled
        self.busy = busy
        self.max_lag = max_lag
        #: When the oldest message not indexed yet woke the indexer (None: caught up).
        self._behind_since: float | None = None
        self._flushing = 0
        self.indexed = 0
        self.failures = 0
        #: Store id up to which every message was considered (the persisted mark).
        self.mark = 0
        #: Messages stored but not indexed yet, as of the last look (for /status, /metrics).
        self.backlog = 0
        self._wake = asyncio.Event()
        #: Set when a flush or shutdown wants the backlog indexed now, not in a gathered batch.
        self._hurry = asyncio.Event()
        self._progress = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._stopped = asyncio.Event()

    def start(self) -> None:
        """Start indexing; catches up at once with whatever the store holds past the mark."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="memory-episode-indexer")
            if self.enabled():
                self._wake.set()

    def wake(self) -> None:
        """New messages were stored: index them soon; never waits."""
        if self._behind_since is None:
            self._behind_since = time.monotonic()
        self._wake.set()

    @property
    def lag(self) -> float:
        """Seconds the oldest message not indexed yet has waited (0 when caught up)."""
        return 0.0 if self._behind_since is None else time.monotonic() - self._behind_since

    async def _yield_to_ingest(self) -> None:
        """Wait while messages wait for their acknowledgement, for at most ``max_lag``
        seconds of lag (a flush, or shutdown, ends the wait at once)."""
        while (
            not self._stopping and not self._flushing and self.busy() and self.lag < self.max_lag()
        ):
            await self._gather()

    async def _gather(self) -> None:
        """Wait ``delay`` seconds for more messages to join the batch, unless a flush or
        shutdown asks for the backlog now: someone waits on it (a forget that must see what
        was just said, a process that is stopping)."""
        if self._flushing or self._stopping:
            return
        self._hurry.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.delay):
                await self._hurry.wait()

    async def flush(self) -> None:
        """Return once every message stored before the call is indexed, an indexing
        attempt failed meanwhile, or live indexing is off."""
        if self._task is None or self._task.done() or not self.enabled():
            return
        target = await self.source.last_message_id()
        failures = self.failures
        self._flushing += 1  # asked to catch up now: no yielding to a burst
        try:
            self._hurry.set()
            self._wake.set()
            async with self._progress:
                await self._progress.wait_for(
                    lambda: (
                        self.mark >= target
                        or self.failures > failures
                        or self._task is None
                        or self._task.done()
                    )
                )
        finally:
            self._flushing -= 1

    async def _run(self) -> None:
        self.mark = await self.graph.indexed_upto()
        pause = 1.0
        while not self._stopping:
            await self._wake.wait()
            if self._stopping:
                return
            if self._behind_since is None:
                self._behind_since = time.monotonic()
            await self._gather()  # let a burst gather into one batch
            self._wake.clear()
            try:
                await self._catch_up()
                pause = 1.0
            except Exception:
                # The store or the graph is failing: say so, and try again later.
                self.failures += 1
                log.exception("memory.index_failed", indexed_upto=self.mark, retry_in=pause)
                async with self._progress:
                    self._progress.notify_all()
                await self._pause(pause)
                pause = min(pause * 2, 60.0)
                self._wake.set()

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` before a retry, or less when shutdown begins: a store that keeps
        failing must not hold the process up for a whole backoff."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopped.wait()

    async def _catch_up(self) -> None:
        # Other processes on a shared store index the same log: start past their work.
        self.mark = max(self.mark, await self.graph.indexed_upto())
        self.backlog = await self.source.count_since(self.mark, _INDEXED_ROLES)
        if self.backlog > self.batch:
            log.info("memory.index_catching_up", backlog=self.backlog, indexed_upto=self.mark)
        while True:
            await self._yield_to_ingest()
            messages, upto = await self.source.messages_since(
                self.mark, self._batch_now(), _INDEXED_ROLES
            )
            if upto <= self.mark or self._stopping:
                if upto <= self.mark:
                    self._behind_since = None
                break
            await self._index(messages, upto)
            self.backlog = max(0, self.backlog - len(messages))
            async with self._progress:
                self._progress.notify_all()
        self.backlog = 0
        async with self._progress:  # the mark may have moved by another process's work
            self._progress.notify_all()

    def _batch_now(self) -> int:
        """How many messages the next batch takes: a quarter of ``batch`` while messages
        wait for their acknowledgement.  A batch's write holds the database file for its
        whole transaction (about 0.3 ms a message: the text index), and the store's
        commits, which acknowledge messages, wait behind it; whole batches index a
        backlog about a fifth faster once the burst is over."""
        return max(1, self.batch // 4) if self.busy() else self.batch

    async def _index(self, messages: list[Message], upto: int) -> None:
        texts = [m for m in messages if m.text.strip()]
        for attempt in range(3):
            try:
                self.indexed += await self.graph.add_episodes(texts, indexed_upto=upto)
                self.mark = upto
                return
            except Exception:
                self.failures += 1
                log.exception("memory.index_failed", messages=len(texts), attempt=attempt + 1)
                async with self._progress:
                    self._progress.notify_all()
                if self._stopping:
                    raise
                await self._pause(0.5 * 2**attempt)
        # One message is poisoning the batch: index the rest, name the ones that fail.
        for m in texts:
            try:
                self.indexed += await self.graph.add_episodes([m], indexed_upto=m.id)
            except Exception as exc:
                self.failures += 1
                log.error(
                    "memory.index_skipped",
                    channel=m.channel,
                    platform_id=m.platform_id,
                    error=str(exc),
                )
        self.indexed += await self.graph.add_episodes([], indexed_upto=upto)
        self.mark = upto

    async def aclose(self, drain_seconds: float = 30.0) -> None:
        """Index what is stored (for at most ``drain_seconds``), then stop between two
        batches; logs how many messages are left for the next start."""
        if self._task is None:
            return
        timed_out = False
        try:
            async with asyncio.timeout(drain_seconds):
                await self.flush()
        except TimeoutError:
            timed_out = True
        except Exception as exc:  # the store cannot be read: stop, and say so below
            log.error("memory.index_drain_failed", error=str(exc))
        self._stopping = True
        self._stopped.set()
        self._hurry.set()
        self._wake.set()
        try:
            # A batch in flight commits (or rolls back) whole; one stuck on a locked
            # database is cancelled, and its rollback keeps the mark where it was.
            await asyncio.wait_for(asyncio.shield(self._task), 15.0)
        except TimeoutError:
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        try:
            left = await self.source.count_since(self.mark, _INDEXED_ROLES)
        except Exception as exc:
            log.error("memory.index_backlog_unknown", indexed_upto=self.mark, error=str(exc))
            return
        self.backlog = left
        if left and self.enabled():
            log.warning(
                "memory.index_backlog_at_shutdown",
                unindexed=left,
                indexed_upto=self.mark,
                drain_seconds=drain_seconds if timed_out else None,
                hint="they are indexed for memory search after the next start",
            )


class MemoryService:
    """One runtime's memory graph, its views, and its maintenance loop."""

    def __init__(
        self,
        graph: MemoryGraph,
        config: Config,
        source: MessageSource,
        *,
        live_indexing: Callable[[], bool] | None = None,
        index_max_lag: Callable[[], float] | None = None,
    ) -> None:
        self.graph = graph
        self.config = config
        self._writer = _Writer(graph)
        self.indexer = EpisodeIndexer(
            graph,
            source,
            enabled=live_indexing or (lambda: config.memory.index_live_messages),
            max_lag=index_max_lag or (lambda: config.memory.index_max_lag_seconds),
        )
        self._access = ChannelMemoryAccess(graph, self.indexer)
        self._maintenance: asyncio.Task[None] | None = None

    @classmethod
    async def open(
        cls,
        config: Config,
        source: MessageSource,
        *,
        live_indexing: Callable[[], bool] | None = None,
        index_max_lag: Callable[[], float] | None = None,
    ) -> MemoryService:
        """Open the graph and start indexing ``source``; ``live_indexing`` tells whether
        live indexing is on now (default: ``config.memory.index_live_messages``), and
        ``index_max_lag`` how long it may yield to a burst (default: the config's)."""
        graph = await open_graph(
            config, pool=getattr(source, "pool", None), where=getattr(source, "where", "")
        )
        try:
            service = cls(
                graph, config, source, live_indexing=live_indexing, index_max_lag=index_max_lag
            )
            service.indexer.start()
        except BaseException:
            await graph.aclose()  # its connection's thread would keep the process alive
            raise
        service._maintenance = asyncio.create_task(service._maintain(), name="memory-maintenance")
        # Several processes on one PostgreSQL: pick up each other's memories.
        graph.start_sync(SYNC_SECONDS)
        return service

    def writer(self) -> _Writer:
        return self._writer

    def access(self) -> ChannelMemoryAccess:
        return self._access

    async def count(self, channel: str) -> int:
        return await self.graph.count(channel)

    async def note_privacy(self, channel: str, private: bool) -> None:
        """Record what the platform says of ``channel`` before its message is stored, so
        no memory or episode of a private conversation is ever scoped to the workspace."""
        await self.graph.set_private(channel, private)

    async def search(self, query: str, *, channel: str, limit: int = 5) -> list[dict[str, Any]]:
        """What ``/memory`` shows: memories and what people said, never the bot's replies."""
        hits = await self.graph.recall(
            query, channel=channel, limit=limit, exclude_authors=(BOT_AUTHOR,)
        )
        return [h.to_json() for h in hits]

    @staticmethod
    def forgotten_author(arg: str) -> str | None:
        """The author a ``/forget`` argument names (``--author USER``), else None."""
        parts = arg.split()
        return parts[1] if len(parts) == 2 and parts[0] == "--author" else None

    def visible_from(self, channel: str) -> Callable[[str], bool]:
        """Whether a channel's messages are within what ``channel`` can see (and forget)."""
        return lambda other: self.graph.visible(channel, other)

    async def forget_command(self, arg: str, *, channel: str) -> ForgetOutcome:
        """``/forget ID`` or ``/forget --author USER``: the reply, the (channel, platform
        id) messages the forgetting touched, and what a forgotten memory said."""
        parts = arg.split()
        if len(parts) == 2 and parts[0] == "--author":
            # Only what this channel can see, like /forget ID: another workspace and the
            # user's DMs are the operator's (`tierbot memory forget --author`).
            report = await self.graph.forget_author(parts[1], channel=channel)
            memories = plural(report.memories_deleted, "memory", "memories")
            indexed = plural(report.episodes_deleted, "indexed message", "indexed messages")
            text = (
                f"Forgot {memories} and {indexed} that came from what {parts[1]} said here "
                "(what this channel can see; other workspaces and DMs are untouched)."
            )
            return ForgetOutcome(text, report.messages)
        if len(parts) == 1 and not parts[0].startswith("-"):
            return await self._forget_one(parts[0], channel=channel)
        return ForgetOutcome(
            "Usage: /forget MEMORY_ID  or  /forget --author USER_ID  (to forget something"
            ' you said, tell me: "forget that my PIN is 1234")'
        )

    async def forget_messages(self, channel: str, platform_ids: Sequence[str]) -> None:
        """Take messages out of recall for good (their episodes go; they are never
        indexed again)."""
        await self.graph.forget_messages(channel, platform_ids)

    async def _forget_one(self, memory_id: str, *, channel: str) -> ForgetOutcome:
        """One memory, and the messages it came from that say it: a memory forgotten while
        the message that told it is still found by recall is not forgotten."""
        node = await self.graph.get(memory_id)
        # Only what this channel can see: a forget never reaches another workspace.
        if node is None or not await self.graph.forget(memory_id, channel=channel):
            return ForgetOutcome(
                f"No memory with id {memory_id}. (/memory QUERY shows the ids; to forget"
                ' something you said, tell me: "forget that my PIN is 1234")'
            )
        if node["type"] == "episode":
            return ForgetOutcome(
                f"Forgot memory {memory_id}.", ((node["channel"], node["platform_id"]),)
            )
        said = without_author(node["content"])
        sources = []
        for pid in node["sources"]:
            # A compaction's memory may cite a whole stretch of talk: only the messages
            # that say what it says go with it.
            told = await self.graph.get(episode_id(node["channel"], pid))
            if told is not None and names(said, told["content"]):
                sources.append(pid)
        await self.graph.forget_messages(node["channel"], sources)
        return ForgetOutcome(
            f"Forgot memory {memory_id}.",
            tuple((node["channel"], pid) for pid in sources),
            said=said,
            channel=node["channel"],
            author_id=node["author_id"] or "",
        )

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
        await self.indexer.aclose(self.config.memory.index_drain_seconds)
        await self.graph.aclose()


def plural(n: int, one: str, many: str) -> str:
    """ "1 memory", "2 memories"."""
    return f"{n} {one if n == 1 else many}"
