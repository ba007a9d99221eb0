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
from .text.tokenize import query_tokens
from .transfer import import_records, records

__all__ = ["migrate", "MigrationReport"]


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


def _same_top(a: list[tuple[str, float]], b: list[tuple[str, float]], tol: float) -> bool:
    """The same top-k: equal scores (within ``tol``), and the same chunks above the cut-off score
    (chunks tied at the cut-off may differ: either side's pick is a correct top-k)."""
    if len(a) != len(b) or any(abs(x - y) > tol for (_, x), (_, y) in zip(a, b)):
        return False
    if not a:
        return True
    cut = min(a[-1][1], b[-1][1]) + tol
    return {r for r, s in a if s > cut} == {r for r, s in b if s > cut}


def _chunk_ids(store: Any, ns: str, hits: list[tuple[int, float]]) -> list[tuple[str, float]]:
    rows = store.fetch([r for r, _ in hits], ns)
    return [(rows[r].chunk_id if r in rows else f"?{r}", sc) for r, sc in hits]


def _verify(src: Any, dst: Any, ns: str, report: MigrationReport, n_queries: int, seed: int) -> None:
    """Counts equal, and the same top-10 on both sides (chunks named by chunk id: rowids are each store's)."""
    a, b = _counts(src, ns), _counts(dst, ns)
    for key in a:
        if a[key] != b.get(key):
            report.mismatches.append(f"{ns}: {key} {a[key]} in the source, {b.get(key)} in the destination")
    rowids = [int(r) for r in src.filter_rowids(ns, None)]
    if not rowids:
        return
    rng = random.Random(seed)
    sample = rng.sample(sorted(rowids), min(n_queries, len(rowids)))
    texts = src.fetch(sample)
    for rid in sample:
        words = texts[rid].text.split()
        start = rng.randrange(max(1, len(words) - 8))
        terms = query_tokens(" ".join(words[start : start + 8]))
        if not terms:
            continue
        s_hits = _chunk_ids(src, ns, src.bm25(ns, terms, None, 10))  # FTS5 on SQLite, the SQL BM25 on PostgreSQL
        d_hits = _chunk_ids(dst, ns, dst.bm25(ns, terms, None, 10))
        report.queries_checked += 1
        if not _same_top(s_hits, d_hits, 1e-6):
            report.mismatches.append(f"{ns}: BM25 top-10 differs for {' '.join(words[start : start + 8])!r}")
    ids, mat = src.vectors_for(sample)
    for i, rid in enumerate(ids.tolist()):
        s_top = _chunk_ids(src, ns, _exact_dense(src, ns, mat[i], 10))
        d_top = _chunk_ids(dst, ns, _exact_dense(dst, ns, mat[i], 10))
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
        # the export's records, piped: documents with their vectors, then each namespace's graph
        recs = records(src, names, vectors=True, graph=True, source=report.source)
        import_records(recs, dst, progress=progress)
        for ns in names:
            report.namespaces[ns] = _counts(dst, ns)
            if verify_queries:
                _verify(src, dst, ns, report, verify_queries, seed)
    finally:
        src.close()
        dst.close()
    report.seconds = time.perf_counter() - t0
    return report
