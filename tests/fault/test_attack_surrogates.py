"""Text SQLite cannot store as it arrived (lone surrogates: bytes that are not UTF-8 typed
into the console, or escapes in a crafted Slack payload) is stored repaired, never lost."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from bot.adapters.console import ConsoleAdapter
from bot.adapters.slack import SlackAdapter
from bot.runtime import Runtime
from tests.helpers import wait_for
from tierbot.config import Config, ConsoleAdapterConfig, SlackAdapterConfig
from tierbot.messages import Role
from tierbot.testing import FakeSlack
from tierbot.testing.scripted import ScriptedLLM

REPLY = "model reply"


async def _user_texts(rt: Runtime, channel: str) -> list[str]:
    return [m.text async for m in rt.store.export(channel) if m.role is Role.USER]


async def test_console_line_with_undecodable_bytes_is_stored_and_chat_goes_on(
    make_config: Callable[..., Config],
) -> None:
    """ "caf\\xe9" read from a Latin-1 pipe (a lone surrogate in Python) is stored with U+FFFD,
    answered, and the line after it is stored and answered too."""
    latin1 = b"caf\xe9 au lait\n".decode("utf-8", "surrogateescape")
    out = io.StringIO()
    console = ConsoleAdapter(
        ConsoleAdapterConfig(),
        channel="console:local",
        stdin=io.StringIO(latin1 + "after\n"),
        stdout=out,
    )
    async with Runtime.open(make_config(), llm=ScriptedLLM(chat_reply=REPLY)) as rt:
        assert await rt.start_adapter(console)
        await wait_for(lambda: console.finished.is_set())
        await rt.drain()
        assert console.failure is None
        assert await _user_texts(rt, "console:local") == ["caf\ufffd au lait", "after"]
        assert f"tierbot> {REPLY}" in out.getvalue()


@pytest.mark.slow
async def test_slack_message_with_lone_surrogate_is_stored(
    make_config: Callable[..., Config],
) -> None:
    """A Slack event whose text and user name carry a lone surrogate escape is acknowledged
    and stored with U+FFFD, and the next message of the channel is stored too."""
    async with FakeSlack(team_id="T1") as fs:
        fs.users.update({"U100": "al\ud800ice"})
        cfg = SlackAdapterConfig(enabled=True, api_base_url=fs.api_base_url)
        env = {
            "SLACK_BOT_TOKEN": fs.bot_token,
            "SLACK_APP_TOKEN": fs.app_token,
            "SLACK_SIGNING_SECRET": "s3cret",
        }
        adapter = SlackAdapter(cfg, environ=env, ping_interval=1.0, connect_timeout=5.0)
        async with Runtime.open(make_config(), llm=ScriptedLLM(chat_reply=REPLY)) as rt:
            assert await rt.start_adapter(adapter)
            for text in ("bad \ud800 text", "next message"):
                envelope = await fs.send_event(fs.message("C100", text, user="U100"))
                await fs.wait_for(lambda e=envelope: e in fs.acks)  # type: ignore[misc]
            await rt.drain()
            assert await _user_texts(rt, "slack:T1:C100") == ["bad \ufffd text", "next message"]
