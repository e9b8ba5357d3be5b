"""What a channel actor is given: the runtime's shared services, and the memory it may use."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tierbot.config import Config, RespondMode
from tierbot.events import Bus
from tierbot.llm.base import LLMProvider, ToolSpec
from tierbot.messages import Message, Outbound, ProgressHandle
from tierbot.storage import MessageStore
from tierbot.tokens import TokenCounter
from workers import Summarizer, WorkerPool
from workers.supervisor import TaskPool

__all__ = ["ChannelDeps", "MemoryAccess"]


class MemoryAccess(Protocol):
    """What a channel needs from the memory graph to answer from memory."""

    def recall_tool(self) -> ToolSpec: ...

    def chat_tools(self) -> list[ToolSpec]:
        """memory_save, memory_recall and memory_forget as a conversation offers them."""
        ...

    async def recall_from_tool(
        self,
        arguments: dict[str, Any],
        *,
        channel: str,
        exclude: Collection[str] = (),
        asker_id: str = "",
    ) -> str:
        """Run memory_recall; ``exclude`` names platform ids the channel already has live,
        ``asker_id`` the person being answered (for ``from_asker``)."""
        ...

    async def forgotten_messages(self, channel: str, messages: Sequence[Message]) -> set[str]:
        """The platform ids of ``messages`` that people asked to be forgotten."""
        ...

    async def save_from_chat(
        self, arguments: dict[str, Any], *, channel: str, source: Message
    ) -> str:
        """Run memory_save for the message ``source`` being answered."""
        ...

    async def forget_from_chat(
        self, arguments: dict[str, Any], *, channel: str, source: Message
    ) -> str:
        """Run memory_forget for the author of ``source``."""
        ...

    def index_wake(self) -> None:
        """New messages are stored: the background indexer reads them from the store soon;
        never waits."""
        ...

    async def count(self, channel: str) -> int: ...


@dataclass
class ChannelDeps:
    """Everything a channel actor uses, shared by all channels of a runtime.

    ``events`` is the runtime's bus: the actor publishes what it does there (turns,
    compactions, emergencies, overflows) for metrics, ``/status`` and the ops page.
    """

    config: Callable[[], Config]
    store: MessageStore
    llm: LLMProvider
    counter: TokenCounter
    pool: WorkerPool
    worker: Summarizer
    deliver: Callable[[Outbound], Awaitable[None]]
    respond_mode: Callable[[str], RespondMode]
    tasks: TaskPool  # process-wide branch/worker slots, their records, the operator's tools
    memory: MemoryAccess | None = None
    progress: Callable[[str, str | None], Awaitable[ProgressHandle | None]] | None = None
    events: Bus = field(default_factory=Bus)
