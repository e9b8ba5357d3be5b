"""OpenAIProvider: any OpenAI-compatible chat-completions endpoint, through the official SDK.

One class serves OpenAI itself, OpenRouter, Ollama, vLLM and llama.cpp's server:
only ``[llm] base_url``, ``model`` and ``api_key_env`` differ.  The SDK's own
retries are off; :func:`tierbot.retry.retry_call` retries rate limits and transient
failures so every provider backs off the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import openai
from openai import omit
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
)

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

__all__ = ["OpenAIProvider"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

# How OpenAI and the common compatible servers word "the prompt does not fit":
# OpenAI/OpenRouter/vLLM "maximum context length", llama.cpp "exceed_context_size_error",
# Gemini "exceeds the maximum number of tokens".
_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "context size",
    "context limit",
    "too many tokens",
    "prompt is too long",
    "maximum number of tokens",
)


class OpenAIProvider:
    """An :class:`~tierbot.llm.base.LLMProvider` for OpenAI-compatible chat-completions APIs.

    ``complete`` raises only :class:`~tierbot.errors.LLMError` subclasses, after
    retrying rate limits and transient failures ``[llm] max_retries`` times.
    The constructor raises :class:`~tierbot.errors.FatalLLMError` when the API key
    variable named by ``[llm] api_key_env`` is unset or ``[llm] model`` is empty.
    """

    name = "openai"

    def __init__(self, config: LLMConfig, environ: Mapping[str, str] = os.environ) -> None:
        if not config.model:
            raise FatalLLMError(
                "[llm] model is empty: set it to a model the endpoint serves "
                "(e.g. gpt-4o-mini, or llama3.1 for Ollama)",
                provider=self.name,
            )
        self._config = config
        self._base_url = config.base_url or DEFAULT_BASE_URL
        # OpenAI's own API rejects max_tokens for reasoning models; most compatible
        # servers only know max_tokens.
        self._official = (urlsplit(self._base_url).hostname or "").endswith("api.openai.com")
        self._backoff = Backoff(config.retry_base_seconds, config.retry_max_seconds)
        self._client = openai.AsyncOpenAI(
            api_key=api_key_from_env(config, environ, self.name),
            base_url=self._base_url,
            timeout=config.timeout_seconds,
            max_retries=0,
        )

    async def __aenter__(self) -> OpenAIProvider:
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
        # Only the leading system messages stay system text; see demote_system.
        system, conversation = demote_system(messages)
        head = [ChatMessage("system", system)] if system else []
        wire_messages = [_message_to_wire(m) for m in (*head, *conversation)]
        wire_tools = [_tool_to_wire(t) for t in tools]

        async def call() -> Completion:
            try:
                response = await self._client.chat.completions.create(
                    model=model,
                    messages=wire_messages,
                    tools=wire_tools or omit,
                    max_tokens=omit if self._official else max_tokens,
                    max_completion_tokens=max_tokens if self._official else omit,
                )
            except openai.OpenAIError as exc:
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

    def _translate(self, exc: openai.OpenAIError, model: str) -> LLMError:
        where = self._base_url
        if isinstance(exc, openai.APITimeoutError):
            return TransientLLMError(
                f"openai: {where} did not answer within {self._config.timeout_seconds:g}s; "
                "raise [llm] timeout_seconds if the model is slow",
                provider=self.name,
            )
        if isinstance(exc, openai.APIConnectionError):
            return TransientLLMError(
                f"openai: could not reach {where} ({exc.__cause__ or exc}); "
                "check [llm] base_url and that the server is running",
                provider=self.name,
            )
        if not isinstance(exc, openai.APIStatusError):
            return _not_the_api(where, exc)

        status = exc.status_code
        detail = _server_message(exc)
        if status == 429 and exc.code != "insufficient_quota":
            return RateLimitedError(
                f"openai: rate limited by {where}: {detail}",
                provider=self.name,
                retry_after=retry_after_seconds(exc.response.headers),
            )
        if status == 413 or exc.code == "context_length_exceeded" or _is_overflow(detail):
            return ContextOverflowError(
                f"openai: the request does not fit {model!r}'s context window: {detail}",
                provider=self.name,
                status=status,
            )
        if status >= 500 or status in (408, 409):
            return TransientLLMError(
                f"openai: {where} failed with HTTP {status}: {detail}",
                provider=self.name,
                status=status,
            )
        key_env = self._config.api_key_env
        if status in (401, 403) and not key_env:
            hint = f"{where} wants an API key: set [llm] api_key_env to the variable holding it"
        elif status == 401:
            hint = f"check that ${key_env} holds a valid key for {where}"
        elif status == 403:
            hint = f"check that the key in ${key_env} may use model {model!r}"
        elif status == 404:
            hint = (
                f"check [llm] model ({model!r}) exists there and [llm] base_url ({where}) "
                "is the API root, usually ending in /v1"
            )
        elif status == 429:
            hint = "the account's quota is used up: check its plan and billing"
        else:
            hint = f"check [llm] model ({model!r}) and that {where} supports chat completions"
        return FatalLLMError(
            f"openai: {where} refused the request with HTTP {status}: {detail}; {hint}",
            provider=self.name,
            status=status,
        )


def _message_to_wire(message: ChatMessage) -> ChatCompletionMessageParam:
    match message.role:
        case "system":
            return {"role": "system", "content": message.content}
        case "user":
            # Folded into the text rather than sent as `name`: Ollama and llama.cpp drop
            # `name`, and OpenAI rejects names outside [A-Za-z0-9_-].
            text = f"{message.name}: {message.content}" if message.name else message.content
            return {"role": "user", "content": text}
        case "assistant":
            if not message.tool_calls:
                return {"role": "assistant", "content": message.content}
            return {
                "role": "assistant",
                "content": message.content or None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                    }
                    for call in message.tool_calls
                ],
            }
        case "tool":
            return {
                "role": "tool",
                "tool_call_id": message.tool_call_id or "",
                "content": message.content,
            }


def _tool_to_wire(tool: ToolSpec) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _completion_from_wire(response: ChatCompletion, where: str) -> Completion:
    # Typed as ChatCompletion, but the SDK hands back whatever JSON (or text) it got.
    choices = getattr(response, "choices", None)
    if not choices:
        error = getattr(response, "error", None)
        if error is not None or choices == []:
            # OpenRouter and some proxies answer 200 with an error body when the upstream failed.
            reason = f": {clip(error)}" if error is not None else ""
            raise TransientLLMError(
                f"openai: {where} returned no completion{reason}", provider="openai"
            )
        raise _not_the_api(where, response)
    choice = choices[0]
    message = choice.message
    calls = []
    for call in message.tool_calls or ():
        function = getattr(call, "function", None)
        if function is not None:  # custom (free-text) tools are never offered
            calls.append(ToolCall(call.id, function.name, _decode_arguments(function.arguments)))
    usage = response.usage
    return Completion(
        text=message.content or message.refusal or "",
        tool_calls=tuple(calls),
        usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else None,
        stop_reason=choice.finish_reason or "",
    )


def _not_the_api(where: str, what: object) -> FatalLLMError:
    return FatalLLMError(
        f"openai: {where} did not answer like an OpenAI-compatible API ({clip(what)}); "
        "check that [llm] base_url is the API root, usually ending in /v1",
        provider="openai",
    )


def _decode_arguments(raw: str | None) -> dict[str, Any]:
    """JSON-decode tool arguments; anything but a JSON object is kept as ``{"_raw": raw}``."""
    if not raw or not raw.strip():
        return {}
    try:
        decoded = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return decoded if isinstance(decoded, dict) else {"_raw": raw}


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else body
    return clip(message if isinstance(message, str) and message else exc.message)


def _is_overflow(detail: str) -> bool:
    lowered = detail.lower()
    return any(marker in lowered for marker in _OVERFLOW_MARKERS)
