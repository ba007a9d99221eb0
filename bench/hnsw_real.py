"""HNSW (usearch) recall@10 and latency vs exact search on *real* e5 vectors from the bench cache.

    python bench/hnsw_real.py          # needs .bench-cache/embeddings.db (bench/precompute.py fills it)

Queries are cached vectors plus small Gaussian noise (σ = 0.03, re-normalised), so each has true
neighbours; i.i.d. random vectors (bench/latency.py) are the known worst case for graph indexes.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

CACHE = Path(__file__).resolve().parents[1] / ".bench-cache" / "embeddings.db"


def main() -> None:
    from usearch.index import Index

    if not CACHE.exists():
        sys.exit(f"no embedding cache at {CACHE}: run bench/precompute.py first")
    db = sqlite3.connect(CACHE)
    v = np.stack([np.frombuffer(b, np.float32) for (b,) in db.execute("SELECT vec FROM emb")])
    rng = np.random.default_rng(0)
    q = v[rng.choice(len(v), 300, replace=False)] + rng.normal(0, 0.03, (300, v.shape[1])).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    t = time.perf_counter()
    truth = [set(np.argsort(-(v @ x))[:10].tolist()) for x in q]
    exact_ms = (time.perf_counter() - t) / len(q) * 1000
    idx = Index(ndim=v.shape[1], metric="ip", dtype="f32", connectivity=16, expansion_add=128)
    t = time.perf_counter()
    idx.add(np.arange(len(v), dtype=np.uint64), v, threads=2)
    print(f"{len(v)} real e5 vectors, HNSW build {time.perf_counter() - t:.1f} s, exact {exact_ms:.2f} ms/query")
    for ef in (64, 128, 256, 512):
        idx.expansion_search = ef
        t = time.perf_counter()
        rec = [len(set(idx.search(x, 10).keys.tolist()) & tr) / 10 for x, tr in zip(q, truth)]
        ms = (time.perf_counter() - t) / len(q) * 1000
        print(f"ef {ef:4d}: recall@10 {np.mean(rec):.4f} (min {min(rec):.1f}), {ms:.3f} ms/query")
    filtered(v, q)


def filtered(v: np.ndarray, q: np.ndarray) -> None:
    """DenseIndex with a filter: broad filters over-fetch from the graph, the rest search exactly."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from hybridmem.retrieve.dense import DenseIndex

    ids = np.arange(1, len(v) + 1)
    exact = DenseIndex(v.shape[1], exact_threshold=10**9)
    exact.load(1, ids, v)
    graph = DenseIndex(v.shape[1], exact_threshold=0)
    graph.load(1, ids, v)
    graph.search(q[0], 1)  # starts the background build
    while not graph.hnsw_ready:
        time.sleep(0.1)
    rng = np.random.default_rng(1)
    print("filtered (random subsets), DenseIndex.search top 10 vs exact over the allowed rows:")
    for share in (0.5, 0.33, 0.1, 0.05):
        allowed = np.sort(rng.choice(ids, int(len(ids) * share), replace=False))
        rec, t_graph, t_exact = [], 0.0, 0.0
        for x in q:
            t = time.perf_counter()
            got = graph.search(x, 20, allowed)
            t_graph += time.perf_counter() - t
            t = time.perf_counter()
            want = exact.search(x, 20, allowed)
            t_exact += time.perf_counter() - t
            rec.append(len({r for r, _ in got[:10]} & {r for r, _ in want[:10]}) / 10)
        print(
            f"  share {share:4.2f} ({len(allowed)} rows): recall@10 {np.mean(rec):.4f} (min {min(rec):.1f}), "
            f"{t_graph / len(q) * 1000:.3f} ms/query (exact {t_exact / len(q) * 1000:.3f} ms)"
        )


if __name__ == "__main__":
    main()
