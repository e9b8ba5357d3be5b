"""The LLM provider seam: one protocol, provider-neutral message and tool types.

Providers translate :class:`ChatMessage` lists and :class:`ToolSpec` lists to
their wire format, normalise tool calls back to :class:`ToolCall`, and map
failures onto the typed errors of :mod:`tierbot.errors` (context overflow, rate
limited, transient, fatal).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

ChatRole = Literal["system", "user", "assistant", "tool"]
Purpose = Literal["chat", "summary", "branch", "worker"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to run one tool; ``arguments`` is already JSON-decoded."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message sent to a model.

    ``name`` is the speaker of a user message in a group chat; an assistant
    message may carry ``tool_calls``; a ``tool`` message answers the call
    ``tool_call_id``.
    """

    role: ChatRole
    content: str
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    #: When a user message was sent (unix seconds), for providers that can use it.
    sent_at: float | None = None
    #: ``content``'s tokens with the message framing, when the caller counted them
    #: already (a channel counts every message once, as it enters): the offline
    #: provider's usage is read from it.  Never sent to a model.
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: its name, what it does, a JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Completion:
    """A model's answer: text, tool calls (possibly both), and reported usage if any."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    stop_reason: str = ""


@runtime_checkable
class LLMProvider(Protocol):
    """What the core needs from a model.

    ``complete`` raises only :class:`~tierbot.errors.LLMError` subclasses.  ``purpose``
    lets a provider pick a model per job (``[llm] summary_model``) and lets the
    offline provider choose its behaviour; real providers may ignore it.
    """

    name: str

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        max_tokens: int = 1024,
        purpose: Purpose = "chat",
    ) -> Completion: ...

    async def aclose(self) -> None: ...
