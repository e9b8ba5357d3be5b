"""The Slack adapter end to end: the real slack-bolt AsyncApp against FakeSlack on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest
import structlog

from bot.adapters.base import Adapter, Outbound
from bot.adapters.slack import SlackAdapter
from tests.recording import RecordingDispatcher
from tierbot.config import SlackAdapterConfig
from tierbot.errors import AdapterError
from tierbot.testing import FakeSlack, post_signed_event

pytestmark = pytest.mark.slow

TEAM, CHANNEL, OTHER_CHANNEL, DM = "T0001", "C0001", "C0002", "D0001"
ALICE, BOB = "U100", "U200"
SECRET = "signing-secret"


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(team_id=TEAM) as server:
        server.users.update({ALICE: "alice", BOB: "bob"})
        yield server


def make_adapter(
    fake: FakeSlack, environ: dict[str, str] | None = None, **settings: Any
) -> SlackAdapter:
    config = SlackAdapterConfig(enabled=True, api_base_url=fake.api_base_url, **settings)
    env = {
        "SLACK_BOT_TOKEN": fake.bot_token,
        "SLACK_APP_TOKEN": fake.app_token,
        "SLACK_SIGNING_SECRET": SECRET,
    }
    env.update(environ or {})
    return SlackAdapter(config, environ=env, ping_interval=1.0, connect_timeout=5.0)


async def start(
    adapter: SlackAdapter, dispatcher: RecordingDispatcher | None = None
) -> RecordingDispatcher:
    dispatcher = dispatcher or RecordingDispatcher()
    dispatcher.adapter = adapter
    await adapter.start(dispatcher)
    return dispatcher


@pytest.fixture
async def started(fake: FakeSlack) -> AsyncIterator[tuple[SlackAdapter, RecordingDispatcher]]:
    async with make_adapter(fake, admins=[ALICE]) as adapter:
        dispatcher = await start(adapter)
        yield adapter, dispatcher
        await dispatcher.settle()


def events(logs: Sequence[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    return [e for e in logs if e["event"] == name]


async def test_double_delivered_mention_gets_one_reply(fake: FakeSlack, started: Any) -> None:
    """A mention delivered as app_mention and as message is submitted and answered once."""
    adapter, dispatcher = started
    assert isinstance(adapter, Adapter) and adapter.connected()
    mention = fake.message(CHANNEL, "<@UBOT> what is 2+2?", type="app_mention")
    as_message = dict(mention, type="message", channel_type="channel")
    with structlog.testing.capture_logs() as logs:
        first = await fake.send_event(mention)
        second = await fake.send_event(as_message)
        await fake.wait_for(lambda: fake.posted(CHANNEL) and {first, second} <= set(fake.acks))
        await dispatcher.settle()
    [message] = dispatcher.submitted
    assert message.channel == f"slack:{TEAM}:{CHANNEL}" and message.platform_id == mention["ts"]
    assert message.text == "what is 2+2?" and message.addressed and not message.is_dm
    # A user's first message carries the id: the name is looked up after the ack.
    assert (message.author_id, message.author_name) == (ALICE, ALICE)
    assert [p["text"] for p in fake.posted(CHANNEL)] == ["echo: what is 2+2?"]
    assert "thread_ts" not in fake.posted(CHANNEL)[0]
    [ignored] = events(logs, "message.ignored")
    assert ignored["reason"].startswith("already received")


async def test_redelivered_event_is_answered_once(fake: FakeSlack, started: Any) -> None:
    """Slack's retry of an event (same event_id) is acknowledged but not submitted again."""
    _, dispatcher = started
    mention = fake.message(CHANNEL, "<@UBOT> hello", type="app_mention")
    first = await fake.send_event(mention, event_id="Ev001")
    await fake.wait_for(lambda: first in fake.acks)
    with structlog.testing.capture_logs() as logs:
        retry = await fake.send_event(mention, event_id="Ev001", retry_attempt=1)
        await fake.wait_for(lambda: retry in fake.acks)
    await dispatcher.settle()
    assert len(dispatcher.submitted) == 1 and len(fake.posted(CHANNEL)) == 1
    assert events(logs, "message.ignored")[0]["reason"] == "Slack redelivered this event"


async def test_thread_replies_go_to_their_thread_and_threads_are_separate_keys(
    fake: FakeSlack, started: Any
) -> None:
    """Messages in two threads are two channel keys, and each reply lands in its own thread."""
    _, dispatcher = started
    parents = [fake.new_ts(), fake.new_ts()]
    for parent in parents:
        await fake.send_event(fake.message(CHANNEL, f"<@UBOT> in {parent}", thread_ts=parent))
    await fake.wait_for(lambda: len(fake.posted(CHANNEL)) == 2)
    keys = {m.channel for m in dispatcher.submitted}
    assert keys == {f"slack:{TEAM}:{CHANNEL}:{p}" for p in parents}
    assert {m.thread for m in dispatcher.submitted} == set(parents)
    assert {(p["thread_ts"], p["text"]) for p in fake.posted(CHANNEL)} == {
        (p, f"echo: in {p}") for p in parents
    }


async def test_dm_gets_a_reply(fake: FakeSlack, started: Any) -> None:
    """A direct message is addressed without a mention and answered in the DM."""
    _, dispatcher = started
    await fake.send_event(fake.message(DM, "hi there", channel_type="im"))
    await fake.wait_for(lambda: fake.posted(DM))
    [message] = dispatcher.submitted
    assert message.channel == f"slack:{TEAM}:{DM}" and message.is_dm and message.addressed
    assert fake.posted(DM)[0]["text"] == "echo: hi there"


async def test_unaddressed_channel_message_is_submitted_not_addressed(
    fake: FakeSlack, started: Any
) -> None:
    """A channel message without a mention reaches the runtime flagged as not addressed
    (a mentioned user whose name is not known yet shows as their id)."""
    _, dispatcher = started
    envelope = await fake.send_event(fake.message(CHANNEL, "talking among humans <@U200>"))
    await fake.wait_for(lambda: envelope in fake.acks)
    [message] = dispatcher.submitted
    assert not message.addressed and message.text == "talking among humans @U200"


async def test_long_reply_with_code_is_split_with_intact_fences(fake: FakeSlack) -> None:
    """A 4,500-character reply with a code block arrives as two messages with balanced fences."""
    code = (
        "```python\n"
        + "\n".join(f"def step_{i}(x):\n    return x + {i}" for i in range(75))
        + "\n```"
    )
    prose = " ".join(f"Point {i} is explained here." for i in range(70))
    long_reply = f"{prose}\n\n{code}\n\nThat is the whole answer."
    assert 4450 < len(long_reply) < 4550
    async with make_adapter(fake) as adapter:
        dispatcher = await start(adapter, RecordingDispatcher(reply=lambda m: long_reply))
        await fake.send_event(fake.message(CHANNEL, "<@UBOT> explain", type="app_mention"))
        await fake.wait_for(lambda: len(fake.posted(CHANNEL)) == 2)
        await dispatcher.settle()
    texts = [p["text"] for p in fake.posted(CHANNEL)]
    assert all(len(t) <= 4000 for t in texts)
    assert all(t.count("```") % 2 == 0 for t in texts)
    code_lines = [ln for t in texts for ln in t.split("\n") if "step_" in ln or "return x" in ln]
    assert code_lines == code.split("\n")[1:-1]


async def test_progress_reaction_is_added_then_removed(fake: FakeSlack) -> None:
    """:hourglass_flowing_sand: goes on the triggering message while working and comes off after."""
    async with make_adapter(fake) as adapter:
        dispatcher = await start(adapter, RecordingDispatcher(work_seconds=0.2))
        event = fake.message(CHANNEL, "<@UBOT> slow one", type="app_mention")
        await fake.send_event(event)
        await fake.wait_for(lambda: fake.called("reactions.remove"))
        await dispatcher.settle()
    order = [c.method for c in fake.calls if c.method.startswith(("reactions.", "chat."))]
    assert order == ["reactions.add", "chat.postMessage", "reactions.remove"]
    for call in fake.called("reactions.add") + fake.called("reactions.remove"):
        assert call.args == {
            "channel": CHANNEL,
            "timestamp": event["ts"],
            "name": "hourglass_flowing_sand",
        }


async def test_rate_limited_post_is_retried_after_retry_after(
    fake: FakeSlack, started: Any
) -> None:
    """A 429 on chat.postMessage waits the Retry-After seconds, retries, and the reply arrives."""
    fake.rate_limit(1, retry_after=1)
    began = time.monotonic()
    await fake.send_event(fake.message(CHANNEL, "<@UBOT> busy?", type="app_mention"))
    await fake.wait_for(lambda: fake.posted(CHANNEL))
    assert time.monotonic() - began >= 1.0
    assert [c.status for c in fake.called("chat.postMessage")] == [429, 200]
    assert fake.posted(CHANNEL)[0]["text"] == "echo: busy?"


async def test_reply_text_is_escaped(fake: FakeSlack, started: Any) -> None:
    """Model output cannot ping <!channel> or smuggle markup: & < > are escaped."""
    adapter, _ = started
    await adapter.send(Outbound(f"slack:{TEAM}:{CHANNEL}", "a < b & <!channel>"))
    assert fake.posted(CHANNEL)[0]["text"] == "a &lt; b &amp; &lt;!channel&gt;"


async def test_own_bot_and_edit_events_are_ignored_with_a_reason(
    fake: FakeSlack, started: Any
) -> None:
    """Own messages, other bots' and edits are never submitted, each with a logged reason."""
    _, dispatcher = started
    with structlog.testing.capture_logs() as logs:
        for event in (
            fake.message(CHANNEL, "echo: hi", user="UBOT", bot_id="BBOT"),
            fake.message(CHANNEL, "beep", user="U999", bot_id="BOTHER"),
            fake.message(CHANNEL, "edited", subtype="message_changed"),
        ):
            envelope = await fake.send_event(event)
            await fake.wait_for(lambda: envelope in fake.acks)  # noqa: B023 (awaited right here)
    reasons = [e["reason"] for e in events(logs, "message.ignored")]
    assert reasons == [
        "the bot's own message",
        "sent by another bot",
        "not conversation (subtype message_changed)",
    ]
    assert not dispatcher.submitted


async def test_messages_outside_the_allow_lists_are_ignored_with_a_reason(fake: FakeSlack) -> None:
    """Other teams and channels not allowed are dropped with a logged reason; DMs still pass."""
    async with make_adapter(fake, allowed_teams=[TEAM], allowed_channels=[CHANNEL]) as adapter:
        dispatcher = await start(adapter)
        with structlog.testing.capture_logs() as logs:
            await fake.send_event(fake.message(CHANNEL, "<@UBOT> hi"), team_id="T9999")
            await fake.send_event(fake.message(OTHER_CHANNEL, "<@UBOT> hi"))
            await fake.send_event(fake.message(DM, "hi", channel_type="im"))
            await fake.send_event(fake.message(CHANNEL, "<@UBOT> hi"))
            await fake.wait_for(lambda: len(fake.posted()) == 2)
        await dispatcher.settle()
    reasons = [e["reason"] for e in events(logs, "message.ignored")]
    assert reasons == ["team not in allowed_teams", "channel not in allowed_channels"]
    assert [m.channel for m in dispatcher.submitted] == [
        f"slack:{TEAM}:{DM}",
        f"slack:{TEAM}:{CHANNEL}",
    ]


async def test_admin_commands_run_only_for_admins(fake: FakeSlack, started: Any) -> None:
    """A mentioned /status runs as admin only for listed admins, is answered in place, never
    submitted."""
    _, dispatcher = started
    await fake.send_event(fake.message(CHANNEL, "<@UBOT> /status", user=ALICE))
    await fake.wait_for(lambda: len(fake.posted(CHANNEL)) == 1)
    await fake.send_event(fake.message(CHANNEL, "<@UBOT> /status", user=BOB))
    await fake.wait_for(lambda: len(fake.posted(CHANNEL)) == 2)
    assert [is_admin for _, is_admin in dispatcher.commands] == [True, False]
    assert [p["text"] for p in fake.posted(CHANNEL)] == [
        "status: all good",
        "only admins may run /status",
    ]
    assert not dispatcher.submitted


async def test_socket_disconnect_reconnects_and_keeps_answering(
    fake: FakeSlack, started: Any
) -> None:
    """When Slack asks the socket to reconnect, the client opens a new one and keeps answering."""
    adapter, _ = started
    await fake.send_disconnect()
    await fake.wait_connected()
    assert fake.connections == 2 and len(fake.called("apps.connections.open")) == 2
    await fake.send_event(fake.message(CHANNEL, "<@UBOT> still there?", type="app_mention"))
    await fake.wait_for(lambda: fake.posted(CHANNEL))
    assert adapter.connected()


async def test_http_mode_verifies_signatures(fake: FakeSlack) -> None:
    """HTTP mode answers a signed event once (even retried); forged or stale ones get 401."""
    async with make_adapter(fake, mode="http", host="127.0.0.1", port=0) as adapter:
        dispatcher = await start(adapter)
        port = adapter.http_addresses[0][1]
        url = f"http://127.0.0.1:{port}/slack/events"
        payload = fake.event_callback(fake.message(CHANNEL, "<@UBOT> over http"), event_id="EvH1")
        assert (await post_signed_event(url, payload, SECRET))[0] == 200
        assert (await post_signed_event(url, payload, SECRET, retry_num=1))[0] == 200
        forged = fake.event_callback(fake.message(CHANNEL, "<@UBOT> forged"))
        assert (await post_signed_event(url, forged, "not-the-secret"))[0] == 401
        assert (await post_signed_event(url, forged, SECRET, signature="v0=" + "0" * 64))[0] == 401
        stale = fake.event_callback(fake.message(CHANNEL, "<@UBOT> replayed"))
        old = int(time.time()) - 600
        assert (await post_signed_event(url, stale, SECRET, timestamp=old))[0] == 401
        await fake.wait_for(lambda: fake.posted(CHANNEL))
        await dispatcher.settle()
    assert [m.text for m in dispatcher.submitted] == ["over http"]
    assert [p["text"] for p in fake.posted(CHANNEL)] == ["echo: over http"]


async def test_bad_tokens_are_clear_errors(fake: FakeSlack) -> None:
    """A refused token or a missing variable raises AdapterError naming the variable."""
    with pytest.raises(
        AdapterError, match=r"rejected the bot token in \$SLACK_BOT_TOKEN \(invalid_auth\)"
    ):
        await make_adapter(fake, {"SLACK_BOT_TOKEN": "xoxb-wrong"}).start(RecordingDispatcher())
    with pytest.raises(
        AdapterError, match=r"app-level token in \$SLACK_APP_TOKEN \(invalid_auth\)"
    ):
        await make_adapter(fake, {"SLACK_APP_TOKEN": "xapp-wrong"}).start(RecordingDispatcher())
    with pytest.raises(AdapterError, match="environment variable SLACK_APP_TOKEN is not set"):
        await make_adapter(fake, {"SLACK_APP_TOKEN": ""}).start(RecordingDispatcher())
    with pytest.raises(AdapterError, match="environment variable SLACK_SIGNING_SECRET is not set"):
        adapter = make_adapter(fake, {"SLACK_SIGNING_SECRET": ""}, mode="http", port=0)
        await adapter.start(RecordingDispatcher())


async def test_start_twice_is_harmless_and_start_after_stop_reconnects(fake: FakeSlack) -> None:
    """A second start while connected opens nothing new; after stop, start connects afresh."""
    async with make_adapter(fake) as adapter:
        dispatcher = await start(adapter)
        await adapter.start(dispatcher)
        assert fake.connections == 1 and adapter.connected()
        await adapter.stop()
        assert not adapter.connected()
        await adapter.start(dispatcher)
        await fake.send_event(fake.message(CHANNEL, "<@UBOT> back", type="app_mention"))
        await fake.wait_for(lambda: fake.posted(CHANNEL))
        assert fake.connections == 2 and len(dispatcher.submitted) == 1


async def test_slash_command_answers_ephemerally_and_checks_admins(
    fake: FakeSlack, started: Any
) -> None:
    """`/tierbot status` runs the /status command for admins only, answered in the
    acknowledgement (only the caller sees it), never submitted as conversation."""
    _, dispatcher = started
    first = await fake.send_slash_command("status", user=ALICE)
    second = await fake.send_slash_command("/status", user=BOB)
    await fake.wait_for(lambda: {first, second} <= set(fake.acks))
    assert fake.ack_payloads[first] == {"text": "status: all good"}
    assert fake.ack_payloads[second] == {"text": "only admins may run /status"}
    [(message, is_admin), (_, bob_admin)] = dispatcher.commands
    assert message.channel == f"slack:{TEAM}:{CHANNEL}" and message.text == "/status"
    assert is_admin and not bob_admin
    assert not dispatcher.submitted and not fake.posted()


async def test_slow_slash_command_is_acknowledged_then_answered_in_channel(
    fake: FakeSlack,
) -> None:
    """A command slower than Slack's 3 s deadline is acknowledged at once and its
    answer posted in the channel when ready."""

    class Slow(RecordingDispatcher):
        async def command(self, message: Any, *, is_admin: bool) -> str | None:
            await asyncio.sleep(3.0)
            return "compacted"

    async with make_adapter(fake, admins=[ALICE]) as adapter:
        await start(adapter, Slow())
        env = await fake.send_slash_command("compact", user=ALICE)
        await fake.wait_for(lambda: env in fake.acks, within=2.9)
        assert "Working on /compact" in fake.ack_payloads[env]["text"]
        await fake.wait_for(lambda: fake.posted(CHANNEL), within=5.0)
        assert fake.posted(CHANNEL)[0]["text"] == "compacted"


async def test_slash_command_outside_allowed_channels_is_refused(fake: FakeSlack) -> None:
    """allowed_channels applies to the slash command too."""
    async with make_adapter(fake, admins=[ALICE], allowed_channels=[CHANNEL]) as adapter:
        dispatcher = await start(adapter)
        env = await fake.send_slash_command("status", user=ALICE, channel=OTHER_CHANNEL)
        await fake.wait_for(lambda: env in fake.acks)
        assert fake.ack_payloads[env] == {"text": "tierbot is not enabled here."}
        assert not dispatcher.commands
