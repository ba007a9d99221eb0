"""Export and import at scale (issue 43): an SQLite store of N memories with their vectors (``hash``
embedder's name, 256 dimensions) → ``hybridmem export --with-vectors`` to ``.jsonl.gz`` → ``hybridmem
import`` into a new SQLite file. Each direction runs in its own process; its peak RSS is measured
above that process's baseline (its RSS once hybridmem is imported and the store opened), target
<= 300 MB. Baselines, in the same process: export against walking the store's documents without
writing them; import against ``add_documents`` of the same memories (vectors given) into a fresh store.

    python -m bench transfer                 # N = 1,000,000 (the store is built once, .bench-cache/store-N/)
    python -m bench transfer --n 200000

Writes bench/results/transfer.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench._common import ROOT, cached_store, git_commit, loadavg, rerun, rss_mb, write_report

TARGET_MB = 300
#: memories the import's baseline writes with add_documents (a slice: the rate, not the size, is compared)
BASELINE_DOCS = 50_000


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child_export(db: str, out: str) -> dict:
    from hybridmem.store import open_store
    from hybridmem.transfer import export_store

    store = open_store(db, create=False)
    base = rss_mb()
    t = time.perf_counter()
    rep = export_store(store, out, None, vectors=True, source=db)
    took = time.perf_counter() - t
    peak = _peak_mb() - base
    docs = sum(c["documents"] for c in rep.namespaces.values())
    t = time.perf_counter()
    walked = sum(1 for ns in store.namespaces() for _ in store.export_documents(ns))
    walk = time.perf_counter() - t
    store.close()
    return {
        "documents": docs,
        "vectors": sum(c["vectors"] for c in rep.namespaces.values()),
        "seconds": round(took, 1),
        "docs_per_s": round(docs / took),
        "file_mb": round(os.path.getsize(out) / 2**20, 1),
        "baseline_rss_mb": round(base, 1),
        "peak_rss_above_baseline_mb": round(peak, 1),
        "baseline_walk": {"documents": walked, "seconds": round(walk, 1), "docs_per_s": round(walked / walk)},
        "ratio_time_vs_walk": round(took / walk, 2),
    }


def _child_import(path: str, db: str, source_db: str) -> dict:
    from hybridmem import Memory
    from hybridmem.store import open_store
    from hybridmem.transfer import import_file, read_records

    store = open_store(db, create=True)
    base = rss_mb()
    t = time.perf_counter()
    rep = import_file(path, store)
    took = time.perf_counter() - t
    peak = _peak_mb() - base
    counts = {ns: store.counts(ns) for ns in store.namespaces()}
    store.close()
    written = sum(c.get("written", 0) for c in rep.namespaces.values())
    # the baseline: the same memories through add_documents, vectors given, into a fresh store
    docs = []
    for _, rec in read_records(path):
        if rec["kind"] == "document":
            ch = rec["chunks"][0]
            docs.append({"id": rec["id"], "text": ch["text"], "metadata": rec["metadata"], "vector": ch["vector"]})
            if len(docs) == BASELINE_DOCS:
                break
    from hybridmem.transfer.format import decode_vector

    for d in docs:
        d["vector"] = decode_vector(d["vector"], 256, "vector")
    fresh = Path(db).with_name("baseline.db")
    t = time.perf_counter()
    with Memory(fresh, embedder="hash", auto_embed=False, chunk_size=None) as m:
        for i in range(0, len(docs), 1000):
            m.add_documents(docs[i : i + 1000], batch_size=1000)
    base_s = time.perf_counter() - t
    src = open_store(source_db, create=False)
    same = {ns: src.counts(ns) for ns in src.namespaces()} == counts
    src.close()
    return {
        "documents": written,
        "vectors": sum(c.get("vectors", 0) for c in rep.namespaces.values()),
        "queued": sum(c.get("queued", 0) for c in rep.namespaces.values()),
        "seconds": round(took, 1),
        "docs_per_s": round(written / took),
        "baseline_rss_mb": round(base, 1),
        "peak_rss_above_baseline_mb": round(peak, 1),
        "counts_equal_source": same,
        "baseline_add_documents": {
            "documents": len(docs),
            "seconds": round(base_s, 1),
            "docs_per_s": round(len(docs) / base_s),
        },
        "ratio_rate_vs_add_documents": round((written / took) / (len(docs) / base_s), 2),
    }


def _run_child(*args: str) -> dict:
    out = subprocess.run([*rerun(__file__), "--child", *args], capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        sys.exit(f"child {args[0]} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--out", default=str(ROOT / "bench/results/transfer.json"))
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        kind, *rest = a.child
        print(json.dumps(_child_export(*rest) if kind == "export" else _child_import(*rest)))
        return
    db, build = cached_store(a.n)
    work = db.parent / "transfer"
    work.mkdir(exist_ok=True)
    gz, new = work / "export.jsonl.gz", work / "imported.db"
    for p in work.iterdir():
        p.unlink()
    print(f"exporting {a.n:,} memories with their vectors to {gz} ...", flush=True)
    exp = _run_child("export", str(db), str(gz))
    print(json.dumps(exp), flush=True)
    print(f"importing into {new} ...", flush=True)
    imp = _run_child("import", str(gz), str(new), str(db))
    print(json.dumps(imp), flush=True)
    ok = all(x["peak_rss_above_baseline_mb"] <= TARGET_MB for x in (exp, imp))
    report = {
        "benchmark": "transfer",
        "date": time.strftime("%Y-%m-%d"),
        "commit": git_commit(),
        "n": a.n,
        "loadavg": loadavg(),
        "store": {**build, "file_mb": round(db.stat().st_size / 2**20)},
        "export": exp,
        "import": imp,
        "target_peak_rss_mb": TARGET_MB,
        "target_met": ok,
    }
    write_report(Path(a.out), report)
    print(
        f"export {exp['docs_per_s']:,} docs/s ({exp['ratio_time_vs_walk']}x the walk), peak +{exp['peak_rss_above_baseline_mb']} MB; "
        f"import {imp['docs_per_s']:,} docs/s ({imp['ratio_rate_vs_add_documents']}x add_documents), "
        f"peak +{imp['peak_rss_above_baseline_mb']} MB; target <= {TARGET_MB} MB: {'met' if ok else 'MISSED'} -> {a.out}"
    )


if __name__ == "__main__":
    main()
