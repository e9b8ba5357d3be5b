"""A small window: the system prompt and tool specs take most of it, the conversation the rest."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from bot.runtime import Runtime
from tests.helpers import SMALL_TALK, inbound
from tierbot.config import Config
from tierbot.errors import ConfigError
from tierbot.llm.offline import OfflineProvider

CH = "console:local"
CHAT = (
    *SMALL_TALK[:10],
    "We shipped release 4.2 of the billing service on Tuesday after the migration finished.",
    "The meeting with Dana about the Q3 roadmap moved to Friday at 10am in room B.",
    "Can you remind me what we decided about the cache eviction policy?",
    "My flight to Lisbon is TP1351 on 2026-12-03, seat 14C.",
)


async def test_summaries_are_merged_not_truncated_when_the_fixed_prompt_fills_most_of_the_window(
    make_config: Callable[..., Config],
) -> None:
    """In a 1,500-token window whose system prompt and tools take ~930 tokens, 60 turns of
    chat stay within the window, summaries are merged into meta-summaries and emergency
    truncation stays rare: summaries were allowed a quarter of the whole window, which
    alone put usage past the aggressive threshold, and most turns ended in an emergency."""
    cfg = make_config({"memory": {"enabled": True}, "defaults": {"context_window": 1500}})
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        for i in range(60):
            await rt.submit(inbound(CH, CHAT[i % len(CHAT)], pid=f"console-{i}", author="you"))
            await rt.drain()
        status = await rt.command(inbound(CH, "/status"), is_admin=True)
    assert status is not None
    peak = float(re.search(r"peak usage ([\d.]+)%", status)[1])  # type: ignore[index]
    counts = {k: int(n) for k, n in re.findall(r"(\w+) (\d+)", status.split("compactions:")[1])}
    assert peak <= 100.0, status
    assert counts["emergency"] <= 3, status
    assert counts["meta"] > 0, status


async def test_a_window_the_fixed_prompt_nearly_fills_is_refused_at_start_naming_the_key(
    make_config: Callable[..., Config],
) -> None:
    """A 1,000-token window whose system prompt and tools take ~930 tokens cannot hold a
    conversation (every message was an emergency, usage passed 100 %): the runtime refuses
    to start, naming the default's key, a too-small override's, and the smallest window."""
    cfg = make_config(
        {
            "memory": {"enabled": True},
            "defaults": {"context_window": 1000},
            "channels": [
                {"match": "slack:*", "context_window": 1500},
                {"match": "discord:*", "context_window": 1200},
            ],
        }
    )
    with pytest.raises(ConfigError) as refused:
        async with Runtime.open(cfg, llm=OfflineProvider()):
            pass
    paths = [p.path for p in refused.value.problems]
    assert paths == ["defaults.context_window", "channels[1].context_window"], paths
    message = str(refused.value)
    assert "1000 tokens leave the conversation too little room" in message, message
    assert re.search(r"set it to at least 14\d\d", message), message
