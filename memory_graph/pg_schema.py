"""The memory graph's tables on PostgreSQL (component ``memory_graph``, as on SQLite).

The same nodes, edges, sources, tombstones and private channels as
:mod:`memory_graph.schema`, with two differences the backend brings:

* the text index is a column, ``tsv``: the node's own stemmed terms at weight A and
  its neighbouring turns' at B and C (:func:`tsv_literal`), searched through a GIN
  index; ``dl`` is the row's length in tokens as FTS5 counts it, and
  ``memory_text_stats`` keeps the totals bm25's average length needs;
* vectors are ``pgvector`` values, and memories (not episodes) are searched through an
  HNSW index built for the embedder's dimension (:func:`vector_index_ddl`).
"""

from __future__ import annotations

from tierbot.migrations import Migrations

__all__ = ["HNSW_EF_CONSTRUCTION", "HNSW_M", "MIGRATIONS", "tsquery_literal", "tsv_literal"]

_STEPS: tuple[str, ...] = (
    """
    CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE memory_nodes (
        rowid BIGINT PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        type TEXT NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        importance DOUBLE PRECISION NOT NULL,
        current_importance DOUBLE PRECISION NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        accessed_at DOUBLE PRECISION NOT NULL,
        access_count BIGINT NOT NULL DEFAULT 0,
        channel TEXT NOT NULL,
        workspace TEXT NOT NULL,
        author_id TEXT NOT NULL DEFAULT '',
        author_name TEXT NOT NULL DEFAULT '',
        platform_id TEXT,
        sources TEXT NOT NULL DEFAULT '[]',
        superseded_by TEXT,
        near_text TEXT NOT NULL DEFAULT '',
        far_text TEXT NOT NULL DEFAULT '',
        embedding vector,
        embedder TEXT NOT NULL DEFAULT '',
        tsv tsvector NOT NULL DEFAULT ''::tsvector,
        own_len INTEGER NOT NULL DEFAULT 0,
        dl INTEGER NOT NULL DEFAULT 0
    );
    CREATE UNIQUE INDEX memory_nodes_episode
        ON memory_nodes (channel, platform_id) WHERE platform_id IS NOT NULL;
    CREATE INDEX memory_nodes_hash ON memory_nodes (content_hash);
    CREATE INDEX memory_nodes_author ON memory_nodes (author_id);
    CREATE INDEX memory_nodes_channel ON memory_nodes (channel, type, rowid);
    CREATE INDEX memory_nodes_workspace ON memory_nodes (workspace, type);
    CREATE INDEX memory_nodes_superseded ON memory_nodes (superseded_by)
        WHERE superseded_by IS NOT NULL;
    CREATE INDEX memory_nodes_tsv ON memory_nodes USING gin (tsv);
    CREATE TABLE memory_edges (
        id BIGINT GENERATED ALWAYS AS IDENTITY,
        src BIGINT NOT NULL REFERENCES memory_nodes(rowid) ON DELETE CASCADE,
        dst BIGINT NOT NULL REFERENCES memory_nodes(rowid) ON DELETE CASCADE,
        type TEXT NOT NULL,
        weight DOUBLE PRECISION NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (src, dst, type)
    );
    CREATE INDEX memory_edges_dst ON memory_edges (dst);
    CREATE TABLE memory_sources (
        node BIGINT NOT NULL REFERENCES memory_nodes(rowid) ON DELETE CASCADE,
        channel TEXT NOT NULL,
        platform_id TEXT NOT NULL,
        rank INTEGER NOT NULL,
        PRIMARY KEY (node, platform_id)
    );
    CREATE INDEX memory_sources_pid ON memory_sources (channel, platform_id);
    CREATE TABLE memory_private_channels (
        channel TEXT PRIMARY KEY,
        marked_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE memory_tombstones (
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (kind, key)
    );
    CREATE TABLE memory_text_stats (
        one INTEGER PRIMARY KEY CHECK (one = 1),
        rows BIGINT NOT NULL,
        tokens BIGINT NOT NULL
    );
    INSERT INTO memory_text_stats VALUES (1, 0, 0);
    """,
    # GIN's fast update parks new entries in a pending list that every search scans
    # until vacuum or a 4 MB limit merges it: up to 2 ms per query term at 100k
    # memories. Inserting into the index at once costs saves less than that costs recall.
    """
    ALTER INDEX memory_nodes_tsv SET (fastupdate = off);
    SELECT gin_clean_pending_list('memory_nodes_tsv'::regclass);
    """,
    # Several processes on one database save memories at once: node rowids come from
    # one sequence (each process used to count from the highest it had seen, and the
    # second writer's saves failed on the primary key).  Every process raises it past
    # the rowids it finds when it opens (a migrated store's copied rows included).
    """
    CREATE SEQUENCE memory_rowids;
    """,
)

#: The memory graph's tables on PostgreSQL; the ``vector`` extension must exist first.
MIGRATIONS = Migrations("memory_graph", _STEPS)

#: HNSW build parameters (``[memory] vector_search = "database"``): pgvector's defaults.
#: Thinner graphs (m = 6, ef_construction = 24) saved faster but found barely half of the
#: exact top 10 with the offline embedder's sparse vectors (benchmarks/memory_speed.py).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64

#: Largest tsvector position: later tokens share it.
_MAX_POS = 16383
#: Positions PostgreSQL keeps per lexeme.
_MAX_POSITIONS = 256


def _lexeme(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def tsv_literal(*columns: tuple[str, str]) -> str:
    """A ``tsvector`` in its text form from ``(space-separated terms, weight letter)``
    columns, positions numbered across them.  The terms are the graph's own stems
    (:func:`memory_graph.text.term_string`): no parser or dictionary of the server's
    touches them, so the index holds exactly what SQLite's does."""
    positions: dict[str, list[str]] = {}
    p = 0
    for text, weight in columns:
        for term in text.split():
            p += 1
            positions.setdefault(term, []).append(f"{min(p, _MAX_POS)}{weight}")
    return " ".join(f"{_lexeme(t)}:{','.join(ps[:_MAX_POSITIONS])}" for t, ps in positions.items())


def tsquery_literal(term: str) -> str:
    """One stemmed term as a ``tsquery`` (quoted: never an operator)."""
    return _lexeme(term)


def vector_index_ddl(dim: int) -> tuple[str, str]:
    """(index name, CREATE INDEX) of the HNSW index over memories' ``dim``-dimensional
    vectors: cosine distance, episodes left out (recall scores those from the rows)."""
    name = f"memory_nodes_hnsw_{int(dim)}"
    ddl = (
        f"CREATE INDEX IF NOT EXISTS {name} ON memory_nodes USING hnsw "
        f"((embedding::vector({int(dim)})) vector_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
        f"WHERE type <> 'episode' AND vector_dims(embedding) = {int(dim)}"
    )
    return name, ddl
