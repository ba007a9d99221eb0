"""Hybrid while vectors are pending: nDCG@10 when only a share of the chunks has a vector (issue 15).

After a plain ``ingest`` the dense leg sees only the chunks embedded so far. This builds the
dataset's memory once with every vector (the eval cache), then for each coverage c keeps the
vectors of a random c of the chunks (the others go back to the embedding queue, as after an
ingest) and scores BM25 alone and hybrid under every fusion policy of
``hybridmem.retrieve.search.Searcher._dense_scale`` (rank | weight | drop | none), averaged over
seeds. At c = 100% every policy is today's hybrid.

    python bench/partial_coverage.py demo --embedder e5
    python bench/partial_coverage.py ../shared/data/beir/scifact --embedder use
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from hybridmem import Memory
from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.harness import EvalConfig, open_index
from hybridmem.eval.metrics import per_query

POLICIES = ("none", "rank", "weight", "drop", "impute", "impute-rank")
COVERAGES = (0.0, 0.01, 0.1, 0.5, 0.9, 1.0)


def _keep_share(db: Path, share: float, seed: int) -> None:
    """Delete the vectors of all but a random ``share`` of the chunks and queue them again."""
    con = sqlite3.connect(db)
    rows = [r[0] for r in con.execute("SELECT chunk_rowid FROM vectors ORDER BY chunk_rowid")]
    drop = random.Random(seed).sample(rows, len(rows) - round(share * len(rows)))
    with con:
        con.executemany("DELETE FROM vectors WHERE chunk_rowid=?", [(r,) for r in drop])
        con.executemany("INSERT INTO embed_queue VALUES (?, '2026-01-01T00:00:00Z')", [(r,) for r in drop])
        con.execute("UPDATE namespaces SET vec_version = vec_version + 1")
        # the store keeps each namespace's queue count (schema 10): counted afresh, as a write would
        con.execute(
            "UPDATE namespaces SET n_pending = (SELECT count(*) FROM embed_queue q "
            "JOIN chunks c ON c.id = q.chunk_rowid WHERE c.ns_id = namespaces.id)"
        )
    con.close()


def _score(mem: Memory, ds: Any, mode: str) -> float:
    out = []
    for qid, text in ds.queries.items():
        req: dict[str, Any] = {"query_id": qid, "search_text": text, "top_k": 10, "mode": mode}
        if qid in ds.filters:
            req["metadata_filter"] = ds.filters[qid]
        ranked = list(dict.fromkeys(r.doc_id for r in mem.search(req).results))
        out.append(per_query(ranked, ds.qrels[qid])["ndcg@10"])
    return float(np.mean(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--embedder", default="e5")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--cache-dir", default=str(Path(".hybridmem") / "eval-cache"))
    args = ap.parse_args()
    ds = load_dataset(args.dataset)
    cfg = EvalConfig(embedder=args.embedder, cache_dir=Path(args.cache_dir))
    full, info = open_index(ds, cfg, need_vectors=True)
    embedder = full.embedder
    full.close()
    src = Path(info["path"]) / "memory.db"
    print(f"{ds.name}: {len(ds.queries)} queries, {info['chunks']} chunks, embedder {args.embedder}")
    print(f"{'coverage':>8} {'bm25':>7} " + " ".join(f"{p:>7}" for p in POLICIES))
    work = Path(tempfile.mkdtemp(prefix="hybridmem-coverage-"))
    try:
        for c in COVERAGES:
            seeds = range(1 if c in (0.0, 1.0) else args.seeds)
            cells: dict[str, list[float]] = {p: [] for p in ("bm25", *POLICIES)}
            for seed in seeds:
                db = work / f"c{c}-{seed}.db"
                shutil.copy(src, db)
                _keep_share(db, c, seed)
                with Memory(db, embedder=embedder, chunk_size=ds.chunk_size, auto_embed=False) as mem:
                    cells["bm25"].append(_score(mem, ds, "bm25"))
                    for p in POLICIES:
                        mem.searcher.partial_dense = p
                        cells[p].append(_score(mem, ds, "hybrid"))
            print(
                f"{c:8.0%} {np.mean(cells['bm25']):7.4f} " + " ".join(f"{np.mean(cells[p]):7.4f}" for p in POLICIES),
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
