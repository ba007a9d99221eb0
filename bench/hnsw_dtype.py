"""The HNSW graph's vector dtype (``HYBRIDMEM_HNSW_DTYPE`` = f32 | f16 | i8): recall@10 against exact
search on real e5 vectors, the graph's memory, build and query time, side by side in one process.

    python bench/hnsw_dtype.py --cache /path/to/embeddings.db     # an eval or bench embedding cache (e5)
    python bench/hnsw_dtype.py --cache … --synthetic 100000        # + a 100k build of each (memory, restore)

Everything goes through ``DenseIndex`` (the product's dense index): with f16 and i8 the graph proposes
``RESCORE_FACTOR`` × k candidates that are scored again against the float32 matrix, so the scores
are exact cosines and recall is what the compressed graph proposes. Queries are stored vectors plus
small Gaussian noise (σ = 0.03, re-normalised), as in bench/hnsw_real.py. Results:
``bench/results/hnsw-dtype.json``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from hybridmem.retrieve.dense import RESCORE_FACTOR, DenseIndex  # noqa: E402
from hybridmem.retrieve.hnsw_file import HnswFile  # noqa: E402

DTYPES = ("f32", "f16", "i8")


def _ready(idx: DenseIndex) -> float:
    t = time.perf_counter()
    assert idx.wait_ready() and idx.hnsw_ready
    return time.perf_counter() - t


def _noisy(v: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = v[rng.choice(len(v), n, replace=False)] + rng.normal(0, 0.03, (n, v.shape[1])).astype(np.float32)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def _recall(
    idx: DenseIndex, v: np.ndarray, queries: np.ndarray, kth: list[float], allowed: np.ndarray | None
) -> tuple[float, int, float]:
    """Mean recall@10, queries that found none of their ten, p50 ms. A hit counts when its exact score reaches the exact 10th
    best's (``kth``): caches hold some vectors twice (one text under two keys), and any of equal
    vectors is a right answer."""
    lat, rec = [], []
    for q, t in zip(queries, kth):
        s = time.perf_counter()
        got = idx.search(q, 10, allowed)
        lat.append((time.perf_counter() - s) * 1000)
        rec.append(sum(float(v[r] @ q) >= t - 1e-6 for r, _ in got) / 10)
    return round(float(np.mean(rec)), 4), sum(r == 0 for r in rec), round(float(np.median(lat)), 3)


def _kth(v: np.ndarray, rows: np.ndarray, queries: np.ndarray) -> list[float]:
    return [float(np.sort(v[rows] @ q)[-10]) for q in queries]


def real(cache: Path, n_queries: int, ef: int) -> dict:
    db = sqlite3.connect(cache)
    v = np.stack([np.frombuffer(b, np.float32) for (b,) in db.execute("SELECT vec FROM emb WHERE model LIKE 'e5%'")])
    if not len(v):
        sys.exit(f"no e5 vectors in {cache}")
    rowids = np.arange(len(v), dtype=np.int64)
    queries = _noisy(v, n_queries)
    rng = np.random.default_rng(1)
    subsets = {
        "all": None,
        **{f"{s:.0%}": np.sort(rng.choice(len(v), int(len(v) * s), replace=False)) for s in (0.5, 0.2)},
    }
    truth = {name: _kth(v, rowids if allowed is None else allowed, queries) for name, allowed in subsets.items()}
    out: dict = {"vectors": len(v), "dim": v.shape[1], "queries": n_queries, "ef": ef, "dtypes": {}}
    for dt in DTYPES:
        idx = DenseIndex(v.shape[1], exact_threshold=0, hnsw_dtype=dt, ef=ef)
        idx.load(1, rowids, v)
        build = _ready(idx)
        row = {
            "ef": ef,
            "build_s": round(build, 2),
            "graph_bytes_per_vector": round(idx._hnsw.memory_usage / len(v), 1),
        }
        for name, allowed in subsets.items():
            row[f"recall@10 {name}"], row[f"zero-recall {name}"], row[f"p50_ms {name}"] = _recall(
                idx, v, queries, truth[name], allowed
            )
        out["dtypes"][dt] = row
        idx.close()
        print(f"real e5 {dt}: {row}", flush=True)
    base = out["dtypes"]["f32"]["recall@10 all"]
    for dt in DTYPES:
        out["dtypes"][dt]["recall vs f32"] = round(out["dtypes"][dt]["recall@10 all"] / base, 4)
    return out


def synthetic(n: int, dim: int = 384) -> dict:
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(1000, dim)).astype(np.float32)
    v = centers[rng.integers(0, 1000, n)] + rng.normal(0, 0.6, (n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    rowids = np.arange(n, dtype=np.int64)
    queries = _noisy(v, 200, seed=3)
    truth = _kth(v, rowids, queries)
    out: dict = {"vectors": n, "dim": dim, "matrix_mb": round(v.nbytes / 2**20, 1), "dtypes": {}}
    with tempfile.TemporaryDirectory() as d:
        for dt in DTYPES:
            describe = {"embedder": "synthetic", "dim": dim, "dtype": dt}
            idx = DenseIndex(dim, exact_threshold=0, hnsw_dtype=dt, saved=HnswFile(Path(d) / dt, "default", describe))
            idx.load(1, rowids, v)
            build = _ready(idx)
            graph_mb = idx._hnsw.memory_usage / 2**20
            rec, zero, p50 = _recall(idx, v, queries, truth, None)
            idx.close()
            again = DenseIndex(dim, exact_threshold=0, hnsw_dtype=dt, saved=HnswFile(Path(d) / dt, "default", describe))
            again.load(1, rowids, v)
            restore = _ready(again)
            assert again.restored
            again.close()
            file_mb = sum(f.stat().st_size for f in (Path(d) / dt).glob("*.usearch")) / 2**20
            row = {
                "build_s": round(build, 1),
                "restore_s": round(restore, 2),
                "graph_mb": round(graph_mb, 1),
                "file_mb": round(file_mb, 1),
                "graph_mb_at_1m": round(graph_mb * 1_000_000 / n, 0),
                "recall@10": rec,
                "zero-recall queries": zero,
                "p50_ms": p50,
            }
            out["dtypes"][dt] = row
            print(f"synthetic {n} {dt}: {row}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=ROOT / ".bench-cache" / "embeddings.db")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--synthetic", type=int, default=0, help="also build a synthetic index of this size")
    ap.add_argument("--ef", default="128,256", help="expansion_search values for the real vectors")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "hnsw-dtype.json")
    args = ap.parse_args()
    if not args.cache.exists():
        sys.exit(f"no embedding cache at {args.cache}: run hybridmem eval (or bench/precompute.py) first")
    res: dict = {
        "rescore_factor": RESCORE_FACTOR,
        "real_e5": [real(args.cache, args.queries, int(e)) for e in args.ef.split(",")],
    }
    if args.synthetic:
        res["synthetic"] = synthetic(args.synthetic)
    res["date"] = time.strftime("%Y-%m-%d")
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
