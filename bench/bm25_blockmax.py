"""Block-max MaxScore document at a time (the kernel's default, ``sparse.BLOCK`` = 64) against
MaxScore term at a time (the kernel before it, ``BLOCK`` = 0), on the same index in the same
process, query by query, alternating which goes first; both checked equal, and a sample against
the exhaustive scorer.

    python bench/bm25_blockmax.py                                  # synthetic 1M + packages (~440k)
    python bench/bm25_blockmax.py --corpora synthetic --size 200000 --queries 200
    python bench/bm25_blockmax.py --blocks 32,64,128               # block sizes side by side

The corpora and their queries are bench/bm25_speed.py's (cached token strings under ``--cache``):
``synthetic`` (uniform words: every query word in ~8 % of the chunks, the pruning's worst case) and
``packages`` (this machine's READMEs, changelogs and sources in 80-word windows; the shared data's
questions and known-item queries). Cases: k = 10, k = 100, a filter allowing 10 % of the chunks.
Printed per case: p50/p95 of each, the p50 ratio, postings read, mismatches (must be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "src"))
sys.path.insert(0, str(BENCH))

from bm25_speed import corpus  # noqa: E402
from hybridmem.retrieve import sparse  # noqa: E402
from hybridmem.retrieve.sparse import SparseIndex  # noqa: E402
from hybridmem.text.tokenize import query_tokens  # noqa: E402
from latency import SEED, rss_mb  # noqa: E402


def timed(idx: SparseIndex, block: int, q: list[str], k: int, flt: np.ndarray | None) -> tuple[list, float, dict]:
    sparse.BLOCK = block
    t = time.perf_counter()
    got, counts = idx.search_counted(q, k, flt)
    return got, (time.perf_counter() - t) * 1000, counts


def run(name: str, n: int, n_queries: int, cache: Path, blocks: list[int]) -> dict:
    toks, queries = corpus(name, n, cache)
    idx = SparseIndex()
    idx.load(1, enumerate(toks, 1))
    n_chunks = len(toks)
    del toks
    rng = random.Random(SEED)
    qs = [q for q in (query_tokens(x) for x in queries) if q]
    rng.shuffle(qs)
    qs = qs[: n_queries + 20]
    tenth = np.array(sorted(rng.sample(range(1, n_chunks + 1), n_chunks // 10)), dtype=np.int64)
    out: dict = {"corpus": name, "chunks": n_chunks}
    variants = [0, *blocks]
    # long queries (a question with the feedback leg's 10 terms, a pasted paragraph): three in one
    longs = [list(dict.fromkeys(qs[i] + qs[i + 1] + qs[i + 2])) for i in range(0, len(qs) - 2)]
    cases = [("k10", 10, None, qs), ("k100", 100, None, qs), ("k10-filter10%", 10, tenth, qs)]
    cases.append(("k10-long", 10, None, longs))
    for label, k, flt, qset in cases:
        for q in qset[:20]:  # warm-up: the terms' bounds and block maxima cached, the filter's mask too
            for b in variants:
                timed(idx, b, q, k, flt)
        times: dict[int, list[float]] = {b: [] for b in variants}
        read: dict[int, int] = dict.fromkeys(variants, 0)
        posted = bad = wrong = 0
        for i, q in enumerate(qset[20:]):
            order = variants[i % len(variants) :] + variants[: i % len(variants)]
            res = {}
            for b in order:
                res[b], ms, c = timed(idx, b, q, k, flt)
                times[b].append(ms)
                read[b] += c["scanned"] + c["looked_up"]
            posted += c["postings"]
            bad += any(res[b] != res[0] for b in blocks)
            if i % 10 == 0:  # and the exhaustive scorer, now and then
                wrong += res[0] != idx.search_exhaustive(q, k, flt)
        row: dict = {
            "queries": len(qset) - 20,
            "terms_p50": statistics.median(len(q) for q in qset),
            "mismatches": bad,
            "differ_from_exhaustive": wrong,
        }
        base = statistics.median(times[0])
        for b in variants:
            tag = "taat" if b == 0 else f"block{b}"
            row[f"{tag}_p50_ms"] = round(statistics.median(times[b]), 3)
            row[f"{tag}_p95_ms"] = round(float(np.percentile(times[b], 95)), 3)
            row[f"{tag}_read_share"] = round(read[b] / max(posted, 1), 3)
            if b:
                row[f"{tag}_speedup_p50"] = round(base / statistics.median(times[b]), 2)
        out[label] = row
        print(f"  {name} {n_chunks:,} {label}: " + ", ".join(f"{k_} {v}" for k_, v in row.items()), flush=True)
    out["rss_mb"] = round(rss_mb())
    sparse.BLOCK = 64
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="synthetic,packages")
    ap.add_argument("--size", type=int, default=0, help="chunks per corpus (default 1M synthetic, 500k packages)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--blocks", default="64", help="block sizes to run against term at a time")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/hybridmem-bm25-cache"))
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "bm25-blockmax.json")
    a = ap.parse_args()
    blocks = [int(x) for x in a.blocks.split(",")]
    rows = []
    for name in a.corpora.split(","):
        n = a.size or 1_000_000
        print(f"{name}: {n:,} chunks", flush=True)
        rows.append(run(name, n, a.queries, a.cache, blocks))
    meta = {"loadavg": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d"), "kernel": sparse._kernel is not None}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"meta": meta, "runs": rows}, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
