"""Slack faults: a slow or rate-limited Web API during acknowledgement, a malformed request header.

The real slack-bolt client (Socket Mode and HTTP mode) against FakeSlack on 127.0.0.1,
feeding a real runtime and store.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import structlog

from bot.adapters.slack import SlackAdapter
from bot.runtime import Runtime
from tests.helpers import wait_for
from tierbot.config import Config, SlackAdapterConfig
from tierbot.messages import Message, Role
from tierbot.testing import FakeSlack, post_signed_event
from tierbot.testing.scripted import ScriptedLLM

pytestmark = pytest.mark.slow

TEAM, CHANNEL, ALICE = "T0001", "C0001", "U100"
KEY = f"slack:{TEAM}:{CHANNEL}"
SECRET = "signing-secret"


def slack(fake: FakeSlack, **settings: Any) -> SlackAdapter:
    config = SlackAdapterConfig(enabled=True, api_base_url=fake.api_base_url, **settings)
    env = {
        "SLACK_BOT_TOKEN": fake.bot_token,
        "SLACK_APP_TOKEN": fake.app_token,
        "SLACK_SIGNING_SECRET": SECRET,
    }
    return SlackAdapter(config, environ=env, ping_interval=1.0, connect_timeout=5.0)


@pytest.fixture
async def bot(
    make_config: Callable[..., Config],
) -> AsyncIterator[tuple[FakeSlack, Runtime]]:
    async with FakeSlack(team_id=TEAM) as fake:
        fake.users[ALICE] = "alice"
        async with Runtime.open(make_config(), llm=ScriptedLLM(chat_reply="noted")) as rt:
            assert await rt.start_adapter(slack(fake))
            yield fake, rt


async def stored(rt: Runtime, key: str = KEY) -> list[Message]:
    return [m async for m in rt.store.export(key) if m.role is Role.USER]


async def test_ack_is_sent_while_users_info_hangs(bot: tuple[FakeSlack, Runtime]) -> None:
    """A new user's message is stored and acknowledged while users.info is still unanswered;
    once Slack answers, the same user's next message carries the real name."""
    fake, rt = bot
    fake.hold_users_info()
    envelope = await fake.send_event(fake.message(CHANNEL, "my locker code is 4471"))
    await fake.wait_for(lambda: envelope in fake.acks and fake.pending_users_info() == 1)
    assert ("users.info answered", ALICE) not in fake.timeline
    [first] = await stored(rt)
    assert (first.text, first.author_id, first.author_name) == (
        "my locker code is 4471",
        ALICE,
        ALICE,
    )
    with structlog.testing.capture_logs() as logs:
        fake.release_users_info()
        await wait_for(lambda: any(e["event"] == "slack.user_named" for e in logs), 15)
    second = await fake.send_event(fake.message(CHANNEL, "and the gym opens at 6"))
    await fake.wait_for(lambda: second in fake.acks)
    assert [(m.text, m.author_name) for m in await stored(rt)] == [
        ("my locker code is 4471", ALICE),
        ("and the gym opens at 6", "alice"),
    ]
    assert len(fake.called("users.info")) == 1


async def test_ack_is_sent_while_users_info_is_rate_limited(
    bot: tuple[FakeSlack, Runtime],
) -> None:
    """With users.info answering 429 (Retry-After 3), the message is stored and acknowledged
    before the name arrives, and the name is used once Slack gives it."""
    fake, rt = bot
    fake.rate_limit_users_info(1, retry_after=3)
    with structlog.testing.capture_logs() as logs:
        envelope = await fake.send_event(fake.message(CHANNEL, "deploy freeze starts friday"))
        await fake.wait_for(lambda: ("users.info answered", ALICE) in fake.timeline, within=15)
        await wait_for(lambda: any(e["event"] == "slack.user_named" for e in logs), 15)
    order = [kind for kind, _ in fake.timeline]
    assert order.index("users.info 429") < order.index("users.info answered")
    assert fake.timeline.index(("ack", envelope)) < order.index("users.info answered")
    later = await fake.send_event(fake.message(CHANNEL, "and ends monday"))
    await fake.wait_for(lambda: later in fake.acks)
    assert [(m.text, m.author_name) for m in await stored(rt)] == [
        ("deploy freeze starts friday", ALICE),
        ("and ends monday", "alice"),
    ]


async def test_malformed_slack_timestamp_header_is_401_without_a_traceback(
    make_config: Callable[..., Config], caplog: pytest.LogCaptureFixture
) -> None:
    """HTTP mode refuses a request whose X-Slack-Request-Timestamp is not a number with 401,
    logs no traceback, stores nothing, and still serves the next genuine event."""
    async with FakeSlack(team_id=TEAM) as fake:
        fake.users[ALICE] = "alice"
        async with Runtime.open(make_config(), llm=ScriptedLLM(chat_reply="noted")) as rt:
            adapter = slack(fake, mode="http", host="127.0.0.1", port=0)
            assert await rt.start_adapter(adapter)
            url = f"http://127.0.0.1:{adapter.http_addresses[0][1]}/slack/events"
            caplog.set_level(logging.DEBUG)
            bad = fake.event_callback(fake.message(CHANNEL, "<@UBOT> sneaky"))
            for stamp in ("not-a-number", "1e9", "", " 1700000000", "١٧٠٠٠٠٠٠٠٠", "9" * 5000):
                status, body = await post_signed_event(url, bad, SECRET, timestamp=stamp)
                assert (status, stamp) == (401, stamp) and "invalid request" in body
            assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
            good = fake.event_callback(fake.message(CHANNEL, "<@UBOT> genuine"))
            assert (await post_signed_event(url, good, SECRET))[0] == 200
            await fake.wait_for(lambda: fake.posted(CHANNEL))
            assert [m.text for m in await stored(rt)] == ["genuine"]
