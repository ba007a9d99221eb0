"""Scaling curve of the embedded backend (SQLite): ingest chunks/s, query p50 and RSS at 10k, 100k, 1M chunks.

    python -m bench scaling                          # sizes 10000,100000
    python -m bench scaling --sizes 10000,100000,1000000 --size-timeout 1800
    python -m bench scaling --report bench/results/scaling.json

Corpus, queries and vectors are bench/_common.py's (synthetic incident notes, ``lookup:384`` look-up
embedder: no model runs, so query embedding is excluded and reported apart). Each size is built in
one subprocess (``latency.phase_build``: ``add_documents`` 1000 docs a call, then ``embed_pending``)
and queried in a fresh one: cold BM25 query (loads the postings), cold vector query (loads the
vectors; above ``exact_threshold`` = 50,000 chunks it builds the HNSW graph, waited for here), 10
warm-up queries, then ``--queries`` queries in each of bm25 / vector / hybrid mode, one at a time.

Bottleneck per size: the hybrid response's per-leg ``took_ms`` (bm25, dense, exact identifier;
the legs run concurrently) against the whole search; what is left after the slowest leg is fusion
and response building. Ingest: cProfile of ``add_documents`` on ``--profile-n`` chunks (top
functions by own time). The e5 query-embedding cost is taken from bench/results/latency.json when
it has one (section (3)), to say when embedding, not retrieval, dominates a real query.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

from bench._common import NS, LookupEmbedder, file_size, loadavg, make_corpus, make_queries, rerun, rss_mb, summary  # noqa: E402
from bench.latency import phase_build  # noqa: E402
from hybridmem import Memory  # noqa: E402


def _search(mem: Memory, q: str, mode: str):
    t = time.perf_counter()
    r = mem.search({"search_text": q, "top_k": 10, "mode": mode})
    return (time.perf_counter() - t) * 1000, r


def phase_query(n: int, db: Path, n_queries: int) -> dict:
    gc.collect()
    rss0 = rss_mb()
    t = time.perf_counter()
    mem = Memory(db, embedder=LookupEmbedder(), auto_embed=False, chunk_size=None)
    open_ms = (time.perf_counter() - t) * 1000
    qs = make_queries(n_queries + 10)
    warm, queries = qs[:10], qs[10:]
    cold_bm25_ms, _ = _search(mem, warm[0], "bm25")
    rss_bm25 = rss_mb()
    t = time.perf_counter()
    _search(mem, warm[0], "vector")
    cold_vec_ms = (time.perf_counter() - t) * 1000
    mem.wait_for_indexes(namespace=NS)
    ready_ms = (time.perf_counter() - t) * 1000
    rss_loaded = rss_mb()
    for q in warm:
        for mode in ("bm25", "vector", "hybrid"):
            _search(mem, q, mode)
    times: dict[str, list[float]] = {"bm25": [], "vector": [], "hybrid": []}
    legs: dict[str, list[float]] = {}
    inner: list[float] = []  # the response's own took_ms (hybrid)
    not_ok: dict[str, int] = {}
    for q in queries:
        for mode in ("bm25", "vector", "hybrid"):
            ms, r = _search(mem, q, mode)
            times[mode].append(ms)
            if mode == "hybrid":
                inner.append(r.took_ms)
                for leg, rep in r.legs.items():
                    if rep.status == "ok":
                        legs.setdefault(leg, []).append(rep.took_ms)
                    elif rep.status in ("error", "timeout"):
                        not_ok[f"{leg} {rep.status}"] = not_ok.get(f"{leg} {rep.status}", 0) + 1
    out = {
        "n": n,
        "open_ms": round(open_ms, 1),
        "cold_first_bm25_query_ms": round(cold_bm25_ms, 1),
        "cold_first_vector_query_ms": round(cold_vec_ms, 1),
        "dense_ready_after_ms": round(ready_ms, 1),
        "dense_index_kind": mem.stats(NS).dense_index,
        "exact_threshold": mem.exact_threshold,
        "latency": {m: summary(v) for m, v in times.items()},
        "hybrid_took_ms_p50": round(statistics.median(inner), 3),
        "hybrid_leg_p50_ms": {k: round(statistics.median(v), 3) for k, v in legs.items()},
        "hybrid_leg_share_of_queries": {k: round(len(v) / len(queries), 3) for k, v in legs.items()},
        "legs_not_ok": not_ok,
        "rss_mb_start": round(rss0, 1),
        "rss_mb_after_bm25_load": round(rss_bm25, 1),
        "rss_mb_after_dense_load": round(rss_loaded, 1),
        "rss_mb_after_queries": round(rss_mb(), 1),
        "sqlite_bytes": file_size(db),
        "loadavg": loadavg(),
    }
    mem.close()
    return out


def phase_profile(n: int, db: Path) -> dict:
    """cProfile of add_documents (top 12 functions by own time) on n chunks, apart from the timed build
    (the profiler roughly doubles Python's cost, so chunks/s are not taken from here)."""
    corpus = make_corpus(n)
    mem = Memory(db, embedder=LookupEmbedder(), auto_embed=False, chunk_size=None)
    prof = cProfile.Profile()
    prof.enable()
    for i in range(0, n, 1000):
        mem.add_documents(corpus[i : i + 1000])
    prof.disable()
    mem.close()
    st = pstats.Stats(prof)
    total = st.total_tt
    rows = []
    for (file, line, fn), (cc, nc, tt, ct, _) in st.stats.items():
        rows.append(
            {
                "function": f"{Path(file).name}:{line}({fn})",
                "tottime_s": round(tt, 3),
                "share": round(tt / total, 3),
                "calls": nc,
            }
        )
    rows.sort(key=lambda r: -r["tottime_s"])
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
    return {"n": n, "total_s": round(total, 2), "top": rows[:12]}


def bottleneck(q: dict, e5_query_ms: float | None) -> dict:
    legs = q["hybrid_leg_p50_ms"]
    total = q["hybrid_took_ms_p50"]
    slowest = max(legs, key=legs.get) if legs else None
    parts = {f"{k} leg": v for k, v in legs.items()}
    parts["fusion + response (took_ms - slowest leg)"] = round(max(total - (legs[slowest] if slowest else 0), 0), 3)
    parts["client overhead (wall - took_ms)"] = round(max(q["latency"]["hybrid"]["p50_ms"] - total, 0), 3)
    name = max(parts, key=parts.get)
    out = {"components_p50_ms": parts, "retrieval_bottleneck": name}
    if e5_query_ms is not None:
        out["e5_query_embedding_p50_ms"] = e5_query_ms
        out["with_e5_query_embedding"] = (
            "query embedding (e5)" if e5_query_ms > q["latency"]["hybrid"]["p50_ms"] else name
        )
    return out


def _child(args: list[str], timeout: float) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        subprocess.run([*rerun(__file__), *args, "--child-out", out], check=True, timeout=timeout)
        return json.loads(Path(out).read_text())
    finally:
        Path(out).unlink(missing_ok=True)


def _e5_query_ms() -> float | None:
    p = BENCH / "results" / "latency.json"
    try:
        return json.loads(p.read_text())["embedders"]["e5"]["query"]["p50_ms"]
    except (OSError, KeyError, ValueError):
        return None


def chart(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    sizes = [s for s in res["sizes"] if "query" in s]
    ns = [s["n"] for s in sizes]
    fig, axes = plt.subplots(1, 3, figsize=(16, 6.2))
    ax = axes[0]
    for mode, c in (("hybrid", "#d62728"), ("bm25", "#1f77b4"), ("vector", "#2ca02c")):
        ys = [s["query"]["latency"][mode]["p50_ms"] for s in sizes]
        ax.plot(ns, ys, "o-", color=c, label=f"{mode} p50")
        for x, y in zip(ns, ys):
            ax.annotate(f"{y:.3g}", (x, y), textcoords="offset points", xytext=(4, 5), fontsize=8, color=c)
    leg_names = sorted({k for s in sizes for k in s["query"]["hybrid_leg_p50_ms"]})
    for leg, ls, c in zip(leg_names, ("--", ":", "-.", "--"), ("#17becf", "#8c564b", "#7f7f7f", "#bcbd22")):
        ax.plot(
            ns,
            [s["query"]["hybrid_leg_p50_ms"].get(leg, float("nan")) for s in sizes],
            ls,
            color=c,
            label=f"hybrid: {leg} leg p50 (took_ms)",
        )
    ax.set_title("query latency (ms, excl. query embedding)")
    ax2 = axes[1]
    ys = [s["build"]["write"]["chunks_per_s"] for s in sizes]
    ax2.plot(ns, ys, "o-", color="#9467bd", label="add_documents chunks/s")
    ys2 = [s["build"]["vectors"]["vectors_per_s_excluding_embedder"] for s in sizes]
    ax2.plot(ns, ys2, "s--", color="#8c564b", label="embed_pending vectors/s (excl. embedder)")
    for x, y in zip(ns, ys):
        ax2.annotate(f"{y:.0f}", (x, y), textcoords="offset points", xytext=(4, 5), fontsize=8)
    ax2.set_title("ingest throughput (per second)")
    ax3 = axes[2]
    ax3.plot(
        ns,
        [s["query"]["rss_mb_after_queries"] for s in sizes],
        "o-",
        color="#d62728",
        label="query process RSS after queries",
    )
    ax3.plot(
        ns,
        [s["build"]["rss_mb_after_build"] for s in sizes],
        "s--",
        color="#7f7f7f",
        label="build process RSS after build",
    )
    ax3.plot(ns, [s["query"]["sqlite_bytes"] / 2**20 for s in sizes], "^:", color="#1f77b4", label="SQLite file MB")
    for x, y in zip(ns, [s["query"]["rss_mb_after_queries"] for s in sizes]):
        ax3.annotate(f"{y:.0f}", (x, y), textcoords="offset points", xytext=(4, 5), fontsize=8)
    ax3.set_title("memory (MB)")
    for a in axes:
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("chunks")
        a.set_xticks(ns, [f"{n // 1000}k" if n < 10**6 else f"{n // 10**6}M" for n in ns])
        a.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        a.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        a.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        a.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    thr = res["config"].get("exact_threshold")
    if thr and ns and min(ns) < thr < max(ns):
        axes[0].axvline(thr, color="black", lw=0.8, alpha=0.5)
        axes[0].text(thr, axes[0].get_ylim()[1], " HNSW above", fontsize=8, va="top")
    fig.suptitle(
        f"hybridmem embedded (SQLite) scaling, lookup:384 vectors, {res['env']['cpus']} CPUs; log-log", fontsize=12
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_report(res: dict) -> None:
    print(
        f"\nscaling ({res['env']['started']}, commit {res['env'].get('git')}, {res['env']['cpus']} CPUs, load avg "
        f"{res['env']['loadavg_start']} -> {res['env'].get('loadavg_end')})"
    )
    hdr = [
        "N",
        "dense",
        "write ch/s",
        "vec/s",
        "bm25 p50",
        "vector p50",
        "hybrid p50",
        "hybrid p95",
        "legs p50 (took_ms)",
        "bottleneck",
        "query RSS MB",
        "SQLite MB",
        "HNSW ready s",
    ]
    rows = [hdr]
    for s in res["sizes"]:
        if "error" in s:
            rows.append([s["n"], s["error"]] + [""] * (len(hdr) - 2))
            continue
        q, b = s["query"], s["build"]
        rows.append(
            [
                s["n"],
                q["dense_index_kind"],
                b["write"]["chunks_per_s"],
                b["vectors"]["vectors_per_s"],
                q["latency"]["bm25"]["p50_ms"],
                q["latency"]["vector"]["p50_ms"],
                q["latency"]["hybrid"]["p50_ms"],
                q["latency"]["hybrid"]["p95_ms"],
                ", ".join(f"{k} {v}" for k, v in q["hybrid_leg_p50_ms"].items()),
                s["bottleneck"]["retrieval_bottleneck"],
                q["rss_mb_after_queries"],
                round(q["sqlite_bytes"] / 2**20, 1),
                round(q["dense_ready_after_ms"] / 1000, 1),
            ]
        )
    w = [max(len(str(r[i])) for r in rows) for i in range(len(hdr))]
    for j, r in enumerate(rows):
        print("  ".join(str(c).rjust(x) for c, x in zip(r, w)))
        if j == 0:
            print("  ".join("-" * x for x in w))
    p = res.get("ingest_profile")
    if p:
        print(f"\ningest profile (add_documents, {p['n']} chunks, {p['total_s']} s under cProfile), top by own time:")
        for r in p["top"][:8]:
            print(f"  {r['share']:6.1%}  {r['tottime_s']:7.2f} s  {r['function']}")
    for s in res["sizes"]:
        if "bottleneck" in s:
            print(
                f"N={s['n']}: "
                + ", ".join(f"{k} {v}" for k, v in s["bottleneck"]["components_p50_ms"].items())
                + (
                    f"; e5 query embedding p50 {s['bottleneck']['e5_query_embedding_p50_ms']} ms"
                    if "e5_query_embedding_p50_ms" in s["bottleneck"]
                    else ""
                )
            )
    if res.get("not_run"):
        print(f"not run: {res['not_run']}")
    print(f"\nJSON: {res.get('out')}  chart: {res.get('chart')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--profile-n", type=int, default=20000, help="chunks of the cProfile'd ingest (0 skips)")
    ap.add_argument(
        "--size-timeout", type=float, default=1800, help="seconds per size (build + query) before giving up"
    )
    ap.add_argument("--out", default=str(BENCH / "results" / "scaling.json"))
    ap.add_argument("--chart", default=str(BENCH / "results" / "scaling-embedded.png"))
    ap.add_argument("--report", metavar="JSON")
    ap.add_argument("--child", choices=("build", "query", "profile"), help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.report:
        r = json.loads(Path(a.report).read_text())
        chart(r, Path(a.chart))  # re-drawn from the JSON
        print_report(r)
        return
    if a.child:
        if a.child == "build":
            r = phase_build(a.n, Path(a.db), 1000, False)
        elif a.child == "query":
            r = phase_query(a.n, Path(a.db), a.queries)
        else:
            r = phase_profile(a.n, Path(a.db))
        Path(a.child_out).write_text(json.dumps(r))
        return

    from hybridmem import config

    sizes = sorted(int(s) for s in a.sizes.split(",") if s.strip())
    git = (
        subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
        ).stdout.strip()
        or None
    )
    res: dict = {
        "env": {
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "cpus": os.cpu_count(),
            "git": git,
            "loadavg_start": loadavg(),
        },
        "config": {
            "sizes": sizes,
            "queries": a.queries,
            "top_k": 10,
            "embedder": "lookup:384",
            "exact_threshold": config.EXACT_THRESHOLD,
            "batch_docs": 1000,
            "size_timeout_s": a.size_timeout,
        },
        "sizes": [],
        "not_run": [],
    }
    e5_ms = _e5_query_ms()
    work = Path(tempfile.mkdtemp(prefix="hybridmem-scaling-"))
    t_all = time.perf_counter()
    try:
        if a.profile_n:
            print(f"[profile] add_documents on {a.profile_n} chunks ...", flush=True)
            res["ingest_profile"] = _child(
                ["--child", "profile", "--n", str(a.profile_n), "--db", str(work / "profile.db")], a.size_timeout
            )
        for n in sizes:
            db = work / f"scale-{n}.db"
            t = time.perf_counter()
            try:
                print(f"[N={n}] building ... (load avg {loadavg()})", flush=True)
                b = _child(["--child", "build", "--n", str(n), "--db", str(db)], a.size_timeout)
                print(f"[N={n}] {b['write']['chunks_per_s']} chunks/s; querying ... (load avg {loadavg()})", flush=True)
                left = a.size_timeout - (time.perf_counter() - t)
                q = _child(
                    ["--child", "query", "--n", str(n), "--db", str(db), "--queries", str(a.queries)], max(left, 60)
                )
                s = {
                    "n": n,
                    "build": b,
                    "query": q,
                    "bottleneck": bottleneck(q, e5_ms),
                    "wall_s": round(time.perf_counter() - t, 1),
                }
                print(
                    f"[N={n}] hybrid p50 {q['latency']['hybrid']['p50_ms']} ms, {q['dense_index_kind']}, "
                    f"bottleneck {s['bottleneck']['retrieval_bottleneck']}",
                    flush=True,
                )
            except subprocess.TimeoutExpired:
                s = {
                    "n": n,
                    "error": f"not finished within --size-timeout {a.size_timeout:.0f} s",
                    "wall_s": round(time.perf_counter() - t, 1),
                }
                res["not_run"].append(s["error"] + f" (N={n})")
                print(f"[N={n}] {s['error']}", flush=True)
            res["sizes"].append(s)
            for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
                p.unlink(missing_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res["env"]["loadavg_end"] = loadavg()
    res["env"]["total_s"] = round(time.perf_counter() - t_all, 1)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    res["out"] = str(out.relative_to(ROOT)) if out.resolve().is_relative_to(ROOT) else str(out)
    res["chart"] = (
        str(Path(a.chart).resolve().relative_to(ROOT)) if Path(a.chart).resolve().is_relative_to(ROOT) else a.chart
    )
    out.write_text(json.dumps(res, indent=2))
    chart(res, Path(a.chart))
    print_report(res)


if __name__ == "__main__":
    main()
