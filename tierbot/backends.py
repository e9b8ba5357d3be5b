"""Open the message store the config names: SQLite (the default) or PostgreSQL.

Everything that opens a store (the runtime, the CLI's read-only views, the
operator's tools) goes through :func:`open_store`, so ``[storage] backend`` means
the same thing everywhere and each backend's errors read the same way.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping, Sequence

from tierbot.config import Config
from tierbot.errors import StoreError, StoreLockedError
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
    try:
        return await Store.open(
            path,
            synchronous=storage.synchronous,
            commit_batch=storage.commit_batch,
            busy_timeout=storage.busy_timeout_seconds,
            read_only=read_only,
            components=extra,
        )
    except StoreLockedError:
        raise  # the path is right: another process is using it
    except StoreError as exc:
        what = _path_advice(exc.__cause__, config.source)
        if what is None:
            raise
        raise StoreError(f"storage.path: {exc} ({what})") from exc


#: SQLite's result codes for a file that cannot be opened or created where the path says.
_CANNOT_OPEN = {sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY}
#: ... and for a file there that is no (intact) SQLite database.
_NOT_A_STORE = {sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT}


def _path_advice(cause: BaseException | None, source: str) -> str | None:
    """What to do about ``[storage] path`` when opening the file there failed with
    ``cause``; None when the path is not at fault (a busy or full disk, a newer schema)."""
    code = getattr(cause, "sqlite_errorcode", -1) & 0xFF  # the primary code of an extended one
    if isinstance(cause, OSError) or code in _CANNOT_OPEN:
        return f"point [storage] path in {source} at a file in a folder this user can write"
    if code in _NOT_A_STORE:
        return (
            f"not a tierbot store, or a damaged one: point [storage] path in {source} at "
            "another file, or see 'corrupt database' in docs/operations.md"
        )
    return None
