"""What language-aware fusion costs a hybrid query (issue 42: <= 5 ms at 100k chunks, nothing
when it does not run), measured in one process against itself with it switched off.

    python -m bench language_fusion                  # 100k chunks (English and French incident notes)
    python -m bench language_fusion --n 20000 --queries 300

The store: bench/_common.py's synthetic corpus (a third of it French) with look-up vectors (no
model runs), one chunk per document. The same queries (English and French) run hybrid with
``language_aware`` true and false, alternating query by query so both see the same cache and
load; the step's own cost is also timed apart (``cross_language`` on each query's dense hits:
the question's language and one indexed read of <= 10 rows). Results:
``bench/results/language-fusion.json``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench._common import ROOT, LookupEmbedder, iter_corpus, loadavg, make_queries, summary, write_report

OUT = ROOT / "bench" / "results" / "language-fusion.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="chunks in the store")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    from hybridmem import Memory
    from hybridmem.retrieve.language import cross_language

    with (
        tempfile.TemporaryDirectory() as tmp,
        Memory(Path(tmp) / "m.db", embedder=LookupEmbedder(), auto_embed=False, chunk_size=None) as m,
    ):
        t = time.perf_counter()
        m.add_documents(iter_corpus(a.n), batch_size=2048)
        m.embed_pending()
        m.wait_for_indexes()
        build_s = time.perf_counter() - t
        # a question in words: half in English, a quarter in French (their language is detected), a
        # quarter as bare keywords (no language: the step does not run for them)
        frames = ("why was the {} slow and what is the fix", "pourquoi le {} est-il lent et que faire", "{}", "{}")
        queries = [frames[i % 4].format(q) for i, q in enumerate(make_queries(a.queries))]
        for q in queries[:50]:  # warm: postings, vectors, caches
            m.search(q)
        on, off, step, shares = [], [], [], []
        for q in queries:
            for flag, acc in ((True, on), (False, off)):
                t = time.perf_counter()
                r = m.search({"search_text": q, "top_k": 10, "hybrid_params": {"language_aware": flag}})
                acc.append((time.perf_counter() - t) * 1000)
                if flag and r.language is not None:
                    shares.append(r.language.cross_share)
            dense = m.search({"search_text": q, "top_k": 10, "mode": "vector", "fetch_k": 10}).results
            hits = m.store.rowids_for(m.namespace, [h.chunk_id for h in dense])
            t = time.perf_counter()
            cross_language(m.store, m.namespace, q, [(hits[h.chunk_id], 0.0) for h in dense if h.chunk_id in hits])
            step.append((time.perf_counter() - t) * 1000)
    s_on, s_off = summary(on), summary(off)
    report = {
        "chunks": a.n,
        "queries": len(queries),
        "build_s": round(build_s, 1),
        "hybrid_ms_language_aware": s_on,
        "hybrid_ms_off": s_off,
        "p50_added_ms": round(s_on["p50_ms"] - s_off["p50_ms"], 3),
        "step_ms": summary(step),
        "queries_with_a_share": len(shares),
        "queries_with_share_above_0": sum(1 for x in shares if x > 0),
        "loadavg": loadavg(),
    }
    write_report(a.out, report)
    print(f"{a.n:,} chunks: hybrid p50 {s_on['p50_ms']:.2f} ms language-aware, {s_off['p50_ms']:.2f} ms off "
          f"(+{report['p50_added_ms']:.2f} ms); the step alone p50 {report['step_ms']['p50_ms']:.3f} ms; "
          f"{report['queries_with_share_above_0']} of {len(shares)} queries read a share above 0")  # fmt: skip
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
