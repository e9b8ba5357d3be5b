"""tierbot's exception tree.

Every error tierbot raises on purpose derives from :class:`TierbotError`; the
leaves carry structured fields so callers (the CLI, an adapter, a worker) can
react without parsing messages, and each message says what to do next::

    TierbotError
    ├── ConfigError                 a config file or override is invalid (carries .problems)
    ├── TokenizerError              no tiktoken encoding could be loaded
    ├── StoreError                  the SQLite store cannot be opened or written
    │   └── StoreLockedError        another process is the store's writer (.holder says which)
    ├── LLMError                    a provider call failed
    │   ├── ContextOverflowError    the request did not fit the model's context window
    │   ├── RateLimitedError        the provider asked us to slow down (.retry_after seconds)
    │   ├── TransientLLMError       a 5xx, a timeout or a dropped connection: retried with backoff
    │   └── FatalLLMError           bad credentials, unknown model, malformed request: not retried
    ├── ToolError                   a tool was called with bad arguments; returned to the model
    └── AdapterError                a chat platform refused to start or to deliver
        └── FatalAdapterError       a refused token or a missing setting: retrying cannot fix it
"""

from __future__ import annotations

from dataclasses import dataclass


class TierbotError(Exception):
    """Root of every error tierbot raises deliberately."""


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One invalid value: where it is and what is wrong with it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(TierbotError):
    """The configuration is invalid; ``problems`` lists every bad key path."""

    def __init__(self, source: str, problems: list[ConfigProblem]) -> None:
        self.source = source
        self.problems = problems
        lines = [f"{source}: {p}" for p in problems]
        super().__init__("\n".join(lines))


class TokenizerError(TierbotError):
    """No tiktoken encoding could be loaded (the packaged copy is missing or corrupt)."""


class StoreError(TierbotError):
    """The SQLite store could not be opened, migrated or written."""


class StoreLockedError(StoreError):
    """Another process holds the store's writer lock; ``holder`` describes it (may be empty)."""

    def __init__(self, message: str, *, holder: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.holder = dict(holder or {})


class NotOwnerError(TierbotError):
    """In a cluster, a channel another live process owns: its actor runs there."""

    def __init__(self, channel: str) -> None:
        super().__init__(
            f"channel {channel} is served by another process of the cluster "
            "(`tierbot status` names it)"
        )
        self.channel = channel


class LLMError(TierbotError):
    """A call to an LLM provider failed."""

    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status


class ContextOverflowError(LLMError):
    """The request exceeded the model's context window; compact and retry."""


class RateLimitedError(LLMError):
    """The provider rate-limited us; wait ``retry_after`` seconds before retrying."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = 429,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status=status)
        self.retry_after = retry_after


class TransientLLMError(LLMError):
    """A temporary failure (5xx, timeout, connection reset); safe to retry."""


class FatalLLMError(LLMError):
    """A failure retrying cannot fix: credentials, model name, malformed request."""


class ToolError(TierbotError):
    """A tool was called with invalid arguments; the message is shown to the model."""

    def __init__(self, message: str, *, tool: str = "", argument: str = "") -> None:
        super().__init__(message)
        self.tool = tool
        self.argument = argument


class AdapterError(TierbotError):
    """A chat platform adapter failed to start or to deliver a message."""

    def __init__(self, message: str, *, adapter: str = "") -> None:
        super().__init__(message)
        self.adapter = adapter


class FatalAdapterError(AdapterError):
    """An adapter cannot start until the operator fixes something (``setting`` names it).

    A refused token, a missing environment variable, a refused intent: retrying
    would fail the same way, so ``tierbot run`` stops (exit 1) instead of waiting.
    Any other :class:`AdapterError` at startup is transient and retried.
    """

    def __init__(self, message: str, *, adapter: str = "", setting: str = "") -> None:
        super().__init__(message, adapter=adapter)
        self.setting = setting
