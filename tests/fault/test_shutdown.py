"""SIGTERM during a turn: the reply is still posted, or kept and posted after the restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.adapters.slack import SlackAdapter
from bot.runtime import Runtime
from tests.fault.running_bot import (
    Bot,
    run_until_event,
    slack_env,
    slack_section,
    until,
    write_config,
)
from tests.helpers import inbound
from tierbot.config import load_config
from tierbot.testing import FakeSlack
from tierbot.testing.llm_server import FakeLLMServer, Reply
from tierbot.testing.scripted import ScriptedLLM

DM = "D100"
ANSWER = "forty-two, after some thought"


async def ask_and_wait_for_the_model(fake: FakeSlack, srv: FakeLLMServer) -> str:
    """Send a DM; return its ts once Slack has its ack and the model is working on it."""
    await fake.wait_connected(within=60)
    event = fake.message(DM, "what is the answer?", channel_type="im")
    envelope = await fake.send_event(event)
    await fake.wait_for(lambda: envelope in fake.acks, within=30)
    await until(lambda: srv.requests, within=30, what="the model call")
    return str(event["ts"])


@pytest.mark.slow
async def test_sigterm_during_a_turn_posts_the_reply_then_exits_0(tmp_path: Path) -> None:
    """SIGTERM while the model is answering: the reply still reaches Slack, and the exit is 0."""
    async with FakeSlack() as fake, FakeLLMServer(default=Reply(ANSWER, delay=3.0)) as srv:
        cfg = write_config(
            tmp_path, slack_section(fake.api_base_url), llm_base_url=srv.openai_base_url
        )
        bot = await Bot(cfg, slack_env(fake)).start()
        try:
            asked = await ask_and_wait_for_the_model(fake, srv)
            assert fake.posted(DM) == []  # the model has not answered yet
            bot.terminate()
            assert await bot.exit_code(within=30) == 0, bot.output
        finally:
            await bot.stop()
        assert [p["text"] for p in fake.posted(DM)] == [ANSWER]
        stopped = bot.events("runtime.stopped")[-1]
        assert stopped["undelivered"] == 0 and stopped["drained"] is True
        assert not bot.events("reply.delivery_failed"), asked


@pytest.mark.slow
async def test_reply_the_platform_could_not_take_at_shutdown_is_posted_once_after_restart(
    tmp_path: Path,
) -> None:
    """Slack unreachable when the reply is ready at shutdown: the reply is reported (channel
    and message named, counted at shutdown) and posted once by the next run, never re-asked."""
    async with FakeLLMServer(default=Reply(ANSWER, delay=3.0)) as srv:
        async with FakeSlack() as down:
            cfg = write_config(
                tmp_path, slack_section(down.api_base_url), llm_base_url=srv.openai_base_url
            )
            first = await Bot(cfg, slack_env(down)).start()
            try:
                asked = await ask_and_wait_for_the_model(down, srv)
                await down.close()  # Slack is gone before the reply is ready
                first.terminate()
                assert await first.exit_code(within=30) == 0, first.output
            finally:
                await first.stop()
        assert down.posted(DM) == []
        failed = first.events("reply.delivery_failed")
        assert [(e["channel"], e["reply_to"], e["kept"]) for e in failed] == [
            (f"slack:{down.team_id}:{DM}", asked, True)
        ]
        assert first.events("runtime.replies_undelivered")[-1]["count"] == 1
        assert first.events("runtime.stopped")[-1]["undelivered"] == 1

        async with FakeSlack() as back:
            cfg = write_config(
                tmp_path, slack_section(back.api_base_url), llm_base_url=srv.openai_base_url
            )
            second = await run_until_event(
                cfg, slack_env(back), "replies.redelivered", "the kept reply to be posted"
            )
            assert [p["text"] for p in back.posted(DM)] == [ANSWER]
        assert second.events("runtime.stopped")[-1]["undelivered"] == 0
        assert len(srv.requests) == 1  # answered once: the restart posted, it did not re-ask


async def test_messages_arriving_during_the_drain_are_stored_and_answered_after_restart(
    tmp_path: Path,
) -> None:
    """A message that arrives while a stopping bot finishes its turn is stored at once (so it
    can be acknowledged) and answered by the next start, not lost and not answered twice."""
    path = tmp_path / "config.toml"
    path.write_text(f'[storage]\npath = "{tmp_path / "bot.db"}"\n[memory]\nenabled = false\n')
    cfg = load_config(path)
    async with FakeSlack() as fake:
        channel = f"slack:{fake.team_id}:{DM}"
        llm = ScriptedLLM(chat_reply="first answer")
        llm.gate["chat"] = asyncio.Event()
        rt = await Runtime.open(cfg, llm=llm)
        await rt.submit(inbound(channel, "one", pid="1.000001", dm=True))
        await until(lambda: llm.count("chat"), within=15, what="the first turn")
        closing = asyncio.create_task(rt.aclose())
        await until(lambda: rt.draining, within=15, what="the drain")
        delivery = await rt.submit(inbound(channel, "two", pid="1.000002", dm=True))
        assert delivery.accepted
        llm.gate["chat"].set()
        await asyncio.wait_for(closing, 15)
        assert [o.text for o in rt.outbox.sent] == ["first answer"]
        assert llm.count("chat") == 1

        slack = cfg.adapters.slack.model_copy(
            update={"enabled": True, "api_base_url": fake.api_base_url}
        )
        again_llm = ScriptedLLM(chat_reply="second answer")
        async with Runtime.open(cfg, llm=again_llm) as again:
            assert await again.start_adapter(SlackAdapter(slack, environ=slack_env(fake)))
            await fake.wait_for(lambda: fake.posted(DM), within=15)
            await again.drain()
        assert [p["text"] for p in fake.posted(DM)] == ["second answer"]
        assert again_llm.count("chat") == 1


async def test_reply_refused_while_running_is_kept_and_posted_once_when_slack_takes_it(
    tmp_path: Path,
) -> None:
    """Slack keeps answering 429 past the client's retries: the reply is not dropped but
    kept, and posted once a few seconds later when Slack accepts it again."""
    path = tmp_path / "config.toml"
    path.write_text(f'[storage]\npath = "{tmp_path / "bot.db"}"\n[memory]\nenabled = false\n')
    cfg = load_config(path)
    async with FakeSlack() as fake:
        slack = cfg.adapters.slack.model_copy(
            update={"enabled": True, "api_base_url": fake.api_base_url}
        )
        adapter = SlackAdapter(slack, environ=slack_env(fake), rate_limit_retries=1)
        async with Runtime.open(cfg, llm=ScriptedLLM(chat_reply="patience")) as rt:
            assert await rt.start_adapter(adapter)
            fake.rate_limit(2, retry_after=0)  # the first try and its one retry
            await fake.send_event(fake.message(DM, "hello?", channel_type="im"))
            await until(lambda: rt.kept == 1, within=15, what="the reply to be kept")
            await fake.wait_for(lambda: fake.posted(DM), within=30)
            await rt.drain()
            assert await rt.store.undelivered() == []
        assert [p["text"] for p in fake.posted(DM)] == ["patience"]
