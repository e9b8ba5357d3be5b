"""Build the configured provider: ``offline`` (default), ``openai`` or ``anthropic``."""

from __future__ import annotations

from collections.abc import Mapping

from tierbot.config import LLMConfig
from tierbot.llm.base import LLMProvider
from tierbot.tokens import TokenCounter


def make_provider(
    config: LLMConfig, counter: TokenCounter, environ: Mapping[str, str]
) -> LLMProvider:
    """The provider ``config.provider`` names; real SDKs are imported only when chosen."""
    if config.provider == "openai":
        from tierbot.llm.openai_provider import OpenAIProvider

        return OpenAIProvider(config, environ)
    if config.provider == "anthropic":
        from tierbot.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider(config, environ)
    from tierbot.llm.offline import OfflineProvider

    return OfflineProvider(counter)
