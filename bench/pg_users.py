"""PostgreSQL for many users (issue 45, item 2): N chunks over U users with power-law sizes (user i
holds about N / H * (i + 1) ** -1.1 memories, H normalising: a few users with tens of thousands,
most with tens), sessions of 20 memories, times over a year; hybrid search scoped to one user,
scoped to one user and the last 30 days, and under metadata filters of selectivity 0.01 %, 0.1 %,
1 %, 10 %, 50 %, with the plan chosen per query (store/postgres/plan.py). Recall@10 of the dense leg
against the exact top-10 over the same allowed rows, beside latency; the unscoped, unfiltered
hybrid query in the same process as the baseline.

    python -m bench pg_users                     # N = 200,000 over 2,000 users (~6 min on 2 cores)
    python -m bench pg_users --n 1000000 --users 10000   # the issue's size (not run here yet)

Corpus text and vectors are bench/_common.py's and bench/pg_scaling.py's (``bag:384``). Writes
bench/results/pg_users.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench._common import make_corpus, make_queries, summary
from bench.pg_scaling import StructuredEmbedder, bulk_load, fresh_database, pg_settings, start_server

ROOT = Path(__file__).resolve().parents[1]
DAY = 86_400.0
END = 1_767_225_600.0  # 2026-01-01
FILTERS = {"0.01%": {"g10000": 7}, "0.1%": {"g1000": 7}, "1%": {"g100": 7}, "10%": {"g10": 7}, "50%": {"g2": 1}}
TARGETS = {"scoped_p50_ms": 20, "scoped_p95_ms": 50, "filtered_p50_ms": 30, "recall_at_10": 0.95}


def user_sizes(n: int, users: int) -> list[int]:
    """Memories per user, power law, summing to ``n``, at least 1 each."""
    w = np.array([(i + 1) ** -1.1 for i in range(users)])
    sizes = np.maximum(1, np.floor(w / w.sum() * n)).astype(int)
    sizes[0] += n - int(sizes.sum())
    return [int(s) for s in sizes]


def build(url: str, n: int, users: int) -> tuple[object, StructuredEmbedder, list[int], dict]:

    rng = random.Random(7)
    sizes = user_sizes(n, users)
    owner = [u for u, s in enumerate(sizes) for _ in range(s)]
    corpus = make_corpus(n)
    for i, d in enumerate(corpus):
        u = owner[i]
        d["occurred_at"] = END - rng.random() * 365 * DAY
        d["metadata"] = {
            **d.get("metadata", {}),
            "user_id": f"u{u}",
            "session_id": f"u{u}:s{i // 20}",
            **{f"g{m}": i % m for m in (10000, 1000, 100, 10, 2)},
        }
    rng.shuffle(corpus)  # users' memories interleaved, as many writers would leave them
    emb = StructuredEmbedder()
    mem, out = bulk_load(url, corpus, emb)
    return mem, emb, sizes, out


def measure(mem, emb, queries: list[str], cases: list[tuple[dict, dict | None]]) -> dict:  # type: ignore[no-untyped-def]
    """Hybrid latency over ``cases`` (request fields, the equivalent metadata filter), cycling the
    queries; the dense leg's recall@10 against exact over the same rows; the plans that ran."""
    from hybridmem.filters import parse_filter

    st = mem.store
    lat, dense_ms, rec, plans = [], [], [], {}
    for i, (fields, flt_spec) in enumerate(cases):
        q = queries[i % len(queries)]
        t = time.perf_counter()
        r = mem.search({"search_text": q, "top_k": 10, "mode": "hybrid", **fields})
        lat.append((time.perf_counter() - t) * 1000)
        dense_ms.append(r.legs["dense"].took_ms)
        plan = (r.legs["dense"].plan or "none").split(":")[0]
        plans[plan] = plans.get(plan, 0) + 1
        if flt_spec is None:  # a time range: no metadata filter to compare the leg against
            continue
        flt = parse_filter(flt_spec)
        qv = emb.embed_query(q)
        exact = {x for x, _ in st.search_dense("default", qv, flt, 10, plan="exact")}
        got = {x for x, _ in st.search_dense("default", qv, flt, 10)}
        rec.append(len(got & exact) / max(1, len(exact)))
    recall = round(float(np.mean(rec)), 3) if rec else None
    return {**summary(lat), "dense_leg": summary(dense_ms), "recall_at_10": recall, "plans": plans}


def run(mem, emb, sizes: list[int], nq: int) -> dict:  # type: ignore[no-untyped-def]
    queries = make_queries(nq + 10)
    for q in queries[:10]:
        mem.search(q, mode="hybrid", top_k=10)
    queries = queries[10:]
    classes = {
        "heaviest 5 users": list(range(5)),
        "users ranked 20-100": list(range(20, 100)),
        "median users": list(range(len(sizes) // 2 - 40, len(sizes) // 2 + 40)),
    }
    month = [END - 30 * DAY, END]
    out: dict = {"classes": {}}
    for name, us in classes.items():
        scoped = [({"user_id": f"u{us[i % len(us)]}"}, {"user_id": f"u{us[i % len(us)]}"}) for i in range(nq)]
        timed = [({**f, "time_range": {"from": month[0], "to": month[1]}}, None) for f, _ in scoped]
        out["classes"][name] = {
            "memories_per_user": {"min": min(sizes[u] for u in us), "max": max(sizes[u] for u in us)},
            "user": measure(mem, emb, queries, scoped),
            "user_and_last_30_days": measure(mem, emb, queries, timed),
        }
        print(name, json.dumps(out["classes"][name]), file=sys.stderr, flush=True)
    out["filters"] = {}
    for label, spec in FILTERS.items():
        out["filters"][label] = measure(mem, emb, queries, [({"metadata_filter": spec}, spec)] * nq)
        print(label, json.dumps(out["filters"][label]), file=sys.stderr, flush=True)
    lat = []
    for q in queries:
        t = time.perf_counter()
        mem.search(q, mode="hybrid", top_k=10)
        lat.append((time.perf_counter() - t) * 1000)
    out["unfiltered"] = summary(lat)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--users", type=int, default=2_000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--pg-url", default=None, help="admin URL of a server with pgvector (a database is created)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "pg_users.json"))
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hm-pgusers-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    srv = None
    t0 = time.perf_counter()
    try:
        admin = a.pg_url
        if admin is None:
            admin, srv = start_server(work / "pg")
        url = fresh_database(admin, "hm_users")
        mem, emb, sizes, built = build(url, a.n, a.users)
        print("built", built, file=sys.stderr, flush=True)
        data = {
            "machine": {"cores": os.cpu_count(), "loadavg": os.getloadavg()},
            "postgres": pg_settings(url),
            "n": a.n,
            "users": a.users,
            "largest_users": sizes[:5],
            "median_user": sorted(sizes)[len(sizes) // 2],
            "users_under_100": sum(1 for s in sizes if s < 100),
            "build": built,
            "results": run(mem, emb, sizes, a.queries),
            "targets": TARGETS,
        }
        data["wall_s"] = round(time.perf_counter() - t0, 1)
        mem.close()
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(data, indent=1))
        print(json.dumps({k: data[k] for k in ("n", "users", "largest_users", "median_user", "wall_s")}))
    finally:
        if srv is not None:
            srv.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
