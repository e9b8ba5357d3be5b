"""The runtime serving Discord and Slack at once through the real adapters and fakes."""

from __future__ import annotations

import pytest

from bot.adapters.discord import DiscordAdapter
from bot.adapters.slack import SlackAdapter
from bot.runtime import Runtime
from tierbot.config import DiscordAdapterConfig, SlackAdapterConfig
from tierbot.errors import FatalAdapterError
from tierbot.testing import FakeDiscord, FakeSlack
from tierbot.testing.scripted import ScriptedLLM

pytestmark = pytest.mark.slow

GUILD, CHANNEL, TEAM, SLACK_CHANNEL, DM = "111", "1001", "T1", "C100", "D200"


def discord(fake: FakeDiscord, token: str) -> DiscordAdapter:
    cfg = DiscordAdapterConfig(enabled=True, api_base=fake.api_base, gateway_url=fake.gateway_url)
    return DiscordAdapter(
        cfg, environ={"DISCORD_TOKEN": token}, guild_ready_timeout=0.05, ready_timeout=5.0
    )


def slack(fake: FakeSlack) -> SlackAdapter:
    cfg = SlackAdapterConfig(enabled=True, api_base_url=fake.api_base_url)
    env = {
        "SLACK_BOT_TOKEN": fake.bot_token,
        "SLACK_APP_TOKEN": fake.app_token,
        "SLACK_SIGNING_SECRET": "s3cret",
    }
    return SlackAdapter(cfg, environ=env, ping_interval=1.0, connect_timeout=5.0)


async def test_one_process_answers_discord_and_slack_and_keeps_histories_apart(
    make_config,
) -> None:
    """A Discord mention and a Slack DM are stored, answered on their own platform, and land
    in two separate channels."""
    llm = ScriptedLLM(chat_reply="hello from tierbot")
    async with FakeDiscord() as fd, FakeSlack(team_id=TEAM) as fs:
        fd.add_guild(GUILD, "home", {CHANNEL: "general"})
        fs.users.update({"U100": "alice"})
        async with Runtime.open(make_config(), llm=llm) as rt:
            assert await rt.start_adapter(discord(fd, fd.token))
            assert await rt.start_adapter(slack(fs))
            await fd.inject_message(
                CHANNEL, f"<@{fd.bot_id}> hi there", guild_id=GUILD, mentions=[fd.bot_user]
            )
            await fs.send_event(fs.message(DM, "hi in private", channel_type="im"))
            await fd.wait_for(lambda: fd.posted(CHANNEL))
            await fs.wait_for(lambda: fs.posted(DM))
            await rt.drain()
            assert fd.posted(CHANNEL) == ["hello from tierbot"]
            assert [p["text"] for p in fs.posted(DM)] == ["hello from tierbot"]
            keys = set(rt.registry.actors)
            assert keys == {f"discord:{GUILD}:{CHANNEL}", f"slack:{TEAM}:{DM}"}
            for key in keys:
                roles = [m.role.value async for m in rt.store.export(key)]
                assert roles == ["user", "assistant"]


async def test_an_adapter_that_cannot_reach_its_platform_does_not_stop_the_others(
    make_config,
) -> None:
    """Discord unreachable is reported as retrying, and Slack keeps serving in the same
    process; a refused token is raised instead (retrying cannot fix it)."""
    async with FakeDiscord() as fd, FakeSlack(team_id=TEAM) as fs:
        fs.users.update({"U100": "alice"})
        async with Runtime.open(make_config(), llm=ScriptedLLM(chat_reply="still here")) as rt:
            with pytest.raises(FatalAdapterError, match=r"\$DISCORD_TOKEN"):
                await rt.start_adapter(discord(fd, "wrong-token"))
            await fd.close()
            assert not await rt.start_adapter(discord(fd, fd.token))
            assert rt.adapter_problems["discord"].startswith("retrying: ")
            assert await rt.start_adapter(slack(fs))
            assert set(rt.adapters) == {"slack"}
            await fs.send_event(fs.message(DM, "anyone?", channel_type="im"))
            await fs.wait_for(lambda: fs.posted(DM))
            assert [p["text"] for p in fs.posted(DM)] == ["still here"]
