"""One retry-and-backoff helper, shared by LLM calls, reconnects and rate-limit waits."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import structlog

from tierbot.errors import RateLimitedError, TransientLLMError

T = TypeVar("T")
log = structlog.get_logger("tierbot.retry")


@dataclass(frozen=True, slots=True)
class Backoff:
    """Capped exponential backoff with jitter: base * 2**attempt, at most ``cap`` seconds."""

    base: float = 1.0
    cap: float = 30.0
    jitter: float = 0.1

    def delay(self, attempt: int) -> float:
        d = min(self.cap, self.base * (2**attempt))
        return d * (1.0 + random.uniform(-self.jitter, self.jitter)) if self.jitter else d


async def retry_call(
    call: Callable[[], Awaitable[T]],
    *,
    retries: int,
    backoff: Backoff,
    what: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run ``call``; retry rate limits and transient errors at most ``retries`` times.

    A rate limit waits the ``retry_after`` the provider asked for (capped at the
    backoff cap); a transient error waits the backoff delay.  Any other error, or
    the last failure, propagates unchanged.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except RateLimitedError as exc:
            if attempt >= retries:
                raise
            wait = exc.retry_after if exc.retry_after is not None else backoff.delay(attempt)
            wait = min(max(wait, 0.0), backoff.cap)
            log.warning("retry.rate_limited", what=what, attempt=attempt + 1, wait=wait)
        except TransientLLMError as exc:
            if attempt >= retries:
                raise
            wait = backoff.delay(attempt)
            log.warning(
                "retry.transient", what=what, attempt=attempt + 1, wait=wait, error=str(exc)
            )
        attempt += 1
        await sleep(wait)


async def retry_forever(
    call: Callable[[], Awaitable[T]],
    *,
    backoff: Backoff,
    what: str,
    fatal: tuple[type[BaseException], ...] = (),
    on_failure: Callable[[int, float, Exception], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run ``call`` until it succeeds, waiting ``backoff.delay(attempt)`` between tries.

    For reconnects, where "unreachable for now" may last hours: there is no
    attempt limit, only the backoff cap.  An error of a ``fatal`` type
    propagates at once; every other ``Exception`` is reported to
    ``on_failure(attempt, wait, error)`` (attempt counts from 1) and retried.
    Cancel the awaiting task to give up.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except fatal:
            raise
        except Exception as exc:
            wait = backoff.delay(attempt)
            attempt += 1
            log.warning(
                "retry.reconnect",
                what=what,
                attempt=attempt,
                wait=round(wait, 2),
                error=str(exc) or repr(exc),
            )
            if on_failure is not None:
                on_failure(attempt, wait, exc)
        await sleep(wait)
