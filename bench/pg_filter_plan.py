"""PostgreSQL dense leg under metadata filters of every selectivity: the plan chosen per query
(store/postgres/plan.py) against the code path before it, in the same process on the same database.

    python -m bench pg_filter_plan                      # 100k chunks (~4 min on 2 cores)
    python -m bench pg_filter_plan --n 20000 --queries 30
    python -m bench pg_filter_plan --report bench/results/pg_filter_plan.json
    python -m bench pg_filter_plan --plan-cache-mode force_custom_plan --out bench/results/pg_filter_plan_custom_plans.json

Corpus and queries are bench/_common.py's (synthetic incident notes, ``bag:384`` vectors as in
bench/pg_scaling.py), each document also tagged ``g1000 = i % 1000``, ``g100``, ``g10``, ``g2``:
filters ``{"g1000": 7}``, ``{"g100": 7}``, ``{"g10": 7}``, ``{"g2": 1}`` allow 0.1 %, 1 %, 10 %, 50 %
of the chunks. Phases: (1) build — ``add_documents`` 1,000 a transaction, vectors without the index,
then ``CREATE INDEX … USING hnsw`` (m=16, ef_construction=64); (2) calibration — the cost model's
constants measured on this store: the exact plan's median time over the four allowed sets (a
least-squares line against the allowed rows), HNSW's unfiltered median time at ef_search 40-1,000
(a line against ef_search); the "after" runs use these constants; (3) queries — per selectivity,
alternating per query, ``before`` (``filter_plan`` off: HNSW with ef_search 64 and pgvector's
defaults, an exact scan when the index returns fewer than k) and ``after`` (the plan chosen):
p50/p95 of ``search_dense`` and of ``Memory.search(mode="hybrid")`` (BM25 over in-process postings,
the default; the dense leg's own time from its report too), recall@10 of ``search_dense`` against
the exact top-10 over the allowed rows (the exact plan forced), and which plans ran; (4) the SQL
BM25 leg (``bm25_leg="sql"``; ``--no-sparse`` leaves it out): its constants measured the same way
(the postings plan's time against the postings it reads, the allowed-first plan's against terms ×
allowed chunks), then per selectivity the leg and hybrid before (every posting joined to the filter)
and after, and whether both read the same top-10.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import numpy as np  # noqa: E402

from bench._common import make_corpus, make_queries, pct  # noqa: E402
from bench.pg_scaling import StructuredEmbedder, bulk_load, fresh_database, pg_settings, start_server  # noqa: E402

FILTERS: dict[str, dict | None] = {
    "0.1%": {"g1000": 7},
    "1%": {"g100": 7},
    "10%": {"g10": 7},
    "50%": {"g2": 1},
    "none": None,
}


def summary(ms: list[float]) -> dict:
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(pct(ms, 95), 2), "n": len(ms)}


def build(url: str, n: int) -> tuple[object, StructuredEmbedder, dict]:

    corpus = make_corpus(n)
    for i, d in enumerate(corpus):
        d["metadata"] = {**d.get("metadata", {}), "g1000": i % 1000, "g100": i % 100, "g10": i % 10, "g2": i % 2}
    emb = StructuredEmbedder()
    mem, out = bulk_load(url, corpus, emb)
    return mem, emb, out


def _median_ms(fn, qvs) -> float:  # type: ignore[no-untyped-def]
    ms = []
    for qv in qvs:
        t = time.perf_counter()
        fn(qv)
        ms.append((time.perf_counter() - t) * 1000)
    return statistics.median(ms)


def calibrate(mem, qvs: list[np.ndarray]) -> dict:  # type: ignore[no-untyped-def]
    """The cost model's constants on this store: exact ms against allowed rows, HNSW ms against ef_search."""
    from hybridmem.filters import parse_filter
    from hybridmem.store.postgres.plan import Costs

    st = mem.store
    exact_pts = []
    for spec in (f for f in FILTERS.values() if f is not None):
        flt = parse_filter(spec)
        rows = len(st.filter_rowids("default", flt))
        exact_pts.append((rows, _median_ms(lambda qv: st.search_dense("default", qv, flt, 10, plan="exact"), qvs)))
    hnsw_pts = []
    base = st.hnsw_ef_search
    try:
        for ef in (40, 100, 200, 400, 1000):
            st.hnsw_ef_search = ef
            hnsw_pts.append((ef, _median_ms(lambda qv: st.search_dense("default", qv, None, 10, plan="hnsw"), qvs)))
    finally:
        st.hnsw_ef_search = base
    (eb, ea), (hb, ha) = (np.polyfit(*zip(*pts), 1) for pts in (exact_pts, hnsw_pts))
    costs = Costs(
        exact_fixed_ms=round(max(float(ea), 0.1), 3),
        exact_ms_per_row=round(max(float(eb), 1e-6), 6),
        hnsw_fixed_ms=round(max(float(ha), 0.1), 3),
        hnsw_ms_per_tuple=round(max(float(hb), 1e-6), 6),
    )
    return {
        "exact_rows_ms": [[r, round(m, 2)] for r, m in exact_pts],
        "hnsw_ef_ms": [[e, round(m, 2)] for e, m in hnsw_pts],
        "costs": costs.__dict__,
    }


def calibrate_sparse(mem, queries: list[str]) -> dict:  # type: ignore[no-untyped-def]
    """The SQL BM25 leg's constants on this store: the postings plan's ms against the postings read,
    the allowed-first plan's ms against (terms × allowed chunks), each a least-squares line."""
    from hybridmem.filters import parse_filter
    from hybridmem.store.postgres.plan import SparseCosts
    from hybridmem.text.tokenize import query_tokens

    st = mem.store
    _, df = st.doc_freqs("default", [t for q in queries for t in query_tokens(q)])
    post_pts, probe_pts = [], []
    for label, spec in FILTERS.items():
        if spec is None:
            continue
        flt = parse_filter(spec)
        allowed = len(st.filter_rowids("default", flt))
        for q in queries:
            terms = list(dict.fromkeys(query_tokens(q)))
            for plan, pts, x in (
                ("postings", post_pts, sum(df.get(t, 0) for t in terms)),
                ("allowed", probe_pts, len(terms) * allowed),
            ):
                if plan == "allowed" and label == "50%":
                    continue  # 50k probes a term: seconds, and far from where the plans cross
                t = time.perf_counter()
                st.search_sparse("default", terms, flt, 10, plan=plan)
                pts.append((x, (time.perf_counter() - t) * 1000))
    (pb, pa), (ab, aa) = (np.polyfit(*zip(*pts), 1) for pts in (post_pts, probe_pts))
    costs = SparseCosts(
        postings_fixed_ms=round(max(float(pa), 0.1), 3),
        ms_per_posting=round(max(float(pb), 1e-7), 7),
        allowed_fixed_ms=round(max(float(aa), 0.1), 3),
        ms_per_probe=round(max(float(ab), 1e-7), 7),
    )
    return {"postings_points": len(post_pts), "allowed_points": len(probe_pts), "costs": costs.__dict__}


def run_sparse(mem, sql_mem, queries: list[str]) -> dict:  # type: ignore[no-untyped-def]
    """The SQL BM25 leg (``bm25_leg="sql"``) per selectivity, before (every posting, joined to the
    filter) and after (the plan chosen): p50/p95 of the leg and of hybrid, and whether both read
    the same top-10 (BM25 is exact either way)."""
    from hybridmem.filters import parse_filter
    from hybridmem.text.tokenize import query_tokens

    st = mem.store
    out: dict = {}
    for label, spec in FILTERS.items():
        if spec is None:
            continue
        flt = parse_filter(spec)
        lat: dict[str, list[float]] = {f"{w}_{s}": [] for w in ("bm25", "hybrid") for s in ("before", "after")}
        same, plans = 0, Counter()
        for i, q in enumerate(queries):
            terms = list(dict.fromkeys(query_tokens(q)))
            got = {}
            for side in ("before", "after") if i % 2 else ("after", "before"):
                st.filter_plan = sql_mem.store.filter_plan = side == "after"
                t = time.perf_counter()
                got[side] = st.search_sparse("default", terms, flt, 10)
                lat[f"bm25_{side}"].append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                sql_mem.search(q, mode="hybrid", top_k=10, metadata_filter=spec)
                lat[f"hybrid_{side}"].append((time.perf_counter() - t) * 1000)
            same += [r for r, _ in got["before"]] == [r for r, _ in got["after"]]
            plans[(got["after"].plan or "?").split(":")[0]] += 1
        st.filter_plan = sql_mem.store.filter_plan = True
        out[label] = {
            **{k: summary(v) for k, v in lat.items()},
            "same_top10": f"{same}/{len(queries)}",
            "plans_after": dict(plans),
        }
        print("bm25_sql", label, json.dumps(out[label]), file=sys.stderr, flush=True)
    return out


def run_queries(mem, emb, queries: list[str], n_vec: int) -> dict:  # type: ignore[no-untyped-def]
    from hybridmem.filters import parse_filter

    st = mem.store
    out: dict = {}
    for label, spec in FILTERS.items():
        flt = parse_filter(spec) if spec else None
        allowed = len(st.filter_rowids("default", flt))
        lat: dict[str, list[float]] = {
            f"{w}_{s}": [] for w in ("dense", "hybrid", "hybrid_dense_leg") for s in ("before", "after")
        }
        rec: dict[str, list[float]] = {"before": [], "after": []}
        plans: dict[str, Counter] = {"before": Counter(), "after": Counter()}
        for i, q in enumerate(queries):
            qv = emb.embed_query(q)
            exact = {r for r, _ in st.search_dense("default", qv, flt, 10, plan="exact")}
            for side in ("before", "after") if i % 2 else ("after", "before"):  # alternating
                st.filter_plan = side == "after"
                t = time.perf_counter()
                got = st.search_dense("default", qv, flt, 10)
                lat[f"dense_{side}"].append((time.perf_counter() - t) * 1000)
                rec[side].append(len({r for r, _ in got} & exact) / max(1, len(exact)))
                kind = (got.plan or "?").split(":")[0].split(";")[0]
                plans[side][kind + ("+exact" if "finished exactly" in (got.plan or "") else "")] += 1
                t = time.perf_counter()
                r = mem.search(q, mode="hybrid", top_k=10, **({"metadata_filter": spec} if spec else {}))
                lat[f"hybrid_{side}"].append((time.perf_counter() - t) * 1000)
                lat[f"hybrid_dense_leg_{side}"].append(r.legs["dense"].took_ms)
        st.filter_plan = True
        out[label] = {
            "allowed": allowed,
            "share": round(allowed / max(1, n_vec), 4),
            **{k: summary(v) for k, v in lat.items()},
            "recall_at_10": {s: round(float(np.mean(v)), 3) for s, v in rec.items()},
            "plans": {s: dict(c) for s, c in plans.items()},
        }
        print(label, json.dumps(out[label]), file=sys.stderr, flush=True)
    return out


def fmt_table(data: dict) -> str:
    rows = [
        "| filter | allowed | dense p50/p95 before | dense p50/p95 after | hybrid p50/p95 before | "
        "hybrid p50/p95 after | recall@10 before / after | plans after |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, r in data["queries"].items():
        f = lambda k: f"{r[k]['p50_ms']:.1f} / {r[k]['p95_ms']:.1f}"  # noqa: E731
        plans = ", ".join(f"{k} {v}" for k, v in r["plans"]["after"].items())
        rows.append(
            f"| {label} | {r['allowed']:,} | {f('dense_before')} | {f('dense_after')} | {f('hybrid_before')} | "
            f"{f('hybrid_after')} | {r['recall_at_10']['before']} / {r['recall_at_10']['after']} | {plans} |"
        )
    if "bm25_sql" in data:
        rows += [
            "",
            "| filter (bm25_leg=sql) | bm25 p50/p95 before | bm25 p50/p95 after | hybrid p50/p95 before | "
            "hybrid p50/p95 after | same top-10 | plans after |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for label, r in data["bm25_sql"].items():
            f = lambda k: f"{r[k]['p50_ms']:.1f} / {r[k]['p95_ms']:.1f}"  # noqa: E731
            plans = ", ".join(f"{k} {v}" for k, v in r["plans_after"].items())
            rows.append(
                f"| {label} | {f('bm25_before')} | {f('bm25_after')} | {f('hybrid_before')} | {f('hybrid_after')} | "
                f"{r['same_top10']} | {plans} |"
            )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--pg-url", default=None, help="admin URL of a server with pgvector (a database is created)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "pg_filter_plan.json"))
    ap.add_argument("--report", default=None, help="print the table of an earlier run")
    ap.add_argument("--no-sparse", action="store_true", help="leave out the SQL BM25 leg's part")
    ap.add_argument(
        "--plan-cache-mode",
        choices=["auto", "force_custom_plan", "force_generic_plan"],
        default=None,
        help="PostgreSQL's plan_cache_mode for the run's database (default: the server's, auto)",
    )
    a = ap.parse_args()
    if a.report:
        print(fmt_table(json.loads(Path(a.report).read_text())))
        return
    work = Path(tempfile.mkdtemp(prefix="hm-pgfilter-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    srv = None
    t0 = time.perf_counter()
    try:
        admin = a.pg_url
        if admin is None:
            admin, srv = start_server(work / "pg")
        url = fresh_database(admin, "hm_filter_plan")
        if a.plan_cache_mode:  # every connection of the run (psycopg prepares a statement run 5 times)
            import psycopg

            with psycopg.connect(url, autocommit=True) as c:
                c.execute(f"ALTER DATABASE hm_filter_plan SET plan_cache_mode = '{a.plan_cache_mode}'")
        mem, emb, built = build(url, a.n)
        print("built", built, file=sys.stderr, flush=True)
        queries = make_queries(a.queries + 10)
        cal = calibrate(mem, [emb.embed_query(q) for q in queries[:15]])
        print("calibration", json.dumps(cal), file=sys.stderr, flush=True)
        from hybridmem.store.postgres.plan import Costs

        mem.store.plan_costs = Costs(**cal["costs"])
        for q in queries[:10]:  # warm-up
            for spec in FILTERS.values():
                mem.search(q, mode="hybrid", top_k=10, **({"metadata_filter": spec} if spec else {}))
        data = {
            "machine": {"cores": os.cpu_count(), "loadavg": os.getloadavg()},
            "postgres": pg_settings(url),
            "n": a.n,
            "plan_cache_mode": a.plan_cache_mode or "server default (auto)",
            "build": built,
            "calibration": cal,
            "queries": run_queries(mem, emb, queries[10:], built["vectors"]),
        }
        if not a.no_sparse:
            from hybridmem import Memory
            from hybridmem.store.postgres.plan import SparseCosts

            data["sparse_calibration"] = calibrate_sparse(mem, queries[:15])
            print("sparse calibration", json.dumps(data["sparse_calibration"]), file=sys.stderr, flush=True)
            sql_mem = Memory(url, embedder=emb, auto_embed=False, chunk_size=None, store_options={"bm25_leg": "sql"})
            for m_ in (mem, sql_mem):
                m_.store.sparse_costs = SparseCosts(**data["sparse_calibration"]["costs"])
                m_.store.plan_costs = mem.store.plan_costs
            data["bm25_sql"] = run_sparse(mem, sql_mem, queries[10:])
            sql_mem.close()
        data["wall_s"] = round(time.perf_counter() - t0, 1)
        mem.close()
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(data, indent=1))
    finally:
        if srv is not None:
            srv.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    print(fmt_table(data))


if __name__ == "__main__":
    main()
