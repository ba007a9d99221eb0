"""hybridmem against the tools users would pick instead, same data, same vectors, one run.

    python -m bench peers                                   # SciFact (quality + speed) and synthetic 100k (speed, memory)
    python -m bench peers --corpora scifact --systems hybridmem,bm25s
    python -m bench peers --report bench/results/peers.json # re-print an earlier run

Systems (adapters in bench/peer_adapters/): hybridmem (Memory, SQLite temp file, mode hybrid), LangChain
EnsembleRetriever (BM25Retriever on rank_bm25 + FAISS, 0.5/0.5), LlamaIndex QueryFusionRetriever
(reciprocal_rerank, BM25 + VectorStoreIndex, num_queries=1: no LLM), LanceDB native hybrid (FTS +
vector + RRFReranker), bm25s alone, exact numpy alone.

Every system embeds through the same look-up embedder (bench/peer_adapters/__init__.py: a dict text ->
vector for documents and one for queries), so the comparison measures retrieval and fusion, not the
model. SciFact vectors are e5 (hybridmem's ``e5`` spec, real weights) read from the bench cache that
``python -m bench precompute e5 scifact`` fills; the embedding cost itself is reported apart from
``bench/results/embed-cost-e5-scifact.json`` (written by precompute.py). Synthetic vectors come from
bench/_common.py's look-up embedder (``lookup:384``) over its generated corpus and queries.

Each (corpus, system) runs in its own subprocess: load data and vectors, take the RSS baseline, build
(timed), one cold query (timed), 10 warm-up queries, then the measured queries one at a time from a
single client thread. Peak memory = highest RSS during build and queries minus the baseline.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

from bench._common import LookupEmbedder, loadavg, make_corpus, make_queries, pct, rerun  # noqa: E402
from bench.peer_adapters import SYSTEMS, VectorLookup, load  # noqa: E402  (the adapters package)

DATA = ROOT.parent / "shared" / "data" / "beir"
CACHE = ROOT / ".bench-cache" / "embeddings.db"
E5_NAME = "e5:multilingual-e5-small-q4"  # hybridmem's E5Embedder(variant="original").name
EMBED_COST = BENCH / "results" / "embed-cost-e5-scifact.json"
ORDER = [
    "hybridmem",
    "hybridmem-exact",
    "langchain-ensemble",
    "llamaindex-fusion",
    "lancedb-hybrid",
    "bm25s",
    "numpy-exact",
]
WARMUP = 10
TOP_K = 10


# --------------------------------------------------------------------------------------- corpora
def _cache_vectors(texts: list[str], role: str, con: sqlite3.Connection) -> dict[str, np.ndarray]:
    keys = {hashlib.sha256(f"{role}\x00{t}".encode()).digest(): t for t in texts}
    out: dict[str, np.ndarray] = {}
    ks = list(keys)
    for i in range(0, len(ks), 500):
        part = ks[i : i + 500]
        q = f"SELECT key, vec FROM emb WHERE model=? AND key IN ({','.join('?' * len(part))})"
        for k, v in con.execute(q, [E5_NAME, *part]):
            out[keys[k]] = np.frombuffer(v, dtype=np.float32)
    missing = len(keys) - len(out)
    if missing:
        raise SystemExit(
            f"{missing} {role} texts of SciFact are not in {CACHE} for {E5_NAME}: "
            "run `python -m bench precompute e5 scifact` first"
        )
    return out


def load_scifact():
    from hybridmem.eval.datasets import load_dataset

    ds = load_dataset(str(DATA / "scifact"), "test")
    docs = [{"id": d["id"], "text": d["text"]} for d in ds.docs]
    con = sqlite3.connect(str(CACHE))  # (not mode=ro: a WAL database needs its -shm file, created on open)
    dvec = _cache_vectors([d["text"] for d in docs], "passage", con)
    qvec = _cache_vectors(list(ds.queries.values()), "query", con)
    con.close()
    emb = VectorLookup(E5_NAME, 384, dvec, qvec)
    queries = list(ds.queries.items())  # (qid, text), all judged test queries
    warm = queries[:WARMUP]
    return docs, warm, queries, ds.qrels, emb


def load_scifact_lookup():
    """SciFact's texts and test queries with look-up vectors instead of e5 (no embedding cache needed):
    BM25 and fusion see the real text, the dense legs random unit vectors of e5-small's dimension (384).
    Latency, ingest and memory only: quality is not computed (the vectors carry no meaning)."""
    from hybridmem.eval.datasets import load_dataset

    ds = load_dataset(str(DATA / "scifact"), "test")
    docs = [{"id": d["id"], "text": d["text"]} for d in ds.docs]
    queries = list(ds.queries.items())
    return docs, queries[:WARMUP], queries, None, _lookup_vectors(docs, ds.queries.values())


def _lookup_vectors(docs: list[dict], queries) -> VectorLookup:
    """bench/_common.py's ``lookup:384`` vectors for these documents and queries."""
    lk = LookupEmbedder()
    dvec = {d["text"]: lk._vec("passage", d["text"]) for d in docs}
    qvec = {q: lk._vec("query", q) for q in queries}
    return VectorLookup(lk.name, lk.dim, dvec, qvec)


def load_synthetic(n: int, nq: int):
    docs = [{"id": d["id"], "text": d["text"]} for d in make_corpus(n)]
    qs = make_queries(nq + WARMUP)
    emb = _lookup_vectors(docs, qs)
    warm = [(f"w{i}", q) for i, q in enumerate(qs[:WARMUP])]
    queries = [(f"q{i}", q) for i, q in enumerate(qs[WARMUP:])]
    return docs, warm, queries, None, emb


# --------------------------------------------------------------------------------------- child
def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


class PeakSampler:
    """Polls RSS every 20 ms in a thread (only while building: it is stopped before queries are timed)."""

    def __init__(self) -> None:
        self.peak = rss_mb()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_mb())

    def __enter__(self) -> "PeakSampler":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss_mb())


def run_child(system: str, corpus: str, n: int, nq: int, depth: int, query_budget: float) -> dict:
    t0 = time.perf_counter()
    Peer = load(system)
    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if corpus == "scifact":
        docs, warm, queries, qrels, emb = load_scifact()
    elif corpus == "scifact-lookup":
        docs, warm, queries, qrels, emb = load_scifact_lookup()
    else:
        docs, warm, queries, qrels, emb = load_synthetic(n, nq)
    load_s = time.perf_counter() - t0
    gc.collect()
    base = rss_mb()
    maxrss_base = maxrss_mb()
    out: dict = {
        "system": system,
        "corpus": corpus,
        "docs": len(docs),
        "import_s": round(import_s, 2),
        "data_load_s": round(load_s, 2),
        "rss_baseline_mb": round(base, 1),
    }
    with tempfile.TemporaryDirectory(prefix=f"peers-{system}-") as wd:
        peer = Peer(emb, Path(wd), depth)
        out["notes"] = peer.notes
        with PeakSampler() as ps:
            t = time.perf_counter()
            peer.build(docs)
            out["build_s"] = round(time.perf_counter() - t, 3)
            t = time.perf_counter()
            peer.search(queries[0][1], TOP_K)  # cold: loads lazily built structures (hybridmem: BM25 + dense index)
            out["first_query_s"] = round(time.perf_counter() - t, 3)
        out["ingest_s"] = round(out["build_s"] + out["first_query_s"], 3)
        out["rss_after_build_mb"] = round(rss_mb() - base, 1)
        peak = ps.peak
        for _, q in warm:
            peer.search(q, TOP_K)
        lat: list[float] = []
        runs: dict[str, list[str]] = {}
        legs: dict[str, list[float]] = {}
        t_start = time.perf_counter()
        capped = False
        for qid, q in queries:
            t = time.perf_counter()
            ranked = peer.search(q, TOP_K)
            lat.append((time.perf_counter() - t) * 1000)
            runs[qid] = ranked
            if hasattr(peer, "legs_ms"):
                for leg, ms in peer.legs_ms().items():
                    legs.setdefault(leg, []).append(ms)
            peak = max(peak, rss_mb())
            if time.perf_counter() - t_start > query_budget and len(lat) < len(queries):
                capped = True
                break
        end_max = maxrss_mb()
        if end_max > maxrss_base:  # the process high-water mark rose after the baseline: it is the run's peak
            peak = max(peak, end_max)
        out["peak_rss_delta_mb"] = round(peak - base, 1)
        out["rss_end_delta_mb"] = round(rss_mb() - base, 1)
        out["latency_ms"] = {
            "p50": round(statistics.median(lat), 3),
            "p95": round(pct(lat, 95), 3),
            "mean": round(statistics.fmean(lat), 3),
            "n": len(lat),
        }
        out["queries_capped"] = capped
        out["queries_total"] = len(queries)
        if legs:
            out["leg_p50_ms"] = {k: round(statistics.median(v), 3) for k, v in legs.items()}
        if qrels is not None:
            from hybridmem.eval.metrics import per_query

            scores = [per_query(runs[qid], qrels[qid]) for qid in runs]
            out["quality"] = {
                m: round(float(np.mean([s[m] for s in scores])), 4) for m in ("ndcg@10", "recall@10", "mrr@10")
            }
            out["quality"]["queries"] = len(scores)
            out["quality_pytrec_eval"] = _pytrec(runs, qrels)
        if getattr(peer, "dense_kind", None):
            out["dense_index"] = peer.dense_kind
        if hasattr(peer, "close"):
            peer.close()
    return out


def _pytrec(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict | None:
    """nDCG@10 / Recall@10 / MRR@10 from pytrec_eval (trec_eval itself), as a cross-check."""
    try:
        import pytrec_eval
    except ImportError:
        return None
    run = {q: {d: float(len(r) - i) for i, d in enumerate(r)} or {"__none__": 0.0} for q, r in runs.items()}
    ev = pytrec_eval.RelevanceEvaluator({q: qrels[q] for q in runs}, {"ndcg_cut.10", "recall.10", "recip_rank"})
    res = ev.evaluate({q: v for q, v in run.items()})
    # recip_rank is over the whole list: the run holds 10 documents, so it is MRR@10
    return {
        "ndcg@10": round(float(np.mean([r["ndcg_cut_10"] for r in res.values()])), 4),
        "recall@10": round(float(np.mean([r["recall_10"] for r in res.values()])), 4),
        "mrr@10": round(float(np.mean([r["recip_rank"] for r in res.values()])), 4),
    }


# --------------------------------------------------------------------------------------- parent
def run_one(system: str, corpus: str, a) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        child_out = f.name
    cmd = [
        *rerun(__file__),
        "--child",
        system,
        "--child-corpus",
        corpus,
        "--n",
        str(a.n),
        "--queries",
        str(a.queries),
        "--depth",
        str(a.depth),
        "--query-budget",
        str(a.query_budget),
        "--child-out",
        child_out,
    ]
    t = time.perf_counter()
    la = loadavg()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.cap + a.query_budget + 120)
        if p.returncode != 0:
            r = {"system": system, "corpus": corpus, "error": (p.stderr or p.stdout).strip().splitlines()[-1][:300]}
            sys.stderr.write(p.stderr[-3000:])
        else:
            r = json.loads(Path(child_out).read_text())
    except subprocess.TimeoutExpired:
        r = {
            "system": system,
            "corpus": corpus,
            "error": f"capped: not done after {a.cap + a.query_budget + 120:.0f} s (build cap {a.cap:.0f} s)",
            "capped": True,
        }
    finally:
        Path(child_out).unlink(missing_ok=True)
    r["wall_s"] = round(time.perf_counter() - t, 1)
    r["loadavg_start"] = la
    r["loadavg_end"] = loadavg()
    return r


def ratios(rows: list[dict]) -> None:
    """Adds ``vs_hybridmem``: peer / hybridmem for times and memory (> 1: hybridmem is lower/faster);
    nDCG@10 difference hybridmem - peer. With several rounds, ingest is the median round's ratio."""
    ref = next((r for r in rows if r["system"] == "hybridmem" and "error" not in r), None)
    if not ref:
        return
    for r in rows:
        if "error" in r:
            continue
        v = {}
        for key, get in (
            ("p50", lambda x: x["latency_ms"]["p50"]),
            ("p95", lambda x: x["latency_ms"]["p95"]),
            ("ingest", lambda x: x["ingest_s"]),
            ("peak_mem", lambda x: x["peak_rss_delta_mb"]),
        ):
            a, b = get(r), get(ref)
            v[key] = float(f"{a / b:.3g}") if b > 0 else None
        rounds = list(zip(r.get("ingest_runs_s") or [], ref.get("ingest_runs_s") or []))
        if rounds and all(a and b for a, b in rounds):
            # with --repeat: the median of the rounds' ratios (two runs of one round are seconds
            # apart, so a machine that slows down for a while slows both)
            v["ingest"] = float(f"{statistics.median(a / b for a, b in rounds):.3g}")
        if "quality" in r and "quality" in ref:
            v["ndcg_hybridmem_minus_peer"] = round(ref["quality"]["ndcg@10"] - r["quality"]["ndcg@10"], 4)
        r["vs_hybridmem"] = v


def print_report(res: dict) -> None:
    print(
        f"\npeers benchmark  ({res['env']['started']}, commit {res['env'].get('git')}, {res['env']['cpus']} CPUs, "
        f"load avg at start {res['env']['loadavg_start']}, at end {res['env'].get('loadavg_end')})"
    )
    print("ratios: peer / hybridmem (times, memory: > 1 means hybridmem is faster / smaller); ΔnDCG = hybridmem - peer")
    for corpus, rows in res["corpora"].items():
        meta = res["corpus_info"].get(corpus, {})
        print(
            f"\n## {corpus}: {meta.get('docs', '?')} docs, {meta.get('queries', '?')} measured queries, "
            f"top {TOP_K}, leg depth {res['config']['depth']}, vectors {meta.get('vectors', '?')}"
        )
        hdr = [
            "system",
            "nDCG@10",
            "R@10",
            "MRR@10",
            "ingest s",
            "p50 ms",
            "p95 ms",
            "peak MB",
            "p50 x",
            "ingest x",
            "mem x",
            "ΔnDCG",
        ]
        lines = [hdr]
        for r in rows:
            if "error" in r:
                lines.append([r["system"], r["error"][:90]] + [""] * (len(hdr) - 2))
                continue
            q = r.get("quality", {})
            v = r.get("vs_hybridmem", {})
            cap = " (capped: %d/%d q)" % (r["latency_ms"]["n"], r["queries_total"]) if r.get("queries_capped") else ""
            lines.append(
                [
                    r["system"] + cap,
                    q.get("ndcg@10", "-"),
                    q.get("recall@10", "-"),
                    q.get("mrr@10", "-"),
                    r["ingest_s"],
                    r["latency_ms"]["p50"],
                    r["latency_ms"]["p95"],
                    r["peak_rss_delta_mb"],
                    v.get("p50", ""),
                    v.get("ingest", ""),
                    v.get("peak_mem", ""),
                    v.get("ndcg_hybridmem_minus_peer", ""),
                ]
            )
        widths = [max(len(str(x[i])) for x in lines) for i in range(len(hdr))]
        for j, line in enumerate(lines):
            print(
                "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
            )
            if j == 0:
                print("  ".join("-" * w for w in widths))
    ec = res.get("embedding_cost")
    if ec:
        print(
            f"\nembedding cost (separate, {ec.get('embedder')}, {ec.get('threads', '?')} threads): "
            f"{ec['docs']} docs / {ec['doc_tokens']} tokens in {ec['docs_s']} s = {ec['doc_tokens_per_s']} tokens/s; "
            f"{ec['queries']} queries in {ec['queries_s']} s = {ec['query_ms_mean']} ms/query"
        )
    print(f"\nJSON: {res.get('out')}  chart: {res.get('chart')}")


def markdown(res: dict) -> str:
    """The tables of docs/benchmarks.md (``--report JSON --markdown``)."""
    out = []
    for corpus, rows in res["corpora"].items():
        quality = any("quality" in r for r in rows)
        hdr = (
            ["system"]
            + (["nDCG@10", "Recall@10", "MRR@10"] if quality else [])
            + [
                "ingest s",
                "query p50 ms",
                "p95 ms",
                "peak RSS Δ MB",
                "p50 vs hybridmem",
                "ingest vs hybridmem",
                "memory vs hybridmem",
            ]
        )
        out.append(f"**{corpus}**\n")
        out.append("| " + " | ".join(hdr) + " |")
        out.append("|" + "|".join(["---"] + ["---:"] * (len(hdr) - 1)) + "|")
        for r in rows:
            if "error" in r:
                out.append(f"| {r['system']} | " + r["error"] + " |" * (len(hdr) - 1))
                continue
            v = r.get("vs_hybridmem", {})
            name = f"**{r['system']}**" if r["system"] == "hybridmem" else r["system"]
            if r.get("queries_capped"):
                name += f" (capped: {r['latency_ms']['n']}/{r['queries_total']} queries)"
            cells = [name]
            if quality:
                q = r.get("quality", {})
                cells += [
                    f"{q.get('ndcg@10', float('nan')):.3f}",
                    f"{q.get('recall@10', float('nan')):.3f}",
                    f"{q.get('mrr@10', float('nan')):.3f}",
                ]
            x = lambda k: f"{v[k]:g}×" if v.get(k) is not None else ""  # noqa: E731
            cells += [
                f"{r['ingest_s']:.1f}",
                f"{r['latency_ms']['p50']:.2f}",
                f"{r['latency_ms']['p95']:.2f}",
                f"{r['peak_rss_delta_mb']:.0f}",
                x("p50"),
                x("ingest"),
                x("peak_mem"),
            ]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def chart(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "hybridmem": "#d62728",
        "hybridmem-exact": "#ff9896",
        "langchain-ensemble": "#1f77b4",
        "llamaindex-fusion": "#9467bd",
        "lancedb-hybrid": "#2ca02c",
        "bm25s": "#7f7f7f",
        "numpy-exact": "#bcbd22",
    }
    corpora = list(res["corpora"])
    fig, axes = plt.subplots(1, 1 + len(corpora), figsize=(6 + 5.5 * len(corpora), 5.2))
    ax = axes[0]
    sci = [r for r in res["corpora"].get("scifact", []) if "quality" in r]
    if sci:
        names = [r["system"] for r in sci]
        vals = [r["quality"]["ndcg@10"] for r in sci]
        bars = ax.bar(range(len(sci)), vals, color=[colors.get(n, "gray") for n in names])
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v + 0.005, f"{v:.3f}", ha="center", va="bottom", fontsize=9)
        ax.set_xticks(range(len(sci)), names, rotation=30, ha="right", fontsize=9)
        ax.set_ylim(min(vals) - 0.1 if min(vals) > 0.1 else 0, max(vals) + 0.05)
    ax.set_title("SciFact test: nDCG@10 (higher is better; y axis truncated)", fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    for ax, corpus in zip(axes[1:], corpora):
        rows = [r for r in res["corpora"][corpus] if "error" not in r]
        names = [r["system"] for r in rows]
        vals = [r["latency_ms"]["p50"] for r in rows]
        bars = ax.bar(range(len(rows)), vals, color=[colors.get(n, "gray") for n in names])
        ax.set_yscale("log")
        for b, v in zip(bars, vals):
            lab = f"{v:,.0f}" if v >= 100 else (f"{v:.1f}" if v >= 10 else f"{v:.2f}")
            ax.text(b.get_x() + b.get_width() / 2, v * 1.1, lab, ha="center", va="bottom", fontsize=9)
        ax.set_xticks(range(len(rows)), names, rotation=30, ha="right", fontsize=9)
        ax.set_ylim(min(vals) / 2, max(vals) * 4)
        info = res["corpus_info"].get(corpus, {})
        docs = info.get("docs")
        ax.set_title(
            f"{corpus} ({docs:,} docs): query p50 ms, log scale (lower is better)"
            if docs
            else f"{corpus}: query p50 ms, log scale (lower is better)",
            fontsize=11,
        )
        ax.grid(axis="y", alpha=0.3, which="both")
    fig.suptitle(
        f"hybridmem vs peers, same vectors, top {TOP_K}, single client thread, {res['env']['cpus']} CPUs", fontsize=12
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _git() -> str | None:
    try:
        return (
            subprocess.run(
                ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for p in (
        "hybridmem",
        "langchain-core",
        "langchain-community",
        "langchain-classic",
        "faiss-cpu",
        "rank-bm25",
        "llama-index-core",
        "llama-index-retrievers-bm25",
        "lancedb",
        "bm25s",
        "PyStemmer",
        "numpy",
        "pytrec-eval-terrier",
        "usearch",
    ):
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--corpora",
        default="scifact,synthetic",
        help="scifact, scifact-lookup (SciFact text, look-up vectors: latency only, "
        "no e5 cache needed) and/or synthetic",
    )
    ap.add_argument(
        "--systems",
        default=",".join(s for s in ORDER if s != "hybridmem-exact"),
        help=f"comma-separated, from {', '.join(ORDER)}",
    )
    ap.add_argument("--n", type=int, default=100_000, help="synthetic corpus size (chunks)")
    ap.add_argument("--queries", type=int, default=100, help="measured synthetic queries (SciFact: all test queries)")
    ap.add_argument(
        "--depth", type=int, default=2 * TOP_K, help="candidates per leg before fusion (hybridmem: fetch_k)"
    )
    ap.add_argument("--cap", type=float, default=600, help="seconds a system may take to build before it is killed")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per system, interleaved round by round (a machine that slows down slows every system): "
        "each system's run of median ingest time is reported, with every run's ingest time",
    )
    ap.add_argument(
        "--query-budget",
        type=float,
        default=300,
        help="seconds of measured queries per system; beyond it the run stops and says so",
    )
    ap.add_argument("--out", default=str(BENCH / "results" / "peers.json"))
    ap.add_argument("--chart", default=str(BENCH / "results" / "peers.png"))
    ap.add_argument("--report", metavar="JSON", help="only print the table of an earlier run")
    ap.add_argument("--markdown", action="store_true", help="with --report: print the markdown tables")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="keep the rows of --out for (corpus, system) pairs this run does not measure",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-corpus", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.report:
        r = json.loads(Path(a.report).read_text())
        if a.markdown:
            print(markdown(r))
        else:
            chart(r, Path(a.chart))  # re-drawn from the JSON
            print_report(r)
        return
    if a.child:
        r = run_child(a.child, a.child_corpus, a.n, a.queries, a.depth, a.query_budget)
        Path(a.child_out).write_text(json.dumps(r))
        return

    systems = [s for s in a.systems.split(",") if s]
    for s in systems:
        if s not in SYSTEMS:
            raise SystemExit(f"unknown system {s!r}; one of {', '.join(ORDER)}")
    corpora = [c for c in a.corpora.split(",") if c]
    out = Path(a.out)
    old = json.loads(out.read_text()) if a.merge and out.exists() else None
    res: dict = {
        "env": {
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_start": loadavg(),
            "git": _git(),
            "versions": _versions(),
            "thread_env": {
                k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
            },
        },
        "config": {
            "top_k": TOP_K,
            "depth": a.depth,
            "warmup": WARMUP,
            "synthetic_n": a.n,
            "synthetic_queries": a.queries,
            "cap_s": a.cap,
            "repeat": a.repeat,
            "query_budget_s": a.query_budget,
            "systems": systems,
            "corpora": corpora,
        },
        "corpora": {},
        "corpus_info": {},
    }
    t_all = time.perf_counter()
    for corpus in corpora:
        rows = []
        runs: dict[str, list[dict]] = {s: [] for s in systems}
        for rnd in range(max(1, a.repeat)):
            for s in systems:
                print(f"[{corpus}] {s} ... (round {rnd + 1}, load avg {loadavg()})", flush=True)
                runs[s].append(run_one(s, corpus, a))
        for s in systems:
            ok = sorted((r for r in runs[s] if "error" not in r), key=lambda r: r["ingest_s"])
            r = ok[(len(ok) - 1) // 2] if ok else runs[s][0]
            if len(runs[s]) > 1:
                r["ingest_runs_s"] = [x.get("ingest_s") for x in runs[s]]
            if "error" in r:
                print(f"[{corpus}] {s}: ERROR {r['error']}", flush=True)
            else:
                q = r.get("quality", {})
                print(
                    f"[{corpus}] {s}: ingest {r['ingest_s']} s, p50 {r['latency_ms']['p50']} ms, "
                    f"peak +{r['peak_rss_delta_mb']} MB"
                    + (f", nDCG@10 {q['ndcg@10']}" if q else "")
                    + (f", ingest runs {r['ingest_runs_s']} s" if "ingest_runs_s" in r else ""),
                    flush=True,
                )
                res["corpus_info"][corpus] = {
                    "docs": r["docs"],
                    "queries": r["queries_total"],
                    "vectors": "e5 multilingual-e5-small q4 (bench cache)" if corpus == "scifact" else "lookup:384",
                }
                if corpus == "scifact-lookup":
                    res["corpus_info"][corpus]["note"] = "SciFact text and queries, look-up vectors: latency only"
            rows.append(r)
        if old and corpus in old.get("corpora", {}):
            have = {r["system"] for r in rows}
            rows += [r for r in old["corpora"][corpus] if r["system"] not in have]
            res["corpus_info"].setdefault(corpus, old["corpus_info"].get(corpus, {}))
        rows.sort(key=lambda r: ORDER.index(r["system"]) if r["system"] in ORDER else 99)
        ratios(rows)
        res["corpora"][corpus] = rows
    if old:
        for c, rows in old.get("corpora", {}).items():
            if c not in res["corpora"]:
                res["corpora"][c] = rows
                res["corpus_info"][c] = old["corpus_info"].get(c, {})
    if EMBED_COST.exists():
        res["embedding_cost"] = json.loads(EMBED_COST.read_text())
    res["env"]["loadavg_end"] = loadavg()
    res["env"]["total_s"] = round(time.perf_counter() - t_all, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    res["out"] = str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else str(out)
    res["chart"] = str(Path(a.chart).relative_to(ROOT)) if Path(a.chart).resolve().is_relative_to(ROOT) else a.chart
    out.write_text(json.dumps(res, indent=2))
    chart(res, Path(a.chart))
    print_report(res)


if __name__ == "__main__":
    main()
