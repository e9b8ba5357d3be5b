"""The offline provider: deterministic, no network, no model download.

What it does:

* **chat** (see :mod:`tierbot.llm.offline_chat`) saves what people ask it to
  remember, or say about themselves, at once (``memory_save``) and forgets on request
  (``memory_forget``), saying only what the tools confirmed; answers each question
  since its last reply by quoting the best evidence (stemmed, IDF-weighted word
  overlap) with who said it and when; and looks further back (``memory_recall``)
  when nothing in view covers a question.  Greetings are greeted without swallowing
  the rest.  It does not reason, infer, calculate or write prose.
* **summary** (compaction) writes an extractive summary: sentences ranked with
  networkx PageRank over a word-overlap graph, boosted when they carry numbers,
  names or identifiers, kept in chronological order within ``max_tokens``; and
  when ``memory_save`` is offered it calls it with rule-based typed memories
  (identity, preference, decision, goal, todo, event, fact).
* **chat** with a ``branch`` tool: when the context does not cover a question,
  it recalls in a branch instead (``branch(task=question)``), says it is
  looking further back, and answers from the branch's conclusion, for the
  question that started it, when it comes back; the channel keeps answering
  meanwhile.
* **branch** and **worker** search first (``memory_recall`` and
  ``conversation_search``, whichever is offered, with the task as the query),
  then conclude with the best match.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

import networkx as nx

from tierbot.llm.base import ChatMessage, Completion, Purpose, ToolCall, ToolSpec, Usage
from tierbot.llm.extraction import extract_memories
from tierbot.llm.offline_chat import (
    CUT_SHORT,
    best,
    candidates,
    chat,
    quoted_with_changes,
    recall_query,
)
from tierbot.llm.quoting import is_quoted, unquote
from tierbot.llm.text import sentences, stems
from tierbot.llm.transcript import TranscriptEntry, parse_transcript
from tierbot.tokens import MESSAGE_OVERHEAD, TokenCounter, get_counter

_GREETING = re.compile(r"^(hi|hello|hey|hiya|yo|howdy|good (morning|afternoon|evening))\b", re.I)
# The notes workers.task adds to a branch's or worker's context: never the task itself.
_NOTE = re.compile(r"^(Older context has been compacted|You have used all your tool turns)")
_SEARCH_TOOLS = ("memory_recall", "conversation_search")
# How many hits each search brings: nearly all from the memories, which hold the
# archived messages too (a line answering by a value alone, "Biscuit is 7 and Juno is
# 3" for "how old is biscuit?", came ninth of them); the two together no more than
# ten, as a branch's window must leave its answer room (ten of each cut "Later, …" off
# "what's the venue called?" at a 2,048-token window).
_SEARCH_LIMITS = {"memory_recall": 9, "conversation_search": 1}
_HOLDING = "Let me look further back for that; I'll answer in a moment."
_IDENTIFIER = re.compile(r"\b(\d[\d.,:/-]*|[A-Z]{2,}[-_]?\d+|[a-z]+[-_][a-z0-9_-]+|#\d+)\b")


def extractive_summary(
    entries: Sequence[TranscriptEntry], max_tokens: int, counter: TokenCounter
) -> str:
    """Top-ranked sentences (PageRank over word overlap), chronological, within ``max_tokens``."""
    if not entries:
        return ""
    items: list[tuple[int, str, str]] = []  # (order, author, sentence)
    for e in entries:
        for sent in sentences(e.text):
            items.append((len(items), e.author, sent))
    # No message ids: a bot reply's id is a uuid of some 18 tokens, and the two of them
    # took most of a short chat's budget (the channel's own header says what is covered).
    header = f"Summary of {len(entries)} messages:"
    ranked = _rank(items)
    budget = max_tokens - counter.count(header) - 2
    chosen: list[tuple[int, str]] = []
    for idx in ranked:
        order, author, sent = items[idx]
        line = f"- {author}: {sent}"
        cost = counter.count(line) + 1
        if cost > budget:
            continue
        chosen.append((order, line))
        budget -= cost
        if budget < 8:
            break
    chosen.sort()
    return "\n".join([header, *[line for _, line in chosen]])


def _rank(items: Sequence[tuple[int, str, str]]) -> list[int]:
    item_stems = [set(stems(s)) for _, _, s in items]
    postings: dict[str, list[int]] = defaultdict(list)
    for i, ss in enumerate(item_stems):
        for t in ss:
            postings[t].append(i)
    # A term shared by more items than this is too common to tell them apart; the cap also
    # keeps the graph linear in the items (a rescue summary of thousands of messages
    # otherwise links nearly every pair: gigabytes of edges).
    common = max(8, min(len(items) // 3, 64))
    graph = nx.Graph()
    graph.add_nodes_from(range(len(items)))
    for i, ss in enumerate(item_stems):
        overlap: Counter[int] = Counter()
        for t in ss:
            plist = postings[t]
            if len(plist) <= common:
                overlap.update(j for j in plist if j > i)
        for j, shared in overlap.items():
            graph.add_edge(i, j, weight=shared / (1 + len(ss | item_stems[j])))
    try:
        pr = nx.pagerank(graph, weight="weight", max_iter=200)
    except nx.PowerIterationFailedConvergence:
        pr = {i: 1.0 for i in range(len(items))}
    boost = [
        1.0 + 0.5 * bool(_IDENTIFIER.search(s)) + 0.2 * (len(ss) > 5)
        for (_, _, s), ss in zip(items, item_stems, strict=True)
    ]
    return sorted(range(len(items)), key=lambda i: (-pr.get(i, 0.0) * boost[i], i))


#: Prompt texts whose token counts are kept, each at most _COUNTED_CHARS long: a few
#: MB at most, held by the one provider.
_COUNTED_KEEP = 4096
_COUNTED_CHARS = 1000
#: A chat prompt whose conversation (all but the system prompt) holds at most this many
#: characters is answered on the event loop: about half a millisecond of work.
_INLINE_CHARS = 2_000


class OfflineProvider:
    """A deterministic provider that needs no key and no network (see module docstring)."""

    name = "offline"

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter or get_counter()
        #: Token counts of texts seen in prompts (a dict's get and set are atomic, so
        #: the worker threads share it safely).
        self._counted: dict[str, int] = {}

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
        purpose: Purpose = "chat",
    ) -> Completion:
        """Answer like a (very literal) model would; CPU work runs off the event loop, but
        for a young conversation's short prompt."""
        tool_names = {t.name for t in tools}
        if purpose == "summary":
            answer = self._summarize
        elif purpose in ("branch", "worker"):
            answer = self._delegate
        else:
            answer = self._chat

        def run() -> tuple[str, list[ToolCall], Usage]:
            text, calls = answer(messages, tool_names, max_tokens)
            # A channel counted its messages as they entered: only the rest (system
            # prompt, quoted material, tool traffic) is counted here.
            prompt = sum(
                m.tokens if m.tokens is not None else self._count(m.content) + MESSAGE_OVERHEAD
                for m in messages
            )
            return text, calls, Usage(prompt, self.counter.count(text))

        if purpose == "chat" and _conversation_chars(messages) <= _INLINE_CHARS:
            # A young conversation is answered in well under a millisecond: less than a
            # hand-off to a worker thread costs a busy process (measured: 10,000 young
            # channels at 10 % addressed, about 6 % more messages a second).  A longer
            # one still goes off the loop, so other channels keep flowing while it is read.
            text, calls, usage = run()
        else:
            text, calls, usage = await asyncio.to_thread(run)
        return Completion(text=text, tool_calls=tuple(calls), usage=usage, stop_reason="stop")

    def _count(self, text: str) -> int:
        if len(text) > _COUNTED_CHARS:  # a transcript or a long paste: counted each time
            return self.counter.count(text)
        counted = self._counted.get(text)
        if counted is None:
            if len(self._counted) >= _COUNTED_KEEP:  # bounded; refilled by the next turns
                self._counted.clear()
            counted = self._counted[text] = self.counter.count(text)
        return counted

    async def aclose(self) -> None:
        return None

    # -- summary -------------------------------------------------------------

    def _summarize(
        self, messages: Sequence[ChatMessage], tools: set[str], max_tokens: int
    ) -> tuple[str, list[ToolCall]]:
        transcript = unquote(next((m.content for m in reversed(messages) if m.role == "user"), ""))
        entries = parse_transcript(transcript)
        # A summary as long as what it replaces frees nothing: it gets at most half of
        # what the messages cost in the context (their text and framing).  Not half the
        # transcript: its "[id] author (bot): " prefixes (a reply's id is a uuid) made it
        # twice the messages in small talk, and no /compact of a short chat freed a token.
        replaced = sum(self.counter.count(e.text) + MESSAGE_OVERHEAD for e in entries)
        budget = max(32, min(max_tokens, replaced // 2))
        summary = extractive_summary(entries, budget, self.counter)
        answered = any(m.role == "tool" for m in messages)
        if "memory_save" not in tools or answered:
            return summary, []
        calls = [
            ToolCall(
                id=f"save-{i}",
                name="memory_save",
                arguments={
                    "content": m.content,
                    "memory_type": m.memory_type,
                    "importance": m.importance,
                    "source_ids": [m.source_id],
                },
            )
            for i, m in enumerate(extract_memories(entries, limit=max(40, len(entries) // 2)))
        ]
        return summary, calls

    # -- chat ----------------------------------------------------------------

    def _chat(
        self, messages: Sequence[ChatMessage], tools: set[str], max_tokens: int
    ) -> tuple[str, list[ToolCall]]:
        """See :mod:`tierbot.llm.offline_chat`."""
        text, calls = chat(messages, tools)
        return self._cut(text, max_tokens), calls

    def _cut(self, text: str, max_tokens: int) -> str:
        """``text`` within ``max_tokens``: a reply too long for the room left ends after
        its last whole item or sentence, and says it was cut, never mid-word."""
        if self.counter.count(text) <= max_tokens:
            return text
        room = max_tokens - self.counter.count(CUT_SHORT)
        head = self.counter.truncate(text, max(room, 0))
        ends = [head.rfind(mark) for mark in ("; ", ". ", ".\n", "\n")]
        end = max(ends)
        if end <= 0 or room <= 0:
            return self.counter.truncate(text, max_tokens)
        return head[:end].rstrip(" ;,") + CUT_SHORT

    # -- branch and worker ---------------------------------------------------------

    def _delegate(
        self, messages: Sequence[ChatMessage], tools: set[str], max_tokens: int
    ) -> tuple[str, list[ToolCall]]:
        """Search with the task as the query, then conclude with the best match."""
        task_at = max(
            (
                i
                for i, m in enumerate(messages)
                if m.role == "user" and not _NOTE.match(m.content) and not is_quoted(m.content)
            ),
            default=-1,
        )
        if task_at < 0:
            return "There was no task to work on.", []
        task = messages[task_at].content
        results = [m for m in messages[task_at + 1 :] if m.role == "tool"]
        search = [name for name in _SEARCH_TOOLS if name in tools]
        if search and not results:
            query = recall_query(task)
            # (one search alone, without memory, asks for five, as both did before)
            limits = _SEARCH_LIMITS if len(search) > 1 else {}
            return "", [
                ToolCall(f"search-{i}", n, {"query": query, "limit": limits.get(n, 5)})
                for i, n in enumerate(search)
            ]
        pool = candidates(messages[:task_at], results)
        found, score = best(task, pool)
        if found is None or score < 0.2:
            return "Nothing I could find covers that.", []
        answer = quoted_with_changes(found, task, pool)  # as the channel itself answers
        return self.counter.truncate(answer, max_tokens), []


def _conversation_chars(messages: Sequence[ChatMessage]) -> int:
    return sum(len(m.content) for m in messages if m.role != "system")
