"""A speaker leg for LoCoMo, measured and not shipped: when a question names exactly one speaker of
its conversation ("When did Caroline go to ..."), that speaker's turns are searched again (the same
hybrid query with ``metadata_filter: {"speaker": name}``) and fused into the product's ranking as one
more RRF leg of weight w. docs/agent-memory.md cites it.

    python bench/locomo_speaker.py --cache-dir DIR [--fusion adaptive] [--weights 0.05,0.1,0.5]

Both lists are the product's top 100 (``Memory.search`` on the eval harness's cached index, e5);
nDCG@10 / Recall@10 of the evidence turns by category; w = 0 is the product's ranking itself.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from hybridmem.eval.datasets import load_dataset  # noqa: E402
from hybridmem.eval.harness import EvalConfig, open_index  # noqa: E402
from hybridmem.eval.metrics import per_query  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "agentmem" / "locomo" / "locomo-shared.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", type=Path, default=ROOT / ".hybridmem" / "eval-cache")
    ap.add_argument("--fusion", default="adaptive")
    ap.add_argument("--weights", default="0.05,0.1,0.2,0.5")
    args = ap.parse_args()
    ds = load_dataset(str(DATA))
    mem, _ = open_index(ds, EvalConfig(cache_dir=args.cache_dir), True)
    speakers: dict[str, set[str]] = defaultdict(set)
    for d in ds.docs:
        speakers[d["metadata"]["user_id"]].add(d["metadata"]["speaker"])
    weights = [0.0, *(float(w) for w in args.weights.split(","))]
    scores: dict[float, dict[str, list[tuple[float, float]]]] = {w: defaultdict(list) for w in weights}
    named_one = 0
    try:
        for qid, text in ds.queries.items():
            scope = ds.scopes.get(qid, {})
            req = {
                "query_id": qid,
                "search_text": text,
                "top_k": 100,
                "mode": "hybrid",
                **scope,
                "hybrid_params": {"time_weight": 1.0, "fusion": args.fusion},
            }
            ranked = [r.doc_id for r in mem.search(req).results]
            named = [s for s in speakers[scope["user_id"]] if re.search(rf"\b{re.escape(s)}\b", text)]
            leg: list[str] = []
            if len(named) == 1:
                named_one += 1
                leg = [r.doc_id for r in mem.search({**req, "metadata_filter": {"speaker": named[0]}}).results]
            for w in weights:
                order = ranked
                if w > 0 and leg:
                    s: Counter[str] = Counter()
                    for i, d in enumerate(ranked):
                        s[d] += 1 / (61 + i)
                    for i, d in enumerate(leg):
                        s[d] += w / (61 + i)
                    order = sorted(s, key=lambda d: (-s[d], d))
                m = per_query(order, ds.qrels[qid])
                for c in ("all", ds.categories.get(qid) or "?"):
                    scores[w][c].append((m["ndcg@10"], m["recall@10"]))
    finally:
        mem.close()
    print(f"{len(ds.queries)} questions, {named_one} name exactly one speaker; nDCG@10 / Recall@10")
    for w, by in scores.items():
        print(
            f"w {w:<5g}"
            + " ".join(
                f" {c}: {sum(n for n, _ in v) / len(v):.3f}/{sum(r for _, r in v) / len(v):.3f}" for c, v in by.items()
            )
        )


if __name__ == "__main__":
    main()
