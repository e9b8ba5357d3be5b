"""Fault injection for commands: hostile or accidental "/" text, cross-workspace forgets,
silent /compact, and a DNS-rebinding page reading the ops endpoint."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable

import aiohttp
import pytest

from bot.adapters.console import ConsoleAdapter
from bot.adapters.discord import DiscordAdapter
from bot.adapters.slack import SlackAdapter
from bot.cli_ops import record_json, render_history
from bot.ops import OpsServer
from bot.runtime import Runtime
from tests.helpers import inbound, wait_for
from tierbot.config import Config, ConsoleAdapterConfig, DiscordAdapterConfig, SlackAdapterConfig
from tierbot.errors import ToolError, TransientLLMError
from tierbot.llm.base import Completion, ToolCall
from tierbot.messages import Role
from tierbot.testing import FakeDiscord, FakeSlack
from tierbot.testing.scripted import ScriptedLLM

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
    cfg = DiscordAdapterConfig(
        enabled=True, api_base=fake.api_base, gateway_url=fake.gateway_url, admins=[ALICE_DISCORD]
    )
    return DiscordAdapter(
        cfg, environ={"DISCORD_TOKEN": fake.token}, guild_ready_timeout=0.05, ready_timeout=5.0
    )


def _slack(fake: FakeSlack) -> SlackAdapter:
    cfg = SlackAdapterConfig(enabled=True, api_base_url=fake.api_base_url, admins=[ALICE_SLACK])
    env = {
        "SLACK_BOT_TOKEN": fake.bot_token,
        "SLACK_APP_TOKEN": fake.app_token,
        "SLACK_SIGNING_SECRET": "s3cret",
    }
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
        async with Runtime.open(make_config(), llm=ScriptedLLM(chat_reply=REPLY)) as rt:
            assert await rt.start_adapter(_discord(fd))
            for text in SLASH_TEXTS:
                await fd.inject_message(CHANNEL, text, guild_id=GUILD)
            await fd.inject_message(
                CHANNEL, f"<@{fd.bot_id}> /status", guild_id=GUILD, mentions=[fd.bot_user]
            )
            await fd.wait_for(lambda: fd.posted(CHANNEL))
            await fd.inject_message(
                CHANNEL, f"<@{fd.bot_id}> /shrug", guild_id=GUILD, mentions=[fd.bot_user]
            )
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
        async with Runtime.open(make_config(), llm=ScriptedLLM(chat_reply=REPLY)) as rt:
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
    console = ConsoleAdapter(
        ConsoleAdapterConfig(),
        channel="console:local",
        stdin=io.StringIO("/help\n/r/python is busy today\n"),
        stdout=out,
    )
    async with Runtime.open(make_config(), llm=ScriptedLLM(chat_reply=REPLY)) as rt:
        assert await rt.start_adapter(console)
        await wait_for(lambda: console.finished.is_set())
        await rt.drain()
        printed = out.getvalue()
        assert "Commands:\n  /status" in printed and f"tierbot> {REPLY}" in printed
        assert await _user_texts(rt, "console:local") == ["/r/python is busy today"]


@pytest.mark.parametrize("ending", ["", "/quit\n"], ids=["end-of-input", "quit"])
async def test_a_piped_chat_prints_its_answers_before_it_says_bye(
    make_config: Callable[..., Config], ending: str
) -> None:
    """`tierbot chat < script`: the script ends (or says /quit) while the model is still
    answering: the answer is printed, and "Bye." is the last line (it was printed first,
    the answers after it, as if the chat had ended without them)."""
    out = io.StringIO()
    console = ConsoleAdapter(
        ConsoleAdapterConfig(),
        channel="console:local",
        stdin=io.StringIO("what did we decide about the cache?\n" + ending),
        stdout=out,
    )
    llm = ScriptedLLM(chat_reply=REPLY, latency={"chat": 0.3})
    async with Runtime.open(make_config(), llm=llm) as rt:
        assert await rt.start_adapter(console)
        await wait_for(lambda: console.finished.is_set())
        printed = out.getvalue()
    assert f"tierbot> {REPLY}" in printed, printed
    assert printed.rstrip("\n").splitlines()[-1] == "Bye.", printed
    assert printed.count("Bye.") == 1, printed


# -- the ops endpoint ------------------------------------------------------------------------

SECRET_TASK = "find the vault code 7731-ALPHA-SECRET in the old thread"


async def _get(http: aiohttp.ClientSession, url: str, host: str | None = None) -> tuple[int, str]:
    headers = {"Host": host} if host is not None else {}
    async with http.get(url, headers=headers) as resp:
        return resp.status, await resp.text()


async def test_dns_rebinding_host_header_is_refused_by_the_ops_endpoint(
    make_config: Callable[..., Config],
) -> None:
    """A request naming a foreign host (a DNS-rebinding page) gets 403 on /status, /health and
    /metrics; localhost, 127.0.0.1 and [::1], with or without the port, are served."""
    async with (
        Runtime.open(make_config(), llm=ScriptedLLM()) as rt,
        OpsServer(rt, port=0) as ops,
        aiohttp.ClientSession() as http,
    ):
        port = ops.port
        for path in ("/status", "/health", "/metrics"):
            for host in (
                f"evil.example:{port}",
                "evil.example",
                f"localhost.evil.example:{port}",
                f"127.0.0.1.nip.io:{port}",
                "localhost:80x",
                "[::1",
            ):
                status, body = await _get(http, f"{ops.url}{path}", host)
                assert status == 403, (path, host, status)
                assert "allowed_hosts" in body and "channels" not in body
        for host in (
            f"localhost:{port}",
            "localhost",
            f"127.0.0.1:{port}",
            "127.0.0.1",
            f"[::1]:{port}",
            "[::1]",
            f"LOCALHOST:{port}",
        ):
            status, body = await _get(http, f"{ops.url}/status", host)
            assert status == 200 and '"channels"' in body, (host, status)


@pytest.mark.parametrize("bind", ["::1", "0.0.0.0"])
async def test_ops_endpoint_bound_elsewhere_serves_its_own_address_and_refuses_names(
    make_config: Callable[..., Config], bind: str
) -> None:
    """Bound to ::1 or to every interface, the endpoint answers at its own URL (the client's
    Host header) and at an IP address, and still refuses a foreign name."""
    async with (
        Runtime.open(make_config(), llm=ScriptedLLM()) as rt,
        OpsServer(rt, host=bind, port=0) as ops,
        aiohttp.ClientSession() as http,
    ):
        assert (await _get(http, f"{ops.url}/health"))[0] == 200
        assert (await _get(http, f"{ops.url}/health", f"evil.example:{ops.port}"))[0] == 403
        if bind == "0.0.0.0":
            assert (await _get(http, f"{ops.url}/health", f"192.0.2.7:{ops.port}"))[0] == 200


async def test_allowed_hosts_admits_a_named_scraper(make_config: Callable[..., Config]) -> None:
    """A name listed in [ops] allowed_hosts is served; other names still get 403."""
    cfg = make_config({"ops": {"allowed_hosts": ["tierbot"]}})
    async with (
        Runtime.open(cfg, llm=ScriptedLLM()) as rt,
        OpsServer(rt, port=0) as ops,
        aiohttp.ClientSession() as http,
    ):
        assert (await _get(http, f"{ops.url}/metrics", f"tierbot:{ops.port}"))[0] == 200
        assert (await _get(http, f"{ops.url}/metrics", f"evil:{ops.port}"))[0] == 403


@pytest.mark.parametrize("show", [False, True])
async def test_status_keeps_branch_task_text_out_unless_asked(
    make_config: Callable[..., Config], show: bool
) -> None:
    """/status of a running branch leaves out its task text (conversation words) by default and
    shows it only with [ops] status_task_text = true."""
    llm = ScriptedLLM()
    llm.gate["branch"] = asyncio.Event()
    call = ToolCall("c1", "branch", {"task": SECRET_TASK})
    llm.push("chat", Completion(text="", tool_calls=(call,)), Completion("on it"))
    llm.push("branch", Completion(text="found it"))
    cfg = make_config({"ops": {"status_task_text": show}})
    async with (
        Runtime.open(cfg, llm=llm) as rt,
        OpsServer(rt, port=0) as ops,
        aiohttp.ClientSession() as http,
    ):
        await rt.submit(inbound("replay:1", "please look into it"))
        await wait_for(lambda: llm.count("branch") == 1)
        status, body = await _get(http, f"{ops.url}/status")
        llm.gate["branch"].set()
        await rt.drain()
    assert status == 200
    [run] = json.loads(body)["channels"][0]["background"]
    assert run["kind"] == "branch" and run["status"] == "running"
    if show:
        assert run["task"] == SECRET_TASK
    else:
        assert "7731-ALPHA-SECRET" not in body and run["task_chars"] == len(SECRET_TASK)


# -- /compact ----------------------------------------------------------------------------------

COMPACT_CASES = {
    # outcome: (the summary model's answer, what the channel is told)
    "ok": (None, "/compact done: summarized 2 older messages and freed "),
    "noop": (Completion(text="summary " * 110), "/compact freed nothing (noop): the summary ("),
    "failed": (TransientLLMError("upstream 503"), "/compact failed: TransientLLMError: "),
}


@pytest.mark.slow
@pytest.mark.parametrize("outcome", list(COMPACT_CASES))
async def test_compact_that_fails_silently_now_tells_the_channel_how_it_ended(
    make_config: Callable[..., Config], outcome: str
) -> None:
    """After "@bot /compact" on Discord the channel is told whether it freed tokens, freed
    nothing (noop, with the reason) or failed (with the reason); /status and `channel show`
    name the same outcome."""
    step, told = COMPACT_CASES[outcome]
    llm = ScriptedLLM(chat_reply=REPLY)
    if step is not None:
        llm.push("summary", step)
    cfg = make_config({"defaults": {"context_window": 1000}})
    key = f"discord:{GUILD}:{CHANNEL}"
    async with FakeDiscord() as fd:
        fd.add_guild(GUILD, "home", {CHANNEL: "general"})
        async with Runtime.open(cfg, llm=llm) as rt:
            assert await rt.start_adapter(_discord(fd))
            for i in range(6):
                await fd.inject_message(CHANNEL, f"note {i}: " + "alpha " * 45, guild_id=GUILD)
            await wait_for(lambda: rt.registry.messages_in == 6)
            mention = f"<@{fd.bot_id}> "
            await fd.inject_message(
                CHANNEL, mention + "/compact", guild_id=GUILD, mentions=[fd.bot_user]
            )
            await fd.wait_for(lambda: len(fd.posted(CHANNEL)) == 2)
            started, note = fd.posted(CHANNEL)
            assert started.startswith("Compacting the oldest 2 messages")
            assert note.startswith(told), note
            await fd.inject_message(
                CHANNEL, mention + "/status", guild_id=GUILD, mentions=[fd.bot_user]
            )
            await fd.wait_for(lambda: len(fd.posted(CHANNEL)) == 3)
            status = fd.posted(CHANNEL)[2]
            records = await rt.store.compactions(key)
    assert f"last compaction: background {outcome} " in status
    assert [record_json(r)["outcome"] for r in records] == [outcome]
    rows = [" ".join(line.split()) for line in render_history(records, cfg, key).splitlines()]
    assert sum(f" background {outcome} " in row for row in rows) == 1, rows
    if outcome == "ok":
        freed = records[0].tokens_before - records[0].tokens_after
        assert freed > 0 and f"freed {freed} tokens" in note and f"freed {freed} tokens" in status
    else:
        assert records[0].reason in note and records[0].reason in status
        counters = status.split("compactions: ")[1].splitlines()[0]
        assert f"{outcome} 1" in counters and "background 0" in counters


# -- /forget --author ----------------------------------------------------------------------------

GUILD_B, CHANNEL_B, DM_CHANNEL = "222", "3001", "5005"
BOB = "200"
KEY_A, KEY_B, KEY_DM = (
    f"discord:{GUILD}:{CHANNEL}",
    f"discord:{GUILD_B}:{CHANNEL_B}",
    f"discord:dm:{BOB}",
)
#: Where each key is on the fake server (channel id, guild id or None for the DM).
WHERE = {KEY_A: (CHANNEL, GUILD), KEY_B: (CHANNEL_B, GUILD_B), KEY_DM: (DM_CHANNEL, None)}
BOB_SAYS = {  # channel key -> (what Bob said there, the memory saved from it)
    KEY_A: ("my phone is 555-0101 call me", "Bob's phone is 555-0101"),
    KEY_B: ("I live at 12 Elm Street", "Bob lives at 12 Elm Street"),
    KEY_DM: ("my password hint is bluebird", "Bob's password hint is bluebird"),
}


@pytest.mark.slow
async def test_forget_author_in_one_guild_reaches_other_guilds_and_dms(
    make_config: Callable[..., Config],
) -> None:
    """An admin's "/forget --author" in guild A deletes Bob's memories and messages there
    only; guild B and Bob's DM keep theirs, the reply counts guild A alone, and Bob can still
    be remembered in guild B."""
    cfg = make_config({"memory": {"enabled": True, "keep_messages_on_forget": False}})
    async with FakeDiscord() as fd:
        fd.add_guild(GUILD, "home", {CHANNEL: "general"})
        fd.add_guild(GUILD_B, "elsewhere", {CHANNEL_B: "general"})
        async with Runtime.open(cfg, llm=ScriptedLLM(chat_reply=REPLY)) as rt:
            assert await rt.start_adapter(_discord(fd))
            bob = fd.user(BOB, "bob")
            pids = {}
            for key, (said, _) in BOB_SAYS.items():
                channel_id, guild_id = WHERE[key]
                sent = await fd.inject_message(channel_id, said, guild_id=guild_id, author=bob)
                pids[key] = sent["id"]
            await fd.wait_for(lambda: fd.posted(DM_CHANNEL))  # the DM is answered
            await rt.drain()
            await rt.memory.indexer.flush()
            graph = rt.memory.graph
            memories = {}
            for key, (_, fact) in BOB_SAYS.items():
                saved = await graph.save(
                    fact, "fact", channel=key, author_id=BOB, sources=[pids[key]]
                )
                memories[key] = saved.id
            await fd.inject_message(
                CHANNEL,
                f"<@{fd.bot_id}> /forget --author {BOB}",
                guild_id=GUILD,
                mentions=[fd.bot_user],
            )
            await fd.wait_for(lambda: fd.posted(CHANNEL))
            [reply] = fd.posted(CHANNEL)
            assert reply.startswith("Forgot 1 memory and 1 indexed message that came from"), reply
            assert reply.endswith("Deleted 1 of their messages (keep_messages_on_forget = false).")
            for key, (said, _) in BOB_SAYS.items():
                kept = key != KEY_A
                assert (await graph.get(memories[key]) is not None) is kept, key
                assert (said in await _user_texts(rt, key)) is kept, key
            hits = await rt.memory.search("where does Bob live", channel=KEY_B, limit=5)
            assert any("Elm Street" in h["content"] for h in hits)
            # Only guild A forgets Bob from now on.
            assert await graph.save("Bob likes tea", "fact", channel=KEY_B, author_id=BOB)
            with pytest.raises(ToolError):
                await graph.save("Bob likes coffee", "fact", channel=KEY_A, author_id=BOB)
