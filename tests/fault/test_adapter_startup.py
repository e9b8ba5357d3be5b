"""Adapter startup: a refused token ends `tierbot run` at once; an unreachable platform is
retried, shown by /health, and connected to when it comes up."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.fault.running_bot import (
    Bot,
    discord_env,
    discord_section,
    free_port,
    health_until,
    slack_env,
    slack_section,
    write_config,
)
from tierbot.errors import AdapterError
from tierbot.retry import Backoff, retry_forever
from tierbot.testing import FakeDiscord, FakeSlack

GUILD, CHANNEL, DM = "111", "1001", "D100"


@pytest.mark.slow
async def test_refused_discord_token_exits_1_within_15_s_naming_the_adapter(
    tmp_path: Path,
) -> None:
    """Discord answers 401 to the token: exit 1 within 15 s, naming discord and DISCORD_TOKEN."""
    async with FakeDiscord() as fake:
        cfg = write_config(tmp_path, discord_section(fake.port))
        started = time.monotonic()
        bot = await Bot(cfg, discord_env(fake, token="revoked-token")).start()
        try:
            code = await bot.exit_code(within=15)
        finally:
            await bot.stop()
    assert code == 1, bot.output
    assert time.monotonic() - started < 15
    assert "tierbot: [adapters.discord] Discord rejected the bot token in $DISCORD_TOKEN" in (
        bot.output
    )
    assert not [r for r in fake.requests if r.path.endswith("/messages")]


@pytest.mark.slow
async def test_refused_slack_token_exits_1_within_15_s_naming_the_adapter(tmp_path: Path) -> None:
    """Slack answers invalid_auth: exit 1 within 15 s, naming slack and SLACK_BOT_TOKEN."""
    async with FakeSlack() as fake:
        cfg = write_config(tmp_path, slack_section(fake.api_base_url))
        bot = await Bot(cfg, slack_env(fake, bot_token="xoxb-revoked")).start()
        try:
            code = await bot.exit_code(within=15)
        finally:
            await bot.stop()
    assert code == 1, bot.output
    assert "tierbot: [adapters.slack] Slack rejected the bot token in $SLACK_BOT_TOKEN" in (
        bot.output
    )
    assert "(invalid_auth)" in bot.output
    assert "no adapter is running" not in bot.output


@pytest.mark.slow
async def test_discord_unreachable_at_startup_is_retried_and_connects_when_it_comes_up(
    tmp_path: Path,
) -> None:
    """Discord not listening at startup: the bot keeps running, /health says discord is
    retrying, and once Discord is up the adapter connects and a mention is answered."""
    fake = FakeDiscord()
    fake.port = free_port()
    fake.add_guild(GUILD, "home", {CHANNEL: "general"})
    ops = free_port()
    cfg = write_config(tmp_path, discord_section(fake.port), ops_port=ops)
    bot = await Bot(cfg, discord_env(fake)).start()
    try:
        body = await health_until(
            ops, lambda s, b: b.get("checks", {}).get("adapter:discord", "").startswith("retrying")
        )
        assert body["status"] == "unhealthy"
        assert bot.proc is not None and bot.proc.returncode is None
        await fake.start()
        await health_until(ops, lambda s, b: s == 200)
        await fake.inject_message(
            CHANNEL, f"<@{fake.bot_id}> are you there?", guild_id=GUILD, mentions=[fake.bot_user]
        )
        await fake.wait_for(lambda: fake.posted(CHANNEL), within=30)
        bot.terminate()
        assert await bot.exit_code(within=30) == 0, bot.output
    finally:
        await bot.stop()
        await fake.close()
    assert "no adapter is running" not in bot.output


@pytest.mark.slow
async def test_slack_unreachable_at_startup_is_retried_and_connects_when_it_comes_up(
    tmp_path: Path,
) -> None:
    """Slack not listening at startup: the bot keeps running, /health says slack is retrying,
    and once Slack is up the adapter connects and a DM is answered."""
    fake = FakeSlack()
    fake.port = free_port()
    ops = free_port()
    cfg = write_config(tmp_path, slack_section(fake.api_base_url), ops_port=ops)
    bot = await Bot(cfg, slack_env(fake)).start()
    try:
        await health_until(
            ops, lambda s, b: b.get("checks", {}).get("adapter:slack", "").startswith("retrying")
        )
        assert bot.proc is not None and bot.proc.returncode is None
        await fake.start()
        await health_until(ops, lambda s, b: s == 200)
        await fake.send_event(fake.message(DM, "hello?", channel_type="im"))
        await fake.wait_for(lambda: fake.posted(DM), within=30)
        bot.terminate()
        assert await bot.exit_code(within=30) == 0, bot.output
    finally:
        await bot.stop()
        await fake.close()


async def test_retry_forever_backs_off_until_success_and_lets_fatal_errors_through() -> None:
    """Transient failures are retried with capped, growing waits; a fatal one ends at once."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    failures = iter([OSError("refused")] * 5)

    async def flaky() -> str:
        for exc in failures:
            raise exc
        return "up"

    backoff = Backoff(base=1.0, cap=4.0, jitter=0.0)
    assert await retry_forever(flaky, backoff=backoff, what="t", sleep=sleep) == "up"
    assert waits == [1.0, 2.0, 4.0, 4.0, 4.0]

    async def refused() -> str:
        raise AdapterError("token refused")

    with pytest.raises(AdapterError):
        await asyncio.wait_for(
            retry_forever(refused, backoff=backoff, what="t", fatal=(AdapterError,), sleep=sleep),
            5,
        )
