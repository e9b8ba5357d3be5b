"""``tierbot db migrate --from sqlite:PATH --to postgres``: a bot's whole store moves
into PostgreSQL, counts verified, and memory search answers the same before and after;
a migration killed half-way resumes where it stopped; a database holding another store
is refused."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pytest

from memory_graph import MemoryGraph
from tierbot.config import MemoryConfig
from tierbot.messages import Message, Role, State
from tierbot.store import Store

from .procs import env, last_line, no_traceback

pytestmark = pytest.mark.slow

CHANNEL = "discord:5:1"


def _cli(args: list[str], dsn: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        capture_output=True,
        text=True,
        env={**env(), "TIERBOT_DATABASE_URL": dsn},
        timeout=timeout,
    )


def _configs(tmp: Path) -> tuple[Path, Path]:
    common = '[logging]\nlevel = "warning"\n[adapters.console]\nenabled = false\n'
    lite = tmp / "sqlite.toml"
    lite.write_text(f'[storage]\npath = "{tmp / "bot.db"}"\n' + common)
    pg = tmp / "pg.toml"
    pg.write_text('[storage]\nbackend = "postgres"\n' + common)
    return lite, pg


async def _build(db: Path, n: int) -> None:
    """A store of ``n`` messages, most archived and indexed, with a few memories."""
    msgs = [
        Message(
            CHANNEL,
            f"p{i}",
            Role.USER,
            f"line {i}: the {('kestrel', 'heron', 'osprey')[i % 3]} build {i % 40} passed "
            f"under codename zebra{i}",
            author_id=f"u{i % 4}",
            author_name=f"user{i % 4}",
            ts=1.7e9 + i,
        )
        for i in range(n)
    ]
    async with await Store.open(db) as store:
        stored = [m for m in await store.append_many(msgs) if m is not None]
    archived = [m.with_(state=State.ARCHIVED) for m in stored]
    async with await MemoryGraph.open(db, MemoryConfig.model_validate({})) as g:
        for start in range(0, len(archived), 2000):
            await g.add_episodes(archived[start : start + 2000])
        await g.save(
            "the kestrel build server lives in rack 4", "fact", channel=CHANNEL, sources=["p0"]
        )
        await g.save(
            "zebra7 was the codename of the spring release",
            "event",
            channel=CHANNEL,
            sources=["p7"],
        )


def _count(dsn: str, table: str) -> int:
    async def go() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            if await conn.fetchval("SELECT to_regclass($1)", table) is None:
                return 0
            return int(await conn.fetchval(f"SELECT COUNT(*) FROM {table}"))
        finally:
            await conn.close()

    return asyncio.run(go())


def _search(cfg: Path, dsn: str, query: str) -> list[tuple[str, str, float]]:
    out = _cli(["memory", "search", query, "--channel", CHANNEL, "--config", str(cfg)], dsn)
    assert out.returncode == 0, out.stderr
    return [(h["type"], h["content"], h["score"]) for h in json.loads(out.stdout)]


def _export(cfg: Path, dsn: str) -> list[str]:
    out = _cli(["history", "export", "--channel", CHANNEL, "--config", str(cfg)], dsn)
    assert out.returncode == 0, out.stderr
    return [json.loads(line)["id"] for line in out.stdout.splitlines() if line.strip()]


def test_a_migration_killed_half_way_resumes_and_moves_everything(
    tmp_path: Path, pg_dsn: str
) -> None:
    lite, pg = _configs(tmp_path)
    asyncio.run(_build(tmp_path / "bot.db", 12_000))
    queries = ["zebra7 codename", "where does the kestrel build server live", "osprey build 9"]
    before = {q: _search(lite, pg_dsn, q) for q in queries}
    args = ["db", "migrate", "--from", f"sqlite:{tmp_path / 'bot.db'}", "--to", "postgres"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", *args, "--config", str(pg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**env(), "TIERBOT_DATABASE_URL": pg_dsn},
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if _count(pg_dsn, "memory_nodes") > 0:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    moved = _count(pg_dsn, "memory_nodes")
    assert 0 < moved < 24_002, "killed while the memory graph was being copied"
    done = _cli([*args, "--config", str(pg)], pg_dsn, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["verified"]
    assert report["tables"]["messages"] == {"source": 12_000, "target": 12_000}
    assert report["tables"]["memory_nodes"] == {"source": 12_002, "target": 12_002}
    assert all(c["source"] == c["target"] for c in report["tables"].values())
    assert _export(pg, pg_dsn) == [f"p{i}" for i in range(12_000)]
    for q in queries:
        after = _search(pg, pg_dsn, q)
        assert [h[:2] for h in after] == [h[:2] for h in before[q]], q
        assert [h[2] for h in after] == pytest.approx([h[2] for h in before[q]], abs=1e-3), q
    again = _cli([*args, "--config", str(pg)], pg_dsn)
    assert again.returncode == 0 and json.loads(again.stdout.splitlines()[-1])["verified"]
    assert _count(pg_dsn, "messages") == 12_000, "running it again copies nothing twice"


def test_a_database_holding_another_store_is_refused(tmp_path: Path, pg_dsn: str) -> None:
    _, pg = _configs(tmp_path)
    asyncio.run(_build(tmp_path / "bot.db", 50))
    feed = tmp_path / "feed.jsonl"
    feed.write_text(json.dumps({"id": "x1", "author": "u", "text": "hello"}) + "\n")
    first = _cli(
        ["replay", str(feed), "--channel", "s:1", "--listen-only", "--config", str(pg)], pg_dsn
    )
    assert first.returncode == 0, first.stderr
    args = ["db", "migrate", "--from", f"sqlite:{tmp_path / 'bot.db'}", "--to", "postgres"]
    out = _cli([*args, "--config", str(pg)], pg_dsn)
    assert out.returncode == 2, out.stderr
    line = last_line(out.stderr)
    assert "already holds a tierbot store" in line and no_traceback(out.stderr)
    assert _count(pg_dsn, "messages") == 1, "nothing was copied into it"
    missing = _cli(
        ["db", "migrate", "--from", "sqlite:/no/such.db", "--to", "postgres", "--config", str(pg)],
        pg_dsn,
    )
    assert missing.returncode == 2 and "no such file" in last_line(missing.stderr)


def test_a_row_the_database_refuses_fails_the_migration_and_is_never_counted_done(
    tmp_path: Path, pg_dsn: str
) -> None:
    """A message PostgreSQL refuses mid-copy stops the migration non-zero with the
    database's reason; it never ends verified, and a run after the cause is gone finishes."""
    _, pg = _configs(tmp_path)
    db = tmp_path / "bot.db"
    asyncio.run(_build(db, 50))
    args = ["db", "migrate", "--from", f"sqlite:{db}", "--to", "postgres", "--config", str(pg)]
    assert _cli(args, pg_dsn).returncode == 0

    async def more_and_poison() -> None:
        async with await Store.open(db) as store:
            await store.append_many(
                [
                    Message(CHANNEL, f"late{i}", Role.USER, "poison" if i == 3 else f"late {i}")
                    for i in range(10)
                ]
            )
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute(
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.text = 'poison' THEN RAISE EXCEPTION 'poisoned row refused'; END IF; "
                "RETURN NEW; END $$; CREATE TRIGGER poison BEFORE INSERT ON messages "
                "FOR EACH ROW EXECUTE FUNCTION poison()"
            )
        finally:
            await conn.close()

    asyncio.run(more_and_poison())
    failed = _cli(args, pg_dsn)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    line = last_line(failed.stderr)
    assert "poisoned row refused" in line and "run the command again" in line
    assert no_traceback(failed.stderr) and '"verified": true' not in failed.stdout
    assert _count(pg_dsn, "messages") == 50, "the refused page was rolled back whole"

    async def cure() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute("DROP TRIGGER poison ON messages")
        finally:
            await conn.close()

    asyncio.run(cure())
    done = _cli(args, pg_dsn)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["tables"]["messages"] == {
        "source": 60,
        "target": 60,
    }
