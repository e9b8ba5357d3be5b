"""Fault injection for commands: hostile or accidental "/" text, cross-workspace forgets,
silent /compact, and a DNS-rebinding page reading the ops endpoint."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest

from bot.adapters.console import ConsoleAdapter
from bot.adapters.discord import DiscordAdapter
from bot.adapters.fakes import FakeDiscord, FakeSlack
from bot.adapters.slack import SlackAdapter
from bot.config import Config, ConsoleAdapterConfig, DiscordAdapterConfig, SlackAdapterConfig
from bot.llm.scripted import ScriptedLLM
from bot.messages import Role
from bot.runtime import Runtime
from tests.helpers import wait_for

GUILD, CHANNEL, TEAM, SLACK_CHANNEL = "111", "1001", "T1", "C100"
ALICE_DISCORD, ALICE_SLACK = "100", "U100"
#: Text people type that starts with "/" but is no command, and a known command said in
#: passing: all of it is conversation unless the bot is addressed.
SLASH_TEXTS = (
    "/etc/hosts is where the names live",
    "/r/python has a thread about it",
    "/shrug",
    "/status of the deploy is green",
)
REPLY = "model reply"


def _discord(fake: FakeDiscord) -> DiscordAdapter:
    cfg = DiscordAdapterConfig(enabled=True, api_base=fake.api_base,
                               gateway_url=fake.gateway_url, admins=[ALICE_DISCORD])  # fmt: skip
    return DiscordAdapter(cfg, environ={"DISCORD_TOKEN": fake.token}, guild_ready_timeout=0.05,
                          ready_timeout=5.0)  # fmt: skip


def _slack(fake: FakeSlack) -> SlackAdapter:
    cfg = SlackAdapterConfig(enabled=True, api_base_url=fake.api_base_url, admins=[ALICE_SLACK])
    env = {"SLACK_BOT_TOKEN": fake.bot_token, "SLACK_APP_TOKEN": fake.app_token,
           "SLACK_SIGNING_SECRET": "s3cret"}  # fmt: skip
    return SlackAdapter(cfg, environ=env, ping_interval=1.0, connect_timeout=5.0)


async def _user_texts(rt: Runtime, channel: str) -> list[str]:
    return [m.text async for m in rt.store.export(channel) if m.role is Role.USER]


@pytest.mark.slow
async def test_slash_text_on_discord_is_stored_not_answered_as_a_command(
    make_config: Callable[..., Config],
) -> None:
    """On Discord, "/etc/hosts...", "/r/python", "/shrug" and an unaddressed "/status" are
    stored as conversation with no reply; "@bot /status" answers the status; "@bot /shrug"
    is conversation the model answers."""
    async with FakeDiscord() as fd:
        fd.add_guild(GUILD, "home", {CHANNEL: "general"})
        async with Runtime(make_config(), llm=ScriptedLLM(chat_reply=REPLY)) as rt:
            assert await rt.start_adapter(_discord(fd))
            for text in SLASH_TEXTS:
                await fd.inject_message(CHANNEL, text, guild_id=GUILD)
            await fd.inject_message(CHANNEL, f"<@{fd.bot_id}> /status", guild_id=GUILD,
                                    mentions=[fd.bot_user])  # fmt: skip
            await fd.wait_for(lambda: fd.posted(CHANNEL))
            await fd.inject_message(CHANNEL, f"<@{fd.bot_id}> /shrug", guild_id=GUILD,
                                    mentions=[fd.bot_user])  # fmt: skip
            await fd.wait_for(lambda: len(fd.posted(CHANNEL)) == 2)
            await rt.drain()
            key = f"discord:{GUILD}:{CHANNEL}"
            status, answer = fd.posted(CHANNEL)
            assert status.startswith(f"channel {key}\ncontext [")
            assert answer == REPLY
            assert await _user_texts(rt, key) == [*SLASH_TEXTS, "/shrug"]


@pytest.mark.slow
async def test_slash_text_on_slack_is_stored_not_answered_as_a_command(
    make_config: Callable[..., Config],
) -> None:
    """On Slack, the same "/" texts are stored as conversation with no reply; "@bot /status"
    answers the status; the platform's own slash command still runs it."""
    async with FakeSlack(team_id=TEAM) as fs:
        fs.users.update({ALICE_SLACK: "alice"})
        async with Runtime(make_config(), llm=ScriptedLLM(chat_reply=REPLY)) as rt:
            assert await rt.start_adapter(_slack(fs))
            for text in SLASH_TEXTS:
                envelope = await fs.send_event(fs.message(SLACK_CHANNEL, text, user=ALICE_SLACK))
                await fs.wait_for(lambda e=envelope: e in fs.acks)  # type: ignore[misc]
            await fs.send_event(fs.message(SLACK_CHANNEL, "<@UBOT> /status", user=ALICE_SLACK))
            await fs.wait_for(lambda: fs.posted(SLACK_CHANNEL))
            slash = await fs.send_slash_command("status", user=ALICE_SLACK, channel=SLACK_CHANNEL)
            await fs.wait_for(lambda: slash in fs.acks)
            await rt.drain()
            key = f"slack:{TEAM}:{SLACK_CHANNEL}"
            [status] = [p["text"] for p in fs.posted(SLACK_CHANNEL)]
            assert status.startswith(f"channel {key}\ncontext [")
            assert fs.ack_payloads[slash]["text"].startswith(f"channel {key}")
            assert await _user_texts(rt, key) == list(SLASH_TEXTS)


async def test_console_still_answers_help_and_keeps_slash_text_as_conversation(
    make_config: Callable[..., Config],
) -> None:
    """In the console /help is answered (not stored) and "/r/python" is stored and answered
    by the model."""
    out = io.StringIO()
    console = ConsoleAdapter(ConsoleAdapterConfig(), channel="console:local",
                             stdin=io.StringIO("/help\n/r/python is busy today\n"),
                             stdout=out)  # fmt: skip
    async with Runtime(make_config(), llm=ScriptedLLM(chat_reply=REPLY)) as rt:
        assert await rt.start_adapter(console)
        await wait_for(lambda: console.finished.is_set())
        await rt.drain()
        printed = out.getvalue()
        assert "Commands:\n  /status" in printed and f"tierbot> {REPLY}" in printed
        assert await _user_texts(rt, "console:local") == ["/r/python is busy today"]
