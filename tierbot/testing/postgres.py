"""A private PostgreSQL server for tests: PostgreSQL 16 with pgvector, from the
``pgserver`` wheel (the ``dev`` extra), in a temporary directory.

    server = PostgresServer.start()
    dsn = server.create_database()      # a fresh, empty database each call
    ...
    server.stop()                       # stops it and deletes its directory

It listens on a Unix socket inside its directory, so nothing outside this machine's
user can reach it and two test runs never collide on a port.  Starting takes about a
second; a session-wide fixture shares one server and gives each test its own database.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import urllib.parse
import warnings
from pathlib import Path
from typing import Any

__all__ = ["PostgresServer"]


class PostgresServer:
    """One running server; :meth:`create_database` hands out connection strings."""

    def __init__(self, server: Any, directory: Path, owned: bool) -> None:
        self._server = server
        self.directory = directory
        self._owned = owned
        self._names = itertools.count(1)
        self.uri: str = server.get_uri()

    @classmethod
    def start(cls, directory: Path | None = None) -> PostgresServer:
        """Start a server with its data in ``directory`` (a new temporary one if None)."""
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI): harmless.
            warnings.simplefilter("ignore")
            import pgserver

            owned = directory is None
            path = Path(tempfile.mkdtemp(prefix="tierbot-pg-")) if directory is None else directory
            server = pgserver.get_server(path / "pgdata", cleanup_mode="stop")
        return cls(server, path, owned)

    def dsn(self, database: str, user: str | None = None) -> str:
        """The connection string of ``database`` on this server (as ``user``: the
        superuser by default; the socket trusts every local role)."""
        parts = urllib.parse.urlsplit(self.uri)
        if user is not None:
            parts = parts._replace(netloc=f"{user}@{parts.netloc.rsplit('@', 1)[-1]}")
        return urllib.parse.urlunsplit(parts._replace(path="/" + database))

    def psql(self, sql: str) -> str:
        """Run ``sql`` as the superuser in the ``postgres`` database; its output."""
        out: str = self._server.psql(sql)
        return out

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (named ``name`` or ``t<n>``); its connection string."""
        name = name or f"t{os.getpid()}_{next(self._names)}"
        self.psql(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """Stop the server and, when :meth:`start` made its directory, delete it."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._server.cleanup()
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)
