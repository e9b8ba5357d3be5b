"""Task workers: long LLM tool loops a channel delegates, compacted per segment, all on record.

A worker starts from a fresh context (its instructions and the task), runs
``turns_per_segment`` tool turns per segment, at most ``max_segments``
segments, and ends when the model answers without calling a tool; that answer
is its result.  Between segments, when its context usage is above
``segment_compact_threshold``, it compacts its own history: the instructions
and the task stay, the most recent turns stay, older turns (a tool call with
all its results, never one without the other) are dropped and a recap built
in code (which tools ran, with what outcome) takes their place.  A
context-overflow error force-compacts harder and retries, at most
``max_overflow_retries`` times (:func:`complete_with_overflow_retry`, shared
with branches).

Limits, timeouts, cancellation and the records of every run live in
:mod:`workers.supervisor`.
"""

from __future__ import annotations

import json
import math
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from memory_graph import fit_hits
from tierbot.errors import ContextOverflowError, LLMError
from tierbot.llm.base import ChatMessage, Completion, LLMProvider, Purpose, ToolCall, ToolSpec
from tierbot.llm.quoting import quote, quote_tool_result, unquote
from tierbot.tokens import MIN_REPLY_TOKENS, TokenCounter, reply_cap
from workers.records import Transcript
from workers.supervisor import TaskFailed, TaskHandle
from workers.tools import ToolRegistry, ToolResult, message_tokens, specs_tokens, units

log = structlog.get_logger("tierbot.workers.task")

CONTINUE_NOTE = "Older context has been compacted; continue where you left off."
WORKER_PROMPT = """You are a tierbot task worker. Work on the task below step by step with \
your tools; the channel that started you keeps talking to people meanwhile. When you are done, \
answer without calling a tool: that answer is posted to the channel as your result, so make it \
complete and concise. Older tool turns may be replaced by a recap to save room; the full \
transcript is kept."""
FINAL_NOTE = "You have used all your tool turns. Report what you found and what remains."
KEEP_RECENT_TURNS = 2


async def complete_with_overflow_retry(
    llm: LLMProvider,
    prompt: Callable[[], list[ChatMessage]],
    tools: Sequence[ToolSpec],
    *,
    purpose: Purpose,
    max_tokens: int,
    window: int,
    prompt_tokens: Callable[[], int],
    retries: int,
    compact: Callable[[int], Awaitable[bool]],
) -> Completion:
    """One completion; on a context overflow, ``compact(attempt)`` harder and retry.

    The reply cap sent is ``max_tokens`` cut to the room ``window`` leaves after
    ``prompt_tokens()`` (:func:`~tierbot.tokens.reply_cap`); a prompt that leaves less
    than :data:`~tierbot.tokens.MIN_REPLY_TOKENS` is not sent, it counts as an overflow.
    At most ``retries`` retries; ``compact`` returns False when nothing is left
    to drop.  Raises :class:`TaskFailed` when the overflow persists, and for any
    other provider error (the provider has already retried transient ones).
    """
    attempt = 0
    while True:
        tokens = prompt_tokens()
        cap = reply_cap(max_tokens, window, tokens)
        try:
            if cap is None:
                log.warning(
                    "task.no_room_for_reply",
                    purpose=purpose,
                    prompt_tokens=tokens,
                    context_window=window,
                    min_reply_tokens=MIN_REPLY_TOKENS,
                )
                raise ContextOverflowError(
                    f"the prompt ({tokens} tokens) leaves less than {MIN_REPLY_TOKENS} tokens "
                    f"of the {window}-token window for a reply; not sent"
                )
            return await llm.complete(prompt(), tools, max_tokens=cap, purpose=purpose)
        except ContextOverflowError as exc:
            if attempt >= retries:
                raise TaskFailed(
                    f"the context overflowed {attempt + 1} times in a row (max_overflow_retries "
                    f"= {retries}); the task is too large for the model's window"
                ) from exc
            attempt += 1
            if not await compact(attempt):
                raise TaskFailed(
                    "the context overflowed and nothing is left to compact; the task itself "
                    "is too large for the model's window"
                ) from exc
        except LLMError as exc:
            raise TaskFailed(f"the model failed: {type(exc).__name__}: {exc}") from exc


# -- segment compaction ------------------------------------------------------------------------


@dataclass
class Recap:
    """What dropped tool turns did, built in code: per-tool counts and the latest calls."""

    turns: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=8))

    def add(self, unit: Sequence[ChatMessage]) -> None:
        head = unit[0]
        results = {m.tool_call_id: unquote(m.content) for m in unit[1:]}
        if not head.tool_calls:
            return
        self.turns += 1
        for c in head.tool_calls:
            out = results.get(c.id, "")
            failed = out.startswith('{"error"')
            self.counts[c.name] += 1
            self.errors[c.name] += failed
            args = json.dumps(c.arguments, ensure_ascii=False)
            self.lines.append(
                f"- {c.name}({_clip(args, 60)}) -> {'error: ' if failed else ''}{_clip(out, 80)}"
            )

    def text(self) -> str:
        calls = sum(self.counts.values())
        tally = ", ".join(
            f"{name} x{n}" + (f" ({self.errors[name]} failed)" if self.errors[name] else "")
            for name, n in self.counts.most_common()
        )
        lines = [
            f"[Recap of {self.turns} earlier tool turns ({calls} calls), dropped to save room; "
            "the full transcript is kept.]",
            f"Tools used: {tally or 'none'}.",
        ]
        if self.lines:
            lines.append("Latest of them:")
            lines.extend(self.lines)
        return "\n".join(lines)


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


@dataclass(frozen=True, slots=True)
class WorkerLimits:
    """The operator's thresholds, as one channel's settings resolve them."""

    context_window: int
    max_reply_tokens: int
    turns_per_segment: int
    max_segments: int
    segment_compact_threshold: float
    max_overflow_retries: int


class TaskWorker:
    """Runs one task to its result; see the module docstring for the segment rules."""

    def __init__(
        self,
        handle: TaskHandle,
        *,
        llm: LLMProvider,
        counter: TokenCounter,
        tools: ToolRegistry,
        limits: WorkerLimits,
        transcript: Transcript,
        log_: Any = None,
    ) -> None:
        self.handle = handle
        self.llm = llm
        self.counter = counter
        self.tools = tools
        self.limits = limits
        self.transcript = transcript
        self.log = log_ or log.bind(worker=handle.id)
        self.specs = tools.specs()
        self._fixed = specs_tokens(counter, self.specs)
        self.head: list[ChatMessage] = []
        self.recap = Recap()
        self.body: list[tuple[ChatMessage, int]] = []  # (message, transcript seq)
        self.segment = 1
        self.compactions = 0
        self.calls = 0
        self.turns = 0
        self._ids: set[str] = set()

    # -- context ------------------------------------------------------------------------------

    def prompt(self) -> list[ChatMessage]:
        # The recap repeats tool output (user-derived text): quoted material, never system text.
        recap = [self._recap_message()] if self.recap.turns else []
        return [*self.head, *recap, *(m for m, _ in self.body)]

    def _recap_message(self) -> ChatMessage:
        return ChatMessage("user", quote(self.recap.text(), source="recap"))

    def tokens(self) -> int:
        return self._fixed + sum(message_tokens(self.counter, m) for m in self.prompt())

    def usage(self) -> float:
        return self.tokens() / self.limits.context_window

    def _request_tokens(self, specs: Sequence[ToolSpec]) -> int:
        """Tokens the next request sends: the prompt, and the schemas of ``specs``."""
        return self.tokens() - self._fixed + specs_tokens(self.counter, specs)

    async def _add(self, messages: Sequence[ChatMessage], kind: str = "message") -> None:
        seqs = await self.transcript.add(self.segment, messages, kind)
        self.body.extend(zip(messages, seqs, strict=True))

    async def compact(self, *, force: bool = False) -> bool:
        """Drop the oldest tool turns behind the recap; False when nothing could be dropped.

        Normal: at least half of the droppable turns, then more until usage is
        at most half the threshold, so the next segment has room to run.
        Forced (after an overflow): three quarters, and only the newest turn is
        kept.
        """
        keep = 1 if force else KEEP_RECENT_TURNS
        groups = _seq_units(self.body)
        tool_turns = [i for i, g in enumerate(groups) if g[0][0].tool_calls]
        droppable = tool_turns[:-keep]  # the newest ``keep`` turns always stay
        if not droppable:
            return False
        n = math.ceil(len(droppable) * (0.75 if force else 0.5))
        budget = self.limits.segment_compact_threshold * self.limits.context_window / 2
        before = self.tokens()
        drop = set(droppable[:n])
        recap = self.recap
        for i in droppable[:n]:
            recap.add([m for m, _ in groups[i]])
        rest = droppable[n:]
        self.body = [e for i, g in enumerate(groups) if i not in drop for e in g]
        while rest and self.tokens() > budget:
            i = rest.pop(0)
            recap.add([m for m, _ in groups[i]])
            drop.add(i)
            self.body = [e for j, g in enumerate(groups) if j not in drop for e in g]
        # An old "continue" note would only mislead once its context is gone.
        self.body = [
            e for e in self.body if not (e[0].role == "user" and e[0].content == CONTINUE_NOTE)
        ]
        self.compactions += 1
        dropped = [s for i in sorted(drop) for _, s in groups[i]]
        await self.transcript.dropped(dropped, self.compactions)
        await self.transcript.add(self.segment, [self._recap_message()], "recap")
        self.log.info(
            "worker.compacted",
            segment=self.segment,
            forced=force,
            dropped=len(dropped),
            tokens_before=before,
            tokens_after=self.tokens(),
            usage_after=round(self.usage(), 3),
        )
        self.handle.stats["compactions"] = self.compactions
        return True

    async def _force(self, attempt: int) -> bool:
        self.log.warning("worker.overflow", attempt=attempt, usage=round(self.usage(), 3))
        self.handle.overflowed()
        if not await self.compact(force=True):
            return False
        await self._add([ChatMessage("user", CONTINUE_NOTE)], "note")
        self.handle.stats["retries"] = self.handle.stats.get("retries", 0) + 1
        self.log.info("worker.retried", attempt=attempt)
        return True

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> str:
        """Work until the model answers without a tool call; return that answer."""
        self.head = [ChatMessage("system", WORKER_PROMPT), ChatMessage("user", self.handle.task)]
        await self.transcript.add(0, self.head, "head")
        lim = self.limits
        for segment in range(1, lim.max_segments + 1):
            self.segment = segment
            for _ in range(lim.turns_per_segment):
                self.handle.detail = (
                    f"segment {self.segment}/{lim.max_segments}, {self.calls} tool calls"
                )
                completion = await self._complete(self.specs)
                if not completion.tool_calls:
                    await self._add([ChatMessage("assistant", completion.text)], "result")
                    return self._result(completion.text)
                await self._turn(completion)
            if self.segment < lim.max_segments and self.usage() > lim.segment_compact_threshold:
                await self.compact()
        await self._add([ChatMessage("user", FINAL_NOTE)], "note")
        completion = await self._complete(())
        await self._add([ChatMessage("assistant", completion.text)], "result")
        return self._result(completion.text)

    def _result(self, text: str) -> str:
        self.handle.stats.update(turns=self.turns, calls=self.calls, segments=self.segment)
        if not text.strip():
            raise TaskFailed("the model finished with an empty answer")
        return text.strip()

    async def _complete(self, specs: Sequence[ToolSpec]) -> Completion:
        return await complete_with_overflow_retry(
            self.llm,
            self.prompt,
            specs,
            purpose="worker",
            max_tokens=self.limits.max_reply_tokens,
            window=self.limits.context_window,
            prompt_tokens=lambda: self._request_tokens(specs),
            retries=self.limits.max_overflow_retries,
            compact=self._force,
        )

    async def _turn(self, completion: Completion) -> None:
        calls = unique_call_ids(completion.tool_calls, self._ids, "call")
        results: list[ToolResult] = [await self.tools.run(c) for c in calls]
        messages = [ChatMessage("assistant", completion.text, tool_calls=calls)]
        for c, r in zip(calls, results, strict=True):
            used = self.tokens() + sum(message_tokens(self.counter, m) for m in messages)
            text = fit_search(c.name, r.text, self.limits.context_window, used, self.counter)
            messages.append(ChatMessage("tool", quote_tool_result(c.name, text), tool_call_id=c.id))
        await self._add(messages)
        self.turns += 1
        self.calls += len(calls)


#: The search tools whose results are lists a small window may not hold whole.
SEARCH_TOOLS = frozenset({"memory_recall", "conversation_search"})
#: The share of the window a search's result may fill up to.
SEARCH_ROOM_SHARE = 0.95


def fit_search(name: str, text: str, window: int, used: int, counter: TokenCounter) -> str:
    """A search tool's result cut to the room ``window`` leaves after ``used`` tokens
    (under :data:`SEARCH_ROOM_SHARE` of it), saying what it left out; any other tool's
    result as it is.  See :func:`memory_graph.fit_hits`."""
    if name not in SEARCH_TOOLS:
        return text
    room = int(window * SEARCH_ROOM_SHARE) - used - MIN_REPLY_TOKENS  # and the reply's
    return fit_hits(text, room, counter.count_message)


def unique_call_ids(
    calls: Sequence[ToolCall], taken: set[str], prefix: str
) -> tuple[ToolCall, ...]:
    """Rename calls whose id is empty or already in ``taken`` (which is updated), so every
    result pairs with exactly one call in the request."""
    out = []
    for c in calls:
        cid, n = c.id, len(taken)
        while not cid or cid in taken:
            n += 1
            cid = f"{prefix}-{n}"
        taken.add(cid)
        out.append(c if cid == c.id else ToolCall(cid, c.name, c.arguments))
    return tuple(out)


def _seq_units(body: Sequence[tuple[ChatMessage, int]]) -> list[list[tuple[ChatMessage, int]]]:
    """:func:`~workers.tools.units` over (message, seq) pairs."""
    grouped = units([m for m, _ in body])
    out, i = [], 0
    for g in grouped:
        out.append(list(body[i : i + len(g)]))
        i += len(g)
    return out
