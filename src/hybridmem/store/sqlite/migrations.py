"""The SQLite store's schema migrations, one named function each, in order in :data:`MIGRATIONS`:
migration i upgrades ``PRAGMA user_version`` i to i + 1 (the schema and its numbers are the
store's file format: a migration is never changed, only a new one added)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from ..sql import changelog as changelog_sql
from ..sql.graph import graph_tables
from .schema import _TOKENS_TABLE, PENDING_RECOUNT, _script, _tokens

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]


def create_tables(db: sqlite3.Connection) -> None:
    _script(
        db,
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE namespaces (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            vec_version INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE documents (
            ns_id INTEGER NOT NULL REFERENCES namespaces(id),
            doc_id TEXT NOT NULL,
            source TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            content_hash TEXT NOT NULL,
            n_chunks INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (ns_id, doc_id)
        );
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY,
            ns_id INTEGER NOT NULL REFERENCES namespaces(id),
            chunk_id TEXT NOT NULL,
            doc_id TEXT NOT NULL,
            ord INTEGER NOT NULL,
            text TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            lang TEXT,
            source TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (ns_id, chunk_id)
        );
        CREATE INDEX chunks_by_doc ON chunks (ns_id, doc_id);
        CREATE TABLE vectors (chunk_rowid INTEGER PRIMARY KEY, vec BLOB NOT NULL);
        CREATE TABLE embed_queue (chunk_rowid INTEGER PRIMARY KEY, enqueued_at TEXT NOT NULL);
        CREATE TABLE metadata_keys (ns_id INTEGER NOT NULL, key TEXT NOT NULL, PRIMARY KEY (ns_id, key));
        """,
    )


def add_chunk_version(db: sqlite3.Connection) -> None:
    # a counter bumped by every write that adds or removes chunks: in-memory BM25 indexes follow it
    db.execute("ALTER TABLE namespaces ADD COLUMN chunk_version INTEGER NOT NULL DEFAULT 0")


def add_graph_tables(db: sqlite3.Connection) -> None:
    # the GraphRAG layer (hybridmem.graph): entities and relations with their provenance (chunk
    # rowids), the chunks already extracted, and communities with their summaries. Every row carries
    # its namespace; provenance rows are deleted with their chunk (see _delete_chunk_rows)
    _script(db, graph_tables("sqlite"))


HISTORY_COLUMNS_SQL = """
    ALTER TABLE documents ADD COLUMN occurred_at REAL;
    ALTER TABLE documents ADD COLUMN recorded_at REAL;
    ALTER TABLE documents ADD COLUMN valid_to REAL;
    ALTER TABLE documents ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE documents ADD COLUMN head_id TEXT;
    ALTER TABLE documents ADD COLUMN mem_key TEXT;
    ALTER TABLE documents ADD COLUMN change_reason TEXT;
    ALTER TABLE chunks ADD COLUMN context TEXT;
    CREATE INDEX documents_by_time ON documents (ns_id, occurred_at);
    CREATE INDEX documents_by_head ON documents (ns_id, head_id) WHERE head_id IS NOT NULL;
    CREATE INDEX documents_by_key ON documents (ns_id, mem_key) WHERE mem_key IS NOT NULL;
    CREATE INDEX documents_retired ON documents (ns_id, valid_to) WHERE valid_to IS NOT NULL;
    CREATE INDEX documents_by_turn ON documents
        (ns_id, json_extract(metadata, '$.session_id'), json_extract(metadata, '$.turn'))
"""


def drop_chunk_metadata(db: sqlite3.Connection) -> None:
    # metadata lives once per document (it was copied into every chunk: a document of 200 chunks
    # with 16 KiB of metadata stored 3.2 MB); filters join a chunk to its document
    db.execute("ALTER TABLE chunks DROP COLUMN metadata")


def add_history_columns(db: sqlite3.Connection) -> None:
    # time and versions of a memory (store/history_sql.py): existing documents occurred and were
    # recorded when they were created
    _script(db, HISTORY_COLUMNS_SQL)
    db.execute(
        "UPDATE documents SET occurred_at = (julianday(created_at) - 2440587.5) * 86400.0, "
        "recorded_at = (julianday(updated_at) - 2440587.5) * 86400.0"
    )


def add_chunk_log(db: sqlite3.Connection) -> None:
    # the change log of each namespace's chunks (store/changelog_sql.py): another process replays
    # the writes it did not make instead of reloading every chunk's tokens
    db.execute(changelog_sql.table_sql("BLOB") + " WITHOUT ROWID")


def add_vector_log(db: sqlite3.Connection) -> None:
    # the change log of each namespace's vectors: another process's embeddings are applied to the
    # loaded dense index instead of reloading (and re-indexing) every vector
    db.execute(changelog_sql.table_sql("BLOB", "vec_log") + " WITHOUT ROWID")


def move_tokens_out_of_fts5(db: sqlite3.Connection) -> None:
    # each namespace's BM25 token streams in a plain table (tokens_{ns}): the FTS5 table that held
    # them was indexed on every write (its inverted index was 45 % of a bulk ingest's SQL time) and
    # read only as a reference scorer, which now builds it on demand (``SQLiteStore.bm25``)
    for (ns,) in db.execute("SELECT id FROM namespaces").fetchall():
        db.execute(_TOKENS_TABLE.format(table=_tokens(ns)))
        db.execute(f"INSERT INTO {_tokens(ns)} (rowid, tokens) SELECT rowid, tokens FROM fts_{int(ns)}")
        db.execute(f"DROP TABLE fts_{int(ns)}")


def _provenance_keyed_by_namespace(table: str, parent_key: str, parent: str, value: str) -> str:
    """SQL rebuilding a graph provenance table (``parent_key`` → ``parent``, a chunk, a ``value``)
    keyed by (ns_id, parent_key, chunk_rowid), each row given its parent's namespace."""
    name, _ = value.split(" ", 1)
    return f"""
        CREATE TABLE {table}_v9 (
            {parent_key} INTEGER NOT NULL REFERENCES {parent}(id) ON DELETE CASCADE,
            chunk_rowid INTEGER NOT NULL,
            {value},
            ns_id INTEGER NOT NULL,
            PRIMARY KEY (ns_id, {parent_key}, chunk_rowid)
        );
        INSERT INTO {table}_v9 SELECT t.{parent_key}, t.chunk_rowid, t.{name}, p.ns_id
            FROM {table} t JOIN {parent} p ON p.id = t.{parent_key};
        DROP TABLE {table};
        ALTER TABLE {table}_v9 RENAME TO {table};
        CREATE INDEX {table}_by_chunk ON {table} (chunk_rowid);
        CREATE INDEX {table}_by_{parent_key.removesuffix("_id")} ON {table} ({parent_key});
    """


def key_graph_provenance_by_namespace(db: sqlite3.Connection) -> None:
    # the graph's provenance rows carry their namespace and are keyed by it, as on PostgreSQL,
    # where the keys must hold ns_id for a distributed database (docs/scaling.md): one graph SQL
    # for both stores. SQLite cannot change a primary key in place: the three tables are rebuilt
    _script(
        db,
        _provenance_keyed_by_namespace(
            "graph_mentions", "entity_id", "graph_entities", "count INTEGER NOT NULL DEFAULT 1"
        )
        + _provenance_keyed_by_namespace(
            "graph_relation_sources", "relation_id", "graph_relations", "weight REAL NOT NULL DEFAULT 1.0"
        )
        + """
        CREATE TABLE graph_chunks_v9 (
            chunk_rowid INTEGER NOT NULL,
            ns_id INTEGER NOT NULL,
            extractor TEXT NOT NULL,
            extracted_at TEXT NOT NULL,
            PRIMARY KEY (ns_id, chunk_rowid)
        );
        INSERT INTO graph_chunks_v9 SELECT chunk_rowid, ns_id, extractor, extracted_at FROM graph_chunks;
        DROP TABLE graph_chunks;
        ALTER TABLE graph_chunks_v9 RENAME TO graph_chunks;
        CREATE INDEX graph_chunks_by_rowid ON graph_chunks (chunk_rowid)
        """,
    )


def add_pending_counts(db: sqlite3.Connection) -> None:
    # each namespace's count of chunks waiting for a vector, kept by every write that queues or
    # unqueues: counting the queue was O(backlog) on every hybrid query and every ingest call
    # (0.46 s at 1.9M chunks queued, a bulk load's write rate falling from 6,000 to 1,600 chunks/s)
    if "n_pending" not in {r[1] for r in db.execute("PRAGMA table_info(namespaces)")}:
        db.execute("ALTER TABLE namespaces ADD COLUMN n_pending INTEGER NOT NULL DEFAULT 0")
    db.execute(PENDING_RECOUNT)


def index_listing_order(db: sqlite3.Connection) -> None:
    # Memory.list's default order (when each memory was first recorded, then its id) read from an
    # index: a page is a range scan after the cursor, not a sort of the namespace
    db.execute("CREATE INDEX IF NOT EXISTS documents_by_created ON documents(ns_id, created_at, doc_id)")


def index_occurred_order(db: sqlite3.Connection) -> None:
    # Memory.list by occurred time (the explorer's timeline and browse order) read from an index
    # on the list's own key (a memory without a time sorts as 0): 206 ms a page of 1,000 at 1M
    # memories when SQLite sorted the namespace, a range scan after the cursor with it
    db.execute("CREATE INDEX IF NOT EXISTS documents_by_occurred ON documents(ns_id, COALESCE(occurred_at, 0), doc_id)")


#: the schema migrations in order; index i upgrades user_version i to i + 1
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    create_tables,
    add_chunk_version,
    add_graph_tables,
    drop_chunk_metadata,
    add_history_columns,
    add_chunk_log,
    add_vector_log,
    move_tokens_out_of_fts5,
    key_graph_provenance_by_namespace,
    add_pending_counts,
    index_listing_order,
    index_occurred_order,
)
SCHEMA_VERSION = len(MIGRATIONS)
