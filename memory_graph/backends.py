"""Open the memory graph on the backend ``[storage] backend`` names.

SQLite: the graph's tables in the store's file, its vector index in a directory beside
it.  PostgreSQL: the tables in the store's database, on the message store's pool when
the caller has one (a running bot), else on a pool of its own; vectors are searched in
the database with ``[memory] vector_search = "database"`` (pgvector's HNSW index);
otherwise the process keeps its in-RAM index, saved under ``[memory] index_dir`` (default:
``memory-index/`` beside the configured store path) in a folder named by the graph's id.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

import asyncpg

from tierbot.config import Config
from tierbot.pg.connect import dsn_from_env, open_pool, redact

from .graph import MemoryGraph
from .pg_storage import PostgresMemoryStorage

__all__ = ["index_base", "open_graph"]


def index_base(config: Config) -> Path | None:
    """The folder the in-RAM vector index is cached in: ``[memory] index_dir``, else beside
    the SQLite file (``tierbot.db.memory-index``) or, on PostgreSQL, ``memory-index/``
    beside the configured path (one sub-folder per graph id).  None when the vectors are
    searched in the database (``vector_search = "database"``): no folder is used."""
    if config.storage.backend == "postgres" and config.memory.vector_search == "database":
        return None
    if config.memory.index_dir:
        return Path(config.memory.index_dir)
    db = config.storage_path()
    if config.storage.backend == "sqlite":
        return db.parent / (db.name + ".memory-index")
    return db.parent / "memory-index"


async def open_graph(
    config: Config,
    *,
    pool: asyncpg.Pool | None = None,
    where: str = "",
    read_only: bool = False,
    environ: Mapping[str, str] | None = None,
) -> MemoryGraph:
    """The memory graph of ``config``'s store; StoreError (one line) when it cannot open.

    ``pool`` (PostgreSQL): the message store's pool, shared and left open on close;
    ``where`` names its server in errors.  Without it a pool is opened from ``[storage]
    dsn_env`` and closed with the graph.
    """
    if config.storage.backend == "sqlite":
        return await MemoryGraph.open(
            config.storage_path(), config.memory, index_dir=index_base(config), read_only=read_only
        )
    owns = pool is None
    if pool is None:
        dsn = dsn_from_env(config.storage, os.environ if environ is None else environ)
        pool = await open_pool(config.storage, dsn, name=config.storage.dsn_env)
        where = redact(dsn)
    in_database = config.memory.vector_search == "database"
    storage = await PostgresMemoryStorage.open(
        pool, where=where, read_only=read_only, owns_pool=owns, vector_index=in_database
    )
    try:
        # The in-RAM index's file is this database's alone: named by the graph's id.
        graph_id = await storage.get_meta("graph_id")
        if graph_id is None:
            graph_id = secrets.token_hex(8)
            if not read_only:
                await storage.set_meta("graph_id", graph_id)
    except BaseException:
        await storage.close()
        raise
    base = index_base(config) or config.storage_path().parent / "memory-index"
    return await MemoryGraph.open_storage(
        storage,
        config.memory,
        index_dir=base / f"postgres-{graph_id}",
        read_only=read_only,
        where=f" at {where}",
    )
