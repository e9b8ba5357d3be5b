"""Channel actors: one per conversation, each the only writer of its history.

This floor owns the conversation: the actor's mailbox loop (:mod:`channels.actor`),
its live history and usage (:mod:`channels.history`, :mod:`channels.context`),
applying compaction plans (:mod:`channels.compaction`), the turn
(:mod:`channels.turn`, :mod:`channels.prompt`), the registry that routes stored
messages to actors, and the memory access a channel is given (:mod:`channels.memory`).

It may import branches, workers, compactor, memory_graph and the kernel (tierbot);
never the application (bot). It publishes typed events on ``ChannelDeps.events``.
"""

from channels.actor import BOT_AUTHOR, ChannelActor, ChannelDeps, MemoryAccess
from channels.context import LiveContext
from channels.registry import ChannelRegistry, to_message
from channels.snapshot import ChannelSnapshot
from channels.window import window_problems

__all__ = [
    "BOT_AUTHOR",
    "ChannelActor",
    "ChannelDeps",
    "ChannelRegistry",
    "ChannelSnapshot",
    "LiveContext",
    "MemoryAccess",
    "to_message",
    "window_problems",
]
