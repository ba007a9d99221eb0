"""Store layouts of earlier schema versions, for the migration tests: each helper takes a current
SQLite store's connection back to how an older hybridmem wrote it."""

from __future__ import annotations

import sqlite3


def tokens_back_to_fts(db: sqlite3.Connection) -> None:
    """The layout before SQLite schema 8: each namespace's tokens in an FTS5 table (``fts_{ns}``),
    indexed on every write, instead of a plain table (``tokens_{ns}``)."""
    from hybridmem.store.sqlite import _FTS_TOKENIZE

    for (ns,) in db.execute("SELECT id FROM namespaces").fetchall():
        db.execute(f'CREATE VIRTUAL TABLE fts_{ns} USING fts5(tokens, tokenize="{_FTS_TOKENIZE}")')
        db.execute(f"INSERT INTO fts_{ns} (rowid, tokens) SELECT rowid, tokens FROM tokens_{ns}")
        db.execute(f"DROP TABLE tokens_{ns}")


def graph_keys_without_namespace(db: sqlite3.Connection) -> None:
    """The layout before SQLite schema 9: the graph's provenance tables keyed by entity, relation or
    chunk alone, without an ``ns_id`` column (graph_chunks had one, not in its key)."""
    for stmt in """
        CREATE TABLE m8 (entity_id INTEGER NOT NULL REFERENCES graph_entities(id) ON DELETE CASCADE,
            chunk_rowid INTEGER NOT NULL, count INTEGER NOT NULL DEFAULT 1, PRIMARY KEY (entity_id, chunk_rowid));
        INSERT INTO m8 SELECT entity_id, chunk_rowid, count FROM graph_mentions;
        DROP TABLE graph_mentions; ALTER TABLE m8 RENAME TO graph_mentions;
        CREATE INDEX graph_mentions_by_chunk ON graph_mentions (chunk_rowid);
        CREATE TABLE s8 (relation_id INTEGER NOT NULL REFERENCES graph_relations(id) ON DELETE CASCADE,
            chunk_rowid INTEGER NOT NULL, weight REAL NOT NULL DEFAULT 1.0, PRIMARY KEY (relation_id, chunk_rowid));
        INSERT INTO s8 SELECT relation_id, chunk_rowid, weight FROM graph_relation_sources;
        DROP TABLE graph_relation_sources; ALTER TABLE s8 RENAME TO graph_relation_sources;
        CREATE INDEX graph_relation_sources_by_chunk ON graph_relation_sources (chunk_rowid);
        CREATE TABLE c8 (chunk_rowid INTEGER PRIMARY KEY, ns_id INTEGER NOT NULL, extractor TEXT NOT NULL,
            extracted_at TEXT NOT NULL);
        INSERT INTO c8 SELECT chunk_rowid, ns_id, extractor, extracted_at FROM graph_chunks;
        DROP TABLE graph_chunks; ALTER TABLE c8 RENAME TO graph_chunks;
        CREATE INDEX graph_chunks_by_ns ON graph_chunks (ns_id)
    """.split(";"):
        db.execute(stmt)


#: PostgreSQL schema 6 undone: the keys of schema 5 (chunk, vector, queue and graph rows keyed by
#: their own ids, no ``ns_id`` in the queue's and the graph provenance's rows)
PG_KEYS_WITHOUT_NAMESPACE = """
ALTER TABLE vectors DROP CONSTRAINT vectors_chunk_fkey;
ALTER TABLE embed_queue DROP CONSTRAINT embed_queue_chunk_fkey;
ALTER TABLE graph_relations DROP CONSTRAINT graph_relations_src_fkey;
ALTER TABLE graph_relations DROP CONSTRAINT graph_relations_dst_fkey;
ALTER TABLE graph_mentions DROP CONSTRAINT graph_mentions_entity_fkey;
ALTER TABLE graph_relation_sources DROP CONSTRAINT graph_relation_sources_relation_fkey;
ALTER TABLE chunks DROP CONSTRAINT chunks_pkey;
ALTER TABLE chunks ADD PRIMARY KEY (id);
DROP INDEX chunks_by_rowid;
ALTER TABLE vectors DROP CONSTRAINT vectors_pkey;
ALTER TABLE vectors ADD PRIMARY KEY (chunk_rowid);
ALTER TABLE vectors ADD FOREIGN KEY (chunk_rowid) REFERENCES chunks(id) ON DELETE CASCADE;
DROP INDEX vectors_by_rowid;
CREATE INDEX vectors_by_ns ON vectors (ns_id);
ALTER TABLE embed_queue DROP CONSTRAINT embed_queue_pkey;
ALTER TABLE embed_queue DROP COLUMN ns_id;
ALTER TABLE embed_queue ADD PRIMARY KEY (chunk_rowid);
ALTER TABLE embed_queue ADD FOREIGN KEY (chunk_rowid) REFERENCES chunks(id) ON DELETE CASCADE;
DROP INDEX embed_queue_by_rowid;
ALTER TABLE graph_entities DROP CONSTRAINT graph_entities_pkey;
ALTER TABLE graph_entities ADD PRIMARY KEY (id);
DROP INDEX graph_entities_by_id;
ALTER TABLE graph_relations DROP CONSTRAINT graph_relations_pkey;
ALTER TABLE graph_relations ADD PRIMARY KEY (id);
DROP INDEX graph_relations_by_id;
ALTER TABLE graph_relations ADD FOREIGN KEY (src) REFERENCES graph_entities(id) ON DELETE CASCADE;
ALTER TABLE graph_relations ADD FOREIGN KEY (dst) REFERENCES graph_entities(id) ON DELETE CASCADE;
ALTER TABLE graph_mentions DROP CONSTRAINT graph_mentions_pkey;
ALTER TABLE graph_mentions DROP COLUMN ns_id;
ALTER TABLE graph_mentions ADD PRIMARY KEY (entity_id, chunk_rowid);
ALTER TABLE graph_mentions ADD FOREIGN KEY (entity_id) REFERENCES graph_entities(id) ON DELETE CASCADE;
DROP INDEX graph_mentions_by_entity;
ALTER TABLE graph_relation_sources DROP CONSTRAINT graph_relation_sources_pkey;
ALTER TABLE graph_relation_sources DROP COLUMN ns_id;
ALTER TABLE graph_relation_sources ADD PRIMARY KEY (relation_id, chunk_rowid);
ALTER TABLE graph_relation_sources ADD FOREIGN KEY (relation_id) REFERENCES graph_relations(id) ON DELETE CASCADE;
DROP INDEX graph_relation_sources_by_relation;
ALTER TABLE graph_chunks DROP CONSTRAINT graph_chunks_pkey;
ALTER TABLE graph_chunks ADD PRIMARY KEY (chunk_rowid);
DROP INDEX graph_chunks_by_rowid;
CREATE INDEX graph_chunks_by_ns ON graph_chunks (ns_id)
"""
