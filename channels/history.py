"""A channel's live history and its usage: the part of the actor that holds the context.

The history is the live context (:class:`~channels.context.LiveContext`, with its
running token total), the fixed prompt overhead counted once per change, and the
bookkeeping around it: what the channel has answered (``handled_upto``), its peak
usage, and the branches whose results have not entered yet (a cut must not split
those exchanges).  Only the channel's actor uses it, from inside its own task, so
the actor stays the only writer of its history.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from channels.context import LiveContext
from channels.deps import ChannelDeps
from channels.window import fixed_tokens
from tierbot.config import ChannelSettings
from tierbot.llm.base import ToolSpec
from tierbot.messages import Message, Role

__all__ = ["BOT_AUTHOR", "History"]

BOT_AUTHOR = "tierbot"
# The bot's entries sit this far apart after the newest entered message; messages are
# positioned at their integer id, so 100,000 entries fit before the next one (and a
# hundred before a reworded marker, placed 1e-3 after what it follows).
_POS_STEP = 1e-5


#: Tokens of (encoding, system prompt, tools' names and descriptions): the fixed part
#: of a context.
_FIXED_TOKENS: dict[tuple[str, str, tuple[tuple[str, str], ...]], int] = {}


class History:
    """One channel's live context, its usage and the bot's entries into it."""

    def __init__(self, key: str, deps: ChannelDeps, tools: Callable[[], list[ToolSpec]]) -> None:
        self.key = key
        self.deps = deps
        self.ctx = LiveContext()
        self.handled_upto = 0
        self.peak_usage = 0.0
        # Branches started here whose branch_result has not entered the history yet.
        self.awaiting: set[str] = set()
        self._tools = tools
        self._fixed_key: tuple[str, tuple[str, ...]] | None = None
        self._fixed_seen: tuple[object, object] = (None, None)
        self._settings: tuple[object, ChannelSettings] | None = None

    @property
    def settings(self) -> ChannelSettings:
        # Read on every message (usage, compaction checks): resolved once per config, and
        # again when a reload swaps the config in.
        config = self.deps.config()
        if self._settings is None or self._settings[0] is not config:
            self._settings = (config, config.for_channel(self.key))
        return self._settings[1]

    @property
    def usage(self) -> float:
        return self.ctx.usage(self.settings.context_window)

    def load(self, live: Sequence[Message], handled_upto: int) -> None:
        """Start from what the store holds (a channel's start or restart)."""
        self.ctx = LiveContext(live)
        self._fixed_key, self._fixed_seen = None, (None, None)  # a new context: count again
        self.refresh_fixed()
        self.handled_upto = handled_upto
        self.peak_usage = self.usage

    def refresh_fixed(self) -> None:
        """Count the system prompt and tool schemas; recounted only when they change."""
        s = self.settings
        tools = self._tools()
        if self._fixed_seen[0] is s and self._fixed_seen[1] is tools:
            return  # the same settings and tool list as last time: asked at every message
        key = (s.system_prompt, tuple(t.name for t in tools))
        if key == self._fixed_key:
            self._fixed_seen = (s, tools)
            return
        counter = self.deps.counter
        # Process-wide, tools are told apart by description too: a channel that only
        # listens is offered memory_recall with other words than one that chats.
        shared = (
            counter.encoding_name,
            s.system_prompt,
            tuple((t.name, t.description) for t in tools),
        )
        fixed = _FIXED_TOKENS.get(shared)
        if fixed is None:
            # Counted once per process, not once per channel: at a burst's start thousands
            # of channels load, and the tool schemas are a few thousand tokens.
            fixed = fixed_tokens(counter, s.system_prompt, tools)
            if len(_FIXED_TOKENS) >= 64:  # prompts reloaded many times: start over
                _FIXED_TOKENS.clear()
            _FIXED_TOKENS[shared] = fixed
        self._fixed_key = key
        self.ctx.set_fixed(fixed)
        self._fixed_seen = (s, tools)

    def note_usage(self) -> float:
        """The current usage, remembered as the peak if it is one."""
        usage = self.usage
        self.peak_usage = max(self.peak_usage, usage)
        return usage

    def new(self, role: Role, text: str, **meta: Any) -> Message:
        """One of the bot's own entries (not stored yet), counted once, here."""
        return Message(
            channel=self.key,
            platform_id=f"{role.value}:{uuid.uuid4().hex}",
            role=role,
            text=text,
            author_id=BOT_AUTHOR if role is not Role.MARKER else "",
            author_name=BOT_AUTHOR if role is not Role.MARKER else "",
            ts=time.time(),
            tokens=self.deps.counter.count_message(text),
            meta=meta,
        )

    async def store(self, msg: Message) -> Message:
        """Store one of the bot's entries right after what the actor has seen.

        A message stored meanwhile but not entered yet (it waits in the mailbox) comes
        after it: the context keeps the order the actor saw things in, so a tool call
        stays next to its result and a reply before the questions it never saw.
        """
        if len(self.ctx):
            msg = msg.with_(pos=self.ctx.items[-1].pos + _POS_STEP)
        stored = await self.deps.store.append(msg)
        assert stored is not None, "internal platform ids are unique"
        return stored

    def live_messages(self) -> int:
        """Live entries that are neither summaries nor markers."""
        return sum(1 for m in self.ctx.items if m.role not in (Role.SUMMARY, Role.MARKER))
