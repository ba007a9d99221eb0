"""Where the near-duplicate thresholds of ``hybridmem.dedupe`` come from: every memory of a real store
against its BM25 candidates in its scope, the pairs counted by token overlap (Jaccard) and cosine,
and the pairs the rule merges printed for inspection by eye (docs/agent-memory.md, "Near duplicates").

    python -m bench dedupe --store /tmp/locomo.db            # a COPY of an embedded store (e5 vectors)
    python -m bench dedupe --demo                            # the demo corpus, hash embedder
    python -m bench dedupe --corpus ../shared/data/beir/scifact/corpus.jsonl --docs 2000 --plant 200

Writes bench/results/dedupe/<name>.json (counts per band, the merged pairs, the near misses).
"""

from __future__ import annotations

import argparse
import json
import random
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


def plant(mem: Memory, ns: str, n: int, seed: int = 7) -> dict[str, str]:
    """Near duplicates of ``n`` memories, written beside them (same scope, then embedded): case and
    punctuation changed, a filler word added, a word dropped, or two dropped and a filler added. Returns planted id -> original id."""
    rng = random.Random(seed)
    docs = [d for d in dedupe.memories(mem, ns) if len(dedupe.memory_text(d).split()) >= 6]
    planted: dict[str, str] = {}
    batch = []
    for i, d in enumerate(rng.sample(docs, min(n, len(docs)))):
        text = dedupe.memory_text(d)
        words = text.split()
        longest = sorted(range(1, len(words)), key=lambda j: -len(words[j]))
        if i % 4 == 0:
            new = text.lower().rstrip(".!?") + " !"
        elif i % 4 == 1:
            new = " ".join([*words[:1], "well,", *words[1:]])
        elif i % 4 == 2:
            new = " ".join(w for j, w in enumerate(words) if j != longest[0])
        else:  # a rewording: two words dropped, a filler added
            new = " ".join(["Honestly,", *(w for j, w in enumerate(words) if j not in longest[:2])])
        pid = f"plant-{i}"
        planted[pid] = d["doc_id"]
        batch.append({"id": pid, "text": new, "metadata": d["metadata"]})
    mem.add_documents(batch, namespace=ns)
    mem.wait_for_vectors()
    return planted


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", help="a copy of a store to read (copied again to a temporary directory)")
    ap.add_argument("--demo", action="store_true", help="the demo corpus, hash embedder")
    ap.add_argument("--corpus", help="a BEIR corpus.jsonl: its first --docs documents, one chunk each")
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--embedder", default="hash", help="with --corpus (e.g. e5:multilingual-e5-small-q4)")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--limit", type=int, help="the first N memories only")
    ap.add_argument("--plant", type=int, default=0, help="plant N near duplicates first (recall)")
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
    elif a.corpus:
        mem = Memory(tmp / "c.db", embedder=a.embedder, chunk_size=None)
        with open(a.corpus, encoding="utf-8") as f:
            rows = [json.loads(line) for _, line in zip(range(a.docs), f, strict=False)]
        mem.add_documents([{"id": r["_id"], "text": f"{r.get('title', '')}\n{r['text']}".strip()} for r in rows])
        mem.wait_for_vectors()
        name = a.name or Path(a.corpus).parent.name
    else:
        if not a.store:
            ap.error("--store, --corpus or --demo")
        shutil.copy(a.store, tmp / "m.db")
        mem = Memory(tmp / "m.db")
        name = a.name or Path(a.store).stem
    planted = plant(mem, a.namespace, a.plant) if a.plant else {}
    out = measure(mem, a.namespace, a.limit)
    if planted:
        pairs = {tuple(sorted(p)) for p in planted.items()}
        hit = [r for r in out["merged"] if tuple(sorted((r["a"], r["b"]))) in pairs]
        out["planted"] = {"pairs": len(pairs), "caught": len(hit), "recall": round(len(hit) / len(pairs), 3)}
        out["merged_not_planted"] = [r for r in out["merged"] if tuple(sorted((r["a"], r["b"]))) not in pairs]
        out["missed"] = [r for r in out["near_misses"] if tuple(sorted((r["a"], r["b"]))) in pairs]
        band = [r for r in hit if r["jaccard"] < dedupe.JACCARD_ALONE]
        out["planted"]["caught_by_cosine_band"] = len(band)
    mem.close()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{name}.json").write_text(json.dumps(out, ensure_ascii=False, indent=1))
    skip = ("merged", "near_misses", "merged_not_planted", "missed", "bands")
    print(json.dumps({k: v for k, v in out.items() if k not in skip}, indent=1))
    for r in out.get("merged_not_planted", out["merged"]):
        print(f"MERGE j={r['jaccard']} c={r['cosine']}\n  {r['a_text']!r}\n  {r['b_text']!r}")


if __name__ == "__main__":
    main()
