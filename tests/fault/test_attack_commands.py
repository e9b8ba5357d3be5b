"""A command argument the parser did not expect ("/history ²") must be answered, never end
the console's input loop (a hung `tierbot chat`) or leave a platform user unanswered."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from bot.adapters.console import ConsoleAdapter
from bot.adapters.discord import DiscordAdapter
from bot.runtime import Runtime
from tests.helpers import wait_for
from tierbot.config import Config, ConsoleAdapterConfig, DiscordAdapterConfig
from tierbot.messages import Role
from tierbot.testing import FakeDiscord
from tierbot.testing.scripted import ScriptedLLM

REPLY = "model reply"
ODD_ARGS = ("²", "9" * 5000, "١٢", "0")


async def test_history_with_odd_number_does_not_stop_the_console(
    make_config: Callable[..., Config],
) -> None:
    """`/history ²`, a 5,000-digit N, Arabic-Indic digits and 0 are each answered with
    the usage line naming the bad argument, and the line typed after them is stored and
    answered."""
    out = io.StringIO()
    typed = "first words\n" + "".join(f"/history {a}\n" for a in ODD_ARGS) + "still here\n"
    console = ConsoleAdapter(
        ConsoleAdapterConfig(), channel="console:local", stdin=io.StringIO(typed), stdout=out
    )
    async with Runtime.open(make_config(), llm=ScriptedLLM(chat_reply=REPLY)) as rt:
        assert await rt.start_adapter(console)
        await wait_for(lambda: console.finished.is_set())
        await rt.drain()
        assert console.failure is None
        printed = out.getvalue()
        assert printed.count("is not a number of messages. Usage: /history") == len(ODD_ARGS)
        assert "[live] you: first words" not in printed
        assert f"tierbot> {REPLY}" in printed
        texts = [m.text async for m in rt.store.export("console:local") if m.role is Role.USER]
        assert texts == ["first words", "still here"]


@pytest.mark.slow
async def test_history_with_odd_number_on_discord_is_answered(
    make_config: Callable[..., Config],
) -> None:
    """ "@bot /history ²" on Discord gets the usage line in the channel, not silence."""
    async with FakeDiscord() as fd:
        fd.add_guild("111", "home", {"1001": "general"})
        cfg = DiscordAdapterConfig(enabled=True, api_base=fd.api_base, gateway_url=fd.gateway_url)
        adapter = DiscordAdapter(
            cfg, environ={"DISCORD_TOKEN": fd.token}, guild_ready_timeout=0.05, ready_timeout=5.0
        )
        async with Runtime.open(make_config(), llm=ScriptedLLM(chat_reply=REPLY)) as rt:
            assert await rt.start_adapter(adapter)
            await fd.inject_message(
                "1001", f"<@{fd.bot_id}> /history ²", guild_id="111", mentions=[fd.bot_user]
            )
            await fd.wait_for(lambda: fd.posted("1001"))
            assert fd.posted("1001")[0].startswith("'²' is not a number of messages. Usage:")


async def test_console_arguments_out_of_range_get_a_usage_line_and_look_alikes_a_hint(
    make_config: Callable[..., Config],
) -> None:
    """`/history 201` (over the cap) and `/forget --author` (no user) are refused with
    their usage line, not served or looked up as an id; `/stauts` is talk, sent to the
    bot, with a note saying it is no command; `/quit now` quits."""
    out = io.StringIO()
    typed = (
        "/history 201\n/forget --author\n/stauts\n/Remember that my bike is blue\n"
        "/quit now\nnever read\n"
    )
    console = ConsoleAdapter(
        ConsoleAdapterConfig(), channel="console:local", stdin=io.StringIO(typed), stdout=out
    )
    config = make_config({"memory": {"enabled": True}})
    async with Runtime.open(config, llm=ScriptedLLM(chat_reply=REPLY)) as rt:
        assert await rt.start_adapter(console)
        await wait_for(lambda: console.finished.is_set())
        await rt.drain()
        printed = out.getvalue()
        assert "201 is more than 200 messages. Usage: /history" in printed
        assert "Usage: /forget MEMORY_ID  or  /forget --author USER_ID" in printed
        assert "No memory with id" not in printed
        assert "(/stauts is not a command, so it goes to the bot as a message;" in printed
        assert "Bye." in printed
        texts = [m.text async for m in rt.store.export("console:local") if m.role is Role.USER]
        assert "(/Remember is not a command" not in printed  # it is a memory request
        assert texts == ["/stauts", "/Remember that my bike is blue"]
