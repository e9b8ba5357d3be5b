"""tierbot's kernel: the floor every other package stands on.

This package owns the vocabulary and the infrastructure of the whole bot: the
message types (:mod:`tierbot.messages`), configuration (:mod:`tierbot.config`),
the exception tree (:mod:`tierbot.errors`), exact token counting
(:mod:`tierbot.tokens`), the LLM provider protocol and its implementations
(:mod:`tierbot.llm`), the storage protocol (:mod:`tierbot.storage`) and its
SQLite message store (:mod:`tierbot.store`), schema migrations
(:mod:`tierbot.migrations`), typed events and their bus (:mod:`tierbot.events`),
the compaction vocabulary (:mod:`tierbot.vocab`), channel keys
(:mod:`tierbot.keys`), logging and retries.  It imports nothing of tierbot's
other packages: ``memory_graph``, ``compactor``, ``workers``, ``branches``,
``channels`` and the application in ``bot`` all import from here, never the
other way round.

:mod:`tierbot.testing` is the test kit for people who build on tierbot (fake
Discord, Slack and LLM servers on 127.0.0.1, a scripted provider); the runtime
never imports it.

``import tierbot`` gives the public types::

    from tierbot import Config, InboundMessage, LLMProvider, Message, Role
"""

from tierbot.config import ChannelSettings, Config, load_config
from tierbot.errors import ConfigError, LLMError, StoreError, TierbotError
from tierbot.llm.base import ChatMessage, Completion, LLMProvider, ToolCall, ToolSpec
from tierbot.messages import (
    Delivery,
    InboundMessage,
    Message,
    Outbound,
    ProgressHandle,
    Role,
    State,
)
from tierbot.tokens import TokenCounter, get_counter

__all__ = [
    "ChannelSettings",
    "ChatMessage",
    "Completion",
    "Config",
    "ConfigError",
    "Delivery",
    "InboundMessage",
    "LLMError",
    "LLMProvider",
    "Message",
    "Outbound",
    "ProgressHandle",
    "Role",
    "State",
    "StoreError",
    "TierbotError",
    "TokenCounter",
    "ToolCall",
    "ToolSpec",
    "get_counter",
    "load_config",
]
