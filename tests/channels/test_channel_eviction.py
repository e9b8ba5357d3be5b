"""An evicted channel gives its memory back when it is evicted, not at the cyclic garbage
collector's next full pass (which a runtime defers while messages arrive)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

from bot.runtime import Runtime
from tests.helpers import inbound
from tierbot.config import Config
from tierbot.testing.scripted import ScriptedLLM


async def test_an_evicted_channel_is_freed_without_the_cyclic_collector(
    make_config: Callable[..., Config],
) -> None:
    """Channels that answered, compacted and went idle are evicted; with the cyclic
    collector switched off, each one's actor, history and compactor are freed at once."""
    llm = ScriptedLLM(chat_reply="ok")
    async with Runtime.open(make_config(), llm=llm) as rt:
        keys = [f"chat:evict{i}" for i in range(3)]
        for n in range(3):
            for key in keys:
                assert (await rt.submit(inbound(key, f"message {n}", pid=f"{key}-{n}"))).accepted
        await rt.drain()
        assert rt.registry.actors[keys[0]].ctx.items  # it answered and holds history
        await rt.registry.actors[keys[0]].force_compaction()
        await rt.drain()
        parts = [
            weakref.ref(part)
            for actor in (rt.registry.actors[k] for k in keys)
            for part in (actor, actor.history, actor.compaction, actor.turns, actor.compactor)
        ]
        gc.collect()
        gc.disable()
        try:
            evicted = await rt.registry.evict_idle(0.0)
            assert sorted(evicted) == keys
            alive = [r() for r in parts if r() is not None]
            assert alive == []
        finally:
            gc.enable()
