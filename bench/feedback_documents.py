"""The feedback leg on documents: does pseudo-relevance feedback, shipped for conversation turns
only, help or hurt document sets? Runs the eval harness's ``hybrid`` and ``hybrid+feedback`` on
the shared document sets with the leg let onto documents (``search.is_turn`` answering yes for
every chunk, in this process only), e5 real weights, and prints nDCG@10 / Recall@10 with the
harness's paired randomization p-value of the difference.

    python bench/feedback_documents.py --cache-dir DIR      # DIR: the harness's e5 cache
    python bench/feedback_documents.py --sets xquad-de,hotpotqa-hipporag-train100

About 3-10 minutes a set the first time (embedding), seconds when cached.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "src"))

from hybridmem.eval.datasets import load_dataset  # noqa: E402
from hybridmem.eval.harness import EvalConfig, run_eval  # noqa: E402
from hybridmem.eval.metrics import paired_test  # noqa: E402
from hybridmem.retrieve import search  # noqa: E402

DATA = BENCH.parent.parent / "shared" / "data" / "beir"
SETS = "xquad-de,xquad-zh,piaf-fr,hotpotqa-hipporag-train100"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=SETS)
    ap.add_argument("--cache-dir", type=Path, default=Path(".hybridmem") / "eval-cache")
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "feedback-documents.json")
    a = ap.parse_args()
    search.is_turn = lambda row: True  # type: ignore[assignment]  # the leg on documents, here only
    rows = []
    for name in a.sets.split(","):
        ds = load_dataset(str(DATA / name))
        cfg = EvalConfig(modes=("hybrid", "hybrid+feedback"), embedder="e5", cache_dir=a.cache_dir)
        t = time.perf_counter()
        res = run_eval(ds, cfg, load_split=lambda s, n=name: load_dataset(str(DATA / n), s))
        m = {mode: res["modes"][mode]["metrics"]["all"] for mode in cfg.modes}
        per = {mode: res["modes"][mode]["per_query"] for mode in cfg.modes}
        qids = list(per["hybrid"])
        cmp = paired_test(
            [per["hybrid+feedback"][q]["ndcg@10"] for q in qids], [per["hybrid"][q]["ndcg@10"] for q in qids]
        )
        row = {
            "set": name,
            "queries": len(ds.queries),
            "hybrid_ndcg@10": round(m["hybrid"]["ndcg@10"], 4),
            "feedback_ndcg@10": round(m["hybrid+feedback"]["ndcg@10"], 4),
            "hybrid_recall@10": round(m["hybrid"]["recall@10"], 4),
            "feedback_recall@10": round(m["hybrid+feedback"]["recall@10"], 4),
            "ndcg_diff": round(cmp["mean_diff"], 4),
            "p": cmp["p_randomization"],
            "took_s": round(time.perf_counter() - t, 1),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "runs": rows}, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
