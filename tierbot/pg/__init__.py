"""PostgreSQL: connecting, migrating, and the message store on a shared database.

The embedded default is SQLite (:mod:`tierbot.store`); ``[storage] backend =
"postgres"`` puts the same store on PostgreSQL through asyncpg:

* :mod:`tierbot.pg.connect` turns ``[storage]`` and the environment into a pool,
  or into one line naming what to fix (no DSN in the environment, a malformed one,
  a server that does not answer, no pgvector);
* :mod:`tierbot.pg.migrations` applies each component's PostgreSQL steps, versioned
  in the same ``tierbot_schema`` table as SQLite, under an advisory lock so two
  processes starting together migrate once;
* :mod:`tierbot.pg.store` is :class:`~tierbot.pg.store.PostgresStore`, the
  :class:`~tierbot.storage.MessageStore` on PostgreSQL.
"""
