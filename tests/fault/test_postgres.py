"""``[storage] backend = "postgres"`` from the operator's side: a bot that cannot reach its
database says why in one line and exits within seconds; one that can stores every
message once, and a crash loses nothing it acknowledged.  Runs against the private
PostgreSQL server of the test session (the pgserver wheel)."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from .procs import EXIT_BOUND, env, last_line, messages, no_traceback, write_lines

pytestmark = pytest.mark.slow


def pg_config(tmp: Path, extra: str = "") -> Path:
    cfg = tmp / "config.toml"
    cfg.write_text(
        '[storage]\nbackend = "postgres"\n'
        '[logging]\nlevel = "warning"\nformat = "json"\n'
        "[memory]\nenabled = false\n"
        "[adapters.console]\nenabled = false\n" + extra,
        encoding="utf-8",
    )
    return cfg


def tierbot(
    args: list[str], environ: dict[str, str], timeout: float = EXIT_BOUND
) -> tuple[int, str, str, float]:
    """Run ``tierbot ARGS`` with ``environ`` added; (exit code, stdout, stderr, seconds)."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        capture_output=True,
        text=True,
        env={**env(), **environ},
        timeout=timeout,
    )
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "case",
    ["unset", "not postgres", "unreachable", "no such database", "malformed"],
)
@pytest.mark.parametrize("command", ["run", "replay"])
def test_a_database_that_cannot_be_used_is_one_line_and_exit_1(
    tmp_path: Path, pg_server: Any, case: str, command: str
) -> None:
    cfg = pg_config(tmp_path)
    port = closed_port()
    dsn, named = {
        "unset": ("", "$TIERBOT_DATABASE_URL"),
        "not postgres": ("mysql://bot:s3cret@127.0.0.1/bot", "not a PostgreSQL connection"),
        "unreachable": (f"postgresql://bot:s3cret@127.0.0.1:{port}/bot", "cannot reach"),
        "no such database": (pg_server.dsn("no_such_db"), "no such database"),
        "malformed": ("postgresql://bot:s3cret@127.0.0.1:notaport/bot", "TIERBOT_DATABASE_URL"),
    }[case]
    feed = write_lines(tmp_path / "feed.jsonl", messages(2))
    args = ["run"] if command == "run" else ["replay", str(feed), "--channel", "s:1"]
    code, _, err, took = tierbot([*args, "--config", str(cfg)], {"TIERBOT_DATABASE_URL": dsn})
    assert code == 1, err
    line = last_line(err)
    assert line.startswith("tierbot: ") and named in line, err
    assert "s3cret" not in err, "the password is never printed"
    assert no_traceback(err)
    assert took < EXIT_BOUND


def test_the_connection_string_comes_from_the_variable_dsn_env_names(
    tmp_path: Path, pg_dsn: str
) -> None:
    cfg = pg_config(tmp_path)
    text = cfg.read_text().replace(
        'backend = "postgres"\n', 'backend = "postgres"\ndsn_env = "BOT_DB"\n'
    )
    cfg.write_text(text)
    feed = write_lines(tmp_path / "feed.jsonl", messages(3))
    code, _, err, _ = tierbot(
        ["replay", str(feed), "--channel", "s:1", "--listen-only", "--config", str(cfg)],
        {"BOT_DB": pg_dsn, "TIERBOT_DATABASE_URL": ""},
    )
    assert code == 0, err


def _export(cfg: Path, dsn: str, channel: str) -> list[dict[str, Any]]:
    args = ["history", "export", "--channel", channel, "--config", str(cfg)]
    code, out, err, _ = tierbot(args, {"TIERBOT_DATABASE_URL": dsn}, timeout=60)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_a_replay_on_postgres_exports_every_message_once(tmp_path: Path, pg_dsn: str) -> None:
    """Replaying twice (the second time every line is a redelivery) leaves each message
    stored once, in order, and the export reads them back from PostgreSQL."""
    cfg = pg_config(tmp_path)
    rows = messages(300)
    feed = write_lines(tmp_path / "feed.jsonl", rows)
    for _ in range(2):
        code, _, err, _ = tierbot(
            ["replay", str(feed), "--channel", "pg:1", "--listen-only", "--config", str(cfg)],
            {"TIERBOT_DATABASE_URL": pg_dsn},
            timeout=120,
        )
        assert code == 0, err
    exported = _export(cfg, pg_dsn, "pg:1")
    assert [m["id"] for m in exported] == [r["id"] for r in rows]
    assert [m["text"] for m in exported] == [r["text"] for r in rows]


def test_sigkill_mid_replay_loses_nothing_acknowledged(tmp_path: Path, pg_dsn: str) -> None:
    """Kill -9 a replay on PostgreSQL while it stores: what it stored is a prefix of the
    feed, in order, with no gap; a second replay stores the rest, each message once."""
    cfg = pg_config(tmp_path)
    rows = messages(4000)
    feed = write_lines(tmp_path / "feed.jsonl", rows)
    args = ["replay", str(feed), "--channel", "pg:kill", "--listen-only", "--config", str(cfg)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**env(), "TIERBOT_DATABASE_URL": pg_dsn},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if _stored(pg_dsn, "pg:kill") > 0:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    partial = [m["id"] for m in _export(cfg, pg_dsn, "pg:kill") if m["role"] == "user"]
    assert partial, "the replay had stored something before it was killed"
    assert partial == [r["id"] for r in rows[: len(partial)]], "a prefix, in order, no gaps"
    code, _, err, _ = tierbot(args, {"TIERBOT_DATABASE_URL": pg_dsn}, timeout=120)
    assert code == 0, err
    full = [m["id"] for m in _export(cfg, pg_dsn, "pg:kill") if m["role"] == "user"]
    assert full == [r["id"] for r in rows]


def _stored(dsn: str, channel: str) -> int:
    async def count() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            if await conn.fetchval("SELECT to_regclass('messages')") is None:
                return 0
            return int(
                await conn.fetchval("SELECT COUNT(*) FROM messages WHERE channel = $1", channel)
            )
        finally:
            await conn.close()

    return asyncio.run(count())


def _with_memory(cfg: Path, window: int) -> Path:
    text = cfg.read_text().replace("[memory]\nenabled = false\n", "[memory]\nenabled = true\n")
    cfg.write_text(f"[defaults]\ncontext_window = {window}\n" + text)
    return cfg


def _builds(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"c{i}",
            "author": f"u{i % 5}",
            "text": f"line {i}: alice told bob that build {i % 50} passed on runner r{i % 7} "
            f"under codename zebra{i}.",
        }
        for i in range(n)
    ]


def _sql(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    async def go() -> list[tuple[Any, ...]]:
        conn = await asyncpg.connect(dsn)
        try:
            return [tuple(r) for r in await conn.fetch(sql)]
        finally:
            await conn.close()

    return asyncio.run(go())


def test_a_replay_with_memory_on_postgres_archives_and_search_finds_what_was_archived(
    tmp_path: Path, pg_dsn: str
) -> None:
    """With the memory graph on PostgreSQL, a replay that compacts keeps every message
    once, archives most of them, and `memory search` finds an archived line by its words."""
    cfg = _with_memory(pg_config(tmp_path), 1500)
    rows = _builds(300)
    feed = write_lines(tmp_path / "feed.jsonl", rows)
    args = ["replay", str(feed), "--channel", "pg:m", "--listen-only", "--json"]
    code, out, err, _ = tierbot(
        [*args, "--config", str(cfg)], {"TIERBOT_DATABASE_URL": pg_dsn}, timeout=120
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["archived_messages"] > 200 and report["compactions"]["emergency"] == 0
    exported = [m["id"] for m in _export(cfg, pg_dsn, "pg:m") if m["role"] == "user"]
    assert exported == [r["id"] for r in rows]
    [(state,)] = _sql(pg_dsn, "SELECT state FROM messages WHERE platform_id = 'c7'")
    assert state == "archived"
    code, out, err, _ = tierbot(
        ["memory", "search", "zebra7 codename", "--channel", "pg:m", "--config", str(cfg)],
        {"TIERBOT_DATABASE_URL": pg_dsn},
        timeout=60,
    )
    assert code == 0, err
    hits = json.loads(out)
    assert "zebra7." in hits[0]["content"] and "c7" in hits[0]["source_message_ids"]


def test_a_user_who_may_not_enable_pgvector_gets_one_line_naming_the_fix(
    tmp_path: Path, pg_server: Any
) -> None:
    """A database without the vector extension, reached as a user who may not create it,
    stops the bot at startup with one line saying to run CREATE EXTENSION vector."""
    name = f"novec_{tmp_path.name[-8:].lower()}".replace("-", "_")
    pg_server.psql(f"CREATE ROLE {name} LOGIN")
    pg_server.psql(f"CREATE DATABASE {name}")
    pg_server.psql(f"REVOKE CREATE ON DATABASE {name} FROM PUBLIC")
    dsn = pg_server.dsn(name, user=name)
    cfg = _with_memory(pg_config(tmp_path), 1500)
    code, _, err, took = tierbot(["run", "--config", str(cfg)], {"TIERBOT_DATABASE_URL": dsn})
    assert code == 1, err
    line = last_line(err)
    assert line.startswith("tierbot: ") and "CREATE EXTENSION vector" in line, err
    assert no_traceback(err) and took < EXIT_BOUND


def test_sigkill_during_compactions_on_postgres_loses_nothing(tmp_path: Path, pg_dsn: str) -> None:
    """SIGKILL at random points while compactions and memory writes run, 6 times: after
    each, the store is consistent (no live summary over a live message, nothing archived
    without its summary, no message twice); a last run completes the feed exactly once."""
    cfg = _with_memory(pg_config(tmp_path), 1500)
    rows = _builds(900)
    feed = write_lines(tmp_path / "feed.jsonl", rows)
    args = ["replay", str(feed), "--channel", "pg:k", "--listen-only", "--json"]
    cmd = [sys.executable, "-m", "bot.cli", *args, "--config", str(cfg)]
    environ = {**env(), "TIERBOT_DATABASE_URL": pg_dsn}
    rng = random.Random(6)
    for _ in range(6):
        before = _stored(pg_dsn, "pg:k")
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if _stored(pg_dsn, "pg:k") >= before + 60:
                break
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        _check_consistent(pg_dsn)
        got = [m["id"] for m in _export(cfg, pg_dsn, "pg:k") if m["role"] == "user"]
        assert got == [r["id"] for r in rows[: len(got)]], "a prefix, in order, each once"
    code, _out, err, _ = tierbot(
        [*args, "--config", str(cfg)], {"TIERBOT_DATABASE_URL": pg_dsn}, timeout=180
    )
    assert code == 0, err
    _check_consistent(pg_dsn)
    got = [m["id"] for m in _export(cfg, pg_dsn, "pg:k") if m["role"] == "user"]
    assert got == [r["id"] for r in rows]
    tiers = dict(_sql(pg_dsn, "SELECT tier, COUNT(*) FROM compactions GROUP BY tier"))
    assert tiers.get("background", 0) > 0
    [(episodes,)] = _sql(pg_dsn, "SELECT COUNT(*) FROM memory_nodes WHERE type = 'episode'")
    assert episodes == len(rows), "every message indexed once, none lost to the kills"


def _check_consistent(dsn: str) -> None:
    [(dup,)] = _sql(
        dsn,
        "SELECT COUNT(*) FROM summary_members sm JOIN messages s ON s.id = sm.summary_id "
        "JOIN messages m ON m.id = sm.message_id WHERE s.state='live' AND m.state='live'",
    )
    assert dup == 0, "a live summary covers a message that is still live"
    [(orphans,)] = _sql(
        dsn,
        "SELECT COUNT(*) FROM messages m WHERE m.state='archived' AND m.role IN "
        "('user', 'assistant', 'tool_call', 'tool_result') AND NOT EXISTS "
        "(SELECT 1 FROM summary_members sm WHERE sm.message_id = m.id)",
    )
    assert orphans == 0, "an archived message is linked to no summary or marker"


def test_a_message_the_database_refuses_is_never_reported_stored(
    tmp_path: Path, pg_dsn: str
) -> None:
    """A row PostgreSQL refuses (a constraint) fails the replay, non-zero, naming the
    database's reason; it is not counted as stored nor as a duplicate."""
    cfg = pg_config(tmp_path)
    rows = messages(5)
    rows[2]["text"] = "poison"
    feed = write_lines(tmp_path / "feed.jsonl", rows)
    args = [
        "replay",
        str(feed),
        "--channel",
        "pg:p",
        "--listen-only",
        "--json",
        "--config",
        str(cfg),
    ]
    first = write_lines(tmp_path / "first.jsonl", rows[:1])
    setup = ["replay", str(first), "--channel", "pg:p", "--listen-only", "--config", str(cfg)]
    code, _, err, _ = tierbot(setup, {"TIERBOT_DATABASE_URL": pg_dsn}, timeout=60)
    assert code == 0, err  # creates the tables

    async def poison() -> None:
        conn = await asyncpg.connect(pg_dsn)
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

    asyncio.run(poison())
    code, out, err, _ = tierbot(args, {"TIERBOT_DATABASE_URL": pg_dsn}, timeout=60)
    assert code != 0, out + err
    assert "poisoned row refused" in err
    stored = [m["text"] for m in _export(cfg, pg_dsn, "pg:p") if m["role"] == "user"]
    assert "poison" not in stored
