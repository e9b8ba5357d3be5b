"""Storage faults: a second process on one store, constraint errors, a full disk, a locked or
corrupt database. Nothing acknowledged is lost, nothing is lost silently, no process hangs."""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tierbot.errors import StoreError
from tierbot.messages import Message, Role
from tierbot.store import _STEPS, Store

from .procs import (
    EXIT_BOUND,
    last_line,
    messages,
    no_traceback,
    run,
    start,
    stored_ids,
    wait_for_writer,
    write_config,
    write_lines,
)


def msg(pid: str, text: str = "hi", channel: str = "c") -> Message:
    return Message(channel=channel, platform_id=pid, role=Role.USER, text=text, tokens=3, ts=1.0)


# -- ids and duplicates ----------------------------------------------------------------------


async def test_ids_never_reused_after_the_newest_rows_are_forgotten(tmp_path: Path) -> None:
    """Forgetting the newest messages never hands their ids to later ones, across a reopen."""
    path = tmp_path / "s.db"
    async with await Store.open(path) as store:
        stored = [m for m in await store.append_many([msg(f"p{i}") for i in range(5)]) if m]
        assert await store.delete_messages([("c", "p3"), ("c", "p4")]) == 2
    async with await Store.open(path) as store:
        after = await store.append(msg("p5"))
        assert after is not None and after.id > stored[-1].id
        assert await store.delete_messages([("c", "p5")]) == 1
        again = await store.append(msg("p6"))
        assert again is not None and again.id > after.id
        assert again.pos == float(again.id)
        assert [(m.id, m.pos) for m in await store.load_live("c")][-1] == (again.id, again.id)


async def test_upgrade_from_v2_keeps_ids_and_never_goes_below_handled_upto(
    tmp_path: Path,
) -> None:
    """A store written by the previous schema keeps its ids; new ids start past every id a
    channel has already handled, even one whose row was deleted."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE schema_version (version INTEGER)")
        for version, script in enumerate(_STEPS[:2], 1):
            db.executescript(script)
            db.execute("INSERT INTO schema_version VALUES (?)", (version,))
        for i in (1, 2, 3):
            db.execute(
                "INSERT INTO messages (id, channel, platform_id, role, text, ts, tokens, pos) "
                "VALUES (?, 'c', ?, 'user', 'old', 1.0, 1, ?)",
                (i, f"o{i}", float(i)),
            )
        # Message 4 was handled, then forgotten (deleted) before the upgrade.
        db.execute("INSERT INTO channels (key, handled_upto) VALUES ('c', 4)")
    async with await Store.open(path) as store:
        assert [m.id for m in await store.load_live("c")] == [1, 2, 3]
        new = await store.append(msg("n1"))
        assert new is not None and new.id == 5


async def test_constraint_error_is_an_error_not_a_duplicate(tmp_path: Path) -> None:
    """A real constraint failure (a trigger that aborts) raises StoreError naming it; only a
    redelivered (channel, platform id) comes back as a duplicate."""
    path = tmp_path / "s.db"
    async with await Store.open(path) as store:
        assert await store.append(msg("a")) is not None
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON messages WHEN NEW.text = 'poison' "
            "BEGIN SELECT RAISE(ABORT, 'poisoned row refused'); END"
        )
    async with await Store.open(path) as store:
        with pytest.raises(StoreError, match="poisoned row refused"):
            await store.append(msg("b", "poison"))
        assert await store.append(msg("a")) is None  # a true redelivery
        twice = await store.append_many([msg("d"), msg("d")])  # redelivered within one batch
        assert twice[0] is not None and twice[1] is None
        with pytest.raises(StoreError, match="poisoned row refused"):
            await store.append_many([msg("c1"), msg("c2", "poison")])
        assert [m.platform_id async for m in store.export("c")] == ["a", "d"]
    with sqlite3.connect(path) as db:  # any other uniqueness rule is not a redelivery either
        db.execute("CREATE UNIQUE INDEX one_hello ON messages (text) WHERE text = 'hello'")
    async with await Store.open(path) as store:
        assert await store.append(msg("h1", "hello")) is not None
        with pytest.raises(StoreError, match="UNIQUE constraint failed"):
            await store.append(msg("h2", "hello"))


@pytest.mark.slow
def test_replay_with_a_constraint_error_exits_nonzero_naming_it(tmp_path: Path) -> None:
    """`replay` whose rows a constraint refuses exits 1 naming the constraint, not 0."""
    cfg = write_config(tmp_path)
    seed = write_lines(tmp_path / "seed.jsonl", messages(3, "s"))
    assert run("replay", str(seed), "--channel", "r:1", "--config", str(cfg)).returncode == 0
    with sqlite3.connect(tmp_path / "bot.db") as db:
        db.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON messages WHEN NEW.text LIKE '%poison%' "
            "BEGIN SELECT RAISE(ABORT, 'poisoned row refused'); END"
        )
    rows = messages(10, "p")
    rows[5]["text"] = "poison"
    feed = write_lines(tmp_path / "feed.jsonl", rows)
    proc = run("replay", str(feed), "--channel", "r:1", "--config", str(cfg))
    assert proc.returncode == 1
    line = last_line(proc.stderr)
    assert line.startswith("tierbot: cannot write to the store") and "poisoned row refused" in line
    assert no_traceback(proc.stderr)
    assert "duplicate" not in proc.stderr
    assert stored_ids(tmp_path / "bot.db", "r:1") == ["s0", "s1", "s2"]


# -- two processes on one store ---------------------------------------------------------------


@pytest.mark.slow
def test_four_parallel_replays_one_writes_the_others_are_refused(tmp_path: Path) -> None:
    """Four replays on one store: one stores every message, the other three exit 1 at once
    naming the holder; no message is lost without the process saying so."""
    cfg = write_config(tmp_path)
    n = 2000
    feeds = [write_lines(tmp_path / f"f{k}.jsonl", messages(n, f"k{k}-")) for k in range(4)]
    procs = [
        start(
            "replay",
            str(f),
            "--channel",
            f"par:{k}",
            "--listen-only",
            "--json",
            "--config",
            str(cfg),
        )
        for k, f in enumerate(feeds)
    ]
    results = [p.communicate(timeout=180) for p in procs]
    codes = [p.returncode for p in procs]
    # Usually one holds the lock while the others start; on a loaded machine a replay may
    # finish before another starts, and that one may then write too. Either way each
    # process stored everything it read (exit 0) or nothing and said who holds the store.
    assert set(codes) <= {0, 1} and 0 in codes, codes
    writers = {procs[k].pid for k, c in enumerate(codes) if c == 0}
    lost = 0
    for k, (out, err) in enumerate(results):
        ids = stored_ids(tmp_path / "bot.db", f"par:{k}")
        if codes[k] == 0:
            assert json.loads(out)["messages_in"] == n
            lost += n - len(ids)
        else:
            assert ids == []  # refused before storing anything, and said so:
            line = last_line(err)
            assert any(f"in use by pid {pid}" in line for pid in writers), err
            assert "replay" in line
        assert no_traceback(err)
    assert lost == 0


@pytest.fixture
def running_bot(tmp_path: Path):
    """A real `tierbot chat` on the store (stdin kept open), after a replay filled r:1."""
    cfg = write_config(tmp_path, memory=True)
    feed = write_lines(tmp_path / "seed.jsonl", messages(40, "s"))
    seed = run(
        "replay", str(feed), "--channel", "r:1", "--listen-only", "--config", str(cfg), timeout=120
    )
    assert seed.returncode == 0, seed.stderr
    bot = start("chat", "--config", str(cfg), stdin=subprocess.PIPE)
    wait_for_writer(bot, tmp_path / "bot.db.lock")
    try:
        yield cfg, bot
    finally:
        try:
            bot.communicate(timeout=30)  # end of input: the chat ends
        except subprocess.TimeoutExpired:
            bot.kill()
            bot.communicate()


@pytest.mark.slow
def test_replay_beside_a_running_bot_is_refused_naming_it(running_bot, tmp_path: Path) -> None:
    """A writer command beside a running bot exits 1 at once naming the bot's pid and command;
    the bot keeps running and nothing of the replay is half-stored."""
    cfg, bot = running_bot
    feed = write_lines(tmp_path / "more.jsonl", messages(5, "x"))
    proc = run("replay", str(feed), "--channel", "r:2", "--config", str(cfg))
    assert proc.returncode == 1
    line = last_line(proc.stderr)
    assert f"in use by pid {bot.pid}" in line and "chat" in line, line
    assert stored_ids(tmp_path / "bot.db", "r:2") == []
    forget = run("memory", "forget", "--author", "u1", "--yes", "--config", str(cfg))
    assert forget.returncode == 1 and f"pid {bot.pid}" in last_line(forget.stderr)
    # The preview only reads: it works beside the bot, deletes nothing, and asks for --yes.
    preview = run("memory", "forget", "--author", "u1", "--config", str(cfg))
    assert preview.returncode == 2 and "--yes" in last_line(preview.stderr)
    assert bot.poll() is None


@pytest.mark.slow
def test_read_only_commands_work_beside_a_running_bot(running_bot, tmp_path: Path) -> None:
    """history export, memory search/show/export and channel show read the store while a bot
    writes it, see what it just stored, and change nothing on disk."""
    cfg, bot = running_bot
    bot.stdin.write("the blue heron nests by the pier\n")  # type: ignore[union-attr]
    bot.stdin.flush()  # type: ignore[union-attr]
    deadline = time.monotonic() + 60
    said: list[str] = []
    while time.monotonic() < deadline and "the blue heron nests by the pier" not in said:
        out = run("history", "export", "--channel", "console:local", "--config", str(cfg))
        assert out.returncode == 0, out.stderr
        said = [json.loads(line)["text"] for line in out.stdout.splitlines()]
        time.sleep(0.1)
    assert "the blue heron nests by the pier" in said
    old = run("history", "export", "--channel", "r:1", "--config", str(cfg))
    assert old.returncode == 0 and len(old.stdout.splitlines()) == 40
    index = tmp_path / "bot.db.memory-index"
    before = {p.name: p.stat().st_mtime_ns for p in index.iterdir()}
    search = run("memory", "search", "line 7", "--channel", "r:1", "--config", str(cfg))
    assert search.returncode == 0, search.stderr
    assert isinstance(json.loads(search.stdout), list)
    export = run("memory", "export", "--config", str(cfg))
    assert export.returncode == 0, export.stderr
    show = run("channel", "show", "--channel", "r:1", "--config", str(cfg))
    assert show.returncode == 0 and "channel r:1" in show.stdout, show.stderr
    assert {p.name: p.stat().st_mtime_ns for p in index.iterdir()} == before
    assert bot.poll() is None


@pytest.mark.slow
def test_a_killed_writer_leaves_no_stale_lock(tmp_path: Path) -> None:
    """After a writer is SIGKILLed the next replay runs at once: the OS dropped the lock."""
    cfg = write_config(tmp_path)
    feed = write_lines(tmp_path / "f.jsonl", messages(20000, "k"))
    proc = start("replay", str(feed), "--channel", "k:1", "--listen-only", "--config", str(cfg))
    lock = tmp_path / "bot.db.lock"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and str(proc.pid) not in _read(lock):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    small = write_lines(tmp_path / "g.jsonl", messages(3, "g"))
    again = run("replay", str(small), "--channel", "k:2", "--config", str(cfg), timeout=60)
    assert again.returncode == 0, again.stderr
    assert stored_ids(tmp_path / "bot.db", "k:2") == ["g0", "g1", "g2"]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


# -- a full disk, a locked database --------------------------------------------------------------


async def test_database_full_names_the_real_error_and_keeps_earlier_writes(
    tmp_path: Path,
) -> None:
    """When SQLite runs out of room (its own max_page_count), the caller gets a StoreError
    saying the database is full, not a failed rollback; what was stored before stays."""
    path = tmp_path / "s.db"
    async with await Store.open(path) as store:
        first = await store.append_many([msg(f"a{i}", "x" * 500) for i in range(20)])
        assert all(first)

        async def cap(db) -> None:
            async with db.execute("PRAGMA page_count") as cur:
                pages = (await cur.fetchone())[0]
            await db.execute(f"PRAGMA max_page_count = {pages}")

        await store.write(cap)
        with pytest.raises(StoreError, match="database or disk is full") as info:
            for k in range(50):
                await store.append_many([msg(f"b{k}-{i}", "y" * 4000) for i in range(20)])
        assert "rollback" not in str(info.value)
        ids = [m.platform_id async for m in store.export("c")]
        assert ids[:20] == [f"a{i}" for i in range(20)]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _file_size_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG, not a kill
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
def test_replay_on_a_full_disk_exits_nonzero_naming_the_error(tmp_path: Path) -> None:
    """A replay whose writes hit a file-size limit (the kernel refuses with EFBIG) exits 1
    with SQLite's own error, not 0 and not "cannot rollback"; every message stored before
    the fault is intact and in file order."""
    cfg = write_config(tmp_path)
    rows = messages(20000, "d")
    for r in rows:
        r["text"] += " " + "z" * 200
    feed = write_lines(tmp_path / "big.jsonl", rows)
    proc = run(
        "replay",
        str(feed),
        "--channel",
        "d:1",
        "--listen-only",
        "--config",
        str(cfg),
        timeout=120,
        preexec_fn=_file_size_limit(2_000_000),
    )
    assert proc.returncode == 1
    line = last_line(proc.stderr)
    assert line.startswith("tierbot: cannot write to the store")
    assert "disk I/O error" in line or "database or disk is full" in line, line
    assert "cannot rollback" not in proc.stderr
    kept = stored_ids(tmp_path / "bot.db", "d:1")
    assert 0 < len(kept) < len(rows)
    assert kept == [r["id"] for r in rows[: len(kept)]]
    export = run("history", "export", "--channel", "d:1", "--config", str(cfg))
    assert export.returncode == 0 and len(export.stdout.splitlines()) == len(kept)


@pytest.mark.slow
def test_replay_on_a_locked_database_exits_nonzero_naming_it(tmp_path: Path) -> None:
    """Another program holding SQLite's write lock past [storage] busy_timeout_seconds makes
    replay exit 1 with "database is locked"; what was stored before stays."""
    cfg = write_config(tmp_path, storage="busy_timeout_seconds = 0.3\n")
    feed = write_lines(tmp_path / "big.jsonl", messages(50000, "l"))
    db = tmp_path / "bot.db"
    proc = start("replay", str(feed), "--channel", "l:1", "--listen-only", "--config", str(cfg))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_count(db)) == 0:
            time.sleep(0.05)
        holder = sqlite3.connect(db, timeout=30, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # the other program's write lock, held
        try:
            _, err = proc.communicate(timeout=EXIT_BOUND)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1
    assert "database is locked" in last_line(err), err
    assert "cannot rollback" not in err
    kept = stored_ids(db, "l:1")
    assert 0 < len(kept) < 50000
    assert kept == [f"l{i}" for i in range(len(kept))]


def _count(db: Path) -> list[int]:
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            n = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    except sqlite3.Error:
        return []
    return [1] if n else []


# -- a corrupt database ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store (messages, compactions, memory graph) written by a replay."""
    tmp = tmp_path_factory.mktemp("good")
    cfg = write_config(tmp, "[defaults]\ncontext_window = 2048\n", memory=True)
    feed = write_lines(tmp / "seed.jsonl", messages(300, "g"))
    proc = run(
        "replay", str(feed), "--channel", "c:1", "--listen-only", "--config", str(cfg), timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return tmp / "bot.db"


def _corrupt(good: Path, tmp: Path, kind: str) -> Path:
    db = tmp / "bot.db"
    shutil.copy(good, db)
    data = bytearray(db.read_bytes())
    rnd = random.Random(7)
    if kind == "whole file":
        data[:] = rnd.randbytes(len(data))
    elif kind == "all pages but the header":
        data[8192:] = rnd.randbytes(len(data) - 8192)
    else:  # the message table's root page only: the file opens, reading messages fails
        with sqlite3.connect(good) as conn:
            root = conn.execute(
                "SELECT rootpage FROM sqlite_master WHERE name = 'messages'"
            ).fetchone()[0]
        off = (root - 1) * 4096
        data[off + 8 : off + 4096] = rnd.randbytes(4096 - 8)
    db.write_bytes(bytes(data))
    return db


_COMMANDS = {
    "run": ["run"],
    "replay": ["replay", "{feed}", "--channel", "c:2"],
    "history export": ["history", "export", "--channel", "c:1"],
    "memory search": ["memory", "search", "line 7", "--channel", "c:1"],
    "channel show": ["channel", "show", "--channel", "c:1"],
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["whole file", "all pages but the header"])
@pytest.mark.parametrize("command", list(_COMMANDS))
def test_corrupt_database_one_line_reason_and_exit_1(
    good_store: Path, tmp_path: Path, kind: str, command: str
) -> None:
    """Every command on a corrupt database file exits 1 within seconds with a one-line reason
    naming the damage: no traceback, no hang."""
    _corrupt(good_store, tmp_path, kind)
    cfg = write_config(tmp_path, memory=True)
    feed = write_lines(tmp_path / "feed.jsonl", messages(5, "n"))
    args = [a.format(feed=feed) for a in _COMMANDS[command]]
    proc = run(*args, "--config", str(cfg))
    assert proc.returncode == 1
    line = last_line(proc.stderr)
    assert line.startswith("tierbot: ") and (
        "file is not a database" in line or "malformed" in line
    ), line
    assert no_traceback(proc.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["replay", "history export"])
def test_corrupt_message_table_one_line_reason_and_exit_1(
    good_store: Path, tmp_path: Path, command: str
) -> None:
    """A store that opens but whose message table is damaged: commands that read it exit 1
    with a one-line reason, no traceback, no hang."""
    _corrupt(good_store, tmp_path, "message table")
    cfg = write_config(tmp_path, memory=True)
    feed = write_lines(tmp_path / "feed.jsonl", messages(5, "n"))
    args = [a.format(feed=feed) for a in _COMMANDS[command]]
    proc = run(*args, "--config", str(cfg))
    assert proc.returncode == 1
    line = last_line(proc.stderr)
    assert line.startswith("tierbot: ") and "malformed" in line, line
    assert no_traceback(proc.stderr)


def test_replay_whose_store_refuses_the_writes_after_its_last_line_exits_1_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills just after the last line is stored: the summaries and the channel's
    state written after it are refused.  The replay says so and exits 1, not 0 with a
    report; every line is kept, in file order."""
    import aiosqlite

    from bot.cli import main

    rows = messages(600, "e")
    feed = write_lines(tmp_path / "in.jsonl", rows)
    cfg = str(write_config(tmp_path, "[defaults]\ncontext_window = 4000\n"))
    stored = 0
    full = False
    appends, commits = Store.append_many, Store._commit

    async def append_many(self: Store, msgs: list[Message]) -> list[Message | None]:
        nonlocal stored, full
        out = await appends(self, msgs)
        stored += len(msgs)
        full = stored == len(rows)
        return out

    async def commit(self: Store, db: aiosqlite.Connection, batch: list, **kw: object) -> object:
        if full:
            raise aiosqlite.OperationalError("database or disk is full")
        return await commits(self, db, batch, **kw)

    monkeypatch.setattr(Store, "append_many", append_many)
    monkeypatch.setattr(Store, "_commit", commit)
    code = main(["replay", str(feed), "--channel", "e:1", "--listen-only", "--config", cfg])
    out, err = capsys.readouterr()
    assert code == 1, out
    line = last_line(err)
    assert line.startswith("tierbot: cannot write to the store at"), line
    assert "database or disk is full" in line and "all 600 messages were stored" in line
    full = False
    assert main(["history", "export", "--channel", "e:1", "--config", cfg]) == 0
    exported = [json.loads(x)["id"] for x in capsys.readouterr().out.splitlines()]
    assert exported == [r["id"] for r in rows]
