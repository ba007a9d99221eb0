"""Graph tables of the SQLite store (migration 3): entities, relations, provenance, communities.

Every query is scoped by the namespace id: one tenant's graph never reaches another's results.
Chunk deletes drop provenance in the store's own delete transaction (``store.sqlite``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..store.base import Store
from .extract import ChunkExtraction, ChunkInput, entity_key

__all__ = ["GraphStore", "GraphData", "StoredCommunity"]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class GraphData:
    """One namespace's graph, as loaded for algorithms (ids are entity row ids)."""

    version: tuple[int, int]
    entities: dict[int, tuple[str, str, str, str | None, str]]  # id -> (key, name, type, prov_hash, description)
    mentions: dict[int, dict[int, int]]  # entity id -> {chunk rowid: count}
    relations: list[tuple[int, int, str, float, str]]  # (src, dst, type, weight, description)
    relation_chunks: dict[tuple[int, int, str], list[int]] = field(default_factory=dict)


@dataclass
class StoredCommunity:
    community_id: str
    level: int
    parent: str | None
    members: list[str]  # entity keys
    fingerprint: str
    title: str
    summary: str
    chunk_ids: list[str]
    importance: float
    summary_model: str | None
    summarized_at: str | None


def _optional(sql: str, params: list[Any], clause: str, value: Any) -> tuple[str, list[Any]]:
    """``sql`` and ``params`` with ``clause`` (one placeholder) and ``value`` appended when ``value``
    is not None: a query's optional limit or condition."""
    if value is None:
        return sql, params
    return sql + clause, [*params, value]


class GraphStore:
    """Graph persistence over a store's public graph access (``reader``, ``write_transaction``,
    ``namespace_id``, ``snapshot``): the same file or database, the same writer lock."""

    def __init__(self, store: Store) -> None:
        self.store = store
        #: the last graph loaded for reads, per namespace, with its version (see ``load_for_reads``)
        self._read_cache: dict[str, GraphData] = {}

    def _ns(self, namespace: str) -> int | None:
        return self.store.namespace_id(namespace)

    # ------------------------------------------------------------------ chunks to extract
    def pending_chunks(self, namespace: str, limit: int | None = None) -> list[ChunkInput]:
        """Chunks of the namespace never extracted (new, or rewritten by an update)."""
        ns = self._ns(namespace)
        if ns is None:
            return []
        sql = (
            "SELECT c.id, c.chunk_id, c.text FROM chunks c WHERE c.ns_id=? AND NOT EXISTS "
            "(SELECT 1 FROM graph_chunks g WHERE g.ns_id = c.ns_id AND g.chunk_rowid = c.id) ORDER BY c.id"
        )
        sql, params = _optional(sql, [ns], " LIMIT ?", limit)
        return [ChunkInput(r, cid, t) for r, cid, t in self.store.reader.execute(sql, params)]

    def pending_count(self, namespace: str) -> int:
        ns = self._ns(namespace)
        if ns is None:
            return 0
        return int(
            self.store.reader.execute(
                "SELECT count(*) FROM chunks c WHERE c.ns_id=? AND NOT EXISTS "
                "(SELECT 1 FROM graph_chunks g WHERE g.ns_id = c.ns_id AND g.chunk_rowid = c.id)",
                (ns,),
            ).fetchone()[0]
        )

    def extracted_count(self, namespace: str) -> int:
        ns = self._ns(namespace)
        if ns is None:
            return 0
        return int(self.store.reader.execute("SELECT count(*) FROM graph_chunks WHERE ns_id=?", (ns,)).fetchone()[0])

    # ------------------------------------------------------------------ writes
    def write_extractions(self, namespace: str, extractor: str, items: Sequence[ChunkExtraction]) -> int:
        """Store the entities and relations of extracted chunks in one transaction; returns the
        number of chunks written (chunks deleted meanwhile are skipped)."""
        if not items:
            return 0
        store = self.store
        now = _now()
        written = 0
        with store.write_transaction() as db:
            ns = store.namespace_id(namespace, db)
            if ns is None:
                return 0
            db.execute("INSERT INTO graph_state (ns_id) VALUES (?) ON CONFLICT (ns_id) DO NOTHING", (ns,))
            touched: set[int] = set()
            for item in items:
                row = db.execute("SELECT ns_id FROM chunks WHERE id=?", (item.rowid,)).fetchone()
                if row is None or row[0] != ns:
                    continue
                written += 1
                # re-extraction replaces what this chunk said before
                old = [
                    r[0] for r in db.execute("SELECT entity_id FROM graph_mentions WHERE chunk_rowid=?", (item.rowid,))
                ]
                touched.update(old)
                db.execute("DELETE FROM graph_mentions WHERE chunk_rowid=?", (item.rowid,))
                db.execute("DELETE FROM graph_relation_sources WHERE chunk_rowid=?", (item.rowid,))
                ids: dict[str, int] = {}
                for e in item.entities:
                    k = e.key
                    if not k:
                        continue
                    db.execute(
                        "INSERT INTO graph_entities (ns_id, key, name, type, description) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT (ns_id, key) DO UPDATE SET "
                        "type = CASE WHEN graph_entities.type IN ('name', 'term', 'unknown') THEN excluded.type "
                        "ELSE graph_entities.type END, "
                        "description = CASE WHEN graph_entities.description = '' THEN excluded.description "
                        "ELSE graph_entities.description END",
                        (ns, k, e.name, e.type, e.description),
                    )
                    eid = int(
                        db.execute("SELECT id FROM graph_entities WHERE ns_id=? AND key=?", (ns, k)).fetchone()[0]
                    )
                    ids[k] = eid
                    touched.add(eid)
                    db.execute(
                        "INSERT INTO graph_mentions (ns_id, entity_id, chunk_rowid, count) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (ns_id, entity_id, chunk_rowid) "
                        "DO UPDATE SET count = graph_mentions.count + excluded.count",
                        (ns, eid, item.rowid, e.count),
                    )
                self._write_relations(db, ns, item, ids)
                db.execute(
                    "INSERT INTO graph_chunks (chunk_rowid, ns_id, extractor, extracted_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (ns_id, chunk_rowid) DO UPDATE SET "
                    "extractor = excluded.extractor, extracted_at = excluded.extracted_at",
                    (item.rowid, ns, extractor, now),
                )
            for eid in touched:
                db.execute("UPDATE graph_entities SET stale = 1, prov_hash = NULL WHERE id=?", (eid,))
            db.execute(
                "DELETE FROM graph_entities WHERE ns_id=? AND stale = 1 AND NOT EXISTS "
                "(SELECT 1 FROM graph_mentions m WHERE m.entity_id = graph_entities.id)",
                (ns,),
            )
            db.execute("UPDATE graph_state SET version = version + 1 WHERE ns_id=?", (ns,))
        return written

    @staticmethod
    def _write_relations(db: Any, ns: int, item: ChunkExtraction, ids: dict[str, int]) -> None:
        """The relations one chunk states between entities it mentions, with the chunk as a source."""
        for r in item.relations:
            s, d = ids.get(entity_key(r.source)), ids.get(entity_key(r.target))
            if s is None or d is None or s == d:
                continue
            db.execute(
                "INSERT INTO graph_relations (ns_id, src, dst, type, description) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (ns_id, src, dst, type) DO UPDATE SET description = CASE WHEN "
                "graph_relations.description = '' THEN excluded.description ELSE graph_relations.description END",
                (ns, s, d, r.type, r.description),
            )
            rid = db.execute(
                "SELECT id FROM graph_relations WHERE ns_id=? AND src=? AND dst=? AND type=?",
                (ns, s, d, r.type),
            ).fetchone()[0]
            db.execute(
                "INSERT INTO graph_relation_sources (ns_id, relation_id, chunk_rowid, weight) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (ns_id, relation_id, chunk_rowid) "
                "DO UPDATE SET weight = graph_relation_sources.weight + excluded.weight",
                (ns, rid, item.rowid, r.weight),
            )

    def refresh_provenance(self, namespace: str) -> int:
        """Recompute the provenance hash of stale entities (the hash of the text of the chunks that
        mention them): a community's fingerprint is built from these. Returns entities refreshed."""
        store = self.store
        with store.write_transaction() as db:
            ns = store.namespace_id(namespace, db)
            if ns is None:
                return 0
            rows = db.execute(
                "SELECT id FROM graph_entities WHERE ns_id=? AND (stale = 1 OR prov_hash IS NULL)", (ns,)
            ).fetchall()
            for (eid,) in rows:
                hashes = sorted(
                    h
                    for (h,) in db.execute(
                        "SELECT c.text_hash FROM graph_mentions m JOIN chunks c ON c.id = m.chunk_rowid WHERE m.entity_id=?",
                        (eid,),
                    )
                )
                ph = hashlib.sha1("\n".join(hashes).encode()).hexdigest()[:16]
                db.execute("UPDATE graph_entities SET prov_hash=?, stale=0 WHERE id=?", (ph, eid))
        return len(rows)

    def mark_stale(self, namespace: str, keys: Sequence[str]) -> int:
        """Mark existing entities stale (a new document mentions them): their communities are
        stale until ``graph update``."""
        ns = self._ns(namespace)
        if ns is None or not keys:
            return 0
        n = 0
        with self.store.write_transaction() as db:
            for i in range(0, len(keys), 500):
                part = list(keys[i : i + 500])
                n += db.execute(
                    f"UPDATE graph_entities SET stale = 1 WHERE ns_id=? AND key IN ({','.join('?' * len(part))})",
                    [ns, *part],
                ).rowcount
        return n

    def write_communities(self, namespace: str, communities: Sequence[StoredCommunity], params: dict[str, Any]) -> None:
        store = self.store
        with store.write_transaction() as db:
            ns = store.namespace_id(namespace, db)
            if ns is None:
                return
            db.execute("DELETE FROM graph_communities WHERE ns_id=?", (ns,))
            db.executemany(
                "INSERT INTO graph_communities VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        ns,
                        c.community_id,
                        c.level,
                        c.parent,
                        json.dumps(c.members, ensure_ascii=False),
                        c.fingerprint,
                        c.title,
                        c.summary,
                        json.dumps(c.chunk_ids),
                        c.importance,
                        c.summary_model,
                        c.summarized_at,
                    )
                    for c in communities
                ],
            )
            db.execute("INSERT INTO graph_state (ns_id) VALUES (?) ON CONFLICT (ns_id) DO NOTHING", (ns,))
            db.execute(
                "UPDATE graph_state SET built_at=?, params=?, version = version + 1 WHERE ns_id=?",
                (_now(), json.dumps(params), ns),
            )

    # ------------------------------------------------------------------ reads
    def version(self, namespace: str) -> tuple[int, int]:
        ns = self._ns(namespace)
        if ns is None:
            return (0, 0)
        row = self.store.reader.execute("SELECT version FROM graph_state WHERE ns_id=?", (ns,)).fetchone()
        return (int(row[0]) if row else 0, self.store.chunk_version(namespace))

    def state(self, namespace: str) -> dict[str, Any] | None:
        ns = self._ns(namespace)
        if ns is None:
            return None
        row = self.store.reader.execute(
            "SELECT version, built_at, params FROM graph_state WHERE ns_id=?", (ns,)
        ).fetchone()
        if row is None:
            return None
        return {"version": row[0], "built_at": row[1], "params": json.loads(row[2])}

    def load_for_reads(self, namespace: str) -> GraphData:
        """``load``, reused while the namespace's graph and chunks keep their version (a build,
        an update or any write of a chunk changes it): the explorer's entity views and lookups read
        the whole graph, 52 ms a time on the podcast graph. Callers must not modify what it returns."""
        version = self.version(namespace)
        hit = self._read_cache.get(namespace)
        if hit is not None and hit.version == version:
            return hit
        data = self.load(namespace)
        if len(self._read_cache) >= 8:
            self._read_cache.pop(next(iter(self._read_cache)))
        self._read_cache[namespace] = data
        return data

    def load(self, namespace: str) -> GraphData:
        ns = self._ns(namespace)
        version = self.version(namespace)
        if ns is None:
            return GraphData(version, {}, {}, [])
        with self.store.snapshot() as db:  # one consistent snapshot
            ents = {
                r[0]: (r[1], r[2], r[3], r[4], r[5])
                for r in db.execute(
                    "SELECT id, key, name, type, prov_hash, description FROM graph_entities WHERE ns_id=? ORDER BY id",
                    (ns,),
                )
            }
            mentions: dict[int, dict[int, int]] = {}
            for eid, rid, cnt in db.execute(
                "SELECT entity_id, chunk_rowid, count FROM graph_mentions WHERE ns_id=? ORDER BY entity_id, chunk_rowid",
                (ns,),
            ):
                mentions.setdefault(eid, {})[rid] = cnt
            rels: list[tuple[int, int, str, float, str]] = []
            rel_chunks: dict[tuple[int, int, str], list[int]] = {}
            for rid, s, d, typ, desc, w in db.execute(
                "SELECT r.id, r.src, r.dst, r.type, r.description, coalesce(sum(s.weight), 0) FROM graph_relations r "
                "LEFT JOIN graph_relation_sources s ON s.ns_id = r.ns_id AND s.relation_id = r.id WHERE r.ns_id=? "
                "GROUP BY r.ns_id, r.id ORDER BY r.id",
                (ns,),
            ):
                rels.append((s, d, typ, float(w), desc))
            if rels and len(rels) <= 200_000:
                for s, d, typ, cr in db.execute(
                    "SELECT r.src, r.dst, r.type, s.chunk_rowid FROM graph_relations r JOIN graph_relation_sources s "
                    "ON s.ns_id = r.ns_id AND s.relation_id = r.id WHERE r.ns_id=? AND r.type != 'co_occurs' "
                    "ORDER BY r.id, s.chunk_rowid",
                    (ns,),
                ):
                    rel_chunks.setdefault((s, d, typ), []).append(cr)
        return GraphData(version, ents, mentions, rels, rel_chunks)

    def communities(self, namespace: str, level: int | None = None) -> list[StoredCommunity]:
        ns = self._ns(namespace)
        if ns is None:
            return []
        sql = (
            "SELECT community_id, level, parent, members, fingerprint, title, summary, chunk_ids, importance, "
            "summary_model, summarized_at FROM graph_communities WHERE ns_id=?"
        )
        sql, params = _optional(sql, [ns], " AND level=?", level)
        sql += " ORDER BY level, importance DESC, community_id"
        return [
            StoredCommunity(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], r[6], json.loads(r[7]), r[8], r[9], r[10])
            for r in self.store.reader.execute(sql, params)
        ]

    def entity_hashes(self, namespace: str) -> dict[str, str | None]:
        """entity key -> provenance hash (None when stale)."""
        ns = self._ns(namespace)
        if ns is None:
            return {}
        return {
            k: (None if st else h)
            for k, h, st in self.store.reader.execute(
                "SELECT key, prov_hash, stale FROM graph_entities WHERE ns_id=?", (ns,)
            )
        }

    def counts(self, namespace: str) -> dict[str, int]:
        ns = self._ns(namespace)
        if ns is None:
            return {"entities": 0, "relations": 0, "stale_entities": 0, "mentions": 0}
        db = self.store.reader
        one: Callable[[str], int] = lambda sql: int(db.execute(sql, (ns,)).fetchone()[0])  # noqa: E731
        return {
            "entities": one("SELECT count(*) FROM graph_entities WHERE ns_id=?"),
            "stale_entities": one("SELECT count(*) FROM graph_entities WHERE ns_id=? AND stale=1"),
            "relations": one("SELECT count(*) FROM graph_relations WHERE ns_id=? AND type != 'co_occurs'"),
            "cooccurrence_edges": one("SELECT count(*) FROM graph_relations WHERE ns_id=? AND type = 'co_occurs'"),
        }

    def clear(self, namespace: str) -> None:
        """Forget the namespace's graph (a full rebuild follows)."""
        store = self.store
        with store.write_transaction() as db:
            ns = store.namespace_id(namespace, db)
            if ns is None:
                return
            db.execute("DELETE FROM graph_chunks WHERE ns_id=?", (ns,))
            db.execute("DELETE FROM graph_relation_sources WHERE ns_id=?", (ns,))
            db.execute("DELETE FROM graph_relations WHERE ns_id=?", (ns,))
            db.execute("DELETE FROM graph_mentions WHERE ns_id=?", (ns,))
            db.execute("DELETE FROM graph_entities WHERE ns_id=?", (ns,))
            db.execute("DELETE FROM graph_communities WHERE ns_id=?", (ns,))
            db.execute("INSERT INTO graph_state (ns_id) VALUES (?) ON CONFLICT (ns_id) DO NOTHING", (ns,))
            db.execute("UPDATE graph_state SET version = version + 1 WHERE ns_id=?", (ns,))

    def existing_chunk_ids(self, namespace: str, chunk_ids: Sequence[str]) -> set[str]:
        ns = self._ns(namespace)
        if ns is None:
            return set()
        out: set[str] = set()
        ids = list(chunk_ids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            out.update(
                r[0]
                for r in self.store.reader.execute(
                    f"SELECT chunk_id FROM chunks WHERE ns_id=? AND chunk_id IN ({','.join('?' * len(part))})",
                    [ns, *part],
                )
            )
        return out
