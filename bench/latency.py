"""Latency / throughput benchmark of hybridmem on a synthetic technical corpus.

    python -m bench latency [--sizes 10000,100000] [--queries 200] [--out bench/results/latency.json]

Vectors come from a *look-up embedder* (a hash of the text seeds a pseudo-random unit vector): no
model runs, so build and query numbers measure the store and the retrieval pipeline only. The cost
of a real query embedding (bundled e5, and USE) is measured separately at the end.

Each size runs in two fresh subprocesses (build, then query) so that RSS and timings of one size
do not leak into the next. See bench/README.md for what every number means.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from bench._common import (
    DIM,
    NS,
    SEED,
    BagEmbedder,
    LookupEmbedder,
    file_size,
    loadavg,
    make_chunk,
    make_corpus,
    make_queries,
    pct,
    rerun,
    rss_mb,
    summary,
)
from hybridmem import Memory
from hybridmem.filters import parse_filter
from hybridmem.retrieve.dense import DenseIndex

ROOT = Path(__file__).resolve().parents[1]

FILTER_ENV = {"environment": "production"}
FILTER_ENV_SVC = {"environment": "production", "service": "svc-3"}


# --------------------------------------------------------------------------- build phase
def phase_build(n: int, db: Path, batch_docs: int, profile: bool) -> dict:
    gc.collect()
    rss0 = rss_mb()
    t = time.perf_counter()
    corpus = make_corpus(n)
    gen_s = time.perf_counter() - t
    emb = LookupEmbedder()
    mem = Memory(db, embedder=emb, auto_embed=False, chunk_size=None)
    prof = cProfile.Profile() if profile else None
    t = time.perf_counter()
    chunks = 0
    if prof:
        prof.enable()
    for i in range(0, n, batch_docs):
        rep = mem.add_documents(corpus[i : i + batch_docs])
        chunks += rep.chunks_written
    if prof:
        prof.disable()
    write_s = time.perf_counter() - t
    # the first batch is searchable by BM25 right after its commit: prove it (this first BM25 query
    # also loads the postings: at 1M chunks that takes about as long as the 30 s leg timeout, so the
    # leg's status is recorded with the answer)
    t_probe = time.perf_counter()
    probe = mem.search(corpus[0]["text"][:80], mode="bm25", top_k=3)
    probe_s = time.perf_counter() - t_probe
    bm25_visible = any(r.doc_id == corpus[0]["id"] for r in probe.results)
    probe_leg = probe.legs.get("bm25")
    t = time.perf_counter()
    vectors = mem.embed_pending()
    vec_s = time.perf_counter() - t
    st = mem.stats()
    mem.close()
    del corpus
    gc.collect()
    out = {
        "n": n,
        "corpus_gen_s": round(gen_s, 2),
        "write": {
            "chunks": chunks,
            "seconds": round(write_s, 2),
            "chunks_per_s": round(chunks / write_s, 1),
            "add_documents_call_docs": batch_docs,
            "bm25_searchable_after_commit": bm25_visible,
            "probe_query_s": round(probe_s, 2),
            "probe_bm25_leg": probe_leg.status if probe_leg else None,
        },
        "vectors": {
            "vectors": vectors,
            "seconds": round(vec_s, 2),
            "vectors_per_s": round(vectors / vec_s, 1),
            "lookup_embedder_s": round(emb.seconds, 2),
            "store_overhead_s": round(vec_s - emb.seconds, 2),
            "vectors_per_s_excluding_embedder": round(vectors / max(vec_s - emb.seconds, 1e-9), 1),
        },
        "stats": {"chunks": st.chunks, "vectors": st.vectors, "pending": st.pending_vectors},
        "rss_mb_start": round(rss0, 1),
        "rss_mb_after_build": round(rss_mb(), 1),
        "sqlite_bytes": file_size(db),
    }
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(15)
        out["profile_tottime_top15"] = s.getvalue()
    return out


# --------------------------------------------------------------------------- query phase
def _openblas():
    """ctypes handle on the OpenBLAS numpy loaded (for reading / setting its thread count), or None."""
    import ctypes

    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line.lower() and ".so" in line.split()[-1]}
    except OSError:
        return None
    for path in sorted(libs):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get, put in (
            ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
            ("openblas_get_num_threads", "openblas_set_num_threads"),
        ):
            if hasattr(lib, get) and hasattr(lib, put):
                return getattr(lib, get), getattr(lib, put)
    return None


def _timed_search(mem: Memory, q: str, **kw) -> tuple[float, object]:
    t = time.perf_counter()
    r = mem.search(q, top_k=10, **kw)
    return (time.perf_counter() - t) * 1000, r


def run_suite(mem: Memory, queries: list[str]) -> dict:
    """(c) latency per mode and (d) legs concurrency. Per query the three modes run in rotating order,
    so each (bm25, vector, hybrid) triple is paired; then the two filtered hybrids."""
    times: dict[str, list[float]] = {"bm25": [], "vector": [], "hybrid": []}
    legs_ms: dict[str, list[float]] = {"bm25": [], "dense": [], "exact": []}
    n_exact = 0
    not_ok: dict[str, int] = {}  # legs that timed out or failed: their query's time is not comparable
    modes = ("bm25", "vector", "hybrid")
    for i, q in enumerate(queries):
        for j in range(3):
            mode = modes[(i + j) % 3]
            ms, r = _timed_search(mem, q, mode=mode)
            times[mode].append(ms)
            for leg, rep in r.legs.items():
                if rep.status in ("error", "timeout"):
                    not_ok[f"{mode}.{leg}.{rep.status}"] = not_ok.get(f"{mode}.{leg}.{rep.status}", 0) + 1
            if mode == "hybrid":
                for leg in ("bm25", "dense", "exact"):
                    rep = r.legs.get(leg)
                    if rep is not None and rep.status == "ok":
                        legs_ms[leg].append(rep.took_ms)
                n_exact += "exact" in r.legs and r.legs["exact"].status == "ok"
    filt: dict[str, list[float]] = {"env": [], "env_svc": []}
    flegs: dict[str, dict[str, list[float]]] = {"env": {}, "env_svc": {}}
    for q in queries:
        for key, spec in (("env", FILTER_ENV), ("env_svc", FILTER_ENV_SVC)):
            ms, r = _timed_search(mem, q, mode="hybrid", metadata_filter=spec)
            filt[key].append(ms)
            for leg, rep in r.legs.items():
                if rep.status in ("error", "timeout"):
                    not_ok[f"{key}.{leg}.{rep.status}"] = not_ok.get(f"{key}.{leg}.{rep.status}", 0) + 1
                if rep.status == "ok":
                    flegs[key].setdefault(leg, []).append(rep.took_ms)
    hy, b, v = times["hybrid"], times["bm25"], times["vector"]
    ratio_sum = [h / (x + y) for h, x, y in zip(hy, b, v)]
    ratio_max = [h / max(x, y) for h, x, y in zip(hy, b, v)]
    hyb_p50 = statistics.median(hy)
    med = lambda d: {k: round(statistics.median(x), 3) for k, x in d.items() if x}  # noqa: E731
    return {
        "latency": {
            "bm25": summary(b),
            "vector": summary(v),
            "hybrid": summary(hy),
            "hybrid_filter_env": summary(filt["env"]),
            "hybrid_filter_env_service": summary(filt["env_svc"]),
        },
        "filtered_over_unfiltered_p50": {
            "env": round(statistics.median(filt["env"]) / hyb_p50, 2),
            "env_service": round(statistics.median(filt["env_svc"]) / hyb_p50, 2),
        },
        "concurrency": {
            "mean_hybrid_over_sum": round(statistics.fmean(ratio_sum), 3),
            "mean_hybrid_over_max": round(statistics.fmean(ratio_max), 3),
            "median_hybrid_over_sum": round(statistics.median(ratio_sum), 3),
            "median_hybrid_over_max": round(statistics.median(ratio_max), 3),
            "hybrid_leg_p50_ms": med(legs_ms),
            "queries_with_exact_leg": n_exact,
        },
        "filtered_leg_p50_ms": {k: med(x) for k, x in flegs.items()},
        "legs_not_ok": not_ok,
        "loadavg": loadavg(),
    }


def bm25_match_share(mem: Memory, queries: list[str]) -> dict:
    """How many chunks the BM25 OR-query of each query matches (FTS5 scores every one of them)."""
    from hybridmem.store.sqlite import _fts, _fts_query
    from hybridmem.text.tokenize import query_tokens

    fts = _fts(mem.store.namespace_id(NS))
    mem.store.bm25(NS, ["a"], None, 1)  # FTS5 indexes the tokens on this thread (the reference scorer)
    total = mem.store.counts(NS)["chunks"]
    counts, ntoks = [], []
    for q in queries:
        toks = query_tokens(q)
        ntoks.append(len(toks))
        counts.append(
            mem.store.reader.execute(f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ?", (_fts_query(toks),)).fetchone()[
                0
            ]
        )
    return {
        "median_matches": statistics.median(counts),
        "median_share": round(statistics.median(counts) / total, 3),
        "median_query_tokens": statistics.median(ntoks),
        "queries": len(queries),
    }


def phase_query(
    n: int, db: Path, n_queries: int, do_dense: bool, bag_n: int, blas1_queries: int, uncached_queries: int = 30
) -> dict:
    gc.collect()
    rss0 = rss_mb()
    emb = LookupEmbedder()
    t = time.perf_counter()
    mem = Memory(db, embedder=emb, auto_embed=False, chunk_size=None)
    open_ms = (time.perf_counter() - t) * 1000
    queries = make_queries(n_queries + 10)
    warm, queries = queries[:10], queries[10:]

    # cold: the first BM25 query (loads the in-memory BM25 index, when the version has one)
    t = time.perf_counter()
    r = mem.search(warm[0], mode="bm25", top_k=10)
    cold_bm25_ms = (time.perf_counter() - t) * 1000
    cold_bm25_status = r.legs["bm25"].status
    rss_bm25 = rss_mb()
    # cold: the first unfiltered vector query loads the matrix; above the threshold it starts the
    # HNSW build in the background and is answered exactly; we wait here until the graph is ready.
    t = time.perf_counter()
    r = mem.search(warm[0], mode="vector", top_k=10)
    cold_ms = (time.perf_counter() - t) * 1000
    cold_status = r.legs["dense"].status
    mem.wait_for_indexes(namespace=NS)
    ready_ms = (time.perf_counter() - t) * 1000
    idx = mem.legs.dense_index(NS)  # the namespace's dense index, loaded (and built) above
    rss_loaded = rss_mb()
    for q in warm:
        for mode in ("bm25", "vector", "hybrid"):
            mem.search(q, mode=mode, top_k=10)
        mem.search(q, mode="hybrid", top_k=10, metadata_filter=FILTER_ENV)
        mem.search(q, mode="hybrid", top_k=10, metadata_filter=FILTER_ENV_SVC)

    blas = _openblas()
    blas_threads = int(blas[0]()) if blas else None
    suite = run_suite(mem, queries)
    out = {
        "n": n,
        "open_ms": round(open_ms, 1),
        "cold_first_bm25_query_ms": round(cold_bm25_ms, 1),
        "cold_first_bm25_query_leg": cold_bm25_status,
        "rss_mb_after_bm25_load": round(rss_bm25, 1),
        "cold_first_vector_query_ms": round(cold_ms, 1),
        "cold_first_vector_query_dense_leg": cold_status,
        "dense_ready_after_ms": round(ready_ms, 1),
        "leg_timeout_s": mem.searcher.leg_timeout,
        "dense_index_kind": idx.kind,
        "exact_threshold": mem.exact_threshold,
        "openblas_threads": blas_threads,
        **suite,
        "filter_rows": {
            "env": len(mem.store.filter_rowids(NS, parse_filter(FILTER_ENV))),
            "env_service": len(mem.store.filter_rowids(NS, parse_filter(FILTER_ENV_SVC))),
        },
        "rss_mb_start": round(rss0, 1),
        "rss_mb_after_load": round(rss_loaded, 1),
        "rss_mb_after_queries": round(rss_mb(), 1),
        "sqlite_bytes": file_size(db),
    }
    out["bm25_match_share"] = bm25_match_share(mem, queries[:50])
    cache = getattr(mem.legs, "_allowed_cache", None)
    if cache is not None:  # filter results are cached per (filter, chunk version): measure a miss too
        ms_env, ms_svc = [], []
        for q in queries[:uncached_queries]:
            cache.clear()
            ms_env.append(_timed_search(mem, q, mode="hybrid", metadata_filter=FILTER_ENV)[0])
            cache.clear()
            ms_svc.append(_timed_search(mem, q, mode="hybrid", metadata_filter=FILTER_ENV_SVC)[0])
        out["latency_filter_cache_miss"] = {
            "hybrid_filter_env": summary(ms_env),
            "hybrid_filter_env_service": summary(ms_svc),
        }
    if blas1_queries > 0 and blas and blas_threads and blas_threads > 1:
        blas[1](1)  # the first queries again with single-threaded BLAS (no rebuild needed)
        out["openblas_1_thread"] = run_suite(mem, queries[:blas1_queries])
        blas[1](blas_threads)
    if do_dense:
        out["dense"] = dense_compare(mem, n_queries, bag_n, ready_ms if idx.kind == "hnsw" else None)
    mem.close()
    return out


def _bench_pair(exact: DenseIndex, hnsw: DenseIndex, qvecs: list[np.ndarray]) -> dict:
    e_ms, h_ms, recalls = [], [], []
    for q in qvecs:
        t = time.perf_counter()
        e = exact.search(q, 10)
        e_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        h = hnsw.search(q, 10)
        h_ms.append((time.perf_counter() - t) * 1000)
        recalls.append(len({r for r, _ in e} & {r for r, _ in h}) / len(e))
    return {
        "recall_at_10": round(statistics.fmean(recalls), 4),
        "min_recall_at_10": round(min(recalls), 2),
        "exact_p50_ms": round(statistics.median(e_ms), 3),
        "hnsw_p50_ms": round(statistics.median(h_ms), 3),
        "exact_p95_ms": round(pct(e_ms, 95), 3),
        "hnsw_p95_ms": round(pct(h_ms, 95), 3),
    }


def _indexes(rowids: np.ndarray, matrix: np.ndarray, first_q: np.ndarray) -> tuple[DenseIndex, DenseIndex, float]:
    exact = DenseIndex(DIM, exact_threshold=10**12)
    exact.load(1, rowids, matrix)
    hnsw = DenseIndex(DIM, exact_threshold=0)
    hnsw.load(1, rowids, matrix)
    t = time.perf_counter()
    hnsw.search(first_q, 10)  # starts the background build (answered exactly meanwhile)
    while hnsw._building:
        time.sleep(0.05)
    build_s = time.perf_counter() - t
    if hnsw._hnsw is None:
        raise RuntimeError("usearch is not available: no HNSW to compare")
    return exact, hnsw, build_s


def dense_compare(mem: Memory, n_queries: int, bag_n: int, mem_build_ms: float | None) -> dict:
    """(e) exact numpy vs usearch HNSW (connectivity 16, expansion_add 128, ef 128), unfiltered, top 10.

    Both indexes are loaded from ``store.load_vectors``. When the Memory already built its HNSW graph
    over exactly these vectors (N >= its exact_threshold), that DenseIndex is the HNSW side: building
    a second identical graph would only repeat minutes of work on a 2-core machine."""
    version, rowids, matrix = mem.store.load_vectors(NS)
    queries = make_queries(n_queries, seed=SEED + 2)
    emb = LookupEmbedder()
    qvecs = [emb.embed_query(q) for q in queries]
    own = mem.legs.dense_indexes.get(NS)
    if own is not None and own._hnsw is not None and own.version == version and len(own) == len(rowids):
        exact = DenseIndex(DIM, exact_threshold=10**12)
        exact.load(version, rowids, matrix)
        hnsw, build_s, src = own, (mem_build_ms or 0) / 1000, "Memory's own HNSW DenseIndex (built by the cold query)"
    else:
        exact, hnsw, build_s = _indexes(rowids, matrix, qvecs[0])
        src = "DenseIndex(exact_threshold=0) built here"
    random_res = _bench_pair(exact, hnsw, qvecs)
    random_res["hnsw_build_s"] = round(build_s, 1)
    random_res["hnsw_source"] = src
    out = {"n": int(len(rowids)), "queries": n_queries, "random_vectors": random_res}
    del exact, hnsw
    gc.collect()
    if bag_n > 0:
        # structured variant: the same chunk texts (first bag_n), bag-of-hashed-words vectors
        bag = BagEmbedder()
        ids = rowids[: min(bag_n, len(rowids))]
        texts = dict(mem.store.reader.execute("SELECT id, text FROM chunks WHERE id <= ?", (int(ids[-1]),)).fetchall())
        bm = np.stack([bag.embed(texts[int(r)]) for r in ids])
        bq = [bag.embed(q) for q in queries]
        exact, hnsw, build_s = _indexes(ids, bm, bq[0])
        bag_res = _bench_pair(exact, hnsw, bq)
        bag_res["hnsw_build_s"] = round(build_s, 1)
        bag_res["n"] = int(len(ids))
        out["bag_of_words_vectors"] = bag_res
    return out


# --------------------------------------------------------------------------- real embedders
def _passages(n: int, counter, target: int = 200) -> list[str]:
    rng = random.Random(SEED + 3)
    out = []
    for _ in range(n):
        text = make_chunk(rng)
        while counter(text) < target:
            text += " " + make_chunk(rng)
        # trim back towards the target by words
        words = text.split()
        while counter(" ".join(words)) > target + 10 and len(words) > 10:
            words = words[: int(len(words) * 0.95)]
        out.append(" ".join(words))
    return out


def phase_embedders(kinds: list[str]) -> dict:
    from hybridmem.embed import create_embedder

    res: dict = {}
    short = [" ".join(q.split()[:4]) for q in make_queries(50, seed=SEED + 4)]
    e5_counter = None
    for kind in kinds:
        try:
            t = time.perf_counter()
            emb = create_embedder(kind)
            emb.embed_query("warm up query")  # models may load lazily: count the first call as loading
            load_s = time.perf_counter() - t
        except Exception as e:  # model not installed: report, do not fail the run
            res[kind] = {"error": f"{type(e).__name__}: {e}"}
            continue
        q_ms = []
        for q in short:
            t = time.perf_counter()
            emb.embed_query(q)
            q_ms.append((time.perf_counter() - t) * 1000)
        if kind == "e5":
            counter = emb.token_count
            e5_counter = counter
            token_note = "E5Embedder.token_count (XLM-R sentencepiece tokens, passage prefix not counted)"
        else:
            counter = e5_counter or (lambda s: int(len(s.split()) * 1.3))
            token_note = (
                "approximated as whitespace words x 1.3 (USE exposes no tokenizer); same passages as e5, "
                "sized to ~200 e5 tokens when e5 ran first"
            )
        passages = _passages(64, counter)
        if kind == "e5":
            tokens = sum(emb.token_count(p) for p in passages)
        else:
            tokens = int(sum(len(p.split()) for p in passages) * 1.3)
        emb.embed_documents(passages[:4])  # warm
        t = time.perf_counter()
        emb.embed_documents(passages)
        doc_s = time.perf_counter() - t
        res[kind] = {
            "name": emb.name,
            "dim": emb.dim,
            "load_s": round(load_s, 2),
            "query": summary(q_ms),
            "documents": {
                "passages": len(passages),
                "tokens": tokens,
                "mean_tokens_per_passage": round(tokens / len(passages), 1),
                "seconds": round(doc_s, 2),
                "tokens_per_s": round(tokens / doc_s, 1),
                "passages_per_s": round(len(passages) / doc_s, 2),
                "token_count": token_note,
            },
            "loadavg": loadavg(),
        }
        del emb
        gc.collect()
    return res


# --------------------------------------------------------------------------- driver
def _run_child(args: list[str]) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        proc = subprocess.run([*rerun(__file__), *args, "--child-out", out])
        if proc.returncode != 0:
            raise SystemExit(f"child {args} failed with exit code {proc.returncode}")
        return json.loads(Path(out).read_text())
    finally:
        os.unlink(out)


def fmt_bytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def print_report(res: dict) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain text fallback
        Console = Table = None  # type: ignore[assignment,misc]

    def table(title: str, cols: list[str], rows: list[list]) -> None:
        if Table is None:
            print(f"\n{title}")
            w = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(cols)]
            print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(cols)))
            for r in rows:
                print("  ".join(str(x).ljust(w[i]) for i, x in enumerate(r)))
            return
        t = Table(title=title, title_justify="left")
        for i, c in enumerate(cols):
            t.add_column(c, justify="left" if i == 0 else "right")
        for r in rows:
            t.add_row(*map(str, r))
        Console(width=200).print(t)

    env = res["env"]
    sizes = res["sizes"]
    print(
        f"\nhybridmem latency benchmark  ({env['started']}, commit {env.get('git', '?')}, {env['cpus']} CPUs, "
        f"load avg (1/5/15 min) at start "
        f"{env['loadavg_start']}, at end {env['loadavg_end']})"
    )
    print("store/query embedder: lookup:384 (hash-seeded random unit vectors; no model; query embedding excluded)")
    table(
        "(a) writes, (b) vector storing",
        [
            "N",
            "add_documents chunks/s",
            "write s",
            "BM25 hit at commit",
            "embed_pending vec/s",
            "of which lookup s",
            "vec/s excl. embedder",
        ],
        [
            [
                s["n"],
                s["build"]["write"]["chunks_per_s"],
                s["build"]["write"]["seconds"],
                s["build"]["write"]["bm25_searchable_after_commit"],
                s["build"]["vectors"]["vectors_per_s"],
                s["build"]["vectors"]["lookup_embedder_s"],
                s["build"]["vectors"]["vectors_per_s_excluding_embedder"],
            ]
            for s in sizes
        ],
    )
    labels = (
        ("bm25", "bm25"),
        ("vector", "vector"),
        ("hybrid", "hybrid"),
        ("hybrid {env: production}", "hybrid_filter_env"),
        ("hybrid {env: production, service: svc-3}", "hybrid_filter_env_service"),
    )
    rows = []
    for s in sizes:
        q = s["query"]
        b1 = q.get("openblas_1_thread")
        for name, key in labels:
            lat = q["latency"][key]
            row = [s["n"], name, lat["p50_ms"], lat["p95_ms"], lat["mean_ms"]]
            if b1:
                row += [b1["latency"][key]["p50_ms"], b1["latency"][key]["p95_ms"]]
            rows.append(row)
    cols = ["N", "mode (top_k=10)", "p50 ms", "p95 ms", "mean ms"]
    miss = any("latency_filter_cache_miss" in s["query"] for s in sizes)
    if any("openblas_1_thread" in s["query"] for s in sizes):
        nb = res["config"].get("blas1_queries", "")
        cols += [f"p50 ms BLAS 1 thr ({nb} q)", f"p95 ms BLAS 1 thr ({nb} q)"]
        rows = [r + ["", ""] if len(r) < len(cols) else r for r in rows]
    table(f"(c) query latency, warm, {res['config']['queries']} queries, excluding query embedding", cols, rows)

    if miss:
        table(
            "(c) filtered hybrid with the filter cache cleared before each query (a miss: the filter runs in SQL)",
            ["N", "filter", "p50 ms", "p95 ms", "queries", "cached p50 ms (above)"],
            [
                [s["n"], name, m[key]["p50_ms"], m[key]["p95_ms"], m[key]["n"], s["query"]["latency"][key]["p50_ms"]]
                for s in sizes
                if (m := s["query"].get("latency_filter_cache_miss"))
                for name, key in (("env", "hybrid_filter_env"), ("env+svc", "hybrid_filter_env_service"))
            ],
        )

    def ratios(q: dict) -> list:
        c = q["concurrency"]
        return [
            q["filtered_over_unfiltered_p50"]["env"],
            q["filtered_over_unfiltered_p50"]["env_service"],
            c["mean_hybrid_over_sum"],
            c["mean_hybrid_over_max"],
            ", ".join(f"{k} {v}" for k, v in c["hybrid_leg_p50_ms"].items()),
        ]

    rows = []
    for s in sizes:
        q = s["query"]
        rows.append([s["n"], f"default ({q['openblas_threads']})", q["dense_index_kind"], *ratios(q)])
        if "openblas_1_thread" in q:
            rows.append([s["n"], "1", q["dense_index_kind"], *ratios(q["openblas_1_thread"])])
    table(
        "(c) filtered/unfiltered hybrid p50, (d) legs concurrency (mean over queries of per-query ratios)",
        [
            "N",
            "BLAS threads",
            "dense index",
            "env/unfilt.",
            "env+svc/unfilt.",
            "hybrid/(bm25+vector)",
            "hybrid/max(bm25,vector)",
            "hybrid legs p50 ms (from took_ms)",
        ],
        rows,
    )
    table(
        "BM25 work per query (median over 50 queries) and filtered hybrid leg p50 ms (default BLAS)",
        ["N", "BM25 query tokens", "chunks matched (share)", "filter", "rows allowed", "filtered legs p50 ms"],
        [
            [
                s["n"],
                s["query"]["bm25_match_share"]["median_query_tokens"],
                f"{s['query']['bm25_match_share']['median_matches']} ({s['query']['bm25_match_share']['median_share']:.0%})",
                name,
                s["query"]["filter_rows"][rk],
                ", ".join(f"{k} {v}" for k, v in s["query"]["filtered_leg_p50_ms"][fk].items()),
            ]
            for s in sizes
            for name, rk, fk in (("env", "env", "env"), ("env+svc", "env_service", "env_svc"))
        ],
    )
    bad = {f"N={s['n']}": s["query"]["legs_not_ok"] for s in sizes if s["query"]["legs_not_ok"]}
    if bad:
        print(f"WARNING: legs that timed out or failed during the measured queries: {bad}")
    dense = next((s["query"]["dense"] for s in reversed(sizes) if "dense" in s["query"]), None)
    if dense:
        rows = []
        for name, key in (
            ("lookup (i.i.d. random)", "random_vectors"),
            ("bag of hashed words", "bag_of_words_vectors"),
        ):
            d = dense.get(key)
            if d:
                rows.append(
                    [
                        name,
                        d.get("n", dense["n"]),
                        d["recall_at_10"],
                        d["min_recall_at_10"],
                        d["exact_p50_ms"],
                        d["hnsw_p50_ms"],
                        d["exact_p95_ms"],
                        d["hnsw_p95_ms"],
                        d["hnsw_build_s"],
                    ]
                )
        table(
            f"(e) dense exact vs HNSW, {dense['queries']} queries, top 10, unfiltered, DenseIndex.search only",
            [
                "vectors",
                "N",
                "HNSW recall@10",
                "min recall",
                "exact p50 ms",
                "HNSW p50 ms",
                "exact p95 ms",
                "HNSW p95 ms",
                "HNSW build s",
            ],
            rows,
        )
    table(
        "(f) memory and size",
        [
            "N",
            "build proc RSS MB",
            "query proc RSS: start",
            "+ BM25 index",
            "+ dense index",
            "after queries",
            "SQLite file",
            "open ms",
            "cold 1st bm25 query ms",
            "cold 1st vector query ms (dense leg)",
            "dense index ready after ms",
        ],
        [
            [
                s["n"],
                s["build"]["rss_mb_after_build"],
                s["query"]["rss_mb_start"],
                s["query"].get("rss_mb_after_bm25_load", ""),
                s["query"]["rss_mb_after_load"],
                s["query"]["rss_mb_after_queries"],
                fmt_bytes(s["query"]["sqlite_bytes"]),
                s["query"]["open_ms"],
                s["query"].get("cold_first_bm25_query_ms", ""),
                f"{s['query']['cold_first_vector_query_ms']} ({s['query']['cold_first_vector_query_dense_leg']})",
                s["query"]["dense_ready_after_ms"],
            ]
            for s in sizes
        ],
    )
    emb = res.get("embedders", {})
    if emb:
        rows = []
        for k, v in emb.items():
            if "error" in v:
                rows.append([k, v["error"], "", "", "", "", "", ""])
            else:
                rows.append(
                    [
                        k,
                        v["load_s"],
                        v["query"]["p50_ms"],
                        v["query"]["p95_ms"],
                        v["documents"]["tokens_per_s"],
                        v["documents"]["passages_per_s"],
                        v["documents"]["mean_tokens_per_passage"],
                        "e5 tokenizer" if k == "e5" else "words x 1.3 (approx.)",
                    ]
                )
        table(
            "(3) real embedders, CPU, 2 threads (50 short queries; 64 passages of ~200 tokens)",
            [
                "embedder",
                "load + 1st query s",
                "embed_query p50 ms",
                "p95 ms",
                "doc tokens/s",
                "passages/s",
                "tokens/passage",
                "token count",
            ],
            rows,
        )
        if "e5" in emb and "error" not in emb["e5"]:
            table(
                "hybrid p50 including e5 query embedding (= hybrid p50 + e5 embed_query p50)",
                ["N", "hybrid p50 ms", "e5 query p50 ms", "total ms"],
                [
                    [
                        s["n"],
                        s["query"]["latency"]["hybrid"]["p50_ms"],
                        emb["e5"]["query"]["p50_ms"],
                        s["hybrid_p50_incl_e5_ms"],
                    ]
                    for s in sizes
                ],
            )
    tg = res.get("targets")
    if tg:
        table("targets", ["target", "measured", "met"], [[t["target"], t["measured"], t["met"]] for t in tg])
    print(f"\ntotal {env['total_s']} s; JSON: {res['out']}")


def targets(res: dict) -> list[dict]:
    big = max(res["sizes"], key=lambda s: s["n"])
    q = big["query"]
    out = []
    hp50 = q["latency"]["hybrid"]["p50_ms"]
    out.append(
        {"target": f"hybrid p50 <= 10 ms at N={big['n']}, excl. query embedding", "measured": hp50, "met": hp50 <= 10}
    )
    if "hybrid_p50_incl_e5_ms" in big:
        v = big["hybrid_p50_incl_e5_ms"]
        out.append(
            {"target": f"hybrid p50 <= 25 ms at N={big['n']}, incl. e5 query embedding", "measured": v, "met": v <= 25}
        )
    w = min(s["build"]["write"]["chunks_per_s"] for s in res["sizes"])
    out.append({"target": "writes >= 500 chunks/s (slowest size)", "measured": w, "met": w >= 500})
    for s in res["sizes"]:
        r = max(s["query"]["filtered_over_unfiltered_p50"].values())
        out.append(
            {
                "target": f"filtered hybrid p50 <= 2x unfiltered at N={s['n']} (worse filter)",
                "measured": r,
                "met": r <= 2,
            }
        )
    if "dense" in q:
        d = q["dense"]
        r = d["random_vectors"]["recall_at_10"]
        out.append(
            {"target": f"HNSW recall@10 >= 0.95 (lookup random vectors, N={d['n']})", "measured": r, "met": r >= 0.95}
        )
        if "bag_of_words_vectors" in d:
            r = d["bag_of_words_vectors"]["recall_at_10"]
            out.append(
                {
                    "target": f"HNSW recall@10 >= 0.95 (bag-of-words vectors, N={d['bag_of_words_vectors']['n']})",
                    "measured": r,
                    "met": r >= 0.95,
                }
            )
    return out


def _git_describe() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated corpus sizes (chunks)")
    ap.add_argument("--queries", type=int, default=200, help="measured queries per mode (after 10 warm-up)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "latency.json"))
    ap.add_argument("--embedders", default="e5,use", help="real embedders to time ('' to skip)")
    ap.add_argument("--batch-docs", type=int, default=1000, help="documents per add_documents() call")
    ap.add_argument("--workdir", default=None, help="where stores are built (default: a temp dir, deleted)")
    ap.add_argument("--keep", action="store_true", help="keep the built stores")
    ap.add_argument("--profile", action="store_true", help="cProfile add_documents; print top functions")
    ap.add_argument("--no-dense", action="store_true", help="skip (e) exact vs HNSW")
    ap.add_argument(
        "--bag-n",
        type=int,
        default=20000,
        help="vectors in the structured (bag-of-words) HNSW recall check; 0 skips it",
    )
    ap.add_argument(
        "--blas1-queries",
        type=int,
        default=50,
        help="queries of the second pass with OpenBLAS limited to 1 thread (0 skips it)",
    )
    # internal: child processes
    ap.add_argument("--child", choices=("build", "query", "embedders"), help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("--dense", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--report", metavar="JSON", help="only print the tables of an earlier run's JSON")
    a = ap.parse_args()

    if a.report:
        print_report(json.loads(Path(a.report).read_text()))
        return

    if a.child:
        if a.child == "build":
            r = phase_build(a.n, Path(a.db), a.batch_docs, a.profile)
        elif a.child == "query":
            r = phase_query(a.n, Path(a.db), a.queries, a.dense, a.bag_n, a.blas1_queries)
        else:
            r = phase_embedders([k for k in a.embedders.split(",") if k])
        Path(a.child_out).write_text(json.dumps(r))
        return

    sizes = sorted(int(s) for s in a.sizes.split(",") if s.strip())
    workdir = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="hybridmem-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    res: dict = {
        "env": {
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_start": loadavg(),
            "sqlite": __import__("sqlite3").sqlite_version,
            "numpy": np.__version__,
            "git": _git_describe(),
        },
        "config": {
            "sizes": sizes,
            "queries": a.queries,
            "top_k": 10,
            "warmup_queries": 10,
            "seed": SEED,
            "embedder": f"lookup:{DIM}",
            "batch_docs": a.batch_docs,
            "blas1_queries": a.blas1_queries,
            "bag_n": a.bag_n,
        },
        "sizes": [],
    }
    t_all = time.perf_counter()
    try:
        for n in sizes:
            db = workdir / f"bench-{n}.db"
            for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
                p.unlink(missing_ok=True)
            print(f"[N={n}] building ... (load avg {loadavg()})", flush=True)
            extra = ["--profile"] if a.profile else []
            b = _run_child(
                ["--child", "build", "--n", str(n), "--db", str(db), "--batch-docs", str(a.batch_docs), *extra]
            )
            print(
                f"[N={n}] built: {b['write']['chunks_per_s']} chunks/s, vectors {b['vectors']['vectors_per_s']}/s",
                flush=True,
            )
            if "profile_tottime_top15" in b:
                print(b["profile_tottime_top15"])
            print(f"[N={n}] querying ... (load avg {loadavg()})", flush=True)
            dense = ["--dense"] if (n == sizes[-1] and not a.no_dense) else []
            extra = ["--bag-n", str(a.bag_n), "--blas1-queries", str(a.blas1_queries)]
            q = _run_child(
                ["--child", "query", "--n", str(n), "--db", str(db), "--queries", str(a.queries), *dense, *extra]
            )
            res["sizes"].append({"n": n, "build": b, "query": q})
            if not a.keep:
                for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
                    p.unlink(missing_ok=True)
        if a.embedders:
            print(f"[embedders] {a.embedders} ... (load avg {loadavg()})", flush=True)
            res["embedders"] = _run_child(["--child", "embedders", "--embedders", a.embedders])
            e5 = res["embedders"].get("e5", {})
            if "query" in e5:
                for s in res["sizes"]:
                    s["hybrid_p50_incl_e5_ms"] = round(
                        s["query"]["latency"]["hybrid"]["p50_ms"] + e5["query"]["p50_ms"], 3
                    )
    finally:
        if not a.workdir and not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    res["env"]["loadavg_end"] = loadavg()
    res["env"]["total_s"] = round(time.perf_counter() - t_all, 1)
    res["targets"] = targets(res)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    res["out"] = str(out)
    out.write_text(json.dumps(res, indent=2))
    print_report(res)


if __name__ == "__main__":
    main()
