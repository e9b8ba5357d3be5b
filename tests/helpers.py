"""Small builders shared by the channel and compaction tests."""

from __future__ import annotations

import asyncio
import itertools

from bot.messages import InboundMessage
from bot.runtime import Runtime

_seq = itertools.count()


def inbound(
    channel: str = "test:1",
    text: str = "hello",
    *,
    pid: str | None = None,
    author: str = "alice",
    addressed: bool = True,
    dm: bool = False,
) -> InboundMessage:
    return InboundMessage(
        channel=channel,
        platform_id=pid or f"m{next(_seq)}",
        author_id=author,
        author_name=author,
        text=text,
        addressed=addressed,
        is_dm=dm,
    )


async def wait_for(predicate, timeout: float = 5.0) -> None:  # noqa: ASYNC109
    """Poll ``predicate`` until true; fail the test after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


async def export_ids(rt: Runtime, channel: str) -> list[str]:
    return [m.platform_id async for m in rt.store.export(channel)]
