"""A branch's own copy of the channel's context, and the programmatic compaction of that copy.

The copy is taken when the branch forks; the channel's history is never
touched.  Compaction here uses no LLM: the oldest messages of the copy leave
(a tool call always with its results), one marker says how many, and the
channel's last turn (its newest user message and what follows) always stays,
as do the branch's task and its own work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from tierbot.llm.base import ChatMessage, ToolSpec
from tierbot.llm.quoting import is_quoted, quote
from tierbot.tokens import TokenCounter
from workers.task import CONTINUE_NOTE
from workers.tools import message_tokens, sanitize, specs_tokens, units


def request_tokens(
    counter: TokenCounter, messages: Sequence[ChatMessage], specs: Sequence[ToolSpec] = ()
) -> int:
    """Tokens one request costs: every message (with its tool calls) plus the tool schemas."""
    return sum(message_tokens(counter, m) for m in messages) + specs_tokens(counter, specs)


def _marker(dropped: int) -> ChatMessage:
    # A note about the conversation, sent like every other note: quoted, never system text.
    text = (
        f"[Branch copy: the {dropped} oldest messages of this conversation were left out of "
        "this copy to fit the context window; the channel still has them. Search them with "
        "conversation_search or memory_recall if you need them.]"
    )
    return ChatMessage("user", quote(text, source="note"))


@dataclass
class BranchContext:
    """The messages one branch sends: system prompt, marker, the copied history, its own work."""

    counter: TokenCounter
    system: ChatMessage
    history: list[ChatMessage]
    own: list[ChatMessage]
    specs: Sequence[ToolSpec] = ()
    dropped: int = 0
    _units: list[list[ChatMessage]] = field(default_factory=list)
    _unit_tokens: list[int] = field(default_factory=list)
    _fixed: int = 0

    @classmethod
    def fork(
        cls,
        counter: TokenCounter,
        channel_prompt: Sequence[ChatMessage],
        instructions: str,
        task: str,
        specs: Sequence[ToolSpec] = (),
    ) -> BranchContext:
        """Copy ``channel_prompt`` (the channel's request: its system prompt first).

        The branch's ``instructions`` are appended to the channel's system prompt;
        a tool call still waiting for its result (the one that started this
        branch) is left out of the copy.
        """
        if channel_prompt and channel_prompt[0].role == "system":
            base, rest = channel_prompt[0].content, list(channel_prompt[1:])
        else:
            base, rest = "", list(channel_prompt)
        system = ChatMessage("system", f"{base}\n\n{instructions}".strip())
        ctx = cls(counter, system, sanitize(rest), [ChatMessage("user", task)], specs)
        ctx._index()
        return ctx

    def _index(self) -> None:
        self._units = units(self.history)
        self._unit_tokens = [sum(message_tokens(self.counter, m) for m in u) for u in self._units]
        self._fixed = message_tokens(self.counter, self.system) + specs_tokens(
            self.counter, self.specs
        )

    # -- reading ---------------------------------------------------------------------------

    def prompt(self) -> list[ChatMessage]:
        marker = [_marker(self.dropped)] if self.dropped else []
        history = [m for u in self._units for m in u]
        return [self.system, *marker, *history, *self.own]

    def tokens(self) -> int:
        marker = message_tokens(self.counter, _marker(self.dropped)) if self.dropped else 0
        own = sum(message_tokens(self.counter, m) for m in self.own)
        return self._fixed + marker + sum(self._unit_tokens) + own

    def usage(self, window: int) -> float:
        return self.tokens() / window

    def _protected_from(self) -> int:
        """Index of the first history unit of the channel's last turn: its newest user message
        and what follows (kept whatever happens, as in :func:`compactor.last_turn_start`)."""
        for i in range(len(self._units) - 1, -1, -1):
            first = self._units[i][0]
            if first.role == "user" and not is_quoted(first.content):  # a person, not a note
                return i
        return len(self._units)

    # -- compacting ------------------------------------------------------------------------

    def _drop_oldest(self, n: int) -> int:
        n = min(n, self._protected_from())
        if n <= 0:
            return 0
        self.dropped += sum(len(u) for u in self._units[:n])
        del self._units[:n]
        del self._unit_tokens[:n]
        return n

    def preflight(self, threshold: float, window: int, reply_tokens: int) -> int:
        """Drop the oldest history until usage is below ``threshold`` with room for the reply.

        Returns how many messages left the copy (0 when it already fit).
        """
        target = min(threshold * window, window - reply_tokens)
        before = self.dropped
        while self.tokens() >= target and self._drop_oldest(1):
            pass
        return self.dropped - before

    def force(self) -> bool:
        """After an overflow: drop three quarters of the remaining droppable history, or
        failing that the branch's own older tool turns; False when nothing could go."""
        droppable = self._protected_from()
        if droppable:
            self._drop_oldest(math.ceil(droppable * 0.75))
        elif not self._drop_own():
            return False
        self.own = [m for m in self.own if m.content != CONTINUE_NOTE or m.role != "user"]
        self.own.append(ChatMessage("user", CONTINUE_NOTE))
        return True

    def _drop_own(self) -> bool:
        """Drop the branch's oldest tool turn, keeping its task (the first message)."""
        task, rest = self.own[:1], self.own[1:]
        groups = units([m for m in rest if not (m.role == "user" and m.content == CONTINUE_NOTE)])
        turns = [i for i, g in enumerate(groups) if g[0].tool_calls]
        if len(turns) <= 1:
            return False
        del groups[turns[0]]
        self.own = task + [m for g in groups for m in g]
        return True
