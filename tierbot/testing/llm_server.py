"""A scripted fake LLM server on 127.0.0.1 speaking the OpenAI and Anthropic wire APIs.

Tests drive the *real* SDKs against it: point an OpenAI-compatible client at
``srv.openai_base_url`` (``POST /v1/chat/completions``) or an Anthropic client at
``srv.anthropic_base_url`` (``POST /v1/messages``), queue what the "model" should
answer with :meth:`FakeLLMServer.script`, and read back what the client sent
from :attr:`FakeLLMServer.requests`::

    async with FakeLLMServer() as srv:
        srv.script(ErrorResponse(429, headers={"Retry-After": "0.2"}), Reply("hi"))
        ...  # call a provider whose base_url is srv.openai_base_url
        assert srv.requests[-1].body["model"] == "fake-model"

Each scripted response is rendered in the wire shape of whichever API received
the request, so one script serves both providers.  When the script is empty the
server answers with :attr:`FakeLLMServer.default`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from aiohttp import web

from tierbot.llm.base import ToolCall

Api = Literal["openai", "anthropic"]

__all__ = [
    "Api",
    "ContextOverflow",
    "ErrorResponse",
    "FakeLLMServer",
    "RawResponse",
    "RecordedRequest",
    "Reply",
    "Scripted",
]


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful completion: text, tool calls (possibly both) and the usage to report.

    ``stop_reason`` defaults to the API's own value: ``tool_calls``/``tool_use``
    when there are tool calls, else ``stop``/``end_turn``.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 12
    output_tokens: int = 3
    stop_reason: str | None = None
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """An HTTP error rendered in the receiving API's error shape (e.g. 401, 429, 500, 529).

    ``code`` fills OpenAI's ``error.code``; ``headers`` are sent as given, so a
    rate limit is ``ErrorResponse(429, headers={"Retry-After": "0.2"})``.
    """

    status: int
    message: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    code: str | None = None
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class ContextOverflow:
    """The API's real "prompt does not fit the context window" 400 error."""

    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A response sent verbatim: ``body`` is JSON-encoded unless it is already ``str``."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0


Scripted = Reply | ErrorResponse | ContextOverflow | RawResponse


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received; ``body`` is the decoded JSON, headers lower-cased."""

    api: Api
    path: str
    headers: Mapping[str, str]
    body: dict[str, Any]
    received_at: float
    """:func:`time.monotonic` on arrival, to measure how long a client waited between tries."""


class FakeLLMServer:
    """An aiohttp server on an ephemeral 127.0.0.1 port answering from a script.

    Responses are consumed first in, first out, whichever API asks; every
    request with a JSON object body is recorded, including those answered with
    an error.  Use it as an async context manager; :meth:`close` is safe to
    call twice.
    """

    def __init__(self, *, default: Scripted = Reply("ok")) -> None:
        self.default: Scripted = default
        """What to answer when the script is empty; may be replaced at any time."""
        self.requests: list[RecordedRequest] = []
        self._script: deque[Scripted] = deque()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._stopping = asyncio.Event()

    async def __aenter__(self) -> FakeLLMServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Bind 127.0.0.1 on a free port and start answering."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._openai)
        app.router.add_post("/v1/messages", self._anthropic)
        # A short shutdown_timeout so close() does not wait out a long scripted delay.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = site.port

    async def close(self) -> None:
        """Stop the server, cutting off any request still waiting out its delay."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            self._stopping.set()
            await asyncio.sleep(0.05)  # the released requests answer and close
            await runner.cleanup()

    @property
    def port(self) -> int:
        """The bound port; 0 before :meth:`start`."""
        return self._port

    @property
    def openai_base_url(self) -> str:
        """The ``base_url`` for an OpenAI-compatible client (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The ``base_url`` for an Anthropic client (the SDK appends ``/v1/messages``)."""
        return f"http://127.0.0.1:{self._port}"

    def script(self, *responses: Scripted) -> None:
        """Queue responses for the next requests, in order, after any already queued."""
        self._script.extend(responses)

    @property
    def pending(self) -> int:
        """How many scripted responses have not been served yet."""
        return len(self._script)

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._serve("openai", request)

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._serve("anthropic", request)

    async def _serve(self, api: Api, request: web.Request) -> web.StreamResponse:
        received_at = time.monotonic()
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _error(api, 400, "request body must be a JSON object")
        self.requests.append(
            RecordedRequest(
                api=api,
                path=request.path,
                headers={k.lower(): v for k, v in request.headers.items()},
                body=body,
                received_at=received_at,
            )
        )
        missing = [k for k in _REQUIRED[api] if k not in body]
        if missing:
            return _error(api, 400, f"{missing[0]}: Field required")
        if body.get("stream"):
            return _error(api, 400, "the fake LLM server does not stream")

        scripted = self._script.popleft() if self._script else self.default
        if scripted.delay > 0:
            # close() ends every delay at once: each request then finishes as a handler
            # normally does, closing its connection (a client that died meanwhile, its
            # process killed, included) instead of leaving it to be cut off.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), scripted.delay)
        model = str(body["model"])
        n = next(self._ids)
        match scripted:
            case Reply():
                if api == "openai":
                    return web.json_response(_openai_reply(scripted, model, n))
                return web.json_response(_anthropic_reply(scripted, model, n))
            case ErrorResponse():
                return _error(
                    api, scripted.status, scripted.message, scripted.code, scripted.headers
                )
            case ContextOverflow():
                if api == "openai":
                    return _error(api, 400, _OPENAI_OVERFLOW, "context_length_exceeded")
                return _error(api, 400, _ANTHROPIC_OVERFLOW)
            case RawResponse():
                text = (
                    scripted.body if isinstance(scripted.body, str) else json.dumps(scripted.body)
                )
                return web.Response(
                    status=scripted.status,
                    text=text,
                    content_type="application/json",
                    headers=dict(scripted.headers),
                )
        assert_never(scripted)


_REQUIRED: dict[Api, tuple[str, ...]] = {
    "openai": ("model", "messages"),
    "anthropic": ("model", "messages", "max_tokens"),
}

# The real providers' wording, so overflow detection is tested against what they send.
_OPENAI_OVERFLOW = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in "
    "9120 tokens. Please reduce the length of the messages."
)
_ANTHROPIC_OVERFLOW = "prompt is too long: 209137 tokens > 200000 maximum"

_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_denied",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_OPENAI_ERROR_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_DEFAULT_MESSAGES = {
    400: "Invalid request.",
    401: "Incorrect API key provided.",
    403: "You are not allowed to use this model.",
    404: "The model does not exist or you do not have access to it.",
    413: "Request exceeds the maximum allowed number of bytes.",
    429: "Rate limit reached; please try again later.",
    529: "Overloaded",
}


def _error(
    api: Api,
    status: int,
    message: str = "",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    message = message or _DEFAULT_MESSAGES.get(status, "The server had an error.")
    body: dict[str, Any]
    if api == "openai":
        body = {
            "error": {
                "message": message,
                "type": _OPENAI_ERROR_TYPES.get(status, "server_error"),
                "param": None,
                "code": code if code is not None else _OPENAI_ERROR_CODES.get(status),
            }
        }
    else:
        body = {
            "type": "error",
            "error": {"type": _ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message},
        }
    return web.json_response(body, status=status, headers=dict(headers or {}))


def _openai_reply(reply: Reply, model: str, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in reply.tool_calls
        ]
    finish = reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": reply.input_tokens,
            "completion_tokens": reply.output_tokens,
            "total_tokens": reply.input_tokens + reply.output_tokens,
        },
    }


def _anthropic_reply(reply: Reply, model: str, n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    content.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in reply.tool_calls
    )
    return {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }
