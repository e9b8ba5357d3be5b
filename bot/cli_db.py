"""``tierbot db migrate --from sqlite:PATH --to postgres``: move a bot's whole store.

Every table of the SQLite store (the message log, summary membership, channel state,
compaction history, kept replies, task transcripts) and of its memory graph is copied
into the PostgreSQL database ``[storage] dsn_env`` names, ids and rowids kept (what
refers to them, summaries, the indexer's mark, edges, stays true).  Copying goes in
pages, each one transaction, in key order; a run that stops (a crash, Ctrl-C) is
resumed by running the command again: each table continues after the last key it has,
and a page copied twice is skipped row by row on its primary key.  At the end the row
counts of every table are compared and printed; any difference fails the command.

The source is opened as its writer (a running bot holds that lock: stop it first);
the target must be empty or hold an unfinished migration of the same source.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

from bot.cli_config import config_from
from tierbot.config import Config
from tierbot.errors import StoreError
from tierbot.pg.connect import pg_text

__all__ = ["add_db_commands"]

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
PAGE = 2000

_MARKER = (
    "CREATE TABLE IF NOT EXISTS tierbot_migration (source TEXT PRIMARY KEY, "
    "started DOUBLE PRECISION NOT NULL, finished DOUBLE PRECISION)"
)


@dataclass(frozen=True)
class Table:
    """One table to copy: its columns (the same names on both sides), its key columns
    (integer first: the resume point), and whether PostgreSQL generates its id."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    generated_id: bool = False
    memory: bool = False
    #: The unique key a row copied twice collides on (default: ``key``).
    conflict: tuple[str, ...] = ()

    @property
    def resumable(self) -> bool:
        """Whether copying may continue after the target's highest key (an integer)."""
        return self.key[0] in ("id", "rowid", "node", "summary_id")


def _cols(text: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in text.split(","))


STORE_TABLES = (
    Table(
        "messages",
        _cols(
            "id, channel, platform_id, role, author_id, author_name, text, ts, tokens, "
            "state, pos, meta"
        ),
        ("id",),
    ),
    Table("summary_members", ("summary_id", "message_id"), ("summary_id", "message_id")),
    Table("channels", ("key", "handled_upto", "counters", "updated"), ("key",)),
    Table(
        "compactions",
        _cols(
            "id, channel, tier, outcome, started, duration, usage_before, usage_after, "
            "covered, tokens_before, tokens_after, memories, reason"
        ),
        ("id",),
        generated_id=True,
    ),
    Table(
        "undelivered",
        _cols("id, channel, text, reply_to, created, attempts, error, sending"),
        ("id",),
        generated_id=True,
    ),
    Table(
        "tasks",
        _cols("id, channel, kind, task, status, created, finished, result, error, stats"),
        ("id",),
        generated_id=True,
    ),
    Table(
        "task_messages",
        _cols(
            "id, task_id, seq, segment, kind, role, content, tool_calls, tool_call_id, "
            "dropped_by, ts"
        ),
        ("id",),
        generated_id=True,
    ),
)

_NODE_COLUMNS = _cols(
    "rowid, id, type, content, content_hash, importance, current_importance, created_at, "
    "updated_at, accessed_at, access_count, channel, workspace, author_id, author_name, "
    "platform_id, sources, superseded_by, near_text, far_text, embedding, embedder"
)

MEMORY_TABLES = (
    Table("memory_meta", ("key", "value"), ("key",), memory=True),
    Table("memory_nodes", _NODE_COLUMNS, ("rowid",), memory=True),
    Table(
        "memory_edges",
        ("id", "src", "dst", "type", "weight", "created_at"),
        ("id",),
        generated_id=True,
        memory=True,
        conflict=("src", "dst", "type"),
    ),
    Table(
        "memory_sources",
        ("node", "channel", "platform_id", "rank"),
        ("node", "platform_id"),
        memory=True,
    ),
    Table("memory_private_channels", ("channel", "marked_at"), ("channel",), memory=True),
    Table("memory_tombstones", ("kind", "key", "created_at"), ("kind", "key"), memory=True),
)


class _Refused(Exception):
    """The migration cannot start; the message says why and what to do."""


def _source_path(spec: str) -> Path:
    kind, sep, rest = spec.partition(":")
    if not sep or kind != "sqlite" or not rest:
        raise _Refused(f"--from must be sqlite:PATH (got {spec!r})")
    path = Path(rest).expanduser()
    if not path.is_file():
        raise _Refused(f"--from {spec}: no such file")
    return path


def _select(t: Table) -> str:
    cols = ", ".join(
        "rowid AS id" if (t.name == "memory_edges" and c == "id") else c for c in t.columns
    )
    return f"SELECT {cols} FROM {t.name}"


def _source_key(t: Table) -> tuple[str, ...]:
    return tuple("rowid" if (t.name == "memory_edges" and k == "id") else k for k in t.key)


async def _prepare_source(path: Path) -> bool:
    """Bring the SQLite file to this version's schema (as the bot would at start);
    whether it holds a memory graph."""
    from memory_graph.sqlite_storage import SQLiteMemoryStorage
    from tierbot.store import Store
    from workers.records import TASK_TABLES

    await (await Store.open(path, components=(TASK_TABLES,))).aclose()
    with sqlite3.connect(path) as db:
        has_memory = (
            db.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_nodes'").fetchone()
            is not None
        )
    if has_memory:
        await (await SQLiteMemoryStorage.open(path)).close()
    return has_memory


def _node_row(values: Sequence[Any]) -> tuple[Any, ...]:
    """A SQLite memory_nodes row as PostgreSQL's, with its text index computed."""
    from pgvector import Vector

    from memory_graph.pg_schema import tsv_literal
    from memory_graph.text import fts_tags

    row = dict(zip(_NODE_COLUMNS, values, strict=True))
    own_terms = fts_tags(
        row["workspace"], row["channel"], row["type"], row["content"], row["author_name"]
    )[0]
    own = len(own_terms.split()) + 3
    near, far = row["near_text"], row["far_text"]
    blob = row["embedding"]
    row["embedding"] = None if blob is None else Vector(np.frombuffer(blob, dtype=np.float32))
    return (
        *row.values(),
        tsv_literal((own_terms, "A"), (near, "B"), (far, "C")),
        own,
        own + len(near.split()) + len(far.split()),
    )


def _clean(value: Any) -> Any:
    return pg_text(value) if isinstance(value, str) else value


async def _copy_table(
    src: sqlite3.Connection,
    pg: asyncpg.Connection,
    t: Table,
    progress: Callable[[str], None],
) -> None:
    cols = list(t.columns)
    transform: Callable[[Sequence[Any]], tuple[Any, ...]] = tuple
    if t.name == "memory_nodes":
        cols += ["tsv", "own_len", "dl"]
        transform = _node_row
    marks = ", ".join(
        f"${i + 1}::tsvector" if c == "tsv" else f"${i + 1}" for i, c in enumerate(cols)
    )
    overriding = " OVERRIDING SYSTEM VALUE" if t.generated_id else ""
    insert = (
        f"INSERT INTO {t.name} ({', '.join(cols)}){overriding} VALUES ({marks}) "
        f"ON CONFLICT ({', '.join(t.conflict or t.key)}) DO NOTHING"
    )
    skey = _source_key(t)
    order = ", ".join(skey)
    where: str = ""
    params: tuple[Any, ...] = ()
    if t.resumable:
        last = await pg.fetchval(f"SELECT max({t.key[0]}) FROM {t.name}")
        if last is not None:  # the page holding it may be partly there: from it, again
            where, params = f" WHERE {skey[0]} >= ?", (last,)
    copied = 0
    cursor = src.execute(f"{_select(t)}{where} ORDER BY {order}", params)
    while rows := cursor.fetchmany(PAGE):
        batch = [tuple(_clean(v) for v in transform(r)) for r in rows]
        async with pg.transaction():
            await pg.executemany(insert, batch)
        copied += len(batch)
        progress(f"{t.name}: {copied:,} rows")


async def _migrate(cfg: Config, source: Path, environ: dict[str, str]) -> dict[str, Any]:
    from memory_graph.pg_schema import vector_index_ddl
    from memory_graph.pg_storage import PostgresMemoryStorage
    from memory_graph.text import TEXT_VERSION
    from tierbot.pg.connect import dsn_from_env, redact
    from tierbot.pg.store import PostgresStore
    from tierbot.storelock import WriterLock
    from workers.records import TASK_TABLES_PG

    dsn = dsn_from_env(cfg.storage, environ)
    source_key = str(source)  # absolute: resolved by the caller
    has_memory = await _prepare_source(source)
    tables = STORE_TABLES + (MEMORY_TABLES if has_memory else ())
    started = time.time()

    def progress(line: str) -> None:
        print(f"\r{line:<60}", end="", file=sys.stderr, flush=True)

    with WriterLock(source):  # a running bot holds it: nothing changes under the copy
        store = await PostgresStore.connect(
            dsn, cfg.storage, name=cfg.storage.dsn_env, components=(TASK_TABLES_PG,)
        )
        try:
            if has_memory:
                await PostgresMemoryStorage.open(store.pool, where=store.where)
            async with store.pool.acquire() as pg:
                await _claim(pg, source_key, started)
                src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
                try:
                    for t in tables:
                        await _copy_table(src, pg, t, progress)
                    print(file=sys.stderr)
                    await _finish(pg, src, has_memory, TEXT_VERSION)
                    counts = await _counts(src, pg, tables)
                    if has_memory and cfg.memory.vector_search == "database":
                        dims = await pg.fetch(
                            "SELECT DISTINCT vector_dims(embedding) FROM memory_nodes "
                            "WHERE type <> 'episode' AND embedding IS NOT NULL"
                        )
                        for (dim,) in dims:
                            progress(f"building the vector index ({dim} dimensions)")
                            await pg.execute(vector_index_ddl(int(dim))[1])
                        print(file=sys.stderr)
                finally:
                    src.close()
                bad = {n: c for n, c in counts.items() if c["source"] != c["target"]}
                if not bad:
                    await pg.execute(
                        "UPDATE tierbot_migration SET finished = $2 WHERE source = $1",
                        source_key,
                        time.time(),
                    )
        finally:
            await store.aclose()
    return {
        "from": str(source),
        "to": redact(dsn),
        "tables": counts,
        "verified": not bad,
        "seconds": round(time.time() - started, 1),
    }


async def _claim(pg: asyncpg.Connection, source: str, now: float) -> None:
    """Refuse a target holding another store; note this migration (resumable)."""
    await pg.execute(_MARKER)
    mine = await pg.fetchval("SELECT 1 FROM tierbot_migration WHERE source = $1", source)
    if mine:
        return
    others = await pg.fetchval("SELECT string_agg(source, ', ') FROM tierbot_migration")
    has_rows = await pg.fetchval("SELECT EXISTS (SELECT 1 FROM messages)")
    if others or has_rows:
        origin = f"migrated from {others}" if others else "written by a bot"
        raise _Refused(
            f"the PostgreSQL database already holds a tierbot store ({origin}); migrate "
            "into an empty database"
        )
    await pg.execute("INSERT INTO tierbot_migration (source, started) VALUES ($1, $2)", source, now)


async def _finish(
    pg: asyncpg.Connection, src: sqlite3.Connection, has_memory: bool, text_version: str
) -> None:
    """Sequences past the copied ids; the memory graph's totals and marks."""
    for name in ("messages", "compactions", "undelivered", "tasks", "task_messages") + (
        ("memory_edges",) if has_memory else ()
    ):
        await pg.execute(
            f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
            f"GREATEST((SELECT max(id) FROM {name}), 1), (SELECT max(id) FROM {name}) IS NOT NULL)"
        )
    if not has_memory:
        return
    seq = src.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memory_nodes'").fetchone()
    async with pg.transaction():
        await pg.execute(
            "UPDATE memory_text_stats SET rows = (SELECT count(*) FROM memory_nodes), "
            "tokens = (SELECT COALESCE(sum(dl), 0) FROM memory_nodes)"
        )
        for key, value in (("max_rowid", str(seq[0] if seq else 0)), ("fts_version", text_version)):
            await pg.execute(
                "INSERT INTO memory_meta (key, value) VALUES ($1, $2) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                key,
                value,
            )


async def _counts(
    src: sqlite3.Connection, pg: asyncpg.Connection, tables: Sequence[Table]
) -> dict[str, dict[str, int]]:
    out = {}
    for t in tables:
        # The target keeps one mark of its own in memory_meta (the highest rowid).
        where = " WHERE key <> 'max_rowid'" if t.name == "memory_meta" else ""
        [(n,)] = src.execute(f"SELECT COUNT(*) FROM {t.name}{where}").fetchall()
        m = await pg.fetchval(f"SELECT COUNT(*) FROM {t.name}{where}")
        out[t.name] = {"source": int(n), "target": int(m)}
    return out


def cmd_db_migrate(args: argparse.Namespace) -> int:
    cfg = config_from(args.config)
    try:
        if args.to != "postgres":
            raise _Refused(f"--to must be postgres (got {args.to!r})")
        source = _source_path(args.source).resolve()
        report = asyncio.run(_migrate(cfg, source, dict(os.environ)))
    except _Refused as exc:
        print(f"tierbot: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (StoreError, asyncpg.PostgresError, sqlite3.Error) as exc:
        if isinstance(exc, StoreError):
            raise
        raise StoreError(f"the migration stopped: {exc}; run the command again to resume") from exc
    print(json.dumps(report))
    if not report["verified"]:
        bad = [n for n, c in report["tables"].items() if c["source"] != c["target"]]
        print(
            f"tierbot: row counts differ after the copy in {', '.join(bad)}; run the "
            "command again to resume, and report it if they still differ",
            file=sys.stderr,
        )
        return EXIT_FAIL
    return EXIT_OK


def add_db_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``db migrate`` on the top-level subparsers."""
    db = sub.add_parser("db", help="the store's database")
    dsub = db.add_subparsers(dest="db_command", required=True)
    p = dsub.add_parser(
        "migrate",
        parents=[common],
        help="copy a SQLite store and its memory graph into PostgreSQL",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="sqlite:PATH",
        help="the SQLite store to copy (stop the bot that writes it first)",
    )
    p.add_argument("--to", required=True, metavar="postgres", help="the database $dsn_env names")
    p.set_defaults(func=cmd_db_migrate)
