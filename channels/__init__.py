"""Channel actors: one per conversation, each the only writer of its history."""

from channels.actor import BOT_AUTHOR, ChannelActor, ChannelDeps, MemoryAccess
from channels.context import LiveContext
from channels.registry import ChannelRegistry, to_message

__all__ = [
    "BOT_AUTHOR",
    "ChannelActor",
    "ChannelDeps",
    "ChannelRegistry",
    "LiveContext",
    "MemoryAccess",
    "to_message",
]
