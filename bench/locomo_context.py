"""How much of the turn before a LoCoMo message BM25 should index, and what the dense leg gains from
embedding a turn both with and without that context. Outside the product: a plain BM25 over each
conversation (the product's tokenizer, k1 and b) and exact cosine over e5 vectors, so variants the
store does not offer can be compared; each question searched in its own conversation, nDCG@10 of its
evidence turns by category (docs/agent-memory.md cites it).

    python bench/locomo_context.py                  # BM25: no context, whole previous turn, its last N tokens
    python bench/locomo_context.py --dense          # + e5 (cached in --cache-dir; ~4 min per 3,435 texts uncached)
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from hybridmem import config  # noqa: E402
from hybridmem.eval.conversations import load_locomo  # noqa: E402
from hybridmem.text.tokenize import query_tokens, tokenize  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "agentmem" / "locomo" / "locomo-shared.json"
CATS = ["all", "single-hop", "multi-hop", "temporal", "open-domain", "adversarial"]


def bm25(ids: list[str], tf: dict[str, Counter], dl: dict[str, float], q: list[str]) -> list[str]:
    n = len(ids)
    avg = sum(dl[i] for i in ids) / n
    df = Counter(t for i in ids for t in tf[i])
    k1, b = config.BM25_K1, config.BM25_B
    scores = {}
    for i in ids:
        s = 0.0
        for t in set(q):
            f = tf[i].get(t, 0)
            if f:
                idf = max(math.log((n - df[t] + 0.5) / (df[t] + 0.5)), config.BM25_IDF_FLOOR)
                s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * dl[i] / avg))
        if s > 0:
            scores[i] = s
    return sorted(scores, key=lambda i: (-scores[i], i))


def ndcg(ranked: list[str], rel: dict[str, int], k: int = 10) -> float:
    dcg = sum(1 / math.log2(r + 2) for r, i in enumerate(ranked[:k]) if i in rel)
    return dcg / sum(1 / math.log2(r + 2) for r in range(min(len(rel), k)))


def rrf(*lists: list[str], k: int = 60) -> list[str]:
    s: Counter = Counter()
    for ranked in lists:
        for r, i in enumerate(ranked[:100]):
            s[i] += 1 / (k + r + 1)
    return sorted(s, key=lambda i: (-s[i], i))


def variants(docs: list[dict]) -> dict[str, tuple[dict, dict]]:
    own = {d["id"]: tokenize(d["text"], "en") for d in docs}
    ctx = {d["id"]: tokenize(d["context"], "en") if d["context"] else [] for d in docs}
    out = {}
    for name, tail in [("none", 0), ("whole turn", None), *[(f"last {n}", n) for n in (4, 6, 8, 10, 16, 24)]]:
        tf, dl = {}, {}
        for i, toks in own.items():
            c = ctx[i] if tail is None else (ctx[i][-tail:] if tail else [])
            tf[i], dl[i] = Counter(c + toks), float(len(c) + len(toks))
        out[name] = (tf, dl)
    return out


def dense(docs: list[dict], queries: dict[str, str], cache: Path) -> tuple[dict, dict, dict]:
    from hybridmem.embed import create_embedder
    from hybridmem.embed.cache import CachedEmbedder

    emb = CachedEmbedder(create_embedder("e5"), cache / "embeddings.db")
    with_ctx = emb.embed_documents([f"{d['context']}\n{d['text']}" if d["context"] else d["text"] for d in docs])
    alone = emb.embed_documents([d["text"] for d in docs])
    q = {qid: np.asarray(emb.embed_query(t)) for qid, t in queries.items()}
    ids = [d["id"] for d in docs]
    return dict(zip(ids, np.asarray(with_ctx))), dict(zip(ids, np.asarray(alone))), q


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--dense", action="store_true", help="also the e5 leg: with context, alone, summed, fused")
    ap.add_argument("--cache-dir", type=Path, default=ROOT / ".hybridmem" / "eval-cache")
    a = ap.parse_args()
    d = load_locomo(a.data)
    conv = defaultdict(list)
    for doc in d["docs"]:
        conv[doc["metadata"]["user_id"]].append(doc["id"])
    bm = variants(d["docs"])
    vec = dense(d["docs"], d["queries"], a.cache_dir) if a.dense else None
    res: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for qid, text in d["queries"].items():
        ids, rel, cat = conv[d["scopes"][qid]["user_id"]], d["qrels"][qid], d["categories"][qid]
        qt = query_tokens(text)
        runs = {f"bm25, context: {n}": bm25(ids, *v, qt) for n, v in bm.items()}
        if vec is not None:
            vc, vo, vq = vec
            sc = {i: float(vc[i] @ vq[qid]) for i in ids}
            so = {i: float(vo[i] @ vq[qid]) for i in ids}
            runs["dense, with context"] = sorted(ids, key=lambda i: -sc[i])
            runs["dense, with + without (sum)"] = sorted(ids, key=lambda i: -(sc[i] + so[i]))
            tail = runs[f"bm25, context: last {8}"]
            runs["rrf(bm25 last 8, dense with context)"] = rrf(tail, runs["dense, with context"])
            runs["rrf(bm25 last 8, dense sum)"] = rrf(tail, runs["dense, with + without (sum)"])
        for name, ranked in runs.items():
            v = ndcg(ranked, rel)
            res[name][cat].append(v)
            res[name]["all"].append(v)
    print("nDCG@10".ljust(40), *[c.rjust(12) for c in CATS])
    for name, by in res.items():
        print(name.ljust(40), *[f"{sum(by[c]) / len(by[c]):12.3f}" for c in CATS])


if __name__ == "__main__":
    main()
