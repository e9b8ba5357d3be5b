"""Schema migrations: ordered steps per component, one version table for the database.

Each layer that owns tables owns their migrations: the message store
(:mod:`tierbot.store`), the task-worker records (:mod:`workers.records`) and the
memory graph (:mod:`memory_graph.schema`) each declare a :class:`Migrations`
value, a component name and its SQL steps in order (step ``n`` brings the
component to version ``n``).  :func:`migrate` applies the missing steps, each in
its own transaction together with its version row, and refuses a database whose
component is newer than the code (an older tierbot must not write a schema it
does not know).  :func:`version` reads a component's version for a read-only
open, which never migrates.

One table, ``tierbot_schema (component, version)``, records every component.
Databases written before it existed kept one version table per component
(``schema_version``, ``memory_schema_version``): ``legacy`` names that table, and
the first migration adopts its version, so an existing bot upgrades in place.

A small runner rather than a library: the steps must run on the connection the
store's single writer already holds (the writer lock forbids a second writer),
inside aiosqlite's event-loop-friendly calls; yoyo-migrations and alembic open
their own synchronous connections.  The PostgreSQL backend runs the same
:class:`Migrations` values with its own SQL through the same two functions'
counterparts.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import aiosqlite
import structlog

from tierbot.errors import StoreError

__all__ = ["VERSION_TABLE", "Migrations", "check_known", "migrate", "statements", "version"]

log = structlog.get_logger("tierbot.migrations")

VERSION_TABLE = "tierbot_schema"
_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} "
    "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
)


@dataclass(frozen=True, slots=True)
class Migrations:
    """One component's schema: its name, its steps in order, and its pre-``tierbot_schema``
    version table (``legacy``, read as ``MAX(version)``) if it had one."""

    component: str
    steps: tuple[str, ...]
    legacy: str | None = None

    @property
    def latest(self) -> int:
        return len(self.steps)


def statements(script: str) -> list[str]:
    """The statements of a step (a trigger body's ``;`` does not end one)."""
    out, buf = [], ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n;"):
                out.append(buf)
            buf = ""
    return out


async def _legacy_version(db: aiosqlite.Connection, table: str | None) -> int:
    if table is None:
        return 0
    try:
        async with db.execute(f"SELECT MAX(version) FROM {table}") as cur:
            row = await cur.fetchone()
    except aiosqlite.OperationalError as exc:
        if "no such table" in str(exc):
            return 0
        raise
    return int(row[0]) if row and row[0] is not None else 0


async def version(db: aiosqlite.Connection, m: Migrations, *, where: str = "") -> int:
    """The version of ``m.component`` in ``db`` (0: none of its tables yet).

    Raises :class:`StoreError` when it is newer than this code knows.
    """
    try:
        async with db.execute(
            f"SELECT version FROM {VERSION_TABLE} WHERE component = ?", (m.component,)
        ) as cur:
            row = await cur.fetchone()
    except aiosqlite.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        row = None
    current = int(row[0]) if row is not None else await _legacy_version(db, m.legacy)
    return check_known(m, current, where)


def check_known(m: Migrations, current: int, where: str = "") -> int:
    """``current``, unless it is newer than this code knows: then StoreError (an older
    tierbot must not write a schema it does not know).  Every backend's runner calls it."""
    if current > m.latest:
        place = f" of {where}" if where else ""
        raise StoreError(
            f"the {m.component} schema{place} is version {current}, newer than this "
            f"tierbot ({m.latest}); upgrade tierbot"
        )
    return current


async def migrate(db: aiosqlite.Connection, m: Migrations, *, where: str = "") -> int:
    """Apply ``m``'s missing steps to ``db`` (autocommit connection); return the version.

    Each step and its version row commit together (``BEGIN IMMEDIATE``), so a crash
    between steps leaves the database at a known version and the next open goes on.
    """
    await db.execute(_CREATE)
    current = await version(db, m, where=where)
    for n in range(current + 1, m.latest + 1):
        await db.execute("BEGIN IMMEDIATE")
        try:
            for stmt in statements(m.steps[n - 1]):
                await db.execute(stmt)
            await db.execute(
                f"INSERT INTO {VERSION_TABLE} (component, version) VALUES (?, ?) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                (m.component, n),
            )
            await db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                await db.execute("ROLLBACK")
            raise
        log.info("schema.migrated", component=m.component, version=n)
    if current == m.latest and m.latest > 0:
        # Adopted from a legacy table (or already recorded): make sure the row exists.
        await db.execute(
            f"INSERT INTO {VERSION_TABLE} (component, version) VALUES (?, ?) "
            "ON CONFLICT (component) DO NOTHING",
            (m.component, current),
        )
    return m.latest
