"""nDCG@10 / Recall@10 / MRR@10 of bm25, vector and hybrid on the shared BEIR-layout sets.

    python bench/beir.py scifact piaf-fr xquad-de xquad-zh [--embedder e5] [--split test]

Documents are indexed whole (``title\\n\\ntext``, no chunking, as BEIR scores them); vectors come
from the bench embedding cache (``bench/precompute.py`` fills it; misses are embedded on the fly).
Real weights only: the default embedder is the bundled multilingual-e5-small.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from hybridmem import Memory  # noqa: E402
from hybridmem.embed import create_embedder  # noqa: E402
from hybridmem.embed.cache import CachedEmbedder  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "beir"
CACHE = ROOT / ".bench-cache" / "embeddings.db"

MODES = {
    "bm25": {"mode": "bm25"},
    "vector": {"mode": "vector"},
    "hybrid": {"mode": "hybrid"},
    "hybrid-2leg": {"mode": "hybrid", "hybrid_params": {"exact_weight": 0}},
}


def load(name: str, split: str):
    corpus = [json.loads(line) for line in open(DATA / name / "corpus.jsonl", encoding="utf-8")]
    queries = {q["_id"]: q["text"] for q in map(json.loads, open(DATA / name / "queries.jsonl", encoding="utf-8"))}
    qrels: dict[str, dict[str, int]] = {}
    with open(DATA / name / "qrels" / f"{split}.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            qid, did, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels.setdefault(qid, {})[did] = int(score)
    return corpus, queries, qrels


def ndcg_at(ranked: list[str], rel: dict[str, int], k: int = 10) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def evaluate(name: str, embedder_spec: str, split: str, modes: list[str]) -> dict:
    corpus, queries, qrels = load(name, split)
    emb = CachedEmbedder(create_embedder(embedder_spec), CACHE)
    tmp = tempfile.mkdtemp(prefix=f"beir-{name}-")
    t0 = time.perf_counter()
    mem = Memory(Path(tmp) / "m.db", embedder=emb, chunk_size=None, auto_embed=False)
    docs = []
    for d in corpus:
        title = (d.get("title") or "").strip()
        docs.append({"id": d["_id"], "text": f"{title}\n\n{d['text']}" if title else d["text"]})
    mem.add_documents(docs, batch_size=512)
    t_index = time.perf_counter() - t0
    if any(m != "bm25" for m in modes):
        mem.wait_for_vectors()
    t_embed = time.perf_counter() - t0 - t_index
    out = {"set": name, "split": split, "embedder": emb.name, "docs": len(corpus), "queries": len(qrels),
           "index_s": round(t_index, 1), "embed_s": round(t_embed, 1), "modes": {}}
    for label in modes:
        params = MODES[label]
        nd, rec, mrr, lat = [], [], [], []
        for qid, rel in qrels.items():
            s = time.perf_counter()
            resp = mem.search({"search_text": queries[qid], "top_k": 10, **params})
            lat.append((time.perf_counter() - s) * 1000)
            ranked = [r.doc_id for r in resp.results]
            nd.append(ndcg_at(ranked, rel))
            rec.append(len(set(ranked[:10]) & set(rel)) / len(rel))
            mrr.append(next((1 / i for i, d in enumerate(ranked, 1) if d in rel), 0.0))
        lat.sort()
        out["modes"][label] = {
            "ndcg@10": round(sum(nd) / len(nd), 4),
            "recall@10": round(sum(rec) / len(rec), 4),
            "mrr@10": round(sum(mrr) / len(mrr), 4),
            "p50_ms": round(lat[len(lat) // 2], 2),
        }
        print(f"{name:10s} {label:12s} nDCG@10 {out['modes'][label]['ndcg@10']:.4f}  "
              f"R@10 {out['modes'][label]['recall@10']:.4f}  MRR@10 {out['modes'][label]['mrr@10']:.4f}  "
              f"p50 {out['modes'][label]['p50_ms']:.1f} ms", flush=True)
    mem.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sets", nargs="+")
    ap.add_argument("--embedder", default="e5")
    ap.add_argument("--split", default="test")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {', '.join(MODES)}")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "beir.json"))
    a = ap.parse_args()
    results = [evaluate(s, a.embedder, a.split, a.modes.split(",")) for s in a.sets]
    path = Path(a.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(path.read_text()) if path.exists() else {}
    for r in results:
        key = f"{r['set']}/{r['split']}/{r['embedder']}"
        old.setdefault(key, {**r, "modes": {}})
        old[key] = {**old[key], **{k: v for k, v in r.items() if k != "modes"}, "modes": {**old[key]["modes"], **r["modes"]}}
    path.write_text(json.dumps(old, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
