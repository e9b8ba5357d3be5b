"""The memory tools of a channel's turns: recall, save and forget, as a conversation uses them.

Saves and forgets act for one person: the author of the message being answered.  A
save cites that message; a forget touches only that person's memories and messages.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from channels.history import BOT_AUTHOR
from memory_graph import (
    MemoryDraft,
    MemoryGraph,
    RecallHit,
    chat_memory_tools,
    forget_query,
    memory_tools,
    run_memory_tool,
    save_draft,
)
from tierbot.errors import ToolError
from tierbot.llm.base import ToolSpec
from tierbot.llm.extraction import classify, is_chitchat, is_question
from tierbot.llm.text import SAID_ABOUT, names, said_of, stems, without_author, without_named
from tierbot.messages import Message

if TYPE_CHECKING:
    from channels.memory import EpisodeIndexer

__all__ = ["ChannelMemoryAccess"]

log = structlog.get_logger("tierbot.memory")
#: How long a forget waits for live indexing to catch up before it searches.
_FORGET_CATCH_UP_SECONDS = 5.0


#: How many of an asker's own memories a forget reads when a search by its words finds
#: none of theirs.
_OWN_MEMORIES_READ = 200


class ChannelMemoryAccess:
    """The memory tools of channel turns (recall, save, forget), and the live indexing
    of their messages."""

    def __init__(self, graph: MemoryGraph, indexer: EpisodeIndexer) -> None:
        self.graph = graph
        self.indexer = indexer
        self._spec = memory_tools()[1]

    def recall_tool(self) -> ToolSpec:
        return self._spec

    def chat_tools(self) -> list[ToolSpec]:
        return chat_memory_tools()

    async def recall_from_tool(
        self,
        arguments: dict[str, Any],
        *,
        channel: str,
        exclude: Collection[str] = (),
        asker_id: str = "",
    ) -> str:
        """memory_recall; the bot's own replies are never results (they only repeat what
        people said).  ``from_asker`` keeps what ``asker_id`` said."""
        args = dict(arguments)
        mine = args.pop("from_asker", False)
        if not isinstance(mine, bool):
            raise ToolError("from_asker: must be true or false", tool="memory_recall")
        return await run_memory_tool(
            self.graph,
            "memory_recall",
            args,
            channel=channel,
            exclude=exclude,
            exclude_authors=(BOT_AUTHOR,),
            only_author=asker_id if mine and asker_id else "",
        )

    async def save_from_chat(
        self, arguments: dict[str, Any], *, channel: str, source: Message
    ) -> str:
        """memory_save during a conversation: the memory's source and author are the
        message being answered.  JSON: its id and what was saved, or why not."""
        # Arguments are checked before anything is looked up: a bad one is named either way.
        save_draft(arguments, channel=channel)
        if await self.graph.is_forgotten(
            author_id=source.author_id, platform_ids=[source.platform_id], channel=channel
        ):
            return json.dumps({"skipped": "its author asked to be forgotten"})
        return await run_memory_tool(
            self.graph,
            "memory_save",
            arguments,
            channel=channel,
            author_id=source.author_id,
            sources=[source.platform_id],
        )

    async def forget_from_chat(
        self, arguments: dict[str, Any], *, channel: str, source: Message
    ) -> str:
        """memory_forget: the asker's memories and messages that match the query go, the
        bot's replies here that repeat them, and the request itself (it repeats what is
        forgotten).  Nobody else's.  What else a forgotten sentence said is saved anew
        (``kept`` in the JSON: "forget where Ana lives" keeps that she is a dentist)."""
        query = forget_query(arguments)
        # What was said a moment ago (and the bot's "Noted: …" of it) may not be indexed
        # yet: a forget that cannot see it would say "nothing to forget" and leave it.
        try:
            await asyncio.wait_for(self.indexer.flush(), _FORGET_CATCH_UP_SECONDS)
        except TimeoutError:
            log.warning("memory.forget_before_indexed", waited=_FORGET_CATCH_UP_SECONDS)
        # "what Ben said about the ending": the ending, in Ben's lines.
        said_by = SAID_ABOUT.match(query)
        if said_by is not None:
            query = said_by["topic"]
        hits = await self.graph.recall(query, channel=channel, limit=20) if stems(query) else []
        # "He also takes amlodipine" is of Dad when the line before it named him.
        named = [h for h in hits if names(query, h.content) or names(query, _read_of(h, hits))]
        if said_by is not None:
            who = said_by["who"].lower()
            named = [h for h in named if who in {h.author.lower(), h.author_id.lower()}]
        # A question asked is not something told: it is not forgotten with it.
        theirs = [
            h
            for h in named
            if h.author_id == source.author_id
            and not is_question(without_author(h.content))
            # the request itself, once indexed (a memory saved in this turn may cite it)
            and not (h.type == "episode" and source.platform_id in h.source_message_ids)
        ]
        if not theirs and said_by is None and stems(query):
            # Said in other words than the line ("my allergy thing" of "i'm allergic to
            # peanuts", "that i owe jonas money" of "… 12 quid"): a search by the words
            # misses it, so the asker's own memories are read against the request too.
            own = await self.graph.memories_of(
                source.author_id, channel=channel, limit=_OWN_MEMORIES_READ
            )
            theirs = [
                h
                for h in own
                if names(query, h.content) and not is_question(without_author(h.content))
            ]
            named += [h for h in theirs if h not in named]
            # (and the bot's "Noted: …" of each, found by the line's own words)
            for h in theirs:
                said = without_author(h.content)
                named += [
                    e
                    for e in await self.graph.recall(said, channel=channel, limit=10)
                    if e.author_id == BOT_AUTHOR and names(said, e.content) and e not in named
                ]
        # The bot's replies in this channel that repeat it ("Noted: your …") go too; they
        # are never recall results, so they count for nothing in the reply: a forget that
        # found nothing of the asker's says so, not "Done".
        echoes = [
            h
            for h in named
            if h.author_id == BOT_AUTHOR and h.type == "episode" and h.channel == channel
        ]
        chosen = theirs + echoes
        forgotten: list[dict[str, str]] = []
        kept: dict[str, tuple[str, str, float]] = {}  # what else it said: speaker, type, when
        for h in chosen:
            if await self.graph.forget(h.id, channel=channel) and h.author_id != BOT_AUTHOR:
                forgotten.append({"id": h.id, "type": h.type, "content": h.content})
                # "Forget where Ana lives" of "My sister Ana lives in Porto and works as
                # a dentist": that she is a dentist stays.
                rest = without_named(query, h.content)
                told = without_author(rest)
                # A message's rest is kept when it tells something worth keeping: not
                # "lol", nor "today is raining so much" of a remark about the weather.
                kind = h.type if h.type != "episode" else classify(told)[0] if told else None
                if rest and kind and not is_chitchat(told):
                    speaker = h.content[: len(h.content) - len(without_author(h.content))]
                    kept.setdefault(rest, (speaker, kind, h.created_at))
            if h.type != "episode":  # the messages it came from say the same
                await self.graph.forget_messages(h.channel, h.source_message_ids)
        # Saved anew, in the asker's name, once what it was cut from is gone (saved
        # first, it could merge into it).  Its messages were forgotten: it cites none.
        kept_json: list[dict[str, str]] = []
        for told, (speaker, kind, when) in kept.items():
            rest = speaker + told
            try:
                draft = MemoryDraft(
                    content=rest,
                    memory_type=kind,
                    channel=channel,
                    author_id=source.author_id,
                    created_at=when,  # dated as it was said: what came later stays later
                )
                saved = (await self.graph.save_many([draft]))[0]
            except ToolError as e:
                kept_json.append({"content": rest, "error": str(e)})
            except Exception as e:
                # What it was cut from is gone already: the reply must say what was not
                # kept (the person can tell it again), not that the forget failed.
                log.error("memory.forget_rest_failed", error=f"{type(e).__name__}: {e}")
                failed = f"the memory store failed ({type(e).__name__})"
                kept_json.append({"content": rest, "error": failed})
            else:
                kept_json.append({"id": saved.id, "type": kind, "content": rest})
        if names(query, source.text):
            # The request repeats what it forgets ("Forget that my code is 4411"); a
            # correction ("Sorry, I meant 4412") says what holds now, and stays.
            await self.graph.forget_messages(channel, [source.platform_id])
        out: dict[str, Any] = {"forgotten": forgotten}
        if kept_json:
            out["kept"] = kept_json
        if not forgotten:
            # "forget the rehearsal room thing", by Mia, of Dan's line: it is Dan's to ask.
            # Only who said it here (this conversation saw it), never another channel's.
            told_by = {
                h.author
                for h in named
                if h.author_id not in (source.author_id, BOT_AUTHOR)
                and h.author
                and h.channel == channel
                and not is_question(without_author(h.content))
            }
            if told_by:
                out["told_by"] = sorted(told_by)
        return json.dumps(out, ensure_ascii=False)

    async def forgotten_messages(self, channel: str, messages: Sequence[Message]) -> set[str]:
        """The platform ids of ``messages`` that were forgotten (by id, or with their
        author): a search of the conversation's log leaves them out."""
        return await self.graph.forgotten_messages(
            channel, [(m.platform_id, m.author_id, m.ts) for m in messages]
        )

    def index_wake(self) -> None:
        self.indexer.wake()

    async def count(self, channel: str) -> int:
        return await self.graph.count(channel)


#: How long after a line naming someone a "He …" line of the same person is read as of
#: them, when a forget looks for what it names.
_SAID_OF_SECONDS = 900.0


def _read_of(hit: RecallHit, hits: list[RecallHit]) -> str:
    """``hit``'s content with a "He"/"She" it starts with read as whom its author's
    newest line before it that names someone named (see :func:`said_of`)."""
    before = [
        h
        for h in hits
        if h.author_id == hit.author_id
        and h.id != hit.id
        and 0 < hit.created_at - h.created_at <= _SAID_OF_SECONDS
    ]
    for h in sorted(before, key=lambda h: h.created_at, reverse=True):
        if (read := said_of(hit.content, h.content)) != hit.content:
            return read  # the newest line before it that names someone it may mean
    return hit.content
