"""Copy a memory between backends (SQLite file ⇄ PostgreSQL URL), then prove the copy.

    hybridmem migrate --from memory.db --to postgresql://me@db/mem
    hybridmem migrate --from postgresql://me@db/mem --to copy.db

What moves: every namespace's documents (ids, source, metadata, content hash; times: occurred_at,
recorded_at, valid_to; versions: every retired version stays retired, with its reason and key),
chunks (ids, text, language, BM25 tokens — not re-tokenized —, index-only context), embeddings
(bit-for-bit float32; no model runs), and the GraphRAG layer (entities, relations, provenance,
communities with their summaries, build state).
The destination must hold no documents yet. Verification: per-namespace counts (documents, chunks,
vectors, pending vectors, graph entities/relations/communities) must match, and sample queries must
return the same top-10 on both sides — BM25 with query texts drawn from the corpus, dense with stored
vectors as queries (an exact scan on both sides, so the check does not depend on HNSW recall).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from .errors import StoreError, ValidationError
from .store import display_target, open_store
from .store.base import PreparedDocument
from .text.tokenize import query_tokens

__all__ = ["migrate", "MigrationReport"]

BATCH_DOCS = 200


@dataclass
class MigrationReport:
    source: str
    destination: str
    namespaces: dict[str, dict[str, int]] = field(default_factory=dict)  # name -> counts copied
    queries_checked: int = 0
    mismatches: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _graph_counts(store: Any, ns: str) -> dict[str, int]:
    from .graph.store import GraphStore

    g = GraphStore(store)
    c = g.counts(ns)
    return {
        "graph_entities": c["entities"],
        "graph_relations": c["relations"] + c.get("cooccurrence_edges", 0),
        "graph_communities": len(g.communities(ns)),
    }


def _counts(store: Any, ns: str) -> dict[str, int]:
    return {**store.counts(ns), **_graph_counts(store, ns)}


def _copy_documents(src: Any, dst: Any, ns: str, progress: Callable[[int], None] | None) -> dict[int, int]:
    """Documents, chunks and vectors; returns source chunk rowid -> destination rowid."""
    rowmap: dict[int, int] = {}
    batch: list[tuple[PreparedDocument, list[tuple[Any, ...]]]] = []
    times = src.export_times(ns)  # occurred/recorded/valid_to, versions, keys, reasons; chunk context

    def flush() -> None:
        if not batch:
            return
        dst.write_documents(ns, [d for d, _ in batch])
        # the write stamped them as new and current: give back their times, and retired versions their retirement
        dst.restore_times(ns, {d.doc_id: times[d.doc_id] for d, _ in batch if d.doc_id in times})
        chunks = [c for _, cs in batch for c in cs]
        new = dst.rowids_for(ns, [c[1] for c in chunks])
        for c in chunks:
            rowmap[int(c[0])] = int(new[c[1]])
        ids, mat = src.vectors_for([int(c[0]) for c in chunks])
        if len(ids):
            hashes = {int(c[0]): c[3] for c in chunks}
            dst.store_vectors([(rowmap[int(r)], hashes[int(r)], mat[i]) for i, r in enumerate(ids.tolist())])
        if progress:
            progress(len(batch))
        batch.clear()

    for d in src.export_documents(ns):
        chunks = d["chunks"]
        if not chunks:
            continue
        batch.append(
            (
                PreparedDocument(
                    doc_id=d["doc_id"],
                    source=d["source"],
                    metadata=d["metadata"],
                    content_hash=d["content_hash"],
                    chunks=[c[2] for c in chunks],
                    tokens=[c[5] for c in chunks],
                    langs=[c[4] for c in chunks],
                    text_hashes=[c[3] for c in chunks],
                    chunk_ids=[c[1] for c in chunks],
                    context=times.get(d["doc_id"], (None,) * 8)[-1],
                ),
                chunks,
            )
        )
        if len(batch) >= BATCH_DOCS:
            flush()
    flush()
    return rowmap


def _copy_graph(src: Any, dst: Any, ns: str, rowmap: dict[int, int]) -> None:
    """Entities, mentions, relations with their sources, extracted chunks, communities, state —
    through the portable SQL both stores speak (``?`` placeholders, ``snapshot``/``_tx``)."""
    if not src.has_graph(ns):
        return
    src_ns = src.namespace_id(ns)
    with src.snapshot() as r:
        ents = r.execute(
            "SELECT id, key, name, type, description, prov_hash, stale FROM graph_entities WHERE ns_id=? ORDER BY id",
            (src_ns,),
        ).fetchall()
        mentions = r.execute(
            "SELECT entity_id, chunk_rowid, count FROM graph_mentions WHERE ns_id=?", (src_ns,)
        ).fetchall()
        rels = r.execute(
            "SELECT id, src, dst, type, description FROM graph_relations WHERE ns_id=? ORDER BY id", (src_ns,)
        ).fetchall()
        sources = r.execute(
            "SELECT relation_id, chunk_rowid, weight FROM graph_relation_sources WHERE ns_id=?", (src_ns,)
        ).fetchall()
        gchunks = r.execute(
            "SELECT chunk_rowid, extractor, extracted_at FROM graph_chunks WHERE ns_id=?", (src_ns,)
        ).fetchall()
        comms = r.execute(
            "SELECT community_id, level, parent, members, fingerprint, title, summary, chunk_ids, "
            "importance, summary_model, summarized_at FROM graph_communities WHERE ns_id=?",
            (src_ns,),
        ).fetchall()
        state = r.execute("SELECT version, built_at, params FROM graph_state WHERE ns_id=?", (src_ns,)).fetchone()
    with dst._wlock, dst._tx() as w:
        dst_ns = dst.namespace_id(ns, w)
        emap: dict[int, int] = {}
        for eid, key, name, typ, desc, ph, stale in ents:
            w.execute(
                "INSERT INTO graph_entities (ns_id, key, name, type, description, prov_hash, stale) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (dst_ns, key, name, typ, desc, ph, stale),
            )
            emap[eid] = int(
                w.execute("SELECT id FROM graph_entities WHERE ns_id=? AND key=?", (dst_ns, key)).fetchone()[0]
            )
        w.executemany(
            "INSERT INTO graph_mentions (ns_id, entity_id, chunk_rowid, count) VALUES (?, ?, ?, ?)",
            [(dst_ns, emap[e], rowmap[c], n) for e, c, n in mentions if c in rowmap],
        )
        relmap: dict[int, int] = {}
        for rid, s, d, typ, desc in rels:
            w.execute(
                "INSERT INTO graph_relations (ns_id, src, dst, type, description) VALUES (?, ?, ?, ?, ?)",
                (dst_ns, emap[s], emap[d], typ, desc),
            )
            relmap[rid] = int(
                w.execute(
                    "SELECT id FROM graph_relations WHERE ns_id=? AND src=? AND dst=? AND type=?",
                    (dst_ns, emap[s], emap[d], typ),
                ).fetchone()[0]
            )
        w.executemany(
            "INSERT INTO graph_relation_sources (ns_id, relation_id, chunk_rowid, weight) VALUES (?, ?, ?, ?)",
            [(dst_ns, relmap[rid], rowmap[c], wt) for rid, c, wt in sources if c in rowmap],
        )
        w.executemany(
            "INSERT INTO graph_chunks (chunk_rowid, ns_id, extractor, extracted_at) VALUES (?, ?, ?, ?)",
            [(rowmap[c], dst_ns, ex, at) for c, ex, at in gchunks if c in rowmap],
        )
        w.executemany(
            "INSERT INTO graph_communities VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [(dst_ns, *c) for c in comms]
        )
        if state is not None:
            w.execute(
                "INSERT INTO graph_state (ns_id, version, built_at, params) VALUES (?, ?, ?, ?)", (dst_ns, *state)
            )


def _exact_dense(store: Any, ns: str, q: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Exact top-k (rowid, cosine similarity)."""
    if store.capabilities.native_search:
        return cast(list[tuple[int, float]], store.search_dense(ns, q, None, k, exact=True))
    _, rowids, m = store.load_vectors(ns)
    if not len(rowids):
        return []
    sims = (m @ q) / np.maximum(np.linalg.norm(m, axis=1) * np.linalg.norm(q), 1e-12)
    order = np.lexsort((rowids, -sims))[:k]
    return [(int(rowids[i]), float(sims[i])) for i in order]


def _same_top(a: list[tuple[int, float]], b: list[tuple[int, float]], tol: float) -> bool:
    """The same top-k: equal scores (within ``tol``), and the same chunks above the cut-off score
    (chunks tied at the cut-off may differ: either side's pick is a correct top-k)."""
    if len(a) != len(b) or any(abs(x - y) > tol for (_, x), (_, y) in zip(a, b)):
        return False
    if not a:
        return True
    cut = min(a[-1][1], b[-1][1]) + tol
    return {r for r, s in a if s > cut} == {r for r, s in b if s > cut}


def _verify(
    src: Any, dst: Any, ns: str, rowmap: dict[int, int], report: MigrationReport, n_queries: int, seed: int
) -> None:
    a, b = _counts(src, ns), _counts(dst, ns)
    for key in a:
        if a[key] != b.get(key):
            report.mismatches.append(f"{ns}: {key} {a[key]} in the source, {b.get(key)} in the destination")
    if not rowmap:
        return
    rng = random.Random(seed)
    sample = rng.sample(sorted(rowmap), min(n_queries, len(rowmap)))
    inv = {v: k for k, v in rowmap.items()}
    texts = src.fetch(sample)
    for rid in sample:
        words = texts[rid].text.split()
        start = rng.randrange(max(1, len(words) - 8))
        terms = query_tokens(" ".join(words[start : start + 8]))
        if not terms:
            continue
        s_hits = src.bm25(ns, terms, None, 10)  # FTS5 on SQLite, the SQL BM25 on PostgreSQL
        d_hits = [(inv.get(r, -1), s) for r, s in dst.bm25(ns, terms, None, 10)]
        report.queries_checked += 1
        if not _same_top(s_hits, d_hits, 1e-6):
            report.mismatches.append(f"{ns}: BM25 top-10 differs for {' '.join(words[start : start + 8])!r}")
    ids, mat = src.vectors_for(sample)
    for i, rid in enumerate(ids.tolist()):
        s_top = _exact_dense(src, ns, mat[i], 10)
        d_top = [(inv.get(r, -1), s) for r, s in _exact_dense(dst, ns, mat[i], 10)]
        report.queries_checked += 1
        if not _same_top(s_top, d_top, 1e-5):
            report.mismatches.append(f"{ns}: dense top-10 differs for the vector of chunk rowid {rid}")


def migrate(
    source: str,
    destination: str,
    *,
    namespaces: list[str] | None = None,
    verify_queries: int = 20,
    seed: int = 0,
    progress: Callable[[str, int], None] | None = None,
) -> MigrationReport:
    """Copy ``source`` into ``destination`` (an SQLite path or a PostgreSQL URL each) and verify."""
    if str(source) == str(destination):
        raise ValidationError("--from and --to are the same store")
    t0 = time.perf_counter()
    src = open_store(source, create=False)
    try:
        dst = open_store(destination, create=True)
    except BaseException:
        src.close()
        raise
    report = MigrationReport(display_target(source), display_target(destination))
    try:
        names = src.namespaces() if namespaces is None else namespaces
        missing = [n for n in names if n not in src.namespaces()]
        if missing:
            raise ValidationError(f"namespace(s) not in the source: {', '.join(missing)}")
        busy = [n for n in dst.namespaces() if dst.counts(n)["documents"]]
        if busy:
            raise StoreError(
                f"the destination {report.destination} already holds documents (namespaces: "
                f"{', '.join(busy)}); migrate into an empty store"
            )
        name, dim = src.embedder_info()
        d_name, d_dim = dst.embedder_info()
        if (
            name
            and d_name
            and (d_name, d_dim) != (name, dim)
            and any(dst.counts(n)["vectors"] for n in dst.namespaces())
        ):
            raise StoreError(f"the destination was built with {d_name}, the source with {name}")
        if name:
            dst.set_embedder(name, dim, reset_vectors=False)
        for ns in names:
            # (the cast: mypy cannot infer a lambda with a default argument here)
            rowmap = _copy_documents(
                src, dst, ns, cast("Callable[[int], None]", lambda n, ns=ns: progress(ns, n)) if progress else None
            )
            _copy_graph(src, dst, ns, rowmap)
            report.namespaces[ns] = _counts(dst, ns)
            if verify_queries:
                _verify(src, dst, ns, rowmap, report, verify_queries, seed)
    finally:
        src.close()
        dst.close()
    report.seconds = time.perf_counter() - t0
    return report
