"""Schema migrations on PostgreSQL: the same components and versions as on SQLite.

Each layer that owns tables declares a :class:`~tierbot.migrations.Migrations` value of
PostgreSQL steps beside its SQLite one (the store's in :mod:`tierbot.pg.store`, the
memory graph's in :mod:`memory_graph.pg_schema`).  Versions are recorded in the same
``tierbot_schema (component, version)`` table.  Every migration runs under a
transaction-scoped advisory lock, so processes that start together against one
database migrate once, one after the other; PostgreSQL's DDL is transactional, so a
step and its version row commit together or not at all.
"""

from __future__ import annotations

import asyncpg
import structlog

from tierbot.migrations import VERSION_TABLE, Migrations, check_known

__all__ = ["migrate", "version"]

log = structlog.get_logger("tierbot.migrations")

#: pg_advisory_xact_lock key for migrations (an arbitrary constant: "tierbot" in ASCII).
MIGRATION_LOCK = 0x74696572626F74

_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} "
    "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
)


async def version(conn: asyncpg.Connection, m: Migrations, *, where: str = "") -> int:
    """The version of ``m.component`` (0: none of its tables yet); StoreError when it is
    newer than this code knows."""
    exists = await conn.fetchval("SELECT to_regclass($1)", VERSION_TABLE)
    current = 0
    if exists is not None:
        row = await conn.fetchval(
            f"SELECT version FROM {VERSION_TABLE} WHERE component = $1", m.component
        )
        current = int(row or 0)
    return check_known(m, current, where)


async def migrate(conn: asyncpg.Connection, m: Migrations, *, where: str = "") -> int:
    """Apply ``m``'s missing steps; return the version.  Each step commits with its
    version row; concurrent callers wait on the advisory lock and find the work done."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await conn.execute(_CREATE)
    current = await version(conn, m, where=where)
    for n in range(current + 1, m.latest + 1):
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            # Another process may have applied it while we waited for the lock.
            if await version(conn, m, where=where) >= n:
                continue
            await conn.execute(m.steps[n - 1])
            await conn.execute(
                f"INSERT INTO {VERSION_TABLE} (component, version) VALUES ($1, $2) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                m.component,
                n,
            )
        log.info("schema.migrated", component=m.component, version=n, backend="postgres")
    return m.latest
