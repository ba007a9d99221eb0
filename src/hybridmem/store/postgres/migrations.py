"""The PostgreSQL store's schema: its migrations, one named function each, in order in
:data:`MIGRATIONS` (migration i upgrades the schema version in ``meta`` from i to i + 1; the schema
and its numbers are the store's format: a migration is never changed, only a new one added), and
:func:`bootstrap`, which checks pgvector and runs them under an advisory lock."""

from __future__ import annotations

import re
from collections.abc import Callable

import psycopg
from psycopg import errors as pgerr

from ...errors import NotFoundError, StoreError
from ...text.tokenize import TOKENIZER_VERSION
from ..sql import changelog as changelog_sql
from ..sql import graph as graph_sql

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "bootstrap"]


def _run(conn: psycopg.Connection, sql: str) -> None:
    """Each statement of ``sql`` (split at ``;``), in the caller's transaction."""
    for stmt in sql.split(";"):
        if stmt.strip():
            conn.execute(stmt)


_TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE namespaces (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    vec_version BIGINT NOT NULL DEFAULT 0,
    chunk_version BIGINT NOT NULL DEFAULT 0,
    n_chunks BIGINT NOT NULL DEFAULT 0,
    total_len BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE documents (
    ns_id BIGINT NOT NULL REFERENCES namespaces(id),
    doc_id TEXT NOT NULL,
    source TEXT,
    metadata JSONB NOT NULL DEFAULT '{}',
    content_hash TEXT NOT NULL,
    n_chunks INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (ns_id, doc_id)
);
CREATE TABLE chunks (
    id BIGSERIAL PRIMARY KEY,
    ns_id BIGINT NOT NULL REFERENCES namespaces(id),
    chunk_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    ord INTEGER NOT NULL,
    text TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    lang TEXT,
    source TEXT,
    metadata JSONB NOT NULL DEFAULT '{}',
    tokens TEXT NOT NULL DEFAULT '',
    n_tokens INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (ns_id, chunk_id)
);
CREATE INDEX chunks_by_doc ON chunks (ns_id, doc_id);
CREATE INDEX chunks_metadata ON chunks USING gin (metadata jsonb_path_ops);
CREATE TABLE postings (
    ns_id BIGINT NOT NULL,
    term TEXT NOT NULL,
    chunk_rowid BIGINT NOT NULL,
    tf INTEGER NOT NULL,
    dl INTEGER NOT NULL,
    PRIMARY KEY (ns_id, term, chunk_rowid) INCLUDE (tf, dl)  -- covering: BM25 reads only the index
);
CREATE TABLE term_df (
    ns_id BIGINT NOT NULL,
    term TEXT NOT NULL,
    df BIGINT NOT NULL,
    PRIMARY KEY (ns_id, term)
);
CREATE TABLE vectors (
    chunk_rowid BIGINT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    ns_id BIGINT NOT NULL,
    embedding vector NOT NULL
);
CREATE INDEX vectors_by_ns ON vectors (ns_id);
CREATE TABLE embed_queue (
    chunk_rowid BIGINT PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    enqueued_at TEXT NOT NULL
);
CREATE TABLE metadata_keys (ns_id BIGINT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (ns_id, key));
"""


def create_tables(conn: psycopg.Connection) -> None:
    """1: namespaces, documents, chunks, BM25 postings and statistics, vectors, the embedding
    queue, metadata keys and the graph's tables."""
    _run(conn, _TABLES + graph_sql.graph_tables("postgres"))


def metadata_per_document(conn: psycopg.Connection) -> None:
    """2: metadata lives once per document (it was copied into every chunk); filters join a chunk
    to its document, whose GIN index answers containment."""
    _run(
        conn,
        """
CREATE INDEX documents_metadata ON documents USING gin (metadata jsonb_path_ops);
DROP INDEX chunks_metadata;
ALTER TABLE chunks DROP COLUMN metadata;
""",
    )


def add_history_columns(conn: psycopg.Connection) -> None:
    """3: time and versions of a memory (store/sql/history.py): existing documents occurred and were
    recorded when they were created."""
    _run(
        conn,
        """
ALTER TABLE documents ADD COLUMN occurred_at DOUBLE PRECISION;
ALTER TABLE documents ADD COLUMN recorded_at DOUBLE PRECISION;
ALTER TABLE documents ADD COLUMN valid_to DOUBLE PRECISION;
ALTER TABLE documents ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE documents ADD COLUMN head_id TEXT;
ALTER TABLE documents ADD COLUMN mem_key TEXT;
ALTER TABLE documents ADD COLUMN change_reason TEXT;
ALTER TABLE chunks ADD COLUMN context TEXT;
UPDATE documents SET occurred_at = extract(epoch FROM created_at::timestamptz),
                     recorded_at = extract(epoch FROM updated_at::timestamptz);
CREATE INDEX documents_by_time ON documents (ns_id, occurred_at);
CREATE INDEX documents_by_head ON documents (ns_id, head_id) WHERE head_id IS NOT NULL;
CREATE INDEX documents_by_key ON documents (ns_id, mem_key) WHERE mem_key IS NOT NULL;
CREATE INDEX documents_retired ON documents (ns_id, valid_to) WHERE valid_to IS NOT NULL;
""",
    )


def add_chunk_log(conn: psycopg.Connection) -> None:
    """4: the change log of each namespace's chunks (store/sql/changelog.py): a server process keeps
    its in-process BM25 postings in step with every other process's writes by replaying it."""
    _run(conn, changelog_sql.table_sql("BYTEA"))


def add_vector_log(conn: psycopg.Connection) -> None:
    """5: the change log of each namespace's vectors (the same layout)."""
    _run(conn, changelog_sql.table_sql("BYTEA", "vec_log"))


_KEYED_BY_NAMESPACE = """
ALTER TABLE vectors DROP CONSTRAINT IF EXISTS vectors_chunk_rowid_fkey;
ALTER TABLE vectors DROP CONSTRAINT IF EXISTS vectors_chunk_fkey;
ALTER TABLE embed_queue DROP CONSTRAINT IF EXISTS embed_queue_chunk_rowid_fkey;
ALTER TABLE embed_queue DROP CONSTRAINT IF EXISTS embed_queue_chunk_fkey;
ALTER TABLE graph_mentions DROP CONSTRAINT IF EXISTS graph_mentions_entity_id_fkey;
ALTER TABLE graph_mentions DROP CONSTRAINT IF EXISTS graph_mentions_entity_fkey;
ALTER TABLE graph_relations DROP CONSTRAINT IF EXISTS graph_relations_src_fkey;
ALTER TABLE graph_relations DROP CONSTRAINT IF EXISTS graph_relations_dst_fkey;
ALTER TABLE graph_relation_sources DROP CONSTRAINT IF EXISTS graph_relation_sources_relation_id_fkey;
ALTER TABLE graph_relation_sources DROP CONSTRAINT IF EXISTS graph_relation_sources_relation_fkey;
ALTER TABLE chunks DROP CONSTRAINT chunks_pkey;
ALTER TABLE chunks ADD PRIMARY KEY (ns_id, id);
CREATE INDEX IF NOT EXISTS chunks_by_rowid ON chunks (id);
ALTER TABLE vectors DROP CONSTRAINT vectors_pkey;
ALTER TABLE vectors ADD PRIMARY KEY (ns_id, chunk_rowid);
ALTER TABLE vectors ADD CONSTRAINT vectors_chunk_fkey FOREIGN KEY (ns_id, chunk_rowid)
    REFERENCES chunks (ns_id, id) ON DELETE CASCADE;
CREATE INDEX IF NOT EXISTS vectors_by_rowid ON vectors (chunk_rowid);
DROP INDEX IF EXISTS vectors_by_ns;
ALTER TABLE embed_queue ADD COLUMN IF NOT EXISTS ns_id BIGINT;
UPDATE embed_queue q SET ns_id = c.ns_id FROM chunks c WHERE c.id = q.chunk_rowid AND q.ns_id IS NULL;
ALTER TABLE embed_queue ALTER COLUMN ns_id SET NOT NULL;
ALTER TABLE embed_queue DROP CONSTRAINT embed_queue_pkey;
ALTER TABLE embed_queue ADD PRIMARY KEY (ns_id, chunk_rowid);
ALTER TABLE embed_queue ADD CONSTRAINT embed_queue_chunk_fkey FOREIGN KEY (ns_id, chunk_rowid)
    REFERENCES chunks (ns_id, id) ON DELETE CASCADE;
CREATE INDEX IF NOT EXISTS embed_queue_by_rowid ON embed_queue (chunk_rowid);
ALTER TABLE graph_mentions ADD COLUMN IF NOT EXISTS ns_id BIGINT;
UPDATE graph_mentions m SET ns_id = e.ns_id FROM graph_entities e WHERE e.id = m.entity_id AND m.ns_id IS NULL;
ALTER TABLE graph_mentions ALTER COLUMN ns_id SET NOT NULL;
ALTER TABLE graph_relation_sources ADD COLUMN IF NOT EXISTS ns_id BIGINT;
UPDATE graph_relation_sources s SET ns_id = r.ns_id FROM graph_relations r
    WHERE r.id = s.relation_id AND s.ns_id IS NULL;
ALTER TABLE graph_relation_sources ALTER COLUMN ns_id SET NOT NULL;
ALTER TABLE graph_entities DROP CONSTRAINT graph_entities_pkey;
ALTER TABLE graph_entities ADD PRIMARY KEY (ns_id, id);
CREATE INDEX IF NOT EXISTS graph_entities_by_id ON graph_entities (id);
ALTER TABLE graph_relations DROP CONSTRAINT graph_relations_pkey;
ALTER TABLE graph_relations ADD PRIMARY KEY (ns_id, id);
CREATE INDEX IF NOT EXISTS graph_relations_by_id ON graph_relations (id);
ALTER TABLE graph_relations ADD CONSTRAINT graph_relations_src_fkey FOREIGN KEY (ns_id, src)
    REFERENCES graph_entities (ns_id, id) ON DELETE CASCADE;
ALTER TABLE graph_relations ADD CONSTRAINT graph_relations_dst_fkey FOREIGN KEY (ns_id, dst)
    REFERENCES graph_entities (ns_id, id) ON DELETE CASCADE;
ALTER TABLE graph_mentions DROP CONSTRAINT graph_mentions_pkey;
ALTER TABLE graph_mentions ADD PRIMARY KEY (ns_id, entity_id, chunk_rowid);
ALTER TABLE graph_mentions ADD CONSTRAINT graph_mentions_entity_fkey FOREIGN KEY (ns_id, entity_id)
    REFERENCES graph_entities (ns_id, id) ON DELETE CASCADE;
CREATE INDEX IF NOT EXISTS graph_mentions_by_entity ON graph_mentions (entity_id);
ALTER TABLE graph_relation_sources DROP CONSTRAINT graph_relation_sources_pkey;
ALTER TABLE graph_relation_sources ADD PRIMARY KEY (ns_id, relation_id, chunk_rowid);
ALTER TABLE graph_relation_sources ADD CONSTRAINT graph_relation_sources_relation_fkey FOREIGN KEY (ns_id, relation_id)
    REFERENCES graph_relations (ns_id, id) ON DELETE CASCADE;
CREATE INDEX IF NOT EXISTS graph_relation_sources_by_relation ON graph_relation_sources (relation_id);
ALTER TABLE graph_chunks DROP CONSTRAINT graph_chunks_pkey;
ALTER TABLE graph_chunks ADD PRIMARY KEY (ns_id, chunk_rowid);
CREATE INDEX IF NOT EXISTS graph_chunks_by_rowid ON graph_chunks (chunk_rowid);
DROP INDEX IF EXISTS graph_chunks_by_ns
"""


def key_by_namespace(conn: psycopg.Connection) -> None:
    """6: keys a distributed PostgreSQL (Citus, tables distributed and colocated by ns_id) accepts:
    every primary key and foreign key between tenant tables holds ns_id (docs/scaling.md, "Past one
    database server"); the rowid look-ups keep plain indexes. Valid on one node, where it changes
    no query's plan class; ``tests/test_postgres_store.py`` checks the rule on the live catalog.
    Written to run again over its own result (a store told it is older than it is)."""
    _run(conn, _KEYED_BY_NAMESPACE)


def add_pending_counts(conn: psycopg.Connection) -> None:
    """7: each namespace's count of chunks waiting for a vector, kept by every write that queues or
    unqueues in its own transaction: counting the queue was O(backlog) on every hybrid query."""
    _run(
        conn,
        "ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS n_pending BIGINT NOT NULL DEFAULT 0;"
        "UPDATE namespaces SET n_pending = (SELECT count(*) FROM embed_queue q WHERE q.ns_id = namespaces.id)",
    )


def move_counters_to_namespace_stats(conn: psycopg.Connection) -> None:
    """8: the counters every write bumps leave the namespaces table for one keyed by the namespace
    alone: on a distributed PostgreSQL (Citus, docs/scaling.md) namespaces is a reference table,
    copied to every node, where each update is a two-phase commit to all of them; namespace_stats
    is distributed by ns_id with the tenant's other rows, so a write's bump stays on its shard.
    Re-runnable (the columns re-added empty, the copy keeping rows already moved), as 6 is."""
    _run(
        conn,
        """
CREATE TABLE IF NOT EXISTS namespace_stats (
    ns_id BIGINT PRIMARY KEY REFERENCES namespaces(id),
    vec_version BIGINT NOT NULL DEFAULT 0,
    chunk_version BIGINT NOT NULL DEFAULT 0,
    n_chunks BIGINT NOT NULL DEFAULT 0,
    total_len BIGINT NOT NULL DEFAULT 0,
    n_pending BIGINT NOT NULL DEFAULT 0
);
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS vec_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS chunk_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS n_chunks BIGINT NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS total_len BIGINT NOT NULL DEFAULT 0;
ALTER TABLE namespaces ADD COLUMN IF NOT EXISTS n_pending BIGINT NOT NULL DEFAULT 0;
INSERT INTO namespace_stats (ns_id, vec_version, chunk_version, n_chunks, total_len, n_pending)
    SELECT id, vec_version, chunk_version, n_chunks, total_len, n_pending FROM namespaces
    ON CONFLICT (ns_id) DO NOTHING;
ALTER TABLE namespaces DROP COLUMN IF EXISTS vec_version;
ALTER TABLE namespaces DROP COLUMN IF EXISTS chunk_version;
ALTER TABLE namespaces DROP COLUMN IF EXISTS n_chunks;
ALTER TABLE namespaces DROP COLUMN IF EXISTS total_len;
ALTER TABLE namespaces DROP COLUMN IF EXISTS n_pending
""",
    )


#: the migrations in order; index i upgrades schema version i to i + 1
def index_listing_order(conn: psycopg.Connection) -> None:
    """9: Memory.list's default order (when each memory was first recorded, then its id) read from
    an index: a page is a range scan after the cursor, not a sort of the namespace."""
    _run(conn, "CREATE INDEX IF NOT EXISTS documents_by_created ON documents (ns_id, created_at, doc_id)")


def index_occurred_order(conn: psycopg.Connection) -> None:
    """10: Memory.list by occurred time read from an index on the list's own key (a memory without
    a time sorts as 0), not a sort of the namespace."""
    _run(
        conn,
        "CREATE INDEX IF NOT EXISTS documents_by_occurred ON documents (ns_id, (COALESCE(occurred_at, 0)), doc_id)",
    )


MIGRATIONS: tuple[Callable[[psycopg.Connection], None], ...] = (
    create_tables,
    metadata_per_document,
    add_history_columns,
    add_chunk_log,
    add_vector_log,
    key_by_namespace,
    add_pending_counts,
    move_counters_to_namespace_stats,
    index_listing_order,
    index_occurred_order,
)
SCHEMA_VERSION = len(MIGRATIONS)


def bootstrap(conn: psycopg.Connection, schema: str, path: str, create: bool) -> bool:
    """Check pgvector and bring ``schema`` to :data:`SCHEMA_VERSION` (creating it when ``create``),
    one migrator at a time across processes; record this hybridmem's tokenizer version. True when
    the stored postings were written by another tokenizer (the caller re-indexes them)."""
    exists = (
        conn.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema=%s AND table_name='meta'", (schema,)
        ).fetchone()
        is not None
    )
    if not exists and not create:
        raise NotFoundError(f"no hybridmem store in schema {schema!r} at {path}")
    with conn.transaction():
        # one migrator at a time across processes; the lock goes with the transaction
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('hybridmem-migrate'))")
        _ensure_pgvector(conn, path)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        version = 0
        if conn.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_schema=%s AND table_name='meta'", (schema,)
        ).fetchone():
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{path} has hybridmem schema version {version}, newer than this hybridmem ({SCHEMA_VERSION}): upgrade"
            )
        for i in range(version, SCHEMA_VERSION):
            MIGRATIONS[i](conn)
            conn.execute(
                "INSERT INTO meta VALUES ('schema_version', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(i + 1),),
            )
        row = conn.execute("SELECT value FROM meta WHERE key='tokenizer_version'").fetchone()
        stored = row[0] if row else None
        if stored != TOKENIZER_VERSION:
            conn.execute(
                "INSERT INTO meta VALUES ('tokenizer_version', %s) ON CONFLICT (key) DO UPDATE "
                "SET value = excluded.value",
                (TOKENIZER_VERSION,),
            )
    return stored is not None and stored != TOKENIZER_VERSION


def _ensure_pgvector(conn: psycopg.Connection, path: str) -> None:
    """Create the pgvector extension when missing; a clear error when it cannot be, or is too old."""
    try:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname='vector'").fetchone() is None:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except (pgerr.FeatureNotSupported, pgerr.UndefinedFile) as e:
        raise StoreError(
            f"PostgreSQL at {path} has no pgvector extension ({str(e).strip()}): install pgvector 0.8+ on the "
            "server (Debian/Ubuntu: postgresql-NN-pgvector from apt.postgresql.org; or build "
            "github.com/pgvector/pgvector), or use a managed PostgreSQL that offers it"
        ) from None
    except pgerr.InsufficientPrivilege as e:
        raise StoreError(
            f"PostgreSQL at {path}: cannot CREATE EXTENSION vector ({str(e).strip()}); run it once as a "
            "superuser or the database owner"
        ) from None
    version_row = conn.execute("SELECT extversion FROM pg_extension WHERE extname='vector'").fetchone()
    if version_row and tuple(int(x) for x in re.findall(r"\d+", version_row[0])[:2]) < (0, 8):
        raise StoreError(
            f"pgvector {version_row[0]} at {path} is too old: hybridmem needs 0.8+ "
            "(iterative index scans for filtered search)"
        )
