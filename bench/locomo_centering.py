"""Dense centering measured outside the product (issue 17's recall; docs/agent-memory.md): the dense
leg ranks by d·(q − s·μ), μ the mean turn vector of the question's conversation or of the whole set,
alone and fused with BM25 by RRF (replacing the plain dense leg, or as a third leg); then the same
on the document sets, each over its own mean, with the product's BM25 leg.

    python bench/locomo_centering.py --cache-dir DIR            # DIR: the eval harness's e5 cache
    python bench/locomo_centering.py --cache-dir DIR --documents

LoCoMo: plain BM25 and exact e5 cosine of bench/locomo_context.py, each question in its own
conversation, nDCG@10 by category and Recall@10. Documents: nDCG@10 per share.
"""

from __future__ import annotations

import argparse
import sqlite3
from collections import defaultdict
from pathlib import Path

import numpy as np

import locomo_context as L

SHARES = (0.0, 0.5, 0.75, 1.0)
SETS = ("piaf-fr", "xquad-de", "xquad-zh", "hotpotqa-hipporag-train100")


def locomo(cache: Path) -> None:
    d = L.load_locomo(L.DATA)
    vc, _, vq = L.dense(d["docs"], d["queries"], cache)
    conv: dict[str, list[str]] = defaultdict(list)
    for doc in d["docs"]:
        conv[doc["metadata"]["user_id"]].append(doc["id"])
    mu_all = np.mean(list(vc.values()), axis=0)
    mu = {u: np.mean([vc[i] for i in ids], axis=0) for u, ids in conv.items()}
    print(f"|mean of all turns| {np.linalg.norm(mu_all):.3f}")
    bm = L.variants(d["docs"])["last 8"]
    res: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for qid, text in d["queries"].items():
        u = d["scopes"][qid]["user_id"]
        ids, rel, cat = conv[u], d["qrels"][qid], d["categories"][qid]
        sparse = L.bm25(ids, *bm, L.query_tokens(text))
        m = np.stack([vc[i] for i in ids])
        runs = {}
        for s in SHARES:
            for scope, mean in (("conversation", mu[u]), ("all turns", mu_all)):
                if s == 0 and scope == "all turns":
                    continue
                ranked = [ids[j] for j in np.argsort(-(m @ (vq[qid] - s * mean)), kind="stable")]
                runs[f"dense, {scope} mean x{s}"] = ranked
                runs[f"rrf, {scope} mean x{s}"] = L.rrf(sparse, ranked)
        plain = runs["dense, conversation mean x0.0"]
        runs["rrf, centered as a 3rd leg x0.75"] = L.rrf(sparse, plain, runs["dense, conversation mean x0.75"])
        for name, ranked in runs.items():
            for c in (cat, "all"):
                res[name][c].append((L.ndcg(ranked, rel), len(set(ranked[:10]) & set(rel)) / len(rel)))
    print("nDCG@10".ljust(36), *[c[:10].rjust(11) for c in L.CATS], "  R@10")
    for name, by in sorted(res.items()):
        print(
            name.ljust(36),
            *[f"{np.mean([x[0] for x in by[c]]):11.3f}" for c in L.CATS],
            f"{np.mean([x[1] for x in by['all']]):6.3f}",
        )


def documents(cache: Path) -> None:
    from hybridmem.eval.datasets import load_dataset
    from hybridmem.eval.harness import EvalConfig, open_index

    for name in SETS:
        ds = load_dataset(str(L.ROOT.parent / "shared" / "data" / "beir" / name))
        mem, info = open_index(ds, EvalConfig(cache_dir=cache), need_vectors=True)
        with sqlite3.connect(info["path"] + "/memory.db") as c:
            rows = c.execute("SELECT c.doc_id, v.vec FROM vectors v JOIN chunks c ON c.id = v.chunk_rowid").fetchall()
        docs = [r[0] for r in rows]
        m = np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
        mean = m.mean(axis=0)
        out: dict[float, list[float]] = defaultdict(list)
        for qid, text in ds.queries.items():
            q = np.asarray(mem.embedder.embed_query(text), np.float32)
            hits = mem.search({"search_text": text, "top_k": 100, "mode": "bm25"}).results
            sparse = list(dict.fromkeys(h.doc_id for h in hits))
            for s in SHARES:
                order = np.argsort(-(m @ (q - s * mean)), kind="stable")[:300]
                dense = list(dict.fromkeys(docs[j] for j in order))[:100]
                out[s].append(L.ndcg(L.rrf(sparse, dense), ds.qrels[qid]))
        mem.close()
        print(name.ljust(28), "  ".join(f"x{s}: {np.mean(v):.4f}" for s, v in out.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache-dir", type=Path, required=True)
    ap.add_argument("--documents", action="store_true", help="the document sets instead of LoCoMo")
    a = ap.parse_args()
    documents(a.cache_dir) if a.documents else locomo(a.cache_dir)


if __name__ == "__main__":
    main()
