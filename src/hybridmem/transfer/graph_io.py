"""A namespace's GraphRAG layer as export records and back: entities (by key, with their mentions),
relations (by their entities' keys, with their sources), the chunks already extracted,
communities with their summaries, and the build state. Chunks are named by chunk id, never by
rowid (rowids are the store's own), so the records load into any store holding those chunks.

Through the portable SQL both stores speak (``?`` placeholders; ``snapshot``/``write_transaction``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..store.base import Store
from .format import GRAPH_FIELDS

__all__ = ["graph_records", "load_graph"]

#: entities (or relations) per read of their mentions (or sources)
_PART = 500


def graph_records(store: Store, namespace: str) -> Iterator[dict[str, Any]]:
    """The graph records of ``namespace`` (none when it has no graph)."""
    ns = store.namespace_id(namespace)
    if ns is None or not store.has_graph(namespace):
        return
    base = {"namespace": namespace}
    with store.snapshot() as r:
        ents = r.execute(
            "SELECT id, key, name, type, description, prov_hash, stale FROM graph_entities WHERE ns_id=? ORDER BY id",
            (ns,),
        ).fetchall()
        keys = {int(e[0]): e[1] for e in ents}
        for i in range(0, len(ents), _PART):
            part = ents[i : i + _PART]
            mentions = _by_parent(
                r,
                "SELECT m.entity_id, c.chunk_id, m.count FROM graph_mentions m JOIN chunks c ON c.id = m.chunk_rowid "
                "WHERE m.ns_id=? AND m.entity_id IN ({marks}) ORDER BY m.entity_id, c.id",
                ns,
                [int(e[0]) for e in part],
            )
            for eid, key, name, typ, desc, ph, stale in part:
                yield {
                    **base,
                    "kind": "graph_entity",
                    "key": key,
                    "name": name,
                    "type": typ,
                    "description": desc,
                    "prov_hash": ph,
                    "stale": stale,
                    "mentions": mentions.get(int(eid), []),
                }
        rels = r.execute(
            "SELECT id, src, dst, type, description FROM graph_relations WHERE ns_id=? ORDER BY id", (ns,)
        ).fetchall()
        for i in range(0, len(rels), _PART):
            part = rels[i : i + _PART]
            sources = _by_parent(
                r,
                "SELECT s.relation_id, c.chunk_id, s.weight FROM graph_relation_sources s JOIN chunks c "
                "ON c.id = s.chunk_rowid WHERE s.ns_id=? AND s.relation_id IN ({marks}) ORDER BY s.relation_id, c.id",
                ns,
                [int(x[0]) for x in part],
            )
            for rid, s, d, typ, desc in part:
                yield {
                    **base,
                    "kind": "graph_relation",
                    "src": keys[int(s)],
                    "dst": keys[int(d)],
                    "type": typ,
                    "description": desc,
                    "sources": sources.get(int(rid), []),
                }
        for chunk_id, extractor, at in r.execute(
            "SELECT c.chunk_id, g.extractor, g.extracted_at FROM graph_chunks g JOIN chunks c ON c.id = g.chunk_rowid "
            "WHERE g.ns_id=? ORDER BY c.id",
            (ns,),
        ).fetchall():
            yield {**base, "kind": "graph_chunk", "chunk_id": chunk_id, "extractor": extractor, "extracted_at": at}
        for c in r.execute(
            f"SELECT {', '.join(_COMMUNITY)} FROM graph_communities WHERE ns_id=? ORDER BY level, community_id", (ns,)
        ).fetchall():
            yield {**base, "kind": "graph_community", **dict(zip(_COMMUNITY, c))}
        state = r.execute("SELECT version, built_at, params FROM graph_state WHERE ns_id=?", (ns,)).fetchone()
        if state is not None:
            yield {**base, "kind": "graph_state", "version": state[0], "built_at": state[1], "params": state[2]}


_COMMUNITY = GRAPH_FIELDS["graph_community"]


def _by_parent(r: Any, sql: str, ns: int, ids: list[int]) -> dict[int, list[list[Any]]]:
    """parent id -> [[chunk id, value], ...] of ``sql`` (parent id, chunk id, value) for ``ids``."""
    out: dict[int, list[list[Any]]] = {}
    for pid, chunk_id, value in r.execute(sql.format(marks=",".join("?" * len(ids))), (ns, *ids)).fetchall():
        out.setdefault(int(pid), []).append([chunk_id, value])
    return out


def load_graph(store: Store, namespace: str, records: list[dict[str, Any]]) -> int:
    """Write one namespace's graph records in one transaction; returns the rows written. Mentions
    and sources of chunks the store does not hold are left out (they were not imported)."""
    chunk_ids = sorted(
        {m[0] for rec in records for m in rec.get("mentions", []) + rec.get("sources", [])}
        | {rec["chunk_id"] for rec in records if rec["kind"] == "graph_chunk"}
    )
    rowid = store.rowids_for(namespace, chunk_ids)
    written = 0
    with store.write_transaction() as w:
        ns = store.namespace_id(namespace, w, create=True)
        emap: dict[str, int] = {}
        for rec in (x for x in records if x["kind"] == "graph_entity"):
            w.execute(
                "INSERT INTO graph_entities (ns_id, key, name, type, description, prov_hash, stale) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (ns, rec["key"], rec["name"], rec["type"], rec["description"], rec["prov_hash"], rec["stale"]),
            )
            eid = int(
                w.execute("SELECT id FROM graph_entities WHERE ns_id=? AND key=?", (ns, rec["key"])).fetchone()[0]
            )
            emap[rec["key"]] = eid
            rows = [(ns, eid, rowid[c], n) for c, n in rec.get("mentions", []) if c in rowid]
            w.executemany("INSERT INTO graph_mentions (ns_id, entity_id, chunk_rowid, count) VALUES (?, ?, ?, ?)", rows)
            written += 1 + len(rows)
        for rec in (x for x in records if x["kind"] == "graph_relation"):
            s, d = emap[rec["src"]], emap[rec["dst"]]
            w.execute(
                "INSERT INTO graph_relations (ns_id, src, dst, type, description) VALUES (?, ?, ?, ?, ?)",
                (ns, s, d, rec["type"], rec["description"]),
            )
            rid = int(
                w.execute(
                    "SELECT id FROM graph_relations WHERE ns_id=? AND src=? AND dst=? AND type=?",
                    (ns, s, d, rec["type"]),
                ).fetchone()[0]
            )
            rows = [(ns, rid, rowid[c], wt) for c, wt in rec.get("sources", []) if c in rowid]
            w.executemany(
                "INSERT INTO graph_relation_sources (ns_id, relation_id, chunk_rowid, weight) VALUES (?, ?, ?, ?)", rows
            )
            written += 1 + len(rows)
        chunks = [
            (rowid[x["chunk_id"]], ns, x["extractor"], x["extracted_at"])
            for x in records
            if x["kind"] == "graph_chunk" and x["chunk_id"] in rowid
        ]
        w.executemany(
            "INSERT INTO graph_chunks (chunk_rowid, ns_id, extractor, extracted_at) VALUES (?, ?, ?, ?)", chunks
        )
        comms = [(ns, *(x[k] for k in _COMMUNITY)) for x in records if x["kind"] == "graph_community"]
        w.executemany(
            f"INSERT INTO graph_communities (ns_id, {', '.join(_COMMUNITY)}) VALUES ({', '.join('?' * 12)})", comms
        )
        for x in (x for x in records if x["kind"] == "graph_state"):
            w.execute(
                "INSERT INTO graph_state (ns_id, version, built_at, params) VALUES (?, ?, ?, ?)",
                (ns, x["version"], x["built_at"], x["params"]),
            )
        written += len(chunks) + len(comms)
    return written
