"""Cold start of a whole hybrid query at scale: a fresh process's first answer with the HNSW graph,
its RSS, and the latency of the queries after (issue 18).

    python -m bench cold_start                        # 1,000,000 chunks, i8 graph
    python -m bench cold_start --n 200000 --dtype f32
    python -m bench cold_start --n 10000000 --keep BIG.db --build write   # then embed, bm25, graph: each resumes
    python -m bench cold_start --keep 1M.db --kinds mapped,mapped-before --kernel-before OLD.so   # two kernels
    python -m bench cold_start --keep BIG.db --mode bm25 --kinds mapped   # before the graph: BM25 alone

One process writes ``--n`` synthetic chunks (bench/_common.py's incident notes, look-up vectors:
no model time), stores their vectors, runs a BM25 query (the postings are saved beside the store)
and waits for the HNSW graph (built and saved with its vectors, ``<db>.hnsw/``). Then fresh
processes, alternating, open the store and time their first hybrid query (BM25 + dense, the dense
leg on the graph, not the exact fallback): ``mapped`` (the saved graph viewed and its vectors
memory-mapped, this commit) and ``read`` (the vectors file moved aside: every vector read from the
store and the graph restored into memory, as before it), then 200 more hybrid queries. Printed:
seconds to the first answer, RSS (and its anonymous / file-backed parts) after the first answer and
after the 200, query p50 / p95. Results: ``bench/results/cold-start.json``.
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

from bench._common import CHILD_MEM  # noqa: E402

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, sys.argv[3])
t0 = time.perf_counter()
from hybridmem import Memory
from bench._common import LookupEmbedder, make_queries
if sys.argv[6] == "numpy":  # BM25 without the compiled kernel: the scorer before it
    from hybridmem.retrieve import bm25_score
    bm25_score._kernel = None
elif sys.argv[6] != "kernel":  # another build of the kernel (a copy of an earlier commit's _bm25 .so)
    import importlib.util
    from hybridmem.retrieve import bm25_score
    spec = importlib.util.spec_from_file_location("_bm25", sys.argv[6])
    bm25_score._kernel = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bm25_score._kernel)

{CHILD_MEM}

m = Memory(sys.argv[1], embedder=LookupEmbedder(), auto_embed=False, chunk_size=None, hnsw_dtype=sys.argv[4])
t1 = time.perf_counter()
queries = make_queries(int(sys.argv[5]) + 1)
first_mode = sys.argv[7]  # hybrid, or bm25 (a store without its vectors yet: the BM25 leg alone)
r = m.search(queries[0], mode=first_mode, top_k=10)
t2 = time.perf_counter()
first = {"open_s": t1 - t0, "first_query_s": t2 - t1, "total_s": t2 - t0, "mem_first": mem(),
         "legs": {n: l.status for n, l in r.legs.items()}, "ids": [h.chunk_id for h in r.results]}
if first_mode == "hybrid":
    idx = m.legs.dense_index("default")
    first.update(graph=idx.hnsw_ready, mapped=idx.mapped, kind=idx.kind)
def timed(mode):
    took, legs = [], {}
    for q in queries[1:]:
        t = time.perf_counter()
        res = m.search(q, mode=mode, top_k=10)
        took.append((time.perf_counter() - t) * 1000)
        for name, leg in res.legs.items():
            if leg.status == "ok":
                legs.setdefault(name, []).append(leg.took_ms)
    took.sort()
    first.setdefault("legs_p50_ms", {})[mode] = {n: round(sorted(v)[len(v) // 2], 2) for n, v in legs.items()}
    return took[len(took) // 2], took[int(len(took) * 0.95)]

first["p50_ms"], first["p95_ms"] = timed(first_mode)
first["mem_after"] = mem()
first["bm25_p50_ms"], first["bm25_p95_ms"] = timed("bm25")
print(json.dumps(first))
m.legs.save_sparse = lambda: None  # time the open and the queries only, not a save at close
m.close()
"""
CHILD = CHILD.replace("{CHILD_MEM}", CHILD_MEM)


def _documents(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return int(c.execute("SELECT count(*) FROM documents").fetchone()[0])


def build(db: Path, n: int, dtype: str, phases: str = "write,embed,index") -> dict:
    """Write ``n`` synthetic chunks, store their vectors, save the postings and the graph. Each
    phase resumes: ``write`` goes on after the documents already in the store (a build stopped
    part-way, or run one phase a session at 10M), logging its rate every 100,000 chunks (the
    sustained rate is the slowest million's)."""
    from bench._common import LookupEmbedder, iter_corpus
    from hybridmem import Memory

    out: dict = {}
    with Memory(db, embedder=LookupEmbedder(), auto_embed=False, chunk_size=None, hnsw_dtype=dtype) as m:
        if "write" in phases:
            have = _documents(db)
            docs = iter_corpus(n)
            for _ in range(have):
                next(docs)
            t = mark = million_t = time.perf_counter()
            done, million_from, per_million, batch = have, have, [], []
            for d in docs:
                batch.append(d)
                if len(batch) == 1000:
                    m.add_documents(batch)
                    done, batch = done + 1000, []
                    if done % 100_000 == 0:
                        now = time.perf_counter()
                        print(f"  {done:,} chunks, {100_000 / (now - mark):,.0f} chunks/s", flush=True)
                        if done % 1_000_000 == 0:
                            per_million.append(round((done - million_from) / (now - million_t)))
                            million_t, million_from = now, done
                        mark = now
            if batch:
                m.add_documents(batch)
            out["write_s"] = round(time.perf_counter() - t, 1)
            out["write_chunks"] = n - have
            out["write_chunks_per_s"] = round((n - have) / max(out["write_s"], 1e-9))
            out["write_chunks_per_s_by_million"] = per_million
        if "embed" in phases:
            t = time.perf_counter()
            m.embed_pending(batch_size=1024)
            out["embed_s"] = round(time.perf_counter() - t, 1)
        if "index" in phases or "bm25" in phases:
            t = time.perf_counter()
            m.search("connection pool timeout", mode="bm25", top_k=10)  # saves the postings
            out["bm25_load_s"] = round(time.perf_counter() - t, 1)
        if "index" in phases or "graph" in phases:
            t = time.perf_counter()
            m.search("connection pool timeout", mode="vector", top_k=10)
            m.wait_for_indexes()
            out["hnsw_build_s"] = round(time.perf_counter() - t, 1)
    hnsw = Path(str(db) + ".hnsw")
    if hnsw.is_dir():
        out["files_mb"] = {p.suffix: round(p.stat().st_size / 2**20) for p in hnsw.iterdir()}
    return out


def child(db: Path, dtype: str, queries: int, scorer: str, mode: str = "hybrid") -> dict:
    from bench._common import child_json

    return child_json(CHILD, str(db), str(ROOT / "src"), str(ROOT), dtype, str(queries), scorer, mode)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dtype", default="i8", choices=["f32", "f16", "i8"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "cold-start.json")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--keep", type=Path, help="reuse (or build and keep) the store at this path")
    ap.add_argument(
        "--build",
        help="run only these build phases of the --keep store (write, embed, bm25, graph; index = bm25,graph; "
        "each resumes), print and save their figures",
    )
    ap.add_argument(
        "--kinds",
        default="mapped,mapped-numpy,read",
        help="mapped-numpy: BM25 without the kernel; mapped-before: with --kernel-before's build",
    )
    ap.add_argument("--kernel-before", type=Path, help="an earlier build's _bm25 .so, for kind mapped-before")
    ap.add_argument(
        "--mode",
        default="hybrid",
        choices=["hybrid", "bm25"],
        help="bm25: the first answer and the timed queries are BM25 alone (a store built through --build bm25, "
        "no vectors or graph yet)",
    )
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(dir=a.workdir))
    try:
        db = a.keep or work / "m.db"
        built: dict = {"reused": True}
        if a.build or not db.exists():
            print(f"building {a.n:,} chunks ({a.build or 'write,embed,index'}) ...", flush=True)
            built = build(db, a.n, a.dtype, a.build or "write,embed,index")
        print(f"  {built}", flush=True)
        if a.build:  # one phase of a long build: its figures, no queries yet
            from bench._common import write_report

            write_report(
                a.out, {"n": a.n, "dtype": a.dtype, "phases": a.build, **built, "date": time.strftime("%Y-%m-%d")}
            )
            return
        vectors = next(Path(str(db) + ".hnsw").glob("*.vectors"), None) if a.mode == "hybrid" else None
        if a.mode == "hybrid" and vectors is None:
            raise SystemExit(f"{db}: no saved graph vectors; build the graph first, or time --mode bm25")
        aside = work / "vectors.aside"
        kinds = a.kinds.split(",")
        rows: dict[str, list[dict]] = {k: [] for k in kinds}
        for _ in range(a.rounds):
            for kind in kinds:
                if kind == "read":
                    if vectors is None:
                        raise SystemExit("kind read needs the saved graph (--mode hybrid)")
                    shutil.copy(vectors, aside)
                    vectors.unlink()
                try:
                    scorer = "numpy" if kind.endswith("numpy") else "kernel"
                    if kind.endswith("before"):
                        scorer = str(a.kernel_before.resolve())
                    rows[kind].append(child(db, a.dtype, a.queries, scorer, a.mode))
                finally:
                    if kind == "read" and vectors is not None:
                        vectors.unlink(missing_ok=True)  # the child saves nothing, but be sure
                        shutil.move(aside, vectors)
                r = rows[kind][-1]
                print(
                    f"  {kind}: first {a.mode} answer {r['total_s']:.2f} s after start (open {r['open_s']:.2f}), "
                    f"graph {r.get('graph')} mapped {r.get('mapped')}, mem {r['mem_first']} -> {r['mem_after']}, "
                    f"{a.mode} p50 {r['p50_ms']:.1f} p95 {r['p95_ms']:.1f} ms, "
                    f"bm25 p50 {r['bm25_p50_ms']:.1f} p95 {r['bm25_p95_ms']:.1f} ms",
                    flush=True,
                )
        med = {k: statistics.median(r["total_s"] for r in v) for k, v in rows.items()}
        report = {
            "n": a.n,
            "dtype": a.dtype,
            **built,
            "mode": a.mode,
            "first_answer_s" if a.mode == "bm25" else "first_hybrid_answer_s": {k: round(v, 2) for k, v in med.items()},
            "ratio": round(med["read"] / med["mapped"], 1) if {"read", "mapped"} <= med.keys() else None,
            "hybrid_p50_ms" if a.mode == "hybrid" else "bm25_first_pass_p50_ms": {
                k: round(statistics.median(r["p50_ms"] for r in v), 2) for k, v in rows.items()
            },
            "bm25_p50_ms": {k: round(statistics.median(r["bm25_p50_ms"] for r in v), 2) for k, v in rows.items()},
            "runs": rows,
            "loadavg": os.getloadavg()[0],
            "date": time.strftime("%Y-%m-%d"),
        }
        print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))
        from bench._common import write_report

        write_report(a.out, report)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
