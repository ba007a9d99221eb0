"""Pseudo-relevance feedback for LoCoMo, measured and not shipped (issue 17's Recall@10): the terms
of the fused top few turns that the question lacks, weighted by their idf in the conversation, are
added to the question for a second BM25 search, fused as one more RRF leg of weight w (RM3's idea,
Lavrenko & Croft 2001, as one leg). Also Rocchio on the dense side (the question's vector plus the
mean of the top turns'). Outside the product, on locomo_context.py's plain BM25 and exact e5 cosine.

    python bench/locomo_feedback.py --cache-dir DIR      # DIR: the eval harness's e5 cache

nDCG@10 by category and overall Recall@10 of the evidence turns; ``rrf`` is BM25 + dense alone.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

import locomo_context as L


def wrrf(lists: list[tuple[float, list[str]]], k: int = 60) -> list[str]:
    s: Counter = Counter()
    for w, ranked in lists:
        for r, i in enumerate(ranked[:100]):
            s[i] += w / (k + r + 1)
    return sorted(s, key=lambda i: (-s[i], i))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache-dir", type=Path, required=True)
    a = ap.parse_args()
    d = L.load_locomo(L.DATA)
    conv: dict[str, list[str]] = defaultdict(list)
    for doc in d["docs"]:
        conv[doc["metadata"]["user_id"]].append(doc["id"])
    own = {x["id"]: L.tokenize(x["text"], "en") for x in d["docs"]}
    df = {u: Counter(t for i in ids for t in set(own[i])) for u, ids in conv.items()}
    bm = L.variants(d["docs"])["last 8"]
    vc, _, vq = L.dense(d["docs"], d["queries"], a.cache_dir)
    res: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for qid, text in d["queries"].items():
        u = d["scopes"][qid]["user_id"]
        ids, rel, cat = conv[u], d["qrels"][qid], d["categories"][qid]
        qt = L.query_tokens(text)
        sparse = L.bm25(ids, *bm, qt)
        dense = sorted(ids, key=lambda i: -float(vc[i] @ vq[qid]))
        base = L.rrf(sparse, dense)
        runs = {"rrf": base}
        for fb, nt, w in ((2, 10, 1.0), (3, 10, 0.5), (3, 10, 1.0), (3, 10, 1.5), (3, 20, 1.0), (5, 20, 1.0)):
            gain: Counter = Counter()
            for i in base[:fb]:
                for t in set(own[i]) - set(qt):
                    gain[t] += math.log(len(ids) / df[u][t])
            leg = L.bm25(ids, *bm, qt + sorted(gain, key=lambda t: (-gain[t], t))[:nt])  # ties: by term
            runs[f"bm25 feedback top{fb} +{nt} w{w}"] = wrrf([(1, sparse), (1, dense), (w, leg)])
        for fb, alpha in ((3, 0.5), (3, 1.0), (5, 0.5)):
            qv = vq[qid] + alpha * np.mean([vc[i] for i in base[:fb]], axis=0)
            runs[f"rocchio top{fb} a{alpha}"] = L.rrf(sparse, sorted(ids, key=lambda i: -float(vc[i] @ qv)))
        for name, ranked in runs.items():
            for c in (cat, "all"):
                res[name][c].append((L.ndcg(ranked, rel), len(set(ranked[:10]) & set(rel)) / len(rel)))
    print("nDCG@10".ljust(30), *[c[:10].rjust(11) for c in L.CATS], "  R@10")
    for name, by in res.items():
        print(
            name.ljust(30),
            *[f"{np.mean([x[0] for x in by[c]]):11.3f}" for c in L.CATS],
            f"{np.mean([x[1] for x in by['all']]):6.3f}",
        )


if __name__ == "__main__":
    main()
