"""Open the memory graph on the backend ``[storage] backend`` names.

SQLite: the graph's tables in the store's file, its vector index in a directory beside
it.  PostgreSQL: the tables in the store's database, on the message store's pool when
the caller has one (a running bot), else on a pool of its own; vectors are searched in
the database (pgvector), so there is no index directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import asyncpg

from tierbot.config import Config
from tierbot.pg.connect import dsn_from_env, open_pool, redact

from .graph import MemoryGraph
from .pg_storage import PostgresMemoryStorage

__all__ = ["open_graph"]


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
        return await MemoryGraph.open(config.storage_path(), config.memory, read_only=read_only)
    owns = pool is None
    if pool is None:
        dsn = dsn_from_env(config.storage, os.environ if environ is None else environ)
        pool = await open_pool(config.storage, dsn, name=config.storage.dsn_env)
        where = redact(dsn)
    storage = await PostgresMemoryStorage.open(
        pool, where=where, read_only=read_only, owns_pool=owns
    )
    return await MemoryGraph.open_storage(
        storage,
        config.memory,
        index_dir=Path(config.memory.index_dir or "."),  # unused: the database holds it
        read_only=read_only,
        where=f" at {where}",
    )
