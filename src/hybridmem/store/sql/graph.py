"""The GraphRAG tables and their delete cascade, written once for both backends.

The schema is one template, typed per dialect (SQLite: ``INTEGER PRIMARY KEY`` row ids, ``REAL``;
PostgreSQL: ``BIGSERIAL``/``BIGINT``, ``DOUBLE PRECISION``). The cascade speaks the ``?``
placeholders of :mod:`sqlite3`, which the PostgreSQL store's connection adapter also accepts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["graph_tables", "delete_graph_provenance"]

_GRAPH_TABLES = """
CREATE TABLE graph_entities (
    id {id},
    ns_id {int} NOT NULL REFERENCES namespaces(id),
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    prov_hash TEXT,
    stale INTEGER NOT NULL DEFAULT 0,
    UNIQUE (ns_id, key)
);
CREATE TABLE graph_mentions (
    entity_id {int} NOT NULL REFERENCES graph_entities(id) ON DELETE CASCADE,
    chunk_rowid {int} NOT NULL,
    count INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (entity_id, chunk_rowid)
);
CREATE INDEX graph_mentions_by_chunk ON graph_mentions (chunk_rowid);
CREATE TABLE graph_relations (
    id {id},
    ns_id {int} NOT NULL REFERENCES namespaces(id),
    src {int} NOT NULL REFERENCES graph_entities(id) ON DELETE CASCADE,
    dst {int} NOT NULL REFERENCES graph_entities(id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    UNIQUE (ns_id, src, dst, type)
);
CREATE INDEX graph_relations_by_dst ON graph_relations (dst);
CREATE TABLE graph_relation_sources (
    relation_id {int} NOT NULL REFERENCES graph_relations(id) ON DELETE CASCADE,
    chunk_rowid {int} NOT NULL,
    weight {real} NOT NULL DEFAULT 1.0,
    PRIMARY KEY (relation_id, chunk_rowid)
);
CREATE INDEX graph_relation_sources_by_chunk ON graph_relation_sources (chunk_rowid);
CREATE TABLE graph_chunks (
    chunk_rowid {int} PRIMARY KEY,
    ns_id {int} NOT NULL,
    extractor TEXT NOT NULL,
    extracted_at TEXT NOT NULL
);
CREATE INDEX graph_chunks_by_ns ON graph_chunks (ns_id);
CREATE TABLE graph_communities (
    ns_id {int} NOT NULL REFERENCES namespaces(id),
    community_id TEXT NOT NULL,
    level INTEGER NOT NULL,
    parent TEXT,
    members TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL DEFAULT '',
    chunk_ids TEXT NOT NULL DEFAULT '[]',
    importance {real} NOT NULL DEFAULT 0,
    summary_model TEXT,
    summarized_at TEXT,
    PRIMARY KEY (ns_id, community_id)
);
CREATE TABLE graph_state (
    ns_id {int} PRIMARY KEY,
    version {int} NOT NULL DEFAULT 0,
    built_at TEXT,
    params TEXT NOT NULL DEFAULT '{{}}'
)
"""

_TYPES = {
    "sqlite": {"id": "INTEGER PRIMARY KEY", "int": "INTEGER", "real": "REAL"},
    "postgres": {"id": "BIGSERIAL PRIMARY KEY", "int": "BIGINT", "real": "DOUBLE PRECISION"},
}


def graph_tables(dialect: str) -> str:
    """The graph tables' DDL (statements separated by ``;``) for ``sqlite`` or ``postgres``."""
    return _GRAPH_TABLES.format(**_TYPES[dialect])


def delete_graph_provenance(db: Any, part: list[int]) -> None:
    """Drop the graph provenance of deleted chunks in the caller's transaction (before the chunk
    rows go): the entities and relations they supported are marked stale (their communities'
    fingerprints change), and the ones left without any provenance are deleted. No model is
    involved. ``db`` executes ``?``-placeholder SQL; ``part`` is at most a few hundred rowids."""
    q = ",".join("?" * len(part))
    ents = [r[0] for r in db.execute(f"SELECT DISTINCT entity_id FROM graph_mentions WHERE chunk_rowid IN ({q})", part)]
    rels = [
        r[0]
        for r in db.execute(f"SELECT DISTINCT relation_id FROM graph_relation_sources WHERE chunk_rowid IN ({q})", part)
    ]
    db.execute(f"DELETE FROM graph_chunks WHERE chunk_rowid IN ({q})", part)
    if not ents and not rels:
        return
    db.execute(f"DELETE FROM graph_mentions WHERE chunk_rowid IN ({q})", part)
    db.execute(f"DELETE FROM graph_relation_sources WHERE chunk_rowid IN ({q})", part)
    for j in range(0, len(rels), 500):
        rp = rels[j : j + 500]
        db.execute(
            f"DELETE FROM graph_relations WHERE id IN ({','.join('?' * len(rp))}) AND NOT EXISTS "
            "(SELECT 1 FROM graph_relation_sources s WHERE s.relation_id = graph_relations.id)",
            rp,
        )
    for j in range(0, len(ents), 500):
        ep = ents[j : j + 500]
        eq = ",".join("?" * len(ep))
        db.execute(f"UPDATE graph_entities SET stale = 1, prov_hash = NULL WHERE id IN ({eq})", ep)
        # relations of a deleted entity go with it (ON DELETE CASCADE)
        db.execute(
            f"DELETE FROM graph_entities WHERE id IN ({eq}) AND NOT EXISTS "
            "(SELECT 1 FROM graph_mentions m WHERE m.entity_id = graph_entities.id)",
            ep,
        )
    db.execute(
        "UPDATE graph_state SET version = version + 1 WHERE ns_id IN "
        f"(SELECT DISTINCT ns_id FROM chunks WHERE id IN ({q}))",
        part,
    )
