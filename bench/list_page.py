"""``Memory.list`` at scale (issue 43): pages of 1,000 from an SQLite store of N memories (default
1M, the same store as ``bench transfer``: synthetic notes with metadata, one chunk each), target
p50 <= 50 ms a page. Cases: the whole walk in the default order (every page, so deep cursors are
measured, not only the first), descending, by occurred time, by id, and with metadata filters of
three selectivities (33 %, 5 %, 0.4 %: environment; service; service + severity). Baseline, in the
same process: reading the same number of documents through the store's export walk (one
streaming cursor, no keyset, no filter), i.e. what a page would cost with nothing but the reads.

    python -m bench list_page                # N = 1,000,000 (the store is built once, .bench-cache/store-N/)
    python -m bench list_page --n 200000 --pages 50

Writes bench/results/list-page.json (``--out``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from itertools import islice
from pathlib import Path
from typing import Any

from bench._common import ROOT, cached_store, git_commit, loadavg, pct, write_report

TARGET_MS = 50.0
LIMIT = 1000

CASES: dict[str, dict[str, Any]] = {
    "recorded_at (default), whole walk": {},
    "recorded_at, descending": {"descending": True},
    "occurred_at": {"order": "occurred_at"},
    "id": {"order": "id"},
    "filter environment=production (33 %)": {"metadata_filter": {"environment": "production"}},
    "filter service=svc-3 (5 %)": {"metadata_filter": {"service": "svc-3"}},
    "filter service=svc-3 and severity=4 (1.25 %)": {"metadata_filter": {"service": "svc-3", "severity": 4}},
}


def _walk(m: Any, fields: dict[str, Any], pages: int | None) -> dict[str, Any]:
    """Pages of LIMIT in one case: their times (ms), documents seen, repeats (must be 0)."""
    times: list[float] = []
    seen: set[str] = set()
    repeats = 0
    cursor = None
    while pages is None or len(times) < pages:
        t = time.perf_counter()
        page = m.list(cursor, LIMIT, **fields)
        times.append((time.perf_counter() - t) * 1000)
        for doc in page.memories:
            repeats += doc["doc_id"] in seen
            seen.add(doc["doc_id"])
        cursor = page.next_cursor
        if cursor is None:
            break
    return {
        "pages": len(times),
        "documents": len(seen),
        "repeats": repeats,
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(pct(times, 95), 2),
        "max_ms": round(max(times), 2),
        "first_page_ms": round(times[0], 2),
        "last_page_ms": round(times[-1], 2),
    }


def _baseline(m: Any, pages: int) -> dict[str, Any]:
    """The export walk's read of LIMIT documents at a time (same store, same process)."""
    times: list[float] = []
    it = m.store.export_documents(m.namespace)
    for _ in range(pages):
        t = time.perf_counter()
        got = list(islice(it, LIMIT))
        times.append((time.perf_counter() - t) * 1000)
        if len(got) < LIMIT:
            break
    return {"pages": len(times), "p50_ms": round(statistics.median(times), 2), "p95_ms": round(pct(times, 95), 2)}


def main() -> None:
    from hybridmem import Memory

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--pages", type=int, default=200, help="pages per case other than the whole walk")
    ap.add_argument("--out", default=str(ROOT / "bench/results/list-page.json"))
    a = ap.parse_args()
    db, build = cached_store(a.n)
    cases: dict[str, Any] = {}
    with Memory(db, embedder="hash", auto_embed=False) as m:
        base = _baseline(m, a.pages)
        print(f"baseline (export walk, {LIMIT} docs): p50 {base['p50_ms']} ms", flush=True)
        for name, fields in CASES.items():
            whole = not fields
            r = _walk(m, fields, None if whole else a.pages)
            r["ratio_p50_vs_baseline"] = round(r["p50_ms"] / base["p50_ms"], 2)
            cases[name] = r
            print(
                f"{name}: {r['pages']} pages, {r['documents']:,} docs, repeats {r['repeats']}, "
                f"p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms, max {r['max_ms']} ms "
                f"({r['ratio_p50_vs_baseline']}x baseline)",
                flush=True,
            )
    ok = all(c["p50_ms"] <= TARGET_MS for c in cases.values())
    report = {
        "benchmark": "list_page",
        "date": time.strftime("%Y-%m-%d"),
        "commit": git_commit(),
        "n": a.n,
        "limit": LIMIT,
        "loadavg": loadavg(),
        "store": build,
        "baseline_export_walk": base,
        "cases": cases,
        "target_p50_ms": TARGET_MS,
        "target_met": ok,
    }
    write_report(Path(a.out), report)
    worst = max(cases.items(), key=lambda kv: kv[1]["p50_ms"])
    print(
        f"worst p50 {worst[1]['p50_ms']} ms ({worst[0]}); target <= {TARGET_MS} ms: {'met' if ok else 'MISSED'} -> {a.out}"
    )


if __name__ == "__main__":
    main()
