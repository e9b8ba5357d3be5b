"""The offline provider: deterministic, no network, no model download.

What it does:

* **chat** answers from what it can see.  Every question since its last reply
  (a burst may hold several; one reply answers them all, each once) is matched
  (stemmed, IDF-weighted word overlap) against what was said before it,
  summaries and recalled memories (read out of their quoted blocks), and the
  best match is quoted back with who said it.
  When nothing in context matches and a ``memory_recall`` tool is offered, it
  calls the tool first and answers from the results.  Greetings are greeted and
  statements acknowledged.  It does not reason, infer, calculate or write prose.
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
import json
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx

from tierbot.llm.base import ChatMessage, Completion, Purpose, ToolCall, ToolSpec, Usage
from tierbot.llm.quoting import blocks, is_quoted, unquote
from tierbot.llm.text import Overlap, sentences, stems, words
from tierbot.llm.transcript import BOT_MARK, TranscriptEntry, parse_transcript
from tierbot.tokens import TokenCounter, get_counter

_QUESTION_START = re.compile(
    r"^(what|when|where|who|whom|whose|why|how|which|do|does|did|is|are|was|were|can|could|"
    r"would|will|should|have|has|had|remind|tell me|recall|remember)\b",
    re.I,
)
_GREETING = re.compile(r"^(hi|hello|hey|hiya|yo|howdy|good (morning|afternoon|evening))\b", re.I)
# The notes workers.task adds to a branch's or worker's context: never the task itself.
_NOTE = re.compile(r"^(Older context has been compacted|You have used all your tool turns)")
_SEARCH_TOOLS = ("memory_recall", "conversation_search")
_HOLDING = "Let me look further back for that; I'll answer in a moment."
# What the bot quotes of others («...»), and how its answers introduce what it recalls.
_QUOTED_SPAN = re.compile(r"«[^»]*»?|\"[^\"]*\"|\{.*\}", re.S)
_REPORTING = re.compile(
    r"^\s*(«|earlier,|i remember|from an earlier summary|noted|hello|i don't know|"
    r"let me look|sorry)",
    re.I,
)
_BOT_COMMITMENT = re.compile(
    r"\b(i will|i'll|i shall|i promise|i decided|i've decided|i have decided|i am going to|"
    r"i'm going to|i won't|i will not|we (decided|agreed))\b",
    re.I,
)
_BOT_DECISION = re.compile(r"\b(decided|agreed)\b", re.I)
_IDENTIFIER = re.compile(r"\b(\d[\d.,:/-]*|[A-Z]{2,}[-_]?\d+|[a-z]+[-_][a-z0-9_-]+|#\d+)\b")

# (memory type, default importance, pattern); first match wins, most specific first.
_RULES: tuple[tuple[str, float, re.Pattern[str]], ...] = (
    (
        "identity",
        0.9,
        re.compile(
            r"\b(my name is|call me|i am an? |i'm an? |i work (as|at|for)|i live in|i'm from|"
            r"i am from|my pronouns|i was born)\b",
            re.I,
        ),
    ),
    (
        "decision",
        0.8,
        re.compile(
            r"\b(we (decided|agreed|chose|settled)|decided to|let's go with|we're going with|"
            r"we will go with|the plan is|final answer|we'll use|we will use)\b",
            re.I,
        ),
    ),
    (
        "preference",
        0.7,
        re.compile(
            r"\b(i (really |truly |do )?(like|love|prefer|enjoy|hate|dislike|adore)|my favou?rite|"
            r"i'm (a big |a huge |a )?fan of|i can't stand|please always|please never)\b",
            re.I,
        ),
    ),
    (
        "goal",
        0.8,
        re.compile(
            r"\b(i (want|plan|hope|intend|aim|wish) to|my goal|i'm planning|i am planning|"
            r"i'm hoping|dream(ing)? of|i'm going to|i am going to)\b",
            re.I,
        ),
    ),
    (
        "todo",
        0.75,
        re.compile(
            r"\b(need to|have to|must|don't forget|remember to|remind me|todo|to-do|"
            r"deadline|due (on|by)|by (monday|tuesday|wednesday|thursday|friday|tomorrow))\b",
            re.I,
        ),
    ),
    (
        "event",
        0.5,
        re.compile(
            r"\b(yesterday|last (week|month|year|night|weekend|summer|winter)|went to|visited|"
            r"attended|graduated|got married|moved to|started|finished|joined|met|"
            r"on (monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b",
            re.I,
        ),
    ),
)


def is_question(text: str) -> bool:
    t = text.strip()
    return t.endswith("?") or bool(_QUESTION_START.match(t))


@dataclass(frozen=True, slots=True)
class ExtractedMemory:
    """A rule-based memory: its type, importance, content and source message id."""

    memory_type: str
    importance: float
    content: str
    source_id: str


def extract_memories(entries: Sequence[TranscriptEntry], limit: int = 40) -> list[ExtractedMemory]:
    """Typed memories found by rules in ``entries``, most important first.

    The bot's own lines (author marked :data:`BOT_MARK`) give only what it decided
    or promised itself; whatever it quotes of others is never saved again.
    """
    found: list[ExtractedMemory] = []
    seen: set[str] = set()
    for e in entries:
        bot = e.author.endswith(f" {BOT_MARK}")
        author = e.author.removesuffix(f" {BOT_MARK}")
        text = _QUOTED_SPAN.sub(" ", e.text) if bot else e.text
        for sent in sentences(text):
            if len(words(sent)) < 4 or is_question(sent):
                continue
            kind, importance = _classify_bot(sent) if bot else _classify(sent)
            if kind is None:
                continue
            content = f"{author}: {sent}"[:500]
            key = " ".join(stems(sent))
            if key in seen:
                continue
            seen.add(key)
            found.append(ExtractedMemory(kind, importance, content, e.id))
    found.sort(key=lambda m: -m.importance)
    return found[:limit]


def _classify_bot(sentence: str) -> tuple[str | None, float]:
    """The bot's own sentence: a decision or a promise it made, else nothing."""
    if _REPORTING.match(sentence) or not _BOT_COMMITMENT.search(sentence):
        return None, 0.0
    return ("decision", 0.8) if _BOT_DECISION.search(sentence) else ("todo", 0.75)


def _classify(sentence: str) -> tuple[str | None, float]:
    for kind, importance, pattern in _RULES:
        if pattern.search(sentence):
            return kind, importance
    if _IDENTIFIER.search(sentence) or re.search(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", sentence):
        return "fact", 0.6
    return None, 0.0


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
    header = f"Summary of {len(entries)} messages ([{entries[0].id}] to [{entries[-1].id}]):"
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


class OfflineProvider:
    """A deterministic provider that needs no key and no network (see module docstring)."""

    name = "offline"

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter or get_counter()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
        purpose: Purpose = "chat",
    ) -> Completion:
        """Answer like a (very literal) model would; CPU work runs off the event loop."""
        tool_names = {t.name for t in tools}
        if purpose == "summary":
            result = await asyncio.to_thread(self._summarize, messages, tool_names, max_tokens)
        elif purpose in ("branch", "worker"):
            result = await asyncio.to_thread(self._delegate, messages, tool_names, max_tokens)
        else:
            result = await asyncio.to_thread(self._chat, messages, tool_names, max_tokens)
        text, calls = result
        usage = Usage(
            sum(self.counter.count(m.content) + 4 for m in messages), self.counter.count(text)
        )
        return Completion(text=text, tool_calls=tuple(calls), usage=usage, stop_reason="stop")

    async def aclose(self) -> None:
        return None

    # -- summary -------------------------------------------------------------

    def _summarize(
        self, messages: Sequence[ChatMessage], tools: set[str], max_tokens: int
    ) -> tuple[str, list[ToolCall]]:
        transcript = unquote(next((m.content for m in reversed(messages) if m.role == "user"), ""))
        entries = parse_transcript(transcript)
        summary = extractive_summary(entries, max_tokens, self.counter)
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
            for i, m in enumerate(extract_memories(entries))
        ]
        return summary, calls

    # -- chat ----------------------------------------------------------------

    def _chat(
        self, messages: Sequence[ChatMessage], tools: set[str], max_tokens: int
    ) -> tuple[str, list[ToolCall]]:
        """Answer everything since the bot's last reply: each question of a burst, and each
        branch conclusion that came back; statements are acknowledged."""
        since = 1 + max(
            (i for i, m in enumerate(messages) if m.role == "assistant" and not m.tool_calls),
            default=-1,
        )
        new = messages[since:]
        people = [m for m in new if m.role == "user" and not is_quoted(m.content)]
        # Each question with where it stands: it may be answered from anything said before it.
        questions = [
            (since + i, m)
            for i, m in enumerate(new)
            if m.role == "user" and not is_quoted(m.content) and is_question(m.content)
        ]
        results = [m for m in new if m.role == "tool"]
        asked = {c.id: c for m in new for c in m.tool_calls}
        conclusions = _conclusions(results)
        if not questions and not conclusions:
            if not people:
                return "Hello! I'm listening.", []
            current = people[-1]
            speaker = current.name or "there"
            if _GREETING.match(current.content.strip()):
                return f"Hello {speaker}! Ask me anything about this conversation.", []
            kind, _ = _classify(current.content)
            what = f"that as a {kind}" if kind else "that"
            return f"Noted {what}, {speaker}.", []

        started = {
            str(asked[m.tool_call_id].arguments.get("task"))
            for m in results
            if m.tool_call_id in asked and isinstance(b := _tool_json(m), dict) and "started" in b
        }
        answers: list[tuple[str, str]] = []  # (what was asked, the answer)
        waiting: list[str] = []
        calls: list[ToolCall] = []
        for at, q in questions:
            task = q.content
            if task in conclusions:
                answers.append((task, conclusions.pop(task)))
                continue
            best, score = self._best(task, self._candidates(messages[:at], results))
            tried = {
                c.name
                for c in asked.values()
                if task in (c.arguments.get("task"), c.arguments.get("query"))
            }
            if score < 0.34 and "branch" in tools and "branch" not in tried:
                calls.append(ToolCall(f"branch-{since}-{len(calls)}", "branch", {"task": task}))
            elif score < 0.34 and task in started:
                waiting.append(task)
            elif score < 0.34 and "memory_recall" in tools and "memory_recall" not in tried:
                call = ToolCall(
                    f"recall-{since}-{len(calls)}", "memory_recall", {"query": task, "limit": 5}
                )
                calls.append(call)
            elif best is None or score < 0.2:
                answers.append(
                    (task, "I don't know yet: nothing I can see or remember covers that.")
                )
            else:
                source, text = best
                answers.append((task, f"{source} «{text}»" if source else text))
        if calls:
            return "", calls
        answers.extend(conclusions.items())  # branches that came back for earlier questions
        if not answers:
            return _HOLDING, []
        if len(answers) == 1 and not waiting:
            reply = answers[0][1]
        else:
            lines = [f"«{asked_}» {answer}" for asked_, answer in answers]
            lines += [f"«{task}» {_HOLDING}" for task in waiting]
            reply = "\n".join(lines)
        return self.counter.truncate(reply, max_tokens), []

    @staticmethod
    def _candidates(
        history: Sequence[ChatMessage], tool_results: Sequence[ChatMessage]
    ) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for m in tool_results:
            hits = _tool_json(m)
            if isinstance(hits, dict) and hits.get("conclusion"):
                out.append(("", str(hits["conclusion"])))  # a branch's, already attributed
            for h in hits if isinstance(hits, list) else []:
                if isinstance(h, dict) and h.get("content") and h.get("author"):
                    out.append((f"Earlier, {h['author']} said:", str(h["content"])))
                elif isinstance(h, dict) and h.get("content"):
                    out.append(("I remember:", str(h["content"])))
        for m in history:
            if m.role != "user":
                continue
            if not is_quoted(m.content):
                out.append((f"Earlier, {m.name or 'someone'} said:", m.content))
                continue
            for block in blocks(m.content):
                if block.tag == "memory":
                    out.append(("I remember:", block.text.strip()))
                elif block.source == "summary":
                    for line in block.text.splitlines():
                        if line.strip() and not line.startswith(("[Summary", "Summary of")):
                            out.append(("From an earlier summary:", line.lstrip("- ")))
        return out

    @staticmethod
    def _best(
        question: str, candidates: Sequence[tuple[str, str]]
    ) -> tuple[tuple[str, str] | None, float]:
        docs = [c[1] for c in candidates if not is_question(c[1])]
        pool = [c for c in candidates if not is_question(c[1])]
        if not pool:
            return None, 0.0
        scores = Overlap(docs).scores(question)
        # Later evidence wins ties: it is the most recent thing said about the topic.
        i = max(range(len(pool)), key=lambda k: (round(scores[k], 6), k))
        return pool[i], scores[i]

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
            args = {"query": task, "limit": 5}
            return "", [ToolCall(f"search-{i}", n, dict(args)) for i, n in enumerate(search)]
        best, score = self._best(task, self._candidates(messages[:task_at], results))
        if best is None or score < 0.2:
            return "Nothing I could find covers that.", []
        source, text = best
        return self.counter.truncate(f"{source} «{text}»" if source else text, max_tokens), []


def _tool_json(message: ChatMessage) -> object:
    """A tool result's JSON body (tool results reach models quoted), or None."""
    try:
        return json.loads(unquote(message.content))
    except json.JSONDecodeError:
        return None


def _conclusions(tool_results: Sequence[ChatMessage]) -> dict[str, str]:
    """What each branch that came back concluded, by its task (a failure says so)."""
    out: dict[str, str] = {}
    for m in tool_results:
        body = _tool_json(m)
        if not isinstance(body, dict) or "branch" not in body:
            continue
        task = str(body.get("task", ""))
        if body.get("conclusion"):
            out[task] = str(body["conclusion"])
        else:
            status = next((k for k in body if k not in ("branch", "task")), "failed")
            out[task] = f"I could not look further back for that ({status}: {body.get(status)})."
    return out
