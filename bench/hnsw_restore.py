"""Cold start of the dense leg: building the HNSW graph vs restoring the saved one (issue 18).

    python -m bench hnsw_restore                 # 100,000 vectors of 384 dimensions
    python -m bench hnsw_restore --n 20000 --changes 0.05

One process builds the graph of ``--n`` random unit vectors (``DenseIndex``, as a store's first
query does), which saves it (``retrieve/hnsw_file.py``); a second ``DenseIndex`` over the same
vectors, with ``--changes`` of them replaced by new rowids (writes the saved graph has not seen),
restores it instead, three ways: through the vector log (the saved graph says which version it
holds; only the rowids the log names are redone), as it is (no write since: the first process's
vectors), and comparing every vector (a file without a version, or a log that no longer reaches
it). A small stand-in for the store's vector log gives the marks and changes. Printed: build s,
save s (file size), each restore's s, the ratios, and recall@10 against exact search on 200
queries. Results: ``bench/results/hnsw-restore.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from hybridmem.retrieve.dense import DenseIndex  # noqa: E402
from hybridmem.retrieve.hnsw_file import HnswFile  # noqa: E402


def unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def recall(idx: DenseIndex, matrix: np.ndarray, rowids: np.ndarray, queries: np.ndarray) -> float:
    hits = 0
    for q in queries:
        exact = set(rowids[np.argsort(-(matrix @ q))[:10]].tolist())
        hits += len(exact & {r for r, _ in idx.search(q, 10)})
    return round(hits / (10 * len(queries)), 4)


def timed_graph(saved: HnswFile, rowids: np.ndarray, matrix: np.ndarray, version: int = 1) -> tuple[DenseIndex, float]:
    idx = DenseIndex(matrix.shape[1], exact_threshold=1, saved=saved)
    idx.load(version, rowids, matrix)
    t = time.perf_counter()
    assert idx.wait_ready(timeout=None) and idx.hnsw_ready
    return idx, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--changes", type=float, default=0.01, help="share of vectors replaced between the two")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "hnsw-restore.json"))
    a = ap.parse_args()
    rng = np.random.default_rng(7)
    matrix = unit(rng, a.n, a.dim)
    rowids = np.arange(1, a.n + 1, dtype=np.int64)
    queries = unit(rng, 200, a.dim)
    k = int(a.n * a.changes)
    # writes the saved graph has not seen (vector version 1 -> 2): some rows deleted, as many new ones
    rowids2, matrix2 = rowids.copy(), matrix.copy()
    rowids2[:k] = np.arange(a.n + 1, a.n + 1 + k)
    matrix2[:k] = unit(rng, k, a.dim)
    marks = {1: "m1", 2: "m2"}
    log = {1: [(2, rowids2[:k], rowids[:k])], 2: []}
    describe = {"embedder": "random", "dim": a.dim}
    with tempfile.TemporaryDirectory() as d:
        saved = HnswFile(Path(d), "bench", describe, mark_of=marks.get, changes_since=log.get)
        built, build_s = timed_graph(saved, rowids, matrix)  # builds, then saves before it is used
        size = saved.graph.stat().st_size
        t = time.perf_counter()
        saved.save(built._hnsw, 1)  # type: ignore[arg-type]  # a second save, timed alone
        save_s = time.perf_counter() - t
        restored, restore_log_s = timed_graph(saved, rowids2, matrix2, version=2)
        assert restored.restored and saved.how == "log", saved.how
        same, restore_same_s = timed_graph(saved, rowids, matrix, version=1)
        assert same.restored and saved.how == "unchanged", saved.how
        unversioned = HnswFile(Path(d), "bench", describe)  # no log to follow: every vector compared
        compared, restore_s = timed_graph(unversioned, rowids2, matrix2, version=2)
        assert compared.restored and unversioned.how == "compared", unversioned.how
        out = {
            "n": a.n,
            "dim": a.dim,
            "changed_between": k,
            "build_s": round(build_s, 2),
            "save_s": round(save_s, 2),
            "file_mb": round(size / 2**20, 1),
            "restore_s": round(restore_s, 2),
            "restore_log_s": round(restore_log_s, 2),
            "restore_unchanged_s": round(restore_same_s, 2),
            "build/restore": round(build_s / restore_s, 1),
            "build/restore_log": round(build_s / restore_log_s, 1),
            "build/restore_unchanged": round(build_s / restore_same_s, 1),
            "recall@10_built": recall(built, matrix, rowids, queries),
            "recall@10_restored": recall(compared, matrix2, rowids2, queries),
            "recall@10_restored_log": recall(restored, matrix2, rowids2, queries),
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d"),
        }
        for idx in (built, restored, same, compared):
            idx.close()
    print(json.dumps(out, indent=1))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
