"""Build the configured provider: ``offline`` (default), ``openai`` or ``anthropic``."""

from __future__ import annotations

from collections.abc import Mapping

from bot.config import LLMConfig
from bot.llm.base import LLMProvider
from bot.tokens import TokenCounter


def make_provider(
    config: LLMConfig, counter: TokenCounter, environ: Mapping[str, str]
) -> LLMProvider:
    """The provider ``config.provider`` names; real SDKs are imported only when chosen."""
    if config.provider == "openai":
        from bot.llm.openai_provider import OpenAIProvider

        return OpenAIProvider(config, environ)
    if config.provider == "anthropic":
        from bot.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider(config, environ)
    from bot.llm.offline import OfflineProvider

    return OfflineProvider(counter)
