"""Small builders shared by the channel and compaction tests."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence

from bot.runtime import Runtime
from tierbot.llm.base import ChatMessage
from tierbot.messages import InboundMessage

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


def pairs_ok(messages: Sequence[ChatMessage]) -> bool:
    """Every tool result follows its call and every call has its result."""
    open_ids: set[str] = set()
    for m in messages:
        if m.role == "tool":
            if m.tool_call_id not in open_ids:
                return False
            open_ids.discard(m.tool_call_id)
            continue
        if open_ids:
            return False
        open_ids = {c.id for c in m.tool_calls}
    return not open_ids


def register_fetch(rt: Runtime, filler: str) -> None:
    """An operator tool ``fetch(page)`` answering ``"page N: " + filler``, registered in
    ``rt`` (with the shared queue: in the process that runs the task, as an operator's
    plugin code would be in every process)."""

    @rt.registry.deps.tasks.tools.tool(
        description="Fetch one page of the report.",
        parameters={
            "type": "object",
            "properties": {"page": {"type": "integer"}},
            "required": ["page"],
            "additionalProperties": False,
        },
    )
    async def fetch(page: int) -> str:
        return f"page {page}: {filler}"


#: A newcomer's chat of a few words a line (compaction over it must still free room).
SMALL_TALK = (
    "hi",
    "my name is Sam",
    "I live in Leeds",
    "what's my name?",
    "I like tea",
    "my sister is called Jo",
    "where do I live?",
    "ok thanks",
    "remember that my bike is red",
    "what colour is my bike?",
    "cool",
    "I work at a bakery",
    "what do I like?",
    "bye",
)
