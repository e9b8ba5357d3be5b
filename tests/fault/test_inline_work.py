"""Work the offline provider and embedder do on the event loop (a young conversation's
short prompt, a short memory) fails as loudly as the same work in a worker thread: the
message is stored, the person is answered, and the failure is logged at error level."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from structlog.testing import capture_logs

from bot.runtime import Runtime
from memory_graph import HashingEmbedder
from tests.helpers import inbound
from tierbot.config import Config
from tierbot.errors import LLMError
from tierbot.llm.base import ChatMessage, ToolCall
from tierbot.llm.offline import OfflineProvider
from tierbot.messages import Role

CH = "chat:1"
MEMORY = {"memory": {"enabled": True}}


class _BrokenOffline(OfflineProvider):
    def _chat(
        self, messages: Sequence[ChatMessage], tools: set[str], max_tokens: int
    ) -> tuple[str, list[ToolCall]]:
        raise LLMError("the offline model broke", provider="offline")


class _BrokenEmbedder(HashingEmbedder):
    def embed(self, texts: Sequence[str]) -> Any:
        raise RuntimeError("embedder down")


async def _user_ids(rt: Runtime) -> list[str]:
    return [m.platform_id async for m in rt.store.export(CH) if m.role is Role.USER]


@pytest.mark.parametrize("said", ["short", "long"])
async def test_a_model_failure_on_either_path_is_stored_answered_and_logged(
    make_config: Callable[..., Config], said: str
) -> None:
    text = "what did we decide?" if said == "short" else "what did we decide? " + "x " * 1500
    async with Runtime.open(make_config({}), llm=_BrokenOffline()) as rt:
        with capture_logs() as logs:
            await rt.submit(inbound(CH, text, pid="q1"))
            await rt.drain()
        assert await _user_ids(rt) == ["q1"]
        assert rt.outbox.sent[-1].text == "Sorry, I could not reach the model (LLMError)."
        failed = [e for e in logs if e["event"] == "channel.llm_failed"]
        assert failed and failed[0]["log_level"] == "error"
        assert "the offline model broke" in failed[0]["error"]


async def test_an_embedder_failing_on_the_loop_is_not_acknowledged_as_saved(
    make_config: Callable[..., Config],
) -> None:
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        rt.memory.graph.embedder = _BrokenEmbedder()
        with capture_logs() as logs:
            await rt.submit(inbound(CH, "Remember that my locker code is 4411.", pid="r1"))
            await rt.drain()
        assert await _user_ids(rt) == ["r1"]
        reply = rt.outbox.sent[-1].text
        assert reply.startswith("I could not save that: the memory store failed"), reply
        assert "Noted" not in reply
        failed = [e for e in logs if e["event"] == "channel.memory_tool_failed"]
        assert failed and failed[0]["log_level"] == "error"
        assert "embedder down" in failed[0]["error"]


async def test_what_a_forget_says_holds_instead_is_not_acknowledged_when_its_save_fails(
    make_config: Callable[..., Config],
) -> None:
    """ "actually forget the Hague Blue, we're going for Sulking Room Pink …" saves the
    new choice and forgets the old one.  With the embedder failing, both fail: the reply
    says so of each (never "Noted" nor "Done"), the failure is logged at error level, and
    the message is stored."""
    async with Runtime.open(make_config(MEMORY), llm=OfflineProvider()) as rt:
        assert rt.memory is not None
        await rt.submit(inbound(CH, "living room paint is Farrow & Ball Hague Blue", pid="p1"))
        await rt.drain()
        rt.memory.graph.embedder = _BrokenEmbedder()
        line = "actually forget the Hague Blue, we're going for Sulking Room Pink in the lounge"
        with capture_logs() as logs:
            await rt.submit(inbound(CH, line, pid="f1"))
            await rt.drain()
        assert await _user_ids(rt) == ["p1", "f1"]
        reply = rt.outbox.sent[-1].text
        assert "I could not save that: the memory store failed" in reply, reply
        assert "Noted" not in reply and "Sulking Room Pink" not in reply, reply
        failed = [e for e in logs if e["event"] == "channel.memory_tool_failed"]
        assert failed and failed[0]["log_level"] == "error"
        assert "I could not forget that: the memory store failed" in reply, reply
        assert "Done" not in reply, reply
