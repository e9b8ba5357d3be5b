"""Open the message store the config names: SQLite (the default) or PostgreSQL.

Everything that opens a store (the runtime, the CLI's read-only views, the
operator's tools) goes through :func:`open_store`, so ``[storage] backend`` means
the same thing everywhere and each backend's errors read the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from tierbot.config import Config
from tierbot.errors import StoreError
from tierbot.migrations import Migrations
from tierbot.pg.store import PostgresStore
from tierbot.store import Store

__all__ = ["AnyStore", "open_store"]

#: A message store with a single writer other layers' tables may join.
AnyStore = Store | PostgresStore


async def open_store(
    config: Config,
    *,
    environ: Mapping[str, str] | None = None,
    read_only: bool = False,
    components: Mapping[str, Sequence[Migrations]] | None = None,
) -> AnyStore:
    """The store ``[storage]`` names.  ``components``: other layers' migrations per
    backend (``{"sqlite": [...], "postgres": [...]}``).  ``read_only``: no migration, no
    writer; a missing SQLite file is a StoreError naming the config key."""
    storage = config.storage
    extra = tuple((components or {}).get(storage.backend, ()))
    if storage.backend == "postgres":
        return await PostgresStore.open(
            storage,
            os.environ if environ is None else environ,
            read_only=read_only,
            components=extra,
        )
    path = config.storage_path()
    if read_only and not path.is_file():
        raise StoreError(f"no store at {path}: check [storage] path in {config.source}")
    return await Store.open(
        path,
        synchronous=storage.synchronous,
        commit_batch=storage.commit_batch,
        busy_timeout=storage.busy_timeout_seconds,
        read_only=read_only,
        components=extra,
    )
