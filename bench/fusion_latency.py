"""What each fusion costs a hybrid query at 100k chunks (issue 20: adaptive adds ≤ 0.3 ms to p50).

    python bench/fusion_latency.py [--n 100000] [--queries 500] [--workdir DIR]

The synthetic technical corpus and look-up vectors of ``bench/latency.py`` (no model runs, so the
numbers are the store's and the fusion's). The fusions run interleaved query by query in one process
(``rrf``, ``adaptive``, ``dbsf``, ``combsum``, ``combmnz``), after a warm-up, so drift hits them alike;
p50 / p95 per fusion and the p50 difference to ``rrf``. The adaptive fusion's own work (features
and model on the legs' hits) is also timed alone on captured hits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from hybridmem import Memory  # noqa: E402
from hybridmem.retrieve import search as search_mod  # noqa: E402
from hybridmem.text.tokenize import query_tokens  # noqa: E402
from latency import LookupEmbedder, make_corpus, make_queries, pct  # noqa: E402

FUSIONS = ("rrf", "adaptive", "dbsf", "combsum", "combmnz")


def build(db: Path, n: int) -> None:
    if db.exists():
        return
    t = time.perf_counter()
    corpus = make_corpus(n)
    with Memory(db, embedder=LookupEmbedder(), auto_embed=False, chunk_size=None) as mem:
        for i in range(0, n, 2000):
            mem.add_documents(corpus[i : i + 2000])
        mem.embed_pending()
    print(f"built {n:,} chunks in {time.perf_counter() - t:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--workdir", type=Path, default=None, help="keep the store here (reused when present)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fusion" / "latency-100k.json")
    args = ap.parse_args()
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory()
        args.workdir = Path(tmp.name)
    args.workdir.mkdir(parents=True, exist_ok=True)
    db = args.workdir / f"fusion-{args.n}.db"
    build(db, args.n)
    queries = make_queries(args.queries + 50)
    with Memory(db, embedder=LookupEmbedder(), auto_embed=False) as mem:
        mem.wait_for_indexes()
        t = time.perf_counter()
        mem.search(queries[0])  # loads postings and the dense index
        print(f"indexes ready in {time.perf_counter() - t:.1f} s", flush=True)
        for q in queries[:50]:
            for f in FUSIONS:
                mem.search({"search_text": q, "hybrid_params": {"fusion": f}})
        ms: dict[str, list[float]] = {f: [] for f in FUSIONS}
        captured: list[tuple[dict, list[str]]] = []
        original = search_mod.Searcher._run_legs
        for i, q in enumerate(queries[50:]):
            order = FUSIONS[i % len(FUSIONS) :] + FUSIONS[: i % len(FUSIONS)]  # rotate who goes first
            for f in order:
                t = time.perf_counter()
                mem.search({"search_text": q, "hybrid_params": {"fusion": f}})
                ms[f].append((time.perf_counter() - t) * 1000)
            if len(captured) < 200:

                def grab(self, legs, _q=q):  # type: ignore[no-untyped-def]
                    hits, reps = original(self, legs)
                    captured.append((hits, query_tokens(_q)))
                    return hits, reps

                search_mod.Searcher._run_legs = grab  # type: ignore[method-assign]
                mem.search(q)
                search_mod.Searcher._run_legs = original  # type: ignore[method-assign]
        # the adaptive fusion's own work on real hits: features + model, per query
        reps = 20
        t = time.perf_counter()
        for _ in range(reps):
            for hits, terms in captured:
                search_mod.Searcher._dense_share(hits, terms)
        alone_us = (time.perf_counter() - t) / (reps * len(captured)) * 1e6
    p50 = {f: statistics.median(v) for f, v in ms.items()}
    out = {
        "n": args.n,
        "queries": args.queries,
        "fusions": {
            f: {
                "p50_ms": round(p50[f], 3),
                "p95_ms": round(pct(v, 95), 3),
                "p50_minus_rrf_ms": round(p50[f] - p50["rrf"], 3),
                "p50_ratio_to_rrf": round(p50[f] / p50["rrf"], 3),
            }
            for f, v in ms.items()
        },
        "adaptive_features_and_model_us": round(alone_us, 1),
        "target": "adaptive adds <= 0.3 ms to hybrid p50 at 100k chunks",
        "met": p50["adaptive"] - p50["rrf"] <= 0.3,
    }
    print(json.dumps(out, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
