"""The reply cap a channel sends: max_reply_tokens, cut to the room its window leaves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from structlog.testing import capture_logs

from bot.runtime import Runtime
from branches import BRANCH_TOOL, SPAWN_TOOL, request_tokens
from tests.helpers import inbound
from tierbot.config import Config
from tierbot.testing.scripted import Call, ScriptedLLM
from tierbot.tokens import MIN_REPLY_TOKENS

CH = "test:1"
WINDOW = 1500


def settings() -> dict[str, Any]:
    """A 1,500-token window with the default 1,024-token reply cap."""
    return {"defaults": {"context_window": WINDOW, "system_prompt": "Be brief."}}


def text(tokens: int) -> str:
    """A message text that costs exactly ``tokens`` tokens in the history (with overhead)."""
    return "alpha " * (tokens - 5)


def prompt_tokens(rt: Runtime, call: Call) -> int:
    """What the request costs as a provider counts it: its messages and tool schemas."""
    specs = [t for t in (BRANCH_TOOL, SPAWN_TOOL) if t.name in call.tools]
    return request_tokens(rt.counter, call.messages, specs)


async def test_regression_the_reply_cap_never_takes_the_request_past_the_window(
    make_config: Callable[..., Config],
) -> None:
    """With room to spare the full max_reply_tokens (1,024) is asked for; once the prompt
    nears the top of a 1,500-token window, the cap sent is what the window has left, so
    prompt plus reply fit (1,024 on top used to go past the window, which OpenAI and
    Anthropic reject)."""
    llm = ScriptedLLM()
    async with Runtime.open(make_config(settings()), llm=llm) as rt:
        await rt.submit(inbound(CH, "hello", pid="q1"))
        await rt.drain()
        await rt.submit(inbound(CH, text(1000), pid="q2"))
        await rt.drain()
        assert [o.text for o in rt.outbox.sent] == ["ok", "ok"]
    roomy, full = [c for c in llm.calls if c.purpose == "chat"]
    assert roomy.max_tokens == 1024
    used = prompt_tokens(rt, full)
    assert used > WINDOW - 1024
    assert full.max_tokens == WINDOW - used


async def test_a_prompt_that_leaves_no_room_for_a_reply_is_not_sent_and_the_log_says_so(
    make_config: Callable[..., Config],
) -> None:
    """A message that leaves the window fewer than 16 tokens for the reply, and nothing
    older to set aside: no request goes to the model, the log names the shortfall and
    the person is told the conversation is too long."""
    llm = ScriptedLLM()
    with capture_logs() as logs:
        async with Runtime.open(make_config(settings()), llm=llm) as rt:
            actor = await rt.registry.actor(CH)
            await rt.submit(inbound(CH, text(WINDOW - actor.ctx.total - 10), pid="big"))
            await rt.drain()
            replies = [o.text for o in rt.outbox.sent]
    assert llm.count("chat") == 0
    assert replies == ["Sorry, this conversation is too long for the model right now."]
    short = [e for e in logs if e["event"] == "channel.no_room_for_reply"]
    assert len(short) == 2  # the first try, and the one after the emergency cut found nothing
    assert short[0]["log_level"] == "warning"
    assert short[0]["context_window"] == WINDOW
    assert WINDOW - short[0]["prompt_tokens"] < MIN_REPLY_TOKENS
