"""From ``[storage]`` and the environment to an asyncpg pool, or to one clear error.

The connection string lives in the environment variable ``[storage] dsn_env`` names
(default ``TIERBOT_DATABASE_URL``), never in the config file.  Every way this can go
wrong is a :class:`~tierbot.errors.StoreError` of one line that names what to fix and
never prints the password.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping

import asyncpg
import structlog
from pgvector.asyncpg import register_vector

from tierbot.config import StorageConfig
from tierbot.errors import StoreError

__all__ = ["dsn_from_env", "ensure_vector", "open_pool", "pg_text", "redact"]

log = structlog.get_logger("tierbot.pg")

#: pg_advisory_xact_lock key held while the vector extension is created.
_EXTENSION_LOCK = 0x74696572626F76

#: ``scheme://user:PASSWORD@``: the password part of a URL's authority.
_PASSWORD = re.compile(r"(://[^:/@?#]*:)[^/?#]*@")
#: ``?password=...`` in the query string.
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def redact(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***`` (for messages and logs); works on
    strings too malformed to parse."""
    return _QUERY_PASSWORD.sub(r"\1***", _PASSWORD.sub(r"\1***@", dsn))


def dsn_from_env(storage: StorageConfig, environ: Mapping[str, str]) -> str:
    """The connection string ``[storage] dsn_env`` names; StoreError when it is unset or
    is not a ``postgresql://`` URL."""
    name = storage.dsn_env
    dsn = environ.get(name, "").strip()
    if not dsn:
        raise StoreError(
            f'[storage] backend = "postgres" needs a connection string in ${name} '
            "(set it to postgresql://user:password@host:5432/dbname, or name another "
            "variable in [storage] dsn_env)"
        )
    scheme = dsn.split(":", 1)[0].lower()
    if scheme not in ("postgresql", "postgres"):
        raise StoreError(
            f"${name} is not a PostgreSQL connection string: it must start with "
            f"postgresql:// (it starts with {scheme[:20]!r})"
        )
    return dsn


async def open_pool(storage: StorageConfig, dsn: str, *, name: str = "") -> asyncpg.Pool:
    """A pool of ``pool_min``..``pool_max`` connections, tried within
    ``connect_timeout_seconds``; StoreError (one line) when the server cannot be used."""
    where = f"${name}" if name else "the connection string"
    shown = redact(dsn)
    try:
        pool = await asyncio.wait_for(
            asyncpg.create_pool(
                dsn,
                min_size=storage.pool_min,
                max_size=storage.pool_max,
                timeout=storage.connect_timeout_seconds,
                command_timeout=storage.statement_timeout_seconds or None,
                init=_with_vector,
            ),
            timeout=storage.connect_timeout_seconds + 1.0,
        )
    except StoreError as exc:  # from a connection's set-up: pgvector missing
        raise StoreError(f"PostgreSQL at {shown} (from {where}): {exc}") from exc
    except TimeoutError as exc:
        raise StoreError(
            f"PostgreSQL at {shown} (from {where}) did not answer within "
            f"{storage.connect_timeout_seconds:g}s: check the host and port, and that "
            "the server is running"
        ) from exc
    except asyncpg.InvalidPasswordError as exc:
        raise StoreError(
            f"PostgreSQL at {shown} refused the password (from {where}): {exc}"
        ) from exc
    except asyncpg.InvalidCatalogNameError as exc:
        raise StoreError(
            f"PostgreSQL at {shown} has no such database (from {where}): {exc}; "
            "create it first (createdb)"
        ) from exc
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(f"cannot use PostgreSQL at {shown} (from {where}): {exc}") from exc
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise StoreError(
            f"cannot reach PostgreSQL at {shown} (from {where}): {reason}; check the "
            "host and port, and that the server is running"
        ) from exc
    except ValueError as exc:  # a malformed DSN (asyncpg's parser)
        raise StoreError(f"{where} is not a valid PostgreSQL connection string: {exc}") from exc
    log.info("pg.connected", dsn=shown, pool_max=storage.pool_max)
    return pool


def pg_text(text: str) -> str:
    """``text`` as PostgreSQL's ``text`` can hold it: a NUL character (which it cannot)
    becomes U+FFFD, and the replacement is logged, rather than the row being refused."""
    if "\x00" not in text:
        return text
    log.warning("pg.nul_replaced", count=text.count("\x00"))
    return text.replace("\x00", "\ufffd")


async def _with_vector(conn: asyncpg.Connection) -> None:
    """Every pooled connection: pgvector is enabled, and its type travels as numpy."""
    await ensure_vector(conn)
    await register_vector(conn)


async def ensure_vector(conn: asyncpg.Connection, *, where: str = "") -> None:
    """Make sure the ``vector`` extension (pgvector) is installed in this database:
    create it when the server has it and we may; otherwise StoreError saying how."""
    have = await conn.fetchval("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
    if have:
        return
    available = await conn.fetchval("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    place = f" at {where}" if where else ""
    if not available:
        raise StoreError(
            f"the PostgreSQL server{place} has no pgvector extension: install pgvector "
            "on the server (e.g. the postgresql-16-pgvector package), then run "
            "CREATE EXTENSION vector in the database"
        )
    try:
        # Connections opening together must not race to create it.
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _EXTENSION_LOCK)
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except asyncpg.PostgresError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StoreError(
            f"pgvector is installed on the server{place} but not enabled in this database, "
            f"and this user may not enable it ({reason}): run CREATE EXTENSION vector in "
            "this database as a superuser"
        ) from exc
