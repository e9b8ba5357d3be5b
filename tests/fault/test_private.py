"""Private conversations keep their memories: a secret said in a private Slack channel,
a private Discord channel or a private Discord thread is never recalled in a public
channel of the same workspace, and is recalled where it was said.

Real slack-bolt and discord.py clients against the fakes on 127.0.0.1, a real runtime
with the offline model and the memory graph on a temporary store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.discord import DiscordAdapter
from bot.adapters.slack import SlackAdapter
from bot.runtime import Runtime
from memory_graph import MemoryGraph
from tierbot.config import Config, DiscordAdapterConfig, MemoryConfig, SlackAdapterConfig
from tierbot.messages import InboundMessage, Message, Role
from tierbot.testing import FakeDiscord, FakeSlack

pytestmark = pytest.mark.slow

TEAM, PUBLIC, PRIVATE, GROUP_DM = "T0001", "C0PUBLIC", "C0PRIVATE", "G0GROUP"
GUILD, GENERAL, STAFF, SECRET_THREAD = "111", "1001", "1002", "3001"
ALICE = "U100"


def memory_config(make_config: Callable[..., Config], **memory: Any) -> Config:
    return make_config({"memory": {"enabled": True, **memory}})


def slack(fake: FakeSlack) -> SlackAdapter:
    cfg = SlackAdapterConfig(enabled=True, api_base_url=fake.api_base_url)
    env = {"SLACK_BOT_TOKEN": fake.bot_token, "SLACK_APP_TOKEN": fake.app_token}
    return SlackAdapter(cfg, environ=env, ping_interval=1.0, connect_timeout=5.0)


def discord(fake: FakeDiscord) -> DiscordAdapter:
    cfg = DiscordAdapterConfig(enabled=True, api_base=fake.api_base, gateway_url=fake.gateway_url)
    return DiscordAdapter(
        cfg, environ={"DISCORD_TOKEN": fake.token}, guild_ready_timeout=0.05, ready_timeout=5.0
    )


async def recalled(rt: Runtime, query: str, channel: str) -> str:
    """Everything the bot would recall for ``query`` in ``channel``, as one string."""
    return " | ".join(h["content"] for h in await rt.memory.search(query, channel=channel))


async def recalled_eventually(rt: Runtime, query: str, channel: str, secret: str) -> None:
    """Wait (up to 15 s) until ``secret`` is indexed and recalled in ``channel``: messages
    are indexed in the background."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 15.0
    found = await recalled(rt, query, channel)
    while secret not in found:
        if loop.time() > deadline:
            raise AssertionError(f"{secret!r} never recalled in {channel}: {found!r}")
        await asyncio.sleep(0.05)
        found = await recalled(rt, query, channel)


async def test_slack_private_channel_and_group_dm_secrets_stay_private(
    make_config: Callable[..., Config],
) -> None:
    """Secrets said in a private Slack channel and a group DM are recalled there, but a
    question in a public channel of the same team neither finds nor repeats them."""
    async with FakeSlack(team_id=TEAM) as fake:
        fake.users[ALICE] = "alice"
        async with Runtime.open(memory_config(make_config)) as rt:
            assert await rt.start_adapter(slack(fake))
            said = [
                (PRIVATE, "group", "the vault combination is 7731 alpha"),
                (GROUP_DM, "mpim", "the vault backup key is zebra 5509"),
                (PUBLIC, "channel", "the cafeteria opens at nine"),
            ]
            for channel, kind, text in said:
                await fake.send_event(fake.message(channel, text, channel_type=kind))
            private_key, group_key = f"slack:{TEAM}:{PRIVATE}", f"slack:{TEAM}:{GROUP_DM}"
            public_key = f"slack:{TEAM}:{PUBLIC}"
            await recalled_eventually(rt, "vault combination", private_key, "7731")
            await recalled_eventually(rt, "vault backup key", group_key, "5509")
            await recalled_eventually(rt, "cafeteria", public_key, "nine")
            # A thread of the private channel shares the channel's memories.
            thread_key = f"{private_key}:{fake.new_ts()}"
            assert "7731" in await recalled(rt, "vault combination", thread_key)
            for query in ("vault combination", "vault backup key", "what is the vault key"):
                found = await recalled(rt, query, public_key)
                assert "7731" not in found and "5509" not in found, found
            question = fake.message(PUBLIC, "<@UBOT> what is the vault combination?")
            await fake.send_event(question)
            await fake.wait_for(lambda: fake.posted(PUBLIC), within=15)
            await rt.drain()
            reply = " ".join(p["text"] for p in fake.posted(PUBLIC))
            assert "7731" not in reply and "5509" not in reply, reply
            stored = [m async for m in rt.store.export(private_key)]
            assert [m.meta.get("private") for m in stored] == [True]


async def test_discord_private_channel_and_private_thread_secrets_stay_private(
    make_config: Callable[..., Config],
) -> None:
    """Secrets said in a Discord channel @everyone cannot view and in a private thread are
    recalled there, and not in a public channel of the same guild."""
    async with FakeDiscord() as fake:
        fake.add_guild(GUILD, "home", {GENERAL: "general", STAFF: "staff"}, private=(STAFF,))
        fake.add_thread(GUILD, GENERAL, SECRET_THREAD, "hush", private=True)
        async with Runtime.open(memory_config(make_config)) as rt:
            assert await rt.start_adapter(discord(fake))
            await fake.inject_message(STAFF, "the alarm code is 4242 delta", guild_id=GUILD)
            await fake.inject_message(
                SECRET_THREAD, "the safe opens with 8080 echo", guild_id=GUILD
            )
            await fake.inject_message(GENERAL, "lunch is pizza on fridays", guild_id=GUILD)
            staff, general = f"discord:{GUILD}:{STAFF}", f"discord:{GUILD}:{GENERAL}"
            thread = f"{general}:{SECRET_THREAD}"
            await recalled_eventually(rt, "alarm code", staff, "4242")
            await recalled_eventually(rt, "safe opens", thread, "8080")
            await recalled_eventually(rt, "lunch pizza", general, "pizza")
            for query in ("alarm code", "safe opens", "what code opens the safe or alarm"):
                found = await recalled(rt, query, general)
                assert "4242" not in found and "8080" not in found, found
            # The private thread and the private channel do not share either.
            assert "4242" not in await recalled(rt, "alarm code", thread)
            assert "8080" not in await recalled(rt, "safe opens", staff)
            mention = f"<@{fake.bot_id}> what is the alarm code?"
            await fake.inject_message(GENERAL, mention, guild_id=GUILD, mentions=[fake.bot_user])
            await fake.wait_for(lambda: fake.posted(GENERAL), within=15)
            await rt.drain()
            assert "4242" not in " ".join(fake.posted(GENERAL))


def said(channel: str, pid: str, text: str, *, private: bool) -> InboundMessage:
    return InboundMessage(channel, pid, ALICE, "alice", text, private=private)


async def test_privacy_survives_a_restart_and_covers_memories_saved_later(
    make_config: Callable[..., Config],
) -> None:
    """After a restart, a private channel's episodes stay hidden from the workspace, and a
    memory a compaction worker saves for it later is hidden too."""
    private_key, public_key = f"slack:{TEAM}:{PRIVATE}", f"slack:{TEAM}:{PUBLIC}"
    config = memory_config(make_config)
    async with Runtime.open(config) as rt:
        await rt.submit(said(private_key, "1.1", "the payroll password is quokka 31", private=True))
        await rt.submit(said(public_key, "1.2", "standup is at ten", private=False))
        await recalled_eventually(rt, "payroll password", private_key, "quokka")
    async with Runtime.open(config) as rt:
        assert "quokka" not in await recalled(rt, "payroll password", public_key)
        assert "quokka" in await recalled(rt, "payroll password", private_key)
        covered = [m async for m in rt.store.export(private_key)]
        memory = {
            "content": "The payroll system migrates to vendor Wombat in May",
            "memory_type": "fact",
            "source_ids": [covered[0].platform_id],
        }
        saved = await rt.memory.writer().save_from_tool(
            memory, channel=private_key, covered=covered
        )
        assert '"id"' in saved, saved
        assert "Wombat" not in await recalled(rt, "payroll vendor Wombat", public_key)
        assert "Wombat" in await recalled(rt, "payroll vendor Wombat", private_key)
        assert await rt.memory.count(public_key) == 0
        assert await rt.memory.count(private_key) == 1


async def test_private_scope_workspace_lets_the_workspace_recall_private_channels(
    make_config: Callable[..., Config],
) -> None:
    """With [memory] private_scope = "workspace", a private channel's messages are
    recalled across its workspace, as before privacy was tracked."""
    private_key, public_key = f"slack:{TEAM}:{PRIVATE}", f"slack:{TEAM}:{PUBLIC}"
    async with Runtime.open(memory_config(make_config, private_scope="workspace")) as rt:
        await rt.submit(said(private_key, "1.1", "the payroll password is quokka 31", private=True))
        await recalled_eventually(rt, "payroll password", public_key, "quokka")


async def test_channel_first_seen_by_mention_shares_once_slack_says_it_is_public(
    make_config: Callable[..., Config],
) -> None:
    """A public Slack channel first heard of through an app_mention (no channel type) keeps
    its memories to itself only until a message event says it is public."""
    async with FakeSlack(team_id=TEAM) as fake:
        fake.users[ALICE] = "alice"
        async with Runtime.open(memory_config(make_config)) as rt:
            assert await rt.start_adapter(slack(fake))
            key, other = f"slack:{TEAM}:{PUBLIC}", f"slack:{TEAM}:C0OTHER"
            text = "<@UBOT> the offsite is in Lisbon"
            await fake.send_event(fake.message(PUBLIC, text, type="app_mention"))
            await recalled_eventually(rt, "offsite", key, "Lisbon")
            assert "Lisbon" not in await recalled(rt, "offsite", other)
            await fake.send_event(fake.message(PUBLIC, "noted, booking flights"))
            await recalled_eventually(rt, "offsite", other, "Lisbon")


async def test_no_search_path_reaches_a_private_channel(tmp_path: Path) -> None:
    """A private channel's rows stay out of a public channel's results on every path: a
    query of words too common to rank in full, a near-duplicate save (which must not merge
    into the private memory), a forget by id, and the memory count; marking a channel
    public or private re-scopes the rows it already has."""
    private_ch, public_ch = f"slack:{TEAM}:{PRIVATE}", f"slack:{TEAM}:{PUBLIC}"
    config = MemoryConfig.model_validate({})
    async with await MemoryGraph.open(tmp_path / "m.db", config) as g:
        await g.set_private(private_ch, True)
        # More postings of "meeting" than recall ranks in full: the newest-first path.
        filler = [
            Message(
                public_ch,
                f"p{i}",
                Role.USER,
                f"notes {i}: the meeting agenda had budget, hiring, travel, offices and tooling",
                "u1",
                "bob",
            )
            for i in range(2100)
        ]
        layoffs = "meeting after the meeting: the agenda had layoffs, budget, hiring and travel"
        secret = Message(private_ch, "s1", Role.USER, layoffs, "u2", "eve")
        await g.add_episodes([*filler, secret])
        hits = await g.recall("meeting", channel=public_ch, limit=20)
        assert hits and not [h for h in hits if h.channel == private_ch]
        assert [h.content for h in await g.recall("meeting", channel=private_ch)] == [layoffs]
        private_fact = await g.save("The reorg is announced on March 3", "fact", channel=private_ch)
        public_fact = await g.save("The reorg is announced on March 3", "fact", channel=public_ch)
        assert public_fact.id != private_fact.id
        public_hits = await g.recall("reorg announced", channel=public_ch)
        assert [h.id for h in public_hits if h.type == "fact"] == [public_fact.id]
        assert not await g.forget(private_fact.id, channel=public_ch)
        assert await g.count(public_ch) == 1 and await g.count(private_ch) == 1
        # Told the channel is public after all, its rows are shared at once.
        await g.set_private(private_ch, False)
        assert any(h.channel == private_ch for h in await g.recall("layoffs", channel=public_ch))
        # And marked private again (its rows exist already), they are hidden at once.
        await g.set_private(private_ch, True)
        assert not any(
            h.channel == private_ch for h in await g.recall("layoffs", channel=public_ch)
        )
