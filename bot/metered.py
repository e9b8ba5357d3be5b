"""Wrappers that meter what the core calls: the LLM provider and the memory access.

The runtime wraps its provider and its channels' memory access once, so no
call site changes; each wrapper keeps the protocol of what it wraps and
passes errors through unchanged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from bot.metrics import Metrics
from tierbot.errors import LLMError, ToolError
from tierbot.llm.base import ChatMessage, Completion, LLMProvider, Purpose, ToolSpec
from tierbot.messages import Message

if TYPE_CHECKING:
    from channels import MemoryAccess

log = structlog.get_logger("tierbot.llm")


class MeteredProvider:
    """An :class:`~tierbot.llm.base.LLMProvider` that counts and times the calls of another.

    Logs ``llm.call`` (provider, purpose, tokens, duration; debug when it
    succeeds, warning with the error kind when it fails).  Errors pass through
    unchanged; other attributes of the wrapped provider stay reachable.
    """

    def __init__(self, inner: LLMProvider, metrics: Metrics) -> None:
        self.inner = inner
        self.name = inner.name
        self._m = metrics

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
        purpose: Purpose = "chat",
    ) -> Completion:
        started = time.monotonic()
        m, provider = self._m, self.name
        try:
            result = await self.inner.complete(messages, tools, max_tokens, purpose)
        except Exception as exc:
            kind = type(exc).__name__
            duration = time.monotonic() - started
            m.llm_calls.labels(provider, purpose, "error").inc()
            m.llm_errors.labels(provider, kind).inc()
            m.llm_seconds.labels(provider, purpose).observe(duration)
            log.warning(
                "llm.call",
                provider=provider,
                purpose=purpose,
                duration=round(duration, 4),
                error=kind,
                status=exc.status if isinstance(exc, LLMError) else None,
            )
            raise
        duration = time.monotonic() - started
        usage = result.usage
        tokens_in = usage.input_tokens if usage is not None else 0
        tokens_out = usage.output_tokens if usage is not None else 0
        m.llm_calls.labels(provider, purpose, "ok").inc()
        m.llm_seconds.labels(provider, purpose).observe(duration)
        if tokens_in:
            m.llm_tokens.labels(provider, purpose, "input").inc(tokens_in)
        if tokens_out:
            m.llm_tokens.labels(provider, purpose, "output").inc(tokens_out)
        log.debug(
            "llm.call",
            provider=provider,
            purpose=purpose,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            duration=round(duration, 4),
            error=None,
        )
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()


class MeteredMemory:
    """A channel's memory access that counts recalls and the memories they return."""

    def __init__(self, inner: MemoryAccess, metrics: Metrics) -> None:
        self.inner = inner
        self._m = metrics

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def recall_tool(self) -> ToolSpec:
        return self.inner.recall_tool()

    def chat_tools(self) -> list[ToolSpec]:
        return self.inner.chat_tools()

    async def save_from_chat(
        self, arguments: dict[str, Any], *, channel: str, source: Message
    ) -> str:
        return await self.inner.save_from_chat(arguments, channel=channel, source=source)

    async def forget_from_chat(
        self, arguments: dict[str, Any], *, channel: str, source: Message
    ) -> str:
        return await self.inner.forget_from_chat(arguments, channel=channel, source=source)

    async def recall_from_tool(
        self,
        arguments: dict[str, Any],
        *,
        channel: str,
        exclude: Collection[str] = (),
        asker_id: str = "",
    ) -> str:
        try:
            result = await self.inner.recall_from_tool(
                arguments, channel=channel, exclude=exclude, asker_id=asker_id
            )
        except Exception as exc:
            outcome = "invalid" if isinstance(exc, ToolError) else "error"
            self._m.memory_recalls.labels(outcome).inc()
            raise
        self._m.memory_recalls.labels("ok").inc()
        try:
            hits = json.loads(result)
        except ValueError:
            hits = None
        if isinstance(hits, list):
            self._m.memories_recalled.inc(len(hits))
        return result

    async def count(self, channel: str) -> int:
        return await self.inner.count(channel)

    def index_wake(self) -> None:
        self.inner.index_wake()
