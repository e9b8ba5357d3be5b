"""AnthropicProvider: Claude through the official SDK's Messages API.

tierbot's flat message list becomes Anthropic's shape: the leading system
messages (the operator's prompt) become the ``system`` parameter, a system
message anywhere else is sent as quoted user text (never promoted), tool calls
and results become ``tool_use`` / ``tool_result`` content blocks, and
consecutive same-role turns are merged (the API wants user and assistant turns
to alternate).
The SDK's own retries are off; :func:`tierbot.retry.retry_call` retries rate limits,
overloads and transient failures so every provider backs off the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Literal

import anthropic
from anthropic import omit
from anthropic.types import (
    Message,
    MessageParam,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)
from anthropic.types import Usage as AnthropicUsage

from tierbot.config import LLMConfig
from tierbot.errors import (
    ContextOverflowError,
    FatalLLMError,
    LLMError,
    RateLimitedError,
    TransientLLMError,
)
from tierbot.llm._http import api_key_from_env, clip, retry_after_seconds
from tierbot.llm.base import ChatMessage, Completion, Purpose, ToolCall, ToolSpec, Usage
from tierbot.llm.quoting import demote_system
from tierbot.retry import Backoff, retry_call

__all__ = ["AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com"

# Anthropic words overflow as "prompt is too long: N tokens > M maximum" or "input length
# and `max_tokens` exceed context limit"; it has no stable error code for it.
_OVERFLOW_MARKERS = ("prompt is too long", "context limit", "context window", "too many tokens")

_Block = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam


class AnthropicProvider:
    """An :class:`~tierbot.llm.base.LLMProvider` for Anthropic's Messages API.

    ``complete`` raises only :class:`~tierbot.errors.LLMError` subclasses, after
    retrying rate limits, 529 overloads and transient failures ``[llm]
    max_retries`` times.  The constructor raises :class:`~tierbot.errors.FatalLLMError`
    when the API key variable named by ``[llm] api_key_env`` is unset or
    ``[llm] model`` is empty.
    """

    name = "anthropic"

    def __init__(self, config: LLMConfig, environ: Mapping[str, str] = os.environ) -> None:
        if not config.model:
            raise FatalLLMError(
                "[llm] model is empty: set it to a Claude model name (e.g. claude-sonnet-4-5)",
                provider=self.name,
            )
        self._config = config
        self._base_url = config.base_url or DEFAULT_BASE_URL
        self._backoff = Backoff(config.retry_base_seconds, config.retry_max_seconds)
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key_from_env(config, environ, self.name),
            base_url=self._base_url,
            timeout=config.timeout_seconds,
            max_retries=0,
        )

    async def __aenter__(self) -> AnthropicProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connection pool; the provider is unusable afterwards."""
        await self._client.close()

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
        purpose: Purpose = "chat",
    ) -> Completion:
        """Ask the model for the next assistant turn; ``summary`` uses ``[llm] summary_model``."""
        config = self._config
        model = (
            config.summary_model if purpose == "summary" and config.summary_model else config.model
        )
        system, wire_messages = _messages_to_wire(messages)
        wire_tools = [_tool_to_wire(t) for t in tools]

        async def call() -> Completion:
            try:
                response = await self._client.messages.create(
                    model=model,
                    max_tokens=max_tokens,
                    messages=wire_messages,
                    system=system or omit,
                    tools=wire_tools or omit,
                )
            except anthropic.AnthropicError as exc:
                raise self._translate(exc, model) from exc
            except ValueError as exc:  # a 200 labelled JSON that is not JSON escapes the SDK raw
                raise _not_the_api(self._base_url, exc) from exc
            return _completion_from_wire(response, self._base_url)

        return await retry_call(
            call,
            retries=config.max_retries,
            backoff=self._backoff,
            what=f"{self.name} {model}",
        )

    def _translate(self, exc: anthropic.AnthropicError, model: str) -> LLMError:
        where = self._base_url
        if isinstance(exc, anthropic.APITimeoutError):
            return TransientLLMError(
                f"anthropic: {where} did not answer within {self._config.timeout_seconds:g}s; "
                "raise [llm] timeout_seconds if the model is slow",
                provider=self.name,
            )
        if isinstance(exc, anthropic.APIConnectionError):
            return TransientLLMError(
                f"anthropic: could not reach {where} ({exc.__cause__ or exc}); "
                "check [llm] base_url and your network",
                provider=self.name,
            )
        if not isinstance(exc, anthropic.APIStatusError):
            return _not_the_api(where, exc)

        status = exc.status_code
        detail = clip(exc.api_message or exc.message)
        if status == 429:
            return RateLimitedError(
                f"anthropic: rate limited: {detail}",
                provider=self.name,
                retry_after=retry_after_seconds(exc.response.headers),
            )
        if status == 413 or any(m in detail.lower() for m in _OVERFLOW_MARKERS):
            return ContextOverflowError(
                f"anthropic: the request does not fit {model!r}'s context window: {detail}",
                provider=self.name,
                status=status,
            )
        if status >= 500 or status in (408, 409):  # includes 529 overloaded
            return TransientLLMError(
                f"anthropic: {where} failed with HTTP {status}: {detail}",
                provider=self.name,
                status=status,
            )
        key_env = self._config.api_key_env
        if status in (401, 403) and not key_env:
            hint = f"{where} wants an API key: set [llm] api_key_env to the variable holding it"
        elif status == 401:
            hint = f"check that ${key_env} holds a valid Anthropic API key"
        elif status == 403:
            hint = f"check that the key in ${key_env} may use model {model!r}"
        elif status == 404:
            hint = f"check [llm] model ({model!r}) and [llm] base_url ({where})"
        elif status == 402:
            hint = "check the account's plan and billing"
        else:
            hint = f"check [llm] model ({model!r}) and the request"
        return FatalLLMError(
            f"anthropic: {where} refused the request with HTTP {status}: {detail}; {hint}",
            provider=self.name,
            status=status,
        )


def _messages_to_wire(messages: Sequence[ChatMessage]) -> tuple[str, list[MessageParam]]:
    """Split out the system prompt and build alternating user/assistant turns of blocks."""
    system, conversation = demote_system(messages)
    turns: list[tuple[Literal["user", "assistant"], list[_Block]]] = []
    for message in conversation:
        role: Literal["user", "assistant"]
        blocks: list[_Block] = []
        match message.role:
            case "user" | "system":
                role = "user"
                text = f"{message.name}: {message.content}" if message.name else message.content
                if text:
                    blocks.append({"type": "text", "text": text})
            case "assistant":
                role = "assistant"
                if message.content:
                    blocks.append({"type": "text", "text": message.content})
                blocks.extend(
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                    for c in message.tool_calls
                )
            case "tool":
                role = "user"
                result: ToolResultBlockParam = {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id or "",
                }
                if message.content:
                    result["content"] = message.content
                blocks.append(result)
        # Anthropic rejects empty text blocks, so a turn with nothing to say is dropped.
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))

    wire: list[MessageParam] = []
    for role, blocks in turns:
        if role == "user":
            # tool_result blocks must open the turn that answers a tool_use.
            blocks.sort(key=lambda b: b["type"] != "tool_result")
            wire.append({"role": "user", "content": blocks})
        else:
            wire.append({"role": "assistant", "content": blocks})
    return system, wire


def _tool_to_wire(tool: ToolSpec) -> ToolParam:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def _completion_from_wire(response: Message, where: str) -> Completion:
    # Typed as Message, but the SDK hands back whatever JSON (or text) it got.
    content = getattr(response, "content", None)
    if not isinstance(content, list):
        error = getattr(response, "error", None)
        if error is not None:
            raise TransientLLMError(
                f"anthropic: {where} returned an error instead of a message: {clip(error)}",
                provider="anthropic",
            )
        raise _not_the_api(where, response)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {"_raw": block.input}
            calls.append(ToolCall(block.id, block.name, dict(arguments)))
    usage = getattr(response, "usage", None)
    return Completion(
        text="".join(texts),
        tool_calls=tuple(calls),
        usage=_usage(usage) if usage is not None else None,
        stop_reason=response.stop_reason or "",
    )


def _usage(usage: AnthropicUsage) -> Usage:
    # Cached prompt tokens are reported apart from input_tokens but still fill the window.
    prompt = (
        usage.input_tokens
        + (usage.cache_creation_input_tokens or 0)
        + (usage.cache_read_input_tokens or 0)
    )
    return Usage(prompt, usage.output_tokens)


def _not_the_api(where: str, what: object) -> FatalLLMError:
    return FatalLLMError(
        f"anthropic: {where} did not answer like the Anthropic Messages API ({clip(what)}); "
        "check [llm] base_url (the API root, without /v1)",
        provider="anthropic",
    )
