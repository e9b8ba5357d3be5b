"""What the OpenAI and Anthropic providers share: the API key lookup, Retry-After parsing."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from tierbot.config import LLMConfig
from tierbot.errors import FatalLLMError

# Local servers (Ollama, llama.cpp, vLLM without --api-key) ignore the key, but the SDKs
# refuse to start without one.
PLACEHOLDER_KEY = "not-needed"


def api_key_from_env(config: LLMConfig, environ: Mapping[str, str], provider: str) -> str:
    """The key from the variable ``[llm] api_key_env`` names; a placeholder when none is named,
    a FatalLLMError naming the variable when it is unset."""
    if not config.api_key_env:
        return PLACEHOLDER_KEY
    key = environ.get(config.api_key_env, "")
    if not key:
        raise FatalLLMError(
            f"{provider}: environment variable {config.api_key_env} (named by [llm] "
            "api_key_env) is unset or empty: export your API key in it",
            provider=provider,
        )
    return key


def clip(value: object, limit: int = 500) -> str:
    """``value`` as text, cut to ``limit`` characters for error messages."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``Retry-After`` seconds/date."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            seconds = float(millis) / 1000.0
        except ValueError:
            pass
        else:
            return seconds if math.isfinite(seconds) and seconds >= 0 else None
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
