"""The MessageStore contract, run against every implementation of tierbot.storage.MessageStore.

Each implementation is a fixture parameter: a way to open a store at a place (a path for
SQLite; for PostgreSQL, a database on the session's private server, one per place), and a
way to make its database refuse one row (to tell a constraint error from a duplicate).
A new backend adds itself to ``BACKENDS`` and must pass all of this unchanged.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from tierbot.errors import StoreError
from tierbot.messages import Message, Role, State
from tierbot.pg.store import PostgresStore
from tierbot.storage import ChannelState, CompactionRecord, MessageStore
from tierbot.store import Store
from tierbot.testing.postgres import PostgresServer
from tierbot.vocab import CompactionKind, Outcome


@dataclass(frozen=True)
class Backend:
    name: str
    open: Callable[[Path], Awaitable[MessageStore]]
    #: Make the database refuse any row whose text is "poison" (a constraint, not a dup).
    poison: Callable[[Path], Awaitable[None]]


async def _sqlite_poison(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON messages WHEN NEW.text = 'poison' "
            "BEGIN SELECT RAISE(ABORT, 'poisoned row refused'); END"
        )


async def _sqlite_open(path: Path) -> MessageStore:
    return await Store.open(path, synchronous="normal")


class _Postgres:
    """PostgreSQL: each place (a path) is one database on the session's server."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.dsns: dict[Path, str] = {}

    def dsn(self, path: Path) -> str:
        if path not in self.dsns:
            self.dsns[path] = self.server.create_database()
        return self.dsns[path]

    async def open(self, path: Path) -> MessageStore:
        return await PostgresStore.connect(self.dsn(path))

    async def poison(self, path: Path) -> None:
        conn = await asyncpg.connect(self.dsn(path))
        try:
            await conn.execute(
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.text = 'poison' THEN RAISE EXCEPTION 'poisoned row refused'; END IF; "
                "RETURN NEW; END $$; "
                "CREATE TRIGGER poison BEFORE INSERT ON messages FOR EACH ROW "
                "EXECUTE FUNCTION poison()"
            )
        finally:
            await conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", _sqlite_open, _sqlite_poison)
    pg = _Postgres(request.getfixturevalue("pg_server"))
    return Backend("postgres", pg.open, pg.poison)


@pytest.fixture
async def store(backend: Backend, tmp_path: Path) -> AsyncIterator[MessageStore]:
    s = await backend.open(tmp_path / "contract.db")
    try:
        yield s
    finally:
        await s.aclose()


def msg(pid: str, text: str = "hi", channel: str = "c", role: Role = Role.USER) -> Message:
    return Message(channel, pid, role, text, author_id="u1", tokens=3, ts=1.0)


async def test_appended_messages_come_back_in_order_with_growing_ids(store: MessageStore) -> None:
    a = await store.append(msg("p1", "first"))
    b, c = await store.append_many([msg("p2", "second"), msg("p3", "third", role=Role.ASSISTANT)])
    assert a is not None and b is not None and c is not None
    assert 0 < a.id < b.id < c.id
    assert [m.text for m in await store.load_live("c")] == ["first", "second", "third"]
    assert [m.text for m in await store.messages_after("c", a.id)] == ["second", "third"]
    assert [m.text for m in await store.get_messages([c.id, a.id])] == ["first", "third"]
    assert await store.last_message_id() == c.id
    assert await store.channel_keys() == ["c"]


async def test_only_a_redelivery_is_a_duplicate(store: MessageStore) -> None:
    first = await store.append(msg("p1", "original"))
    assert await store.append(msg("p1", "redelivered")) is None
    assert await store.append(msg("p1", channel="other")) is not None, "ids are per channel"
    assert first is not None
    assert [m.text for m in await store.load_live("c")] == ["original"]


async def test_a_constraint_error_raises_and_is_never_reported_as_a_duplicate(
    backend: Backend, tmp_path: Path
) -> None:
    path = tmp_path / "poisoned.db"
    s = await backend.open(path)
    await s.aclose()
    await backend.poison(path)
    s = await backend.open(path)
    try:
        with pytest.raises(StoreError, match="poisoned row refused"):
            await s.append(msg("p1", "poison"))
        ok = await s.append_many([msg("p2", "fine")])
        assert ok[0] is not None, "the store goes on after refusing one row"
        # Writes committed together: the refused one fails alone, the others land.
        results = await asyncio.gather(
            *(s.append(msg(f"q{i}", "poison" if i == 3 else f"ok {i}")) for i in range(8)),
            return_exceptions=True,
        )
        assert isinstance(results[3], StoreError)
        assert all(
            r is not None and not isinstance(r, BaseException)
            for i, r in enumerate(results)
            if i != 3
        )
        assert len(await s.load_live("c")) == 1 + 7
    finally:
        await s.aclose()


async def test_ids_are_never_reused_after_a_forget(store: MessageStore) -> None:
    await store.append(msg("p1"))
    last = await store.append(msg("p2"))
    assert last is not None
    assert await store.delete_messages([("c", "p2")]) == 1
    again = await store.append(msg("p3"))
    assert again is not None and again.id > last.id


async def test_a_swap_archives_what_its_summary_covers_and_links_them(
    store: MessageStore,
) -> None:
    stored = await store.append_many([msg(f"p{i}", f"m{i}") for i in range(4)])
    ids = [m.id for m in stored if m is not None]
    summary = Message("c", "summary-1", Role.SUMMARY, "they said hi", tokens=4, pos=ids[0])
    record = CompactionRecord(
        "c", CompactionKind.BACKGROUND, Outcome.OK, 1.0, 0.5, 0.8, 0.4, 2, 6, 4, 0
    )
    placed = await store.swap("c", ids[:2], summary, record=record, state=ChannelState(ids[-1]))
    assert placed is not None and placed.id > ids[-1]
    assert [m.text for m in await store.load_live("c")] == ["they said hi", "m2", "m3"]
    assert await store.covered_by(placed.id) == ids[:2]
    assert await store.count("c", state=State.ARCHIVED) == 2
    assert [m.text for m in await store.get_messages(ids[:2])] == ["m0", "m1"], "archived, kept"
    exported = [m.text async for m in store.export("c")]
    assert exported == ["m0", "m1", "m2", "m3"], "the log keeps every message, oldest first"
    [back] = await store.compactions("c")
    assert (back.tier, back.outcome, back.covered) == (CompactionKind.BACKGROUND, Outcome.OK, 2)
    assert (await store.channel_state("c")).handled_upto == ids[-1]


async def test_channel_state_and_the_channels_awaiting_a_reply(store: MessageStore) -> None:
    assert await store.channel_state("c") == ChannelState()
    m = await store.append(msg("p1"))
    await store.ensure_channel("c")
    assert await store.channels_awaiting_reply() == ["c"]
    assert m is not None
    await store.save_channel_state("c", ChannelState(m.id, {"background": 2}))
    assert await store.channel_state("c") == ChannelState(m.id, {"background": 2})
    assert await store.channels_awaiting_reply() == []


async def test_kept_replies_are_listed_marked_retried_and_dropped(store: MessageStore) -> None:
    first = await store.save_undelivered("discord:1:2", "hello", "p1", "503")
    await store.save_undelivered("slack:T:C", "hi", None, "timeout")
    assert [r.text for r in await store.undelivered("discord:")] == ["hello"]
    await store.mark_sending(first)
    [sending] = await store.undelivered("discord:")
    assert sending.sending is not None
    assert await store.release_undelivered(first)
    await store.mark_undelivered_again(first, "502")
    [again] = await store.undelivered("discord:")
    assert (again.sending, again.attempts, again.error) == (None, 2, "502")
    await store.mark_delivered(first)
    assert await store.undelivered("discord:") == []
    assert await store.drop_undelivered((await store.undelivered())[0].id)
    assert await store.undelivered() == []


async def test_everything_is_still_there_after_a_reopen(backend: Backend, tmp_path: Path) -> None:
    path = tmp_path / "reopen.db"
    s = await backend.open(path)
    stored = await s.append(msg("p1", "remember me"))
    await s.save_channel_state("c", ChannelState(7, {"meta": 1}))
    await s.save_undelivered("c", "kept", "p1", "down")
    await s.aclose()
    s = await backend.open(path)
    try:
        assert stored is not None
        assert [(m.id, m.text) for m in await s.load_live("c")] == [(stored.id, "remember me")]
        assert await s.channel_state("c") == ChannelState(7, {"meta": 1})
        assert [r.text for r in await s.undelivered()] == ["kept"]
        assert await s.append(msg("p1")) is None, "a redelivery after a restart is still one"
    finally:
        await s.aclose()


async def test_forgetting_an_author_deletes_only_their_messages(store: MessageStore) -> None:
    await store.append(msg("p1", "mine"))
    other = Message("c", "p2", Role.USER, "theirs", author_id="u2", tokens=3, ts=1.0)
    await store.append(other)
    assert await store.count_author_messages("u1") == 1
    assert await store.delete_author_messages("u1") == 1
    assert [m.text for m in await store.load_live("c")] == ["theirs"]


async def test_text_with_a_nul_character_is_stored_not_refused(store: MessageStore) -> None:
    stored = await store.append(msg("p1", "before\x00after"))
    assert stored is not None
    [back] = await store.load_live("c")
    assert back.text.startswith("before") and back.text.endswith("after")
    assert len(back.text) == len("before\x00after")
