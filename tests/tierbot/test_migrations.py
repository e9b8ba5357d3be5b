"""Schema migrations: one runner, one version table, and existing databases upgraded in place."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import aiosqlite
import pytest

from memory_graph import schema as memory_schema
from tierbot.errors import StoreError
from tierbot.migrations import Migrations, migrate, version
from tierbot.store import _STEPS, Store
from workers.records import TASK_TABLES, read_runs


def versions(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT component, version FROM tierbot_schema").fetchall())


def build_previous_release(path: Path) -> None:
    """A database as the release before ``tierbot_schema`` wrote it: the store's five steps
    (step 2 then created the task tables) recorded in ``schema_version``, the memory graph's
    tables recorded in ``memory_schema_version``, and a little of everything in them."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE schema_version (version INTEGER)")
        for n, script in enumerate(_STEPS, 1):
            db.executescript(TASK_TABLES.steps[0] if n == 2 else script)
            db.execute("INSERT INTO schema_version VALUES (?)", (n,))
        db.executescript(memory_schema.MIGRATIONS.steps[0])
        db.execute("CREATE TABLE memory_schema_version (version INTEGER NOT NULL)")
        db.execute("INSERT INTO memory_schema_version VALUES (1)")
        for i in (1, 2, 3):
            db.execute(
                "INSERT INTO messages (channel, platform_id, role, text, ts, tokens, pos) "
                "VALUES ('c', ?, 'user', ?, 1.0, 1, 0)",
                (f"p{i}", f"kept message {i}"),
            )
        db.execute(
            "INSERT INTO tasks (channel, kind, task, status, created) "
            "VALUES ('c', 'worker', 'dig', 'concluded', 1.0)"
        )
        db.execute(
            "INSERT INTO memory_nodes (id, type, content, content_hash, importance, "
            "current_importance, created_at, updated_at, accessed_at, channel, workspace) "
            "VALUES ('m1', 'fact', 'the deploy is on friday', 'h', 0.5, 0.5, 1, 1, 1, 'c', 'c')"
        )


async def test_a_database_from_the_previous_release_upgrades_in_place(tmp_path: Path) -> None:
    """Every message, run record and memory survives, and tierbot_schema records each
    component at the version its legacy table said: nothing is migrated twice."""
    path = tmp_path / "old.db"
    build_previous_release(path)
    async with await Store.open(path, components=(TASK_TABLES,)) as store:
        assert [m.text for m in await store.load_live("c")] == [
            "kept message 1",
            "kept message 2",
            "kept message 3",
        ]
        assert [(r["kind"], r["task"]) for r in await read_runs(store, "c")] == [("worker", "dig")]
    db = await memory_schema.connect(str(path))
    try:
        await memory_schema.migrate(db)
        async with db.execute("SELECT content FROM memory_nodes") as cur:
            assert [r[0] for r in await cur.fetchall()] == ["the deploy is on friday"]
        plan = await db.execute_fetchall(
            "EXPLAIN QUERY PLAN SELECT rowid FROM memory_nodes WHERE channel = 'c' "
            "AND type = 'episode' ORDER BY rowid DESC LIMIT 8"
        )
        assert "memory_nodes_channel" in str(list(plan)), "step 2 indexes episodes by channel"
    finally:
        await db.close()
    # The legacy table said 1 (adopted, not run again); step 2 ran on top.
    assert versions(path) == {"store": 5, "workers": 1, "memory_graph": 2}
    async with await Store.open(path, read_only=True, components=(TASK_TABLES,)) as again:
        assert await again.count("c") == 3


async def test_a_new_database_records_every_component_it_created(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    async with await Store.open(path, components=(TASK_TABLES,)):
        pass
    assert versions(path) == {"store": len(_STEPS), "workers": 1}
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"messages", "tasks", "task_messages", "tierbot_schema"} <= tables
    assert "schema_version" not in tables, "no second version table on a new database"


async def test_a_legacy_version_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    """A database an old-format newer tierbot wrote is refused, not migrated over."""
    path = tmp_path / "future.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE schema_version (version INTEGER)")
        db.execute("INSERT INTO schema_version VALUES (42)")
    with pytest.raises(StoreError, match=r"version 42, newer than this tierbot"):
        await Store.open(path)


async def test_a_failing_step_leaves_the_component_at_the_last_good_version(
    tmp_path: Path,
) -> None:
    """Each step commits with its version row: a step that fails is rolled back whole, the
    version stays at the step before, and a fixed step is applied on the next run."""
    broken = Migrations(
        "demo",
        (
            "CREATE TABLE a (x INTEGER);",
            "CREATE TABLE b (y INTEGER); INSERT INTO nowhere VALUES (1);",
        ),
    )
    async with aiosqlite.connect(tmp_path / "m.db", isolation_level=None) as db:
        with pytest.raises(sqlite3.OperationalError, match="nowhere"):
            await migrate(db, broken)
        assert await version(db, broken) == 1
        async with db.execute("SELECT name FROM sqlite_master WHERE name = 'b'") as cur:
            assert await cur.fetchone() is None, "the failed step left nothing behind"
        fixed = Migrations("demo", (broken.steps[0], "CREATE TABLE b (y INTEGER);"))
        assert await migrate(db, fixed) == 2
        assert await version(db, fixed) == 2
