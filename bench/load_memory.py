"""Memory of a namespace's first full vector load (issue 18: the load an HNSW build starts from,
when no saved graph is current). Each way in a fresh process, alternating, on one store:

* ``before``: every row fetched, their bytes joined, the array copied (the code before: the vectors
  held three times; at 10M chunks of 384 dimensions 46 GB, and the kernel killed the build);
* ``memory``: streamed a batch at a time into one in-memory array (``load_vectors`` without alloc);
* ``mapped``: streamed into a memory-mapped file of its own (what ``LocalLegs`` does from the graph's
  threshold on): file-backed pages the kernel can evict, not anonymous memory.

    python bench/load_memory.py --db 1M.db        # a store from bench/cold_start.py --keep

Printed per way: seconds, peak RSS (ru_maxrss), anonymous and file-backed RSS after the load.
Results: ``bench/results/load-memory.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(BENCH))

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, sys.argv[4])
import numpy as np
from hybridmem import Memory
from latency import LookupEmbedder

{CHILD_MEM}

m = Memory(sys.argv[1], embedder=LookupEmbedder(), auto_embed=False, chunk_size=None)
store, how = m.store, sys.argv[3]
base = mem()
t = time.perf_counter()
if how == "before":  # the code before: fetchall, join, copy
    db = store.reader
    ns = store.namespace_id("default")
    rows = db.execute(
        "SELECT v.chunk_rowid, v.vec FROM vectors v JOIN chunks c ON c.id = v.chunk_rowid WHERE c.ns_id=? "
        "ORDER BY v.chunk_rowid", (ns,)).fetchall()
    rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1).copy()
    del rows
else:
    alloc = m.legs._vector_rows if how == "mapped" else None
    _, rowids, matrix = store.load_vectors("default", alloc=alloc)
took = time.perf_counter() - t
after = mem()
print(json.dumps({"how": how, "rows": len(rowids), "load_s": round(took, 2), "before_load": base,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                  "after_load": after, "mapped": isinstance(matrix, np.memmap),
                  "checksum": float(np.asarray(matrix[::997]).sum())}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ways", default="before,memory,mapped")
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "load-memory.json")
    a = ap.parse_args()
    from latency import CHILD_MEM, child_json, write_report

    child = CHILD.replace("{CHILD_MEM}", CHILD_MEM)

    runs: dict[str, list[dict]] = {w: [] for w in a.ways.split(",")}
    for _ in range(a.rounds):
        for way in runs:
            r = child_json(child, str(a.db), str(ROOT / "src"), way, str(BENCH))
            runs[way].append(r)
            print(
                f"  {way}: {r['rows']:,} vectors in {r['load_s']:.1f} s, peak RSS {r['peak_rss_mb']:,} MB, "
                f"after {r['after_load']}",
                flush=True,
            )
    sums = {w: {r["checksum"] for r in v} for w, v in runs.items()}
    assert len(set().union(*sums.values())) == 1, f"the ways read different vectors: {sums}"
    report = {
        "db": str(a.db),
        "peak_rss_mb": {w: statistics.median(r["peak_rss_mb"] for r in v) for w, v in runs.items()},
        "anon_after_mb": {w: statistics.median(r["after_load"]["RssAnon"] for r in v) for w, v in runs.items()},
        "load_s": {w: statistics.median(r["load_s"] for r in v) for w, v in runs.items()},
        "runs": runs,
    }
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))
    write_report(a.out, report)


if __name__ == "__main__":
    main()
