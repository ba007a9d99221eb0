"""Probe (issue 42, tried and not kept): dense pseudo-relevance feedback (Rocchio) as a third fused
leg. The question's vector is moved toward the mean of its top m dense chunks (weight beta, both
unit vectors), searched again, and fused by RRF (k = 60) with BM25 (at the language-aware weight
the product gives it for that question) and dense. The dense legs are exact cosine in numpy over the
small shared corpora, BM25 comes from ``Memory.search``, the product's own hybrid is beside them.
nDCG@10 per variant; paired randomization p of each fused variant against dense.

    python -m bench prf_probe [SET,SET,...]   # default: en2de, HotpotQA-100, en2zh, XQuAD-de, demo

Needs the e5 embeddings cached (``python -m bench precompute e5 SET``; the demo embeds itself).
Writes bench/results/prf-probe.json.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import numpy as np

from hybridmem.eval.datasets import load_dataset
from hybridmem.eval.index import open_index
from hybridmem.eval.metrics import paired_test, per_query
from hybridmem.eval.modes import EvalConfig
from hybridmem.eval.runner import search_request

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = "xquad-en2de,hotpotqa-hipporag-train100,xquad-en2zh,xquad-de,demo"
K = 60
#: (seeds m, weight beta) tried
SETTINGS = ((1, 0.5), (3, 0.5), (3, 1.0), (5, 0.5))


def _rrf(lists: list[list[str]], weights: list[float]) -> list[str]:
    score: dict[str, float] = {}
    for ranked, w in zip(lists, weights):
        for r, c in enumerate(ranked, 1):
            score[c] = score.get(c, 0.0) + w / (K + r)
    return sorted(score, key=lambda c: -score[c])


def _docs(chunks: list[str], doc_of: dict[str, str]) -> list[str]:
    return list(dict.fromkeys(doc_of[c] for c in chunks))


def _moved(q: np.ndarray, seeds: np.ndarray, beta: float) -> np.ndarray:
    centre = seeds.mean(axis=0)
    out = q + beta * centre / np.linalg.norm(centre)
    return out / np.linalg.norm(out)


def probe(name: str, cfg: EvalConfig) -> dict[str, Any]:
    ds = load_dataset(name if name == "demo" else str(ROOT.parent / "shared" / "data" / "beir" / name))
    mem, info = open_index(ds, cfg, need_vectors=True)
    rows = (
        sqlite3.connect(Path(info["path"]) / "memory.db").execute("SELECT id, chunk_id, doc_id FROM chunks").fetchall()
    )
    chunk_of = {r[0]: r[1] for r in rows}
    doc_of = {r[1]: r[2] for r in rows}
    got, mat = mem.store.vectors_for([r[0] for r in rows], mem.namespace)
    order = [chunk_of[r] for r in got]
    vecs = np.asarray(mat, dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    scores: dict[str, dict[str, float]] = {}

    def add(variant: str, qid: str, chunks: list[str]) -> None:
        scores.setdefault(variant, {})[qid] = per_query(_docs(chunks, doc_of), ds.qrels[qid])["ndcg@10"]

    for qid in ds.queries:
        hybrid = mem.search(search_request(ds, qid, "hybrid", 10))
        w_bm25 = hybrid.leg_weights.get("bm25", 1.0)
        bm25 = [r.chunk_id for r in mem.search(search_request(ds, qid, "bm25", 100)).results]
        q = np.asarray(mem.embedders.vector(ds.queries[qid]), dtype=np.float32)
        top = np.argsort(-(vecs @ q))[:100]
        dense = [order[i] for i in top]
        add("bm25", qid, bm25)
        add("dense", qid, dense)
        add("hybrid (product)", qid, [r.chunk_id for r in hybrid.results])
        add("rrf, language-aware", qid, _rrf([bm25, dense], [w_bm25, 1.0]))
        for m, beta in SETTINGS:
            prf = [order[i] for i in np.argsort(-(vecs @ _moved(q, vecs[top[:m]], beta)))[:100]]
            add(f"prf m={m} beta={beta}", qid, prf)
            add(f"rrf + prf m={m} beta={beta}", qid, _rrf([bm25, dense, prf], [w_bm25, 1.0, 1.0]))
        seeds = [order.index(c) for c in _rrf([bm25, dense], [w_bm25, 1.0])[:3]]
        prf = [order[i] for i in np.argsort(-(vecs @ _moved(q, vecs[seeds], 0.5)))[:100]]
        add("rrf + prf from the fused top 3", qid, _rrf([bm25, dense, prf], [w_bm25, 1.0, 1.0]))
    mem.close()
    qids = list(ds.queries)
    out: dict[str, Any] = {v: round(sum(s.values()) / len(qids), 4) for v, s in scores.items()}
    dense_scores = [scores["dense"][q] for q in qids]
    out["p_vs_dense"] = {
        v: round(paired_test([s[q] for q in qids], dense_scores)["p_randomization"], 3)
        for v, s in scores.items()
        if v.startswith("rrf +")
    }
    return out


def main() -> None:
    sets = (sys.argv[1] if len(sys.argv) > 1 else DEFAULT).split(",")
    cfg = EvalConfig(cache_dir=ROOT / ".bench-cache")
    summary = {}
    for name in sets:
        summary[name] = probe(name, cfg)
        print(name, json.dumps(summary[name], indent=1), flush=True)
    (ROOT / "bench" / "results" / "prf-probe.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
