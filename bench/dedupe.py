"""Where the near-duplicate thresholds of ``hybridmem.dedupe`` come from: every memory of a real store
against its BM25 candidates in its scope, the pairs counted by token overlap (Jaccard) and cosine,
and the pairs the rule merges printed for inspection by eye (docs/agent-memory.md, "Near duplicates").

    python -m bench dedupe --store /tmp/locomo.db            # a COPY of an embedded store (e5 vectors)
    python -m bench dedupe --demo                            # the demo corpus, hash embedder

Writes bench/results/dedupe/<name>.json (counts per band, the merged pairs, the near misses).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hybridmem import Memory, dedupe

BANDS_J = (0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0)
BANDS_C = (0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 1.0)


def _band(x: float | None, bands: tuple[float, ...]) -> str:
    if x is None:
        return "none"
    low = [b for b in bands if x >= b]
    return f">={low[-1]}" if low else f"<{bands[0]}"


def measure(mem: Memory, ns: str, limit: int | None) -> dict[str, Any]:
    """Every memory against its candidates: pair counts per band, merged pairs and near misses."""
    t0, seen, n = time.perf_counter(), set(), 0
    counts: Counter[str] = Counter()
    merged, near = [], []
    for doc in dedupe.memories(mem, ns):
        n += 1
        if limit is not None and n > limit:
            break
        vec = dedupe.memory_vector(mem, ns, doc)
        text = dedupe.memory_text(doc)
        for p in dedupe.compared(mem, ns, text, doc["metadata"], exclude=doc["doc_id"], vector=vec):
            key = tuple(sorted((p.id, p.other)))
            if key in seen:
                continue
            seen.add(key)
            counts[f"j{_band(p.jaccard, BANDS_J)} c{_band(p.cosine, BANDS_C)}{' guarded' if p.guarded else ''}"] += 1
            row = {"a": p.id, "b": p.other, "jaccard": round(p.jaccard, 3), "cosine": p.cosine, "a_text": p.text[:200]}
            row.update(b_text=p.other_text[:200], guarded=p.guarded)
            if p.duplicate:
                merged.append(row)
            elif p.jaccard >= 0.5 or (p.cosine or 0) >= dedupe.COSINE:
                near.append(row)
    thresholds = {"jaccard": dedupe.JACCARD, "cosine": dedupe.COSINE, "jaccard_alone": dedupe.JACCARD_ALONE}
    return {
        "namespace": ns,
        "memories": min(n, limit or n),
        "pairs_compared": len(seen),
        "thresholds": thresholds,
        "bands": dict(sorted(counts.items())),
        "merged": merged,
        "near_misses": sorted(near, key=lambda r: -r["jaccard"])[:200],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", help="a copy of a store to read (copied again to a temporary directory)")
    ap.add_argument("--demo", action="store_true", help="the demo corpus, hash embedder")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--limit", type=int, help="the first N memories only")
    ap.add_argument("--name", help="results file name (default: from the store)")
    ap.add_argument("--out", default="bench/results/dedupe")
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="dedupe-bench-"))
    if a.demo:
        from hybridmem.demo import load_documents  # noqa: PLC0415

        mem = Memory(tmp / "demo.db", embedder="hash")
        mem.add_documents(load_documents())
        mem.wait_for_vectors()
        name = a.name or "demo"
    else:
        if not a.store:
            ap.error("--store or --demo")
        shutil.copy(a.store, tmp / "m.db")
        mem = Memory(tmp / "m.db")
        name = a.name or Path(a.store).stem
    out = measure(mem, a.namespace, a.limit)
    mem.close()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{name}.json").write_text(json.dumps(out, ensure_ascii=False, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k not in ("merged", "near_misses")}, indent=1))
    for r in out["merged"]:
        print(f"MERGE j={r['jaccard']} c={r['cosine']}\n  {r['a_text']!r}\n  {r['b_text']!r}")


if __name__ == "__main__":
    main()
