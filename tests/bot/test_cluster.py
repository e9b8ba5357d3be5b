"""Several processes, one bot: channel leases, wake-ups, fencing and takeover on PostgreSQL.

Two runtimes in one test process stand for two ``tierbot run`` processes on one
database (the end-to-end test in tests/fault/test_cluster_e2e.py uses real processes
and a SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest

from bot.runtime import Runtime
from tests.helpers import inbound, wait_for
from tierbot.config import Config
from tierbot.errors import ConfigError, StoreError
from tierbot.llm.offline import OfflineProvider
from tierbot.messages import Message, Role
from tierbot.pg.cluster import LeaseLostError

CH = "test:cluster"


@pytest.fixture
def cluster_config(
    make_config: Callable[..., Config], pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], Config]:
    monkeypatch.setenv("TIERBOT_DATABASE_URL", pg_dsn)

    def build(process_id: str, extra: dict[str, Any] | None = None, **cluster: Any) -> Config:
        return make_config(
            {
                **(extra or {}),
                "storage": {"backend": "postgres"},
                "defaults": {"respond": "always"},
                "cluster": {
                    "enabled": True,
                    "process_id": process_id,
                    "lease_seconds": 2.0,
                    "heartbeat_seconds": 0.2,
                    **cluster,
                },
            }
        )

    return build


@contextlib.asynccontextmanager
async def process(cfg: Config) -> AsyncIterator[Runtime]:
    async with Runtime.open(cfg, llm=OfflineProvider()) as rt:
        yield rt


def replies(rt: Runtime, channel: str = CH) -> list[str]:
    return [o.text for o in rt.outbox.sent if o.channel == channel]


async def stored(rt: Runtime, channel: str = CH) -> list[Message]:
    return [m async for m in rt.store.export(channel)]


async def test_a_message_received_by_another_process_is_answered_by_the_owner(
    cluster_config: Callable[..., Config],
) -> None:
    async with process(cluster_config("a")) as a, process(cluster_config("b")) as b:
        await a.submit(inbound(CH, "Remember that my locker code is 4411.", pid="m1"))
        await wait_for(lambda: len(replies(a)) == 1)
        assert a.cluster is not None and CH in a.cluster.leases.held
        # b receives the next message of a's channel: it stores it and wakes a.
        delivery = await b.submit(inbound(CH, "What is my locker code?", pid="m2"))
        assert delivery.accepted
        await wait_for(lambda: len(replies(a)) == 2)
        assert "4411" in replies(a)[1]
        assert replies(b) == [] and CH not in b.registry.actors
        # A command there names the situation instead of starting a second actor.
        answer = await b.command(inbound(CH, "/status", pid="c1"), is_admin=False)
        assert answer is not None and "served by another process" in answer
        assert CH not in b.registry.actors
        users = [m.platform_id for m in await stored(a) if m.role is Role.USER]
        assert users == ["m1", "m2"]  # each stored once, in order
        # A redelivery of m2 to either process is a duplicate, not a second question.
        assert (await a.submit(inbound(CH, "What is my locker code?", pid="m2"))).accepted is False


async def test_an_owner_that_lost_its_lease_cannot_write_the_channel(
    cluster_config: Callable[..., Config], pg_dsn: str
) -> None:
    async with process(cluster_config("a")) as a:
        await a.submit(inbound(CH, "hello there", pid="m1"))
        await wait_for(lambda: len(replies(a)) == 1)
        conn = await asyncpg.connect(pg_dsn)
        try:
            # a stalls past its lease (a long GC pause, a frozen VM) and b takes over.
            await conn.execute(
                "UPDATE channel_leases SET owner = 'b', token = nextval('lease_tokens') "
                "WHERE channel = $1",
                CH,
            )
        finally:
            await conn.close()
        before = len(await stored(a))
        reply = Message(channel=CH, platform_id="late", role=Role.ASSISTANT, text="late", tokens=1)
        with pytest.raises(LeaseLostError, match="no longer holds its lease"):
            await a.store.append(reply)
        assert len(await stored(a)) == before
        # Its next heartbeat notices and stops the channel's actor here.
        await wait_for(lambda: CH not in a.registry.actors)


class _PausingPool:
    """A pool whose connections run ``hook`` right after the heartbeat has read the lease
    table: a lease taken there commits after that read, as under load it may."""

    def __init__(self, pool: Any, hook: Callable[[], Any]) -> None:
        self._pool, self._hook = pool, hook

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        async with self._pool.acquire() as conn:
            yield _PausingConn(conn, self)


class _PausingConn:
    def __init__(self, conn: Any, pool: _PausingPool) -> None:
        self._conn, self._owner = conn, pool

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def fetch(self, query: str, *args: Any) -> Any:
        rows = await self._conn.fetch(query, *args)
        if query.startswith("SELECT channel, token FROM channel_leases"):
            hook, self._owner._hook = self._owner._hook, None
            if hook is not None:
                await hook()
        return rows


async def test_a_lease_taken_while_a_heartbeat_runs_is_kept_and_its_messages_answered(
    cluster_config: Callable[..., Config],
) -> None:
    """A channel claimed between the heartbeat's read of the lease table and its end was
    once counted as lost: its actor was stopped, wake-ups for it were ignored, and the
    lease, still renewed, kept every other process away, so its messages went unanswered."""
    async with process(cluster_config("a")) as a, process(cluster_config("b")) as b:
        assert a.cluster is not None
        leases = a.cluster.leases

        async def claim() -> None:
            assert await leases.acquire(CH) is not None

        real = leases._pool
        leases._pool = _PausingPool(real, claim)  # type: ignore[assignment]
        try:
            lost = await leases.heartbeat({})
        finally:
            leases._pool = real
        assert CH not in lost and CH in leases.held
        # The channel is a's: a message b receives for it is answered by a.
        assert (await b.submit(inbound(CH, "anyone home?", pid="m1"))).accepted
        await wait_for(lambda: len(replies(a)) == 1)
        assert replies(b) == []


async def test_a_message_that_commits_after_a_later_one_is_still_answered(
    cluster_config: Callable[..., Config], pg_dsn: str
) -> None:
    """Ids are drawn before commit: a message another process stores can become visible
    after a later one the owner was already handed.  Its owner still answers it, once."""

    def answered(pid: str) -> int:
        return sum(1 for o in a.outbox.sent if o.channel == CH and o.reply_to == pid)

    async with process(cluster_config("a")) as a, process(cluster_config("b")) as b:
        await a.submit(inbound(CH, "hello", pid="m1"))
        await wait_for(lambda: answered("m1") == 1)
        slow = await asyncpg.connect(pg_dsn)
        try:
            tx = slow.transaction()
            await tx.start()  # another process's store, slow to commit (and its wake-up lost)
            early = await slow.fetchval(
                "INSERT INTO messages (channel, platform_id, role, author_id, author_name, "
                "text, ts, tokens, pos, meta) VALUES ($1, 'm2', 'user', 'dana', 'dana', "
                "'is the build green?', 0, 6, 0, '{\"addressed\": true}') RETURNING id",
                CH,
            )
            await slow.execute("UPDATE messages SET pos = id WHERE id = $1", early)
            assert (await b.submit(inbound(CH, "and the deploy?", pid="m3"))).accepted
            await wait_for(lambda: answered("m3") >= 1)
            actor = a.registry.actors[CH]
            assert actor.last_seen > early and not actor.has_seen(early)
            await tx.commit()
        finally:
            await slow.close()
        await wait_for(lambda: answered("m2") >= 1)
        await asyncio.sleep(0.6)  # three more heartbeats: answered once, not again
        assert answered("m2") == 1 and replies(b) == []


async def test_a_dead_owners_unanswered_channel_is_taken_over(
    cluster_config: Callable[..., Config], pg_dsn: str
) -> None:
    async with process(cluster_config("b")) as b:
        conn = await asyncpg.connect(pg_dsn)
        try:
            # "ghost" stored a question, held the lease and died before answering.
            await conn.execute("INSERT INTO channels (key) VALUES ($1)", CH)
            await conn.execute(
                "INSERT INTO messages (channel, platform_id, role, author_id, author_name, "
                "text, ts, tokens, pos, meta) VALUES ($1, 'q1', 'user', 'dana', 'dana', "
                "'are you there?', 0, 4, 0, '{\"addressed\": true}')",
                CH,
            )
            await conn.execute("UPDATE messages SET pos = id WHERE platform_id = 'q1'")
            await conn.execute(
                "INSERT INTO channel_leases VALUES ($1, 'ghost', nextval('lease_tokens'), "
                "clock_timestamp() + interval '1 second')",
                CH,
            )
            await wait_for(lambda: len(replies(b)) == 1, timeout=10)
            owner = await conn.fetchval("SELECT owner FROM channel_leases WHERE channel = $1", CH)
        finally:
            await conn.close()
        assert owner == "b"
        assert b.cluster is not None and b.cluster.takeovers == 1


async def test_a_clean_stop_hands_its_channels_over_at_once(
    cluster_config: Callable[..., Config], pg_dsn: str
) -> None:
    async with process(cluster_config("b", lease_seconds=600.0, heartbeat_seconds=0.2)) as b:
        async with process(cluster_config("a", lease_seconds=600.0)) as a:
            await a.submit(inbound(CH, "hello", pid="m1"))
            await wait_for(lambda: len(replies(a)) == 1)
        # With a ten-minute lease, only the release lets b answer now.
        await b.submit(inbound(CH, "still there?", pid="m2"))
        await wait_for(lambda: len(replies(b)) == 1)
        conn = await asyncpg.connect(pg_dsn)
        try:
            rows = await conn.fetch("SELECT id FROM cluster_processes")
        finally:
            await conn.close()
        assert [r["id"] for r in rows] == ["b"]


async def test_two_live_processes_cannot_share_a_process_id(
    cluster_config: Callable[..., Config],
) -> None:
    async with process(cluster_config("same")):
        with pytest.raises(StoreError, match="process_id 'same' is in use"):
            async with process(cluster_config("same")):
                pass


def test_a_cluster_on_sqlite_is_refused_naming_the_keys(make_config: Callable[..., Config]) -> None:
    with pytest.raises(ConfigError, match=r"\[cluster\] enabled = true needs \[storage\]"):
        make_config({"cluster": {"enabled": True}})


def test_a_heartbeat_too_slow_for_the_lease_is_refused(make_config: Callable[..., Config]) -> None:
    with pytest.raises(ConfigError, match="heartbeat_seconds"):
        make_config({"cluster": {"lease_seconds": 2.0, "heartbeat_seconds": 1.5}})


async def test_status_lists_every_process_of_the_cluster_with_its_leases(
    cluster_config: Callable[..., Config],
) -> None:
    from bot.cli_ops import render_status_view
    from bot.ops import cluster_view

    async with process(cluster_config("a")) as a, process(cluster_config("b")) as b:
        await a.submit(inbound("test:one", "hello", pid="m1"))
        await b.submit(inbound("test:two", "hello", pid="m2"))
        await b.submit(inbound("test:three", "hello", pid="m3"))
        view = await cluster_view(a)
        text = render_status_view({"cluster": view}, "http://127.0.0.1:8686")
    assert [(p["id"], p["leases"], p["alive"]) for p in view["processes"]] == [
        ("a", 1, True),
        ("b", 2, True),
    ]
    assert "cluster: this is a, owning 1 channels" in text
    assert "b" in text and "2 leases" in text


async def test_each_process_labels_its_metrics_with_its_id(
    cluster_config: Callable[..., Config],
) -> None:
    """Scraping every process of a cluster, a dashboard tells them apart by ``process``."""
    import aiohttp

    from bot.ops import OpsServer
    from tests.bot.test_ops import samples, value

    async with process(cluster_config("a")) as a, process(cluster_config("b")) as b:
        await a.submit(inbound(CH, "hello", pid="m1"))
        await wait_for(lambda: len(replies(a)) == 1)
        pages = {}
        for rt in (a, b):
            async with OpsServer(rt, port=0) as ops, aiohttp.ClientSession() as http:
                async with http.get(f"{ops.url}/metrics") as resp:
                    assert resp.status == 200
                    pages[rt.cluster.id if rt.cluster else ""] = samples(await resp.text())
    for pid, page in pages.items():
        assert page and all(dict(labels).get("process") == pid for _, labels in page)
    name = "tierbot_messages_in_total"
    assert value(pages["a"], name, adapter="test", process="a") == 1
    assert value(pages["b"], name, adapter="test", process="b") == 0


@pytest.mark.slow
async def test_discord_shards_split_the_guilds_and_a_dm_reaches_its_owner(
    cluster_config: Callable[..., Config],
) -> None:
    """Two processes run one shard each of a two-shard bot: each is sent its own guilds
    and answers there; a DM arrives on shard 0 and is answered by its channel's owner."""
    from bot.adapters.discord import DiscordAdapter
    from tierbot.testing import FakeDiscord

    g0, g1 = str(10 << 22), str(11 << 22)  # (id >> 22) % 2: shard 0 and shard 1
    async with FakeDiscord(heartbeat_ms=500) as fake:
        fake.add_guild(g0, "zero", {"5001": "general"})
        fake.add_guild(g1, "one", {"5002": "general"})

        def config(name: str, shard: int) -> Config:
            discord = {
                "enabled": True,
                "api_base": fake.api_base,
                "gateway_url": fake.gateway_url,
                "shard_count": 2,
                "shard_ids": [shard],
                "respond": "mention",
            }
            return cluster_config(name, {"adapters": {"discord": discord}})

        async def start(rt: Runtime) -> DiscordAdapter:
            adapter = DiscordAdapter(
                rt.config.adapters.discord,
                environ={"DISCORD_TOKEN": fake.token},
                guild_ready_timeout=0.05,
                ready_timeout=10.0,
            )
            assert await rt.start_adapter(adapter)
            return adapter

        async with process(config("a", 0)) as a, process(config("b", 1)) as b:
            await start(a)
            await start(b)
            assert sorted(tuple(i["shard"]) for i in fake.identifies) == [(0, 2), (1, 2)]
            hello = f"<@{fake.bot_id}> hello"
            await fake.inject_message("5001", hello, guild_id=g0, mentions=[fake.bot_user])
            await fake.inject_message("5002", hello, guild_id=g1, mentions=[fake.bot_user])
            await fake.wait_for(lambda: fake.posted("5001") and fake.posted("5002"), 10)
            assert list(a.registry.actors) == [f"discord:{g0}:5001"]
            assert list(b.registry.actors) == [f"discord:{g1}:5002"]
            # b owns alice's DM channel (it answered her before the shards were split).
            dm = "discord:dm:100"
            assert b.cluster is not None and await b.cluster.leases.acquire(dm)
            await fake.inject_message("1000", "are you there?")  # arrives on shard 0: a
            await fake.wait_for(lambda: fake.posted("1000"), 10)
            assert dm in b.registry.actors and dm not in a.registry.actors
            assert a.cluster is not None and a.cluster.woken == 1


def test_shard_ids_outside_the_shard_count_are_refused(make_config: Callable[..., Config]) -> None:
    with pytest.raises(ConfigError, match=r"adapters\.discord.*shard_ids \[2\] are outside 0\.\.1"):
        make_config({"adapters": {"discord": {"shard_count": 2, "shard_ids": [0, 2]}}})
    with pytest.raises(ConfigError, match="shard_ids needs shard_count"):
        make_config({"adapters": {"discord": {"shard_ids": [0]}}})


async def test_a_dropped_notification_connection_delays_but_loses_nothing(
    cluster_config: Callable[..., Config], pg_dsn: str
) -> None:
    async with process(cluster_config("a")) as a, process(cluster_config("b")) as b:
        await a.submit(inbound(CH, "hello", pid="m1"))
        await wait_for(lambda: len(replies(a)) == 1)
        member = a.cluster
        assert member is not None and member._listener is not None
        conn = await asyncpg.connect(pg_dsn)
        try:  # the server drops a's listening connection (a restart, a network cut)
            await conn.execute("SELECT pg_terminate_backend($1)", member._listener.get_server_pid())
        finally:
            await conn.close()
        await b.submit(inbound(CH, "are you there?", pid="m2"))  # its NOTIFY is lost
        await wait_for(lambda: len(replies(a)) == 2, timeout=10)
        await wait_for(lambda: member._listener is not None and not member._listener.is_closed())


async def test_a_failed_wake_up_still_acknowledges_and_the_owner_answers(
    cluster_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch
) -> None:
    import bot.cluster

    async with process(cluster_config("a")) as a, process(cluster_config("b")) as b:
        await a.submit(inbound(CH, "hello", pid="m1"))
        await wait_for(lambda: len(replies(a)) == 1)
        # From now on b's NOTIFY is refused by the server (an empty channel name).
        monkeypatch.setattr(bot.cluster, "INBOX_CHANNEL", "")
        delivery = await b.submit(inbound(CH, "are you there?", pid="m2"))
        assert delivery.accepted  # it is stored: a failure here would make Slack resend it
        await wait_for(lambda: len(replies(a)) == 2, timeout=10)  # the heartbeat pulls it


async def test_a_listener_that_cannot_connect_stops_the_start_with_one_line(
    cluster_config: Callable[..., Config], monkeypatch: pytest.MonkeyPatch, pg_dsn: str
) -> None:
    import bot.cluster
    from tierbot.errors import StoreError

    async def refused(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(bot.cluster.asyncpg, "connect", refused)
    with pytest.raises(StoreError, match=r"\[cluster\] cannot listen for wake-ups at .*refused"):
        await Runtime.open(cluster_config("a"), llm=OfflineProvider())
    monkeypatch.undo()
    conn = await asyncpg.connect(pg_dsn)
    try:  # what the failed start registered is gone again
        assert await conn.fetchval("SELECT count(*) FROM cluster_processes") == 0
    finally:
        await conn.close()
