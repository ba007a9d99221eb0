"""Cold start of the BM25 leg: loading the postings from the store vs reading the saved snapshot (issue 18).

    python -m bench bm25_restore                      # 1,000,000 chunks (bench/_common.py's corpus)
    python -m bench bm25_restore --n 200000

One process writes ``--n`` synthetic chunks (bench/_common.py's incident notes, ``add_documents``
1,000 a call, no vectors), runs one BM25 query (which loads the postings from the store and saves
them beside it, ``<db>.bm25/``) and closes. Then fresh processes, alternating, each open the store
and time their first BM25 query: with the snapshot (read back, checked against a sample of the
store's chunks) and without it (the snapshot moved aside: every chunk's tokens read and counted,
as before). Printed: seconds to the first answer, RSS after it, the ratio, snapshot size, and
whether both answered the same. Results: ``bench/results/bm25-restore.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

QUERY = "connection pool timeout HEL-4040 max_connections"

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, sys.argv[3])
t0 = time.perf_counter()
from hybridmem import Memory
from bench._common import LookupEmbedder, rss_mb
m = Memory(sys.argv[1], embedder=LookupEmbedder(), auto_embed=False, chunk_size=None)
t1 = time.perf_counter()
r = m.search(sys.argv[4], mode="bm25", top_k=10)
t2 = time.perf_counter()
print(json.dumps({"open_s": t1 - t0, "first_query_s": t2 - t1, "total_s": t2 - t0, "rss_mb": rss_mb(),
                  "ids": [h.chunk_id for h in r.results], "scores": [h.rrf_score for h in r.results]}))
m.legs.save_sparse = lambda: None  # time the open and the query only, not a save at close
m.close()
"""


def build(db: Path, n: int) -> dict:
    from bench._common import LookupEmbedder, make_corpus
    from hybridmem import Memory

    corpus = make_corpus(n)
    t = time.perf_counter()
    with Memory(db, embedder=LookupEmbedder(), auto_embed=False, chunk_size=None) as m:
        for i in range(0, n, 1000):
            m.add_documents(corpus[i : i + 1000])
        write_s = time.perf_counter() - t
        t = time.perf_counter()
        m.search(QUERY, mode="bm25", top_k=10)  # loads the postings; saves them in the background
        load_s = time.perf_counter() - t
    snap = list(Path(str(db) + ".bm25").glob("*.postings"))
    return {
        "write_s": round(write_s, 1),
        "load_in_build_s": round(load_s, 2),
        "snapshot_mb": round(snap[0].stat().st_size / 2**20, 1) if snap else 0,
    }


def child(db: Path) -> dict:
    from bench._common import child_json

    return child_json(CHILD, str(db), str(ROOT / "src"), str(ROOT), QUERY)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "bm25-restore.json")
    ap.add_argument("--workdir", type=Path)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(dir=a.workdir))
    try:
        db = work / "m.db"
        print(f"building {a.n:,} chunks ...", flush=True)
        built = build(db, a.n)
        print(f"  {built}", flush=True)
        snapdir, aside = Path(str(db) + ".bm25"), work / "aside"
        rows: dict[str, list[dict]] = {"snapshot": [], "store": []}
        for _ in range(a.rounds):
            for kind in ("snapshot", "store"):
                if kind == "store":
                    snapdir.rename(aside)
                try:
                    rows[kind].append(child(db))
                finally:
                    if kind == "store":
                        shutil.rmtree(snapdir, ignore_errors=True)  # the child saves nothing, but be sure
                        aside.rename(snapdir)
                r = rows[kind][-1]
                print(
                    f"  {kind}: open {r['open_s']:.2f} s, first BM25 query {r['first_query_s']:.2f} s, RSS {r['rss_mb']:.0f} MB",
                    flush=True,
                )
        same = all(
            r["ids"] == rows["store"][0]["ids"] and r["scores"] == rows["store"][0]["scores"] for r in rows["snapshot"]
        )
        med = {k: statistics.median(r["total_s"] for r in v) for k, v in rows.items()}
        report = {
            "n": a.n,
            **built,
            "first_answer_s": {k: round(v, 2) for k, v in med.items()},
            "ratio": round(med["store"] / med["snapshot"], 1),
            "rss_mb": {k: round(statistics.median(r["rss_mb"] for r in v)) for k, v in rows.items()},
            "same_answers": same,
            "loadavg": os.getloadavg()[0],
            "date": time.strftime("%Y-%m-%d"),
        }
        print(json.dumps(report, indent=1))
        from bench._common import write_report

        write_report(a.out, report)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
