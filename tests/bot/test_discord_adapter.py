"""The Discord adapter end to end: the real discord.py client against FakeDiscord on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import pytest
import structlog

from bot.adapters.base import Adapter, Outbound
from bot.adapters.discord import DiscordAdapter
from tests.recording import RecordingDispatcher
from tierbot.config import DiscordAdapterConfig
from tierbot.errors import AdapterError
from tierbot.testing import FakeDiscord

pytestmark = pytest.mark.slow

GUILD, CHANNEL, OTHER_CHANNEL = "111", "1001", "1002"
THREAD_A, THREAD_B = "2001", "2002"
BLOCKED_GUILD, BLOCKED_CHANNEL = "222", "3001"
ALICE, BOB = "100", "200"


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(heartbeat_ms=500) as server:
        server.add_guild(GUILD, "home", {CHANNEL: "general", OTHER_CHANNEL: "random"})
        server.add_thread(GUILD, CHANNEL, THREAD_A, "topic-a")
        server.add_thread(GUILD, CHANNEL, THREAD_B, "topic-b")
        server.add_guild(BLOCKED_GUILD, "elsewhere", {BLOCKED_CHANNEL: "general"})
        yield server


def make_adapter(fake: FakeDiscord, token: str | None = None, **settings: Any) -> DiscordAdapter:
    config = DiscordAdapterConfig(
        enabled=True, api_base=fake.api_base, gateway_url=fake.gateway_url, **settings
    )
    environ = {"DISCORD_TOKEN": fake.token if token is None else token}
    return DiscordAdapter(
        config, environ=environ, guild_ready_timeout=0.05, ready_timeout=5.0, typing_interval=0.15
    )


@pytest.fixture
async def started(fake: FakeDiscord) -> AsyncIterator[tuple[DiscordAdapter, RecordingDispatcher]]:
    async with make_adapter(fake, admins=[ALICE]) as adapter:
        dispatcher = RecordingDispatcher()
        dispatcher.adapter = adapter
        await adapter.start(dispatcher)
        yield adapter, dispatcher
        await dispatcher.settle()


def mention(fake: FakeDiscord, text: str) -> tuple[str, list[dict[str, Any]]]:
    return f"<@{fake.bot_id}> {text}", [fake.bot_user]


def events(logs: Sequence[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    return [e for e in logs if e["event"] == name]


async def test_mention_gets_a_reply_in_the_same_channel(fake: FakeDiscord, started: Any) -> None:
    """A channel mention is submitted without the mention and answered there, as a reply."""
    adapter, dispatcher = started
    assert isinstance(adapter, Adapter) and adapter.connected()
    content, mentions = mention(fake, "what is the capital of France?")
    sent = await fake.inject_message(CHANNEL, content, guild_id=GUILD, mentions=mentions)
    await fake.wait_for(lambda: fake.posted(CHANNEL))
    [message] = dispatcher.submitted
    assert message.channel == f"discord:{GUILD}:{CHANNEL}"
    assert message.text == "what is the capital of France?"
    assert message.addressed and not message.is_dm and message.thread is None
    assert (message.platform_id, message.author_id, message.author_name) == (
        sent["id"],
        ALICE,
        "alice",
    )
    assert fake.posted(CHANNEL) == ["echo: what is the capital of France?"]
    [post] = fake.calls("POST", f"/channels/{CHANNEL}/messages")
    assert str(post.json["message_reference"]["message_id"]) == sent["id"]
    assert post.json["allowed_mentions"]["parse"] == ["users"]


async def test_unaddressed_message_is_submitted_but_not_addressed(
    fake: FakeDiscord, started: Any
) -> None:
    """A guild message without a mention still reaches the runtime, flagged as not addressed."""
    _, dispatcher = started
    await fake.inject_message(CHANNEL, "just chatting", guild_id=GUILD)
    await _until(lambda: dispatcher.submitted)
    [message] = dispatcher.submitted
    assert message.text == "just chatting" and not message.addressed


async def test_other_mentions_are_resolved_to_names(fake: FakeDiscord, started: Any) -> None:
    """Mentions of other users become @name; the bot's own mention is stripped."""
    _, dispatcher = started
    bob = fake.user(BOB, "bob")
    content = f"<@{fake.bot_id}> ask <@{BOB}> about <#{OTHER_CHANNEL}>"
    await fake.inject_message(CHANNEL, content, guild_id=GUILD, mentions=[fake.bot_user, bob])
    await _until(lambda: dispatcher.submitted)
    assert dispatcher.submitted[0].text == "ask @bob about #random"


async def test_reply_to_the_bot_counts_as_addressed(fake: FakeDiscord, started: Any) -> None:
    """Replying to one of the bot's messages addresses the bot and records what it replies to."""
    _, dispatcher = started
    content, mentions = mention(fake, "first")
    await fake.inject_message(CHANNEL, content, guild_id=GUILD, mentions=mentions)
    await fake.wait_for(lambda: fake.messages.get(CHANNEL))
    bot_message = fake.messages[CHANNEL][0]
    await fake.inject_message(CHANNEL, "and then?", guild_id=GUILD, reply_to=bot_message)
    await fake.wait_for(lambda: len(fake.posted(CHANNEL)) == 2)
    second = dispatcher.submitted[1]
    assert second.addressed and second.reply_to == bot_message["id"]


async def test_dm_gets_a_reply(fake: FakeDiscord, started: Any) -> None:
    """A direct message has its own key, is addressed, and is answered in the DM channel."""
    _, dispatcher = started
    dm_channel = "5005"
    await fake.inject_message(dm_channel, "hello in private")
    await fake.wait_for(lambda: fake.posted(dm_channel))
    [message] = dispatcher.submitted
    assert message.channel == f"discord:dm:{ALICE}"
    assert message.is_dm and message.addressed
    assert fake.posted(dm_channel) == ["echo: hello in private"]


async def test_two_threads_are_two_channel_keys(fake: FakeDiscord, started: Any) -> None:
    """Two threads of one channel are two conversations, each answered in its own thread."""
    _, dispatcher = started
    for thread in (THREAD_A, THREAD_B):
        content, mentions = mention(fake, f"in {thread}")
        await fake.inject_message(thread, content, guild_id=GUILD, mentions=mentions)
    await fake.wait_for(lambda: fake.posted(THREAD_A) and fake.posted(THREAD_B))
    keys = {m.channel for m in dispatcher.submitted}
    assert keys == {
        f"discord:{GUILD}:{CHANNEL}:{THREAD_A}",
        f"discord:{GUILD}:{CHANNEL}:{THREAD_B}",
    }
    assert {m.thread for m in dispatcher.submitted} == {THREAD_A, THREAD_B}
    assert fake.posted(THREAD_A) == [f"echo: in {THREAD_A}"]
    assert fake.posted(THREAD_B) == [f"echo: in {THREAD_B}"]
    assert not fake.posted(CHANNEL)


async def test_thread_unknown_to_the_cache_is_resolved_over_rest(
    fake: FakeDiscord, started: Any
) -> None:
    """A thread created after connecting is looked up once, so it still gets its parent's key."""
    _, dispatcher = started
    fake.add_thread(GUILD, CHANNEL, "2003", "late")
    content, mentions = mention(fake, "late thread")
    await fake.inject_message("2003", content, guild_id=GUILD, mentions=mentions)
    await fake.wait_for(lambda: fake.posted("2003"))
    assert dispatcher.submitted[0].channel == f"discord:{GUILD}:{CHANNEL}:2003"
    assert fake.calls("GET", "/channels/2003")


async def test_long_reply_with_code_is_split_with_intact_fences(fake: FakeDiscord) -> None:
    """A 4,500-character reply with code arrives as <= 2,000-character pieces, fences intact."""
    code = (
        "```python\n"
        + "\n".join(f"def step_{i}(x):\n    return x + {i}" for i in range(75))
        + "\n```"
    )
    prose = " ".join(f"Point {i} is explained here." for i in range(70))
    long_reply = f"{prose}\n\n{code}\n\nThat is the whole answer."
    assert 4450 < len(long_reply) < 4550
    async with make_adapter(fake) as adapter:
        dispatcher = RecordingDispatcher(reply=lambda m: long_reply)
        dispatcher.adapter = adapter
        await adapter.start(dispatcher)
        content, mentions = mention(fake, "explain")
        await fake.inject_message(CHANNEL, content, guild_id=GUILD, mentions=mentions)
        await _until(lambda: dispatcher.replies)
    posted = fake.posted(CHANNEL)
    assert len(posted) == 3 and all(len(p) <= 2000 for p in posted)
    for piece in posted:
        assert piece.count("```") % 2 == 0, piece
    assert posted[1].startswith("```python\n") and posted[1].endswith("\n```")
    code_lines = [ln for p in posted for ln in p.split("\n") if "step_" in ln or "return x" in ln]
    assert code_lines == code.split("\n")[1:-1]
    posts = fake.calls("POST", f"/channels/{CHANNEL}/messages")
    assert "message_reference" in posts[0].json
    assert all("message_reference" not in p.json for p in posts[1:])


async def test_typing_is_refreshed_until_the_reply_is_sent(fake: FakeDiscord) -> None:
    """While the runtime works, typing is posted repeatedly, and never after the reply."""
    async with make_adapter(fake) as adapter:
        dispatcher = RecordingDispatcher(work_seconds=0.5)
        dispatcher.adapter = adapter
        await adapter.start(dispatcher)
        content, mentions = mention(fake, "think hard")
        await fake.inject_message(CHANNEL, content, guild_id=GUILD, mentions=mentions)
        await _until(lambda: dispatcher.replies)
        await asyncio.sleep(0.3)
    paths = [
        r.path for r in fake.requests if r.method == "POST" and r.path.startswith("/channels/")
    ]
    typing = [i for i, p in enumerate(paths) if p == f"/channels/{CHANNEL}/typing"]
    reply = paths.index(f"/channels/{CHANNEL}/messages")
    assert len(typing) >= 3
    assert max(typing) < reply


async def test_rate_limited_post_is_retried(fake: FakeDiscord, started: Any) -> None:
    """A 429 on a message post waits retry_after and retries, and the reply still arrives."""
    fake.rate_limit(2, retry_after=0.3)
    content, mentions = mention(fake, "busy?")
    began = time.monotonic()
    await fake.inject_message(CHANNEL, content, guild_id=GUILD, mentions=mentions)
    await fake.wait_for(lambda: fake.posted(CHANNEL))
    assert time.monotonic() - began >= 0.6
    statuses = [r.status for r in fake.calls("POST", f"/channels/{CHANNEL}/messages")]
    assert statuses == [429, 429, 200]
    assert fake.posted(CHANNEL) == ["echo: busy?"]


async def test_gateway_reconnect_resumes_and_next_message_is_answered(
    fake: FakeDiscord, started: Any
) -> None:
    """On RECONNECT the client resumes its session (no new IDENTIFY) and keeps answering."""
    adapter, _ = started
    with structlog.testing.capture_logs() as logs:
        await fake.send_reconnect()
        await fake.wait_ready()
        await _until(lambda: events(logs, "discord.gateway_resumed"))
    assert len(fake.identifies) == 1
    assert (
        fake.resumes[0]["session_id"] == "fake-session-1" and fake.resumes[0]["token"] == fake.token
    )
    assert events(logs, "discord.gateway_disconnected")
    assert adapter.connected()
    content, mentions = mention(fake, "still there?")
    await fake.inject_message(CHANNEL, content, guild_id=GUILD, mentions=mentions)
    await fake.wait_for(lambda: fake.posted(CHANNEL))
    assert fake.posted(CHANNEL) == ["echo: still there?"]


async def test_messages_outside_the_allow_lists_are_ignored_with_a_reason(
    fake: FakeDiscord,
) -> None:
    """Guilds, channels and DM users not allowed are dropped, each with a logged reason."""
    async with make_adapter(
        fake, allowed_guilds=[GUILD], allowed_channels=[CHANNEL], allowed_dm_users=[BOB]
    ) as adapter:
        dispatcher = RecordingDispatcher()
        dispatcher.adapter = adapter
        await adapter.start(dispatcher)
        with structlog.testing.capture_logs() as logs:
            content, mentions = mention(fake, "hi")
            await fake.inject_message(
                BLOCKED_CHANNEL, content, guild_id=BLOCKED_GUILD, mentions=mentions
            )
            await fake.inject_message(OTHER_CHANNEL, content, guild_id=GUILD, mentions=mentions)
            await fake.inject_message("5005", "dm from alice")
            await fake.inject_message(THREAD_A, content, guild_id=GUILD, mentions=mentions)
            await fake.wait_for(lambda: fake.posted(THREAD_A))
    reasons = [e["reason"] for e in events(logs, "message.ignored")]
    assert reasons == [
        "guild not in allowed_guilds",
        "channel not in allowed_channels",
        "DM from a user not in allowed_dm_users",
    ]
    # A thread whose parent channel is allowed is allowed.
    assert [m.channel for m in dispatcher.submitted] == [f"discord:{GUILD}:{CHANNEL}:{THREAD_A}"]


async def test_own_and_other_bots_messages_are_ignored(fake: FakeDiscord, started: Any) -> None:
    """The bot never answers itself or another bot, and says why in the log."""
    _, dispatcher = started
    with structlog.testing.capture_logs() as logs:
        await fake.inject_message(CHANNEL, "from me", guild_id=GUILD, author=fake.bot_user)
        other = fake.user("777", "otherbot", bot=True)
        await fake.inject_message(CHANNEL, "from a bot", guild_id=GUILD, author=other)
        await _until(lambda: len(events(logs, "message.ignored")) == 2)
    reasons = [e["reason"] for e in events(logs, "message.ignored")]
    assert reasons == ["the bot's own message", "sent by another bot"]
    assert not dispatcher.submitted


async def test_admin_commands_run_only_for_admins(fake: FakeDiscord, started: Any) -> None:
    """A mentioned /status runs as admin only for listed admins, is answered in place, never
    submitted."""
    _, dispatcher = started
    content, mentions = mention(fake, "/status")
    await fake.inject_message(
        CHANNEL, content, guild_id=GUILD, author=fake.user(ALICE, "alice"), mentions=mentions
    )
    await fake.wait_for(lambda: len(fake.posted(CHANNEL)) == 1)
    await fake.inject_message(
        CHANNEL, content, guild_id=GUILD, author=fake.user(BOB, "bob"), mentions=mentions
    )
    await fake.wait_for(lambda: len(fake.posted(CHANNEL)) == 2)
    assert [is_admin for _, is_admin in dispatcher.commands] == [True, False]
    assert fake.posted(CHANNEL) == ["status: all good", "only admins may run /status"]
    assert not dispatcher.submitted
    await fake.inject_message(CHANNEL, "/shrug not a command", guild_id=GUILD)
    await _until(lambda: dispatcher.submitted)
    assert dispatcher.submitted[0].text == "/shrug not a command"


async def test_missing_message_content_intent_is_a_clear_error(fake: FakeDiscord) -> None:
    """Gateway close 4014 at startup raises AdapterError naming the portal switch to flip."""
    fake.refuse_message_content = True
    adapter = make_adapter(fake)
    with pytest.raises(AdapterError) as caught:
        await adapter.start(RecordingDispatcher())
    message = str(caught.value)
    assert "4014" in message and "Privileged Gateway Intents -> Message Content Intent" in message
    assert caught.value.adapter == "discord"
    assert not adapter.connected()
    await adapter.stop()


async def test_bad_or_missing_token_is_a_clear_error(fake: FakeDiscord) -> None:
    """A refused token or an unset variable raises AdapterError naming DISCORD_TOKEN."""
    with pytest.raises(AdapterError, match=r"rejected the bot token in \$DISCORD_TOKEN"):
        await make_adapter(fake, token="wrong").start(RecordingDispatcher())
    with pytest.raises(AdapterError, match="environment variable DISCORD_TOKEN is not set"):
        await make_adapter(fake, token="").start(RecordingDispatcher())


async def test_start_twice_is_harmless_and_start_after_stop_reconnects(fake: FakeDiscord) -> None:
    """A second start while connected does nothing; after stop, start connects afresh."""
    async with make_adapter(fake) as adapter:
        dispatcher = RecordingDispatcher()
        dispatcher.adapter = adapter
        await adapter.start(dispatcher)
        await adapter.start(dispatcher)
        assert len(fake.identifies) == 1 and adapter.connected()
        content, mentions = mention(fake, "once")
        await fake.inject_message(CHANNEL, content, guild_id=GUILD, mentions=mentions)
        await fake.wait_for(lambda: fake.posted(CHANNEL))
        await asyncio.sleep(0.1)
        assert len(dispatcher.submitted) == 1 and fake.posted(CHANNEL) == ["echo: once"]
        await adapter.stop()
        assert not adapter.connected()
        await adapter.start(dispatcher)
        assert len(fake.identifies) == 2 and adapter.connected()
        content, mentions = mention(fake, "twice")
        await fake.inject_message(CHANNEL, content, guild_id=GUILD, mentions=mentions)
        await fake.wait_for(lambda: len(fake.posted(CHANNEL)) == 2)


async def test_start_after_a_fatal_gateway_close_connects_afresh(fake: FakeDiscord) -> None:
    """When Discord ends the session for good, connected() turns false and start() reconnects."""
    async with make_adapter(fake) as adapter:
        dispatcher = RecordingDispatcher()
        dispatcher.adapter = adapter
        await adapter.start(dispatcher)
        with structlog.testing.capture_logs() as logs:
            await fake.close_gateway(4004)
            await _until(lambda: not adapter.connected())
            await _until(lambda: events(logs, "discord.gateway_failed"))
        await adapter.start(dispatcher)
        assert adapter.connected() and len(fake.identifies) == 2
        content, mentions = mention(fake, "back again")
        await fake.inject_message(CHANNEL, content, guild_id=GUILD, mentions=mentions)
        await fake.wait_for(lambda: fake.posted(CHANNEL))


async def test_send_before_start_is_an_adapter_error(fake: FakeDiscord) -> None:
    """Sending without a connection fails loudly instead of dropping the reply."""
    adapter = make_adapter(fake)
    with pytest.raises(AdapterError, match="not started"):
        await adapter.send(Outbound(f"discord:{GUILD}:{CHANNEL}", "hello"))


async def _until(predicate: Callable[[], Any], within: float = 5.0) -> None:
    """Poll ``predicate`` until it holds (for state the fake does not see)."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)
