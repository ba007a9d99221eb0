"""BM25 leg speed: ``SparseIndex.search`` against the scorer it replaced (embedded here, run on the
same index in the same process), on a synthetic and a real corpus.

    python -m bench bm25_speed                                     # synthetic 1M + packages (~440k)
    python -m bench bm25_speed --corpora packages --size 200000 --queries 300
    python -m bench bm25_speed --report bench/results/bm25-speed.json
    python -m bench bm25_speed --kernel-before OLD.so   # another build of the kernel beside this one

Two corpora, tokenized as ingest does (language detected per chunk, ``index_tokens``), cached as
token strings under ``--cache`` (tokenizing 1M chunks takes ~4 min), loaded with
``SparseIndex.load`` as a process opening a store does:

- ``synthetic``: bench/_common.py's incident notes (the corpus of bench/scaling.py: ~260 words drawn
  uniformly, so every query word is in ~8 % of the chunks) with its queries: ~500k postings a query
  at 1M chunks.
- ``packages``: real text nobody here wrote: the ``.py``/``.md``/``.rst``/``.txt`` files, READMEs and
  changelogs installed on this machine (the virtualenv's site-packages and /usr/share/doc), in
  windows of 80 words, sorted by path. Queries: every question of ../shared/data (SciFact, PIAF,
  XQuAD de/zh, HotpotQA, LoCoMo) and known-item queries (4–8 consecutive words of a random chunk,
  and an identifier-shaped token of one).

Per query both scorers run, alternating which goes first, and their results are compared (the same
scores; the same rowids unless the old one cut a tie at the k-th place arbitrarily). Cases: k = 10
and k = 100 without a filter, a filter allowing 10 % of the chunks, and one allowing 0.1 % (a
session or a user in a big memory). Printed: p50/p95 of each, the p50 ratio, mismatches (must be 0).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import pickle
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

from bench._common import SEED, make_chunk, make_queries, rss_mb  # noqa: E402
from hybridmem.eval.datasets import load_dataset  # noqa: E402
from hybridmem.retrieve import bm25_score  # noqa: E402
from hybridmem.retrieve.sparse import K1, B, SparseIndex  # noqa: E402
from hybridmem.text.tokenize import detect_language, index_tokens, is_identifier, query_tokens  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
WINDOW = 80
SUFFIXES = {".py", ".md", ".rst", ".txt"}


def _tokens(text: str) -> str:
    return " ".join(index_tokens(text, detect_language(text)))


def synthetic(n: int) -> tuple[list[str], list[str]]:
    rng = random.Random(SEED)
    return [make_chunk(rng) for _ in range(n)], make_queries(2000)


def _package_files() -> list[Path]:
    roots = [Path(p) for p in sys.path if p.endswith("site-packages")] + [Path("/usr/share/doc")]
    out = []
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for f in files:
                p = Path(dirpath, f)
                low = f.lower()
                if p.suffix in SUFFIXES or low.startswith(("changelog", "readme", "news")):
                    out.append(p)
    return sorted(set(out))


def _read(p: Path) -> str:
    try:
        raw = gzip.open(p).read() if p.suffix == ".gz" else p.read_bytes()
    except OSError:
        return ""
    if b"\x00" in raw[:4096]:
        return ""  # binary
    return raw.decode("utf-8", errors="replace")


def packages(n: int) -> tuple[list[str], list[str]]:
    chunks: list[str] = []
    for p in _package_files():
        words = _read(p).split()
        for i in range(0, len(words), WINDOW):
            chunks.append(" ".join(words[i : i + WINDOW]))
            if len(chunks) >= n:
                break
        if len(chunks) >= n:
            break
    rng = random.Random(SEED)
    queries: list[str] = []
    for spec in sorted((DATA / "beir").iterdir()):
        queries += load_dataset(str(spec)).queries.values()
    locomo = DATA / "agentmem" / "locomo" / "locomo-shared.json"
    if locomo.is_file():
        queries += load_dataset(str(locomo)).queries.values()
    rng.shuffle(queries)
    known = []
    for _ in range(1000):
        words = rng.choice(chunks).split()
        if len(words) >= 8:
            i = rng.randrange(len(words) - 7)
            known.append(" ".join(words[i : i + rng.randint(4, 8)]))
        ids = [w for w in words if is_identifier(w.lower())]
        if ids:
            known.append(rng.choice(ids))
    return chunks, queries[:1000] + known


def corpus(name: str, n: int, cache: Path) -> tuple[list[str], list[str]]:
    path = cache / f"{name}-{n}.pkl"
    if path.is_file():
        with path.open("rb") as f:
            return pickle.load(f)  # noqa: S301 - our own cache file
    t = time.perf_counter()
    texts, queries = (synthetic if name == "synthetic" else packages)(n)
    toks = [_tokens(x) for x in texts]
    print(f"  tokenized {len(toks):,} chunks in {time.perf_counter() - t:.0f} s", flush=True)
    cache.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump((toks, queries), f)
    return toks, queries


def baseline_search(idx: SparseIndex, terms: list[str], k: int, allowed: np.ndarray | None) -> list[tuple[int, float]]:
    """The scorer before this change (git show f3e5988:src/hybridmem/retrieve/sparse.py): copies of
    the arrays taken under the lock, every posting scored, a hit array, argpartition of all hits."""
    with idx._rw.read():
        n_total = len(idx._rowids)
        n_live = len(idx._pos)
        if not n_live or k <= 0:
            return []
        alive = np.frombuffer(idx._alive, dtype=np.uint8)[:n_total].astype(bool)
        dl = np.frombuffer(idx._dl, dtype=np.float32)[:n_total].copy()
        rowids = np.frombuffer(idx._rowids, dtype=np.int64)[:n_total].copy()
        avgdl = idx._total_len / n_live
        postings = [
            (np.frombuffer(p[0], dtype=np.int32).copy(), np.frombuffer(p[1], dtype=np.int32).copy())
            for t in dict.fromkeys(terms)
            if (p := idx._post.get(t)) is not None
        ]
        mask = alive if allowed is None else idx._allowed_mask(allowed, rowids, n_total)
    scores = np.zeros(n_total, np.float32)
    hit = np.zeros(n_total, bool)
    for ps, tfs in postings:
        live = alive[ps]
        ps, tf = ps[live], tfs[live].astype(np.float32)
        n_t = len(ps)
        if not n_t:
            continue
        idf = math.log((n_live - n_t + 0.5) / (n_t + 0.5))
        idf = idf if idf > 0 else 1e-6
        norm = K1 * (1.0 - B + B * dl[ps] / avgdl)
        scores[ps] += idf * tf * (K1 + 1.0) / (tf + norm)
        hit[ps] = True
    cand = np.flatnonzero(hit & mask)
    if not len(cand):
        return []
    s = scores[cand]
    top = np.argpartition(-s, k - 1)[:k] if k < len(cand) else np.arange(len(cand))
    top = top[np.lexsort((rowids[cand[top]], -s[top]))]
    return [(int(rowids[cand[t]]), float(s[t])) for t in top]


def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    """Equal scores in order, and equal rowids above the last score (a tie there may be cut anywhere
    by the old scorer)."""
    if len(a) != len(b) or not np.allclose([s for _, s in a], [s for _, s in b], rtol=1e-6, atol=0):
        return False  # (scores within float32 rounding: the old scorer added the terms in query order)
    last = a[-1][1] if a else 0.0
    return [r for r, s in a if s > last * (1 + 1e-6)] == [r for r, s in b if s > last * (1 + 1e-6)]


def with_kernel(other: Any) -> Callable[[SparseIndex, list[str], int, np.ndarray | None], list[tuple[int, float]]]:
    """``SparseIndex.search`` through another kernel module (None: the numpy scorer it falls back to)."""

    def search(idx: SparseIndex, terms: list[str], k: int, allowed: np.ndarray | None) -> list[tuple[int, float]]:
        kernel, bm25_score._kernel = bm25_score._kernel, other
        try:
            return idx.search(terms, k, allowed)
        finally:
            bm25_score._kernel = kernel

    return search


numpy_search = with_kernel(None)
SCORERS = {"old": baseline_search, "numpy": numpy_search, "kernel": SparseIndex.search}


def load_kernel(path: Path) -> None:
    """Add scorer ``before``: ``SparseIndex.search`` through another build of the kernel (a copy of
    the ``_bm25`` shared object of an earlier commit), so both builds run on one index in one process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bm25", path)
    assert spec is not None and spec.loader is not None
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    before = with_kernel(other)
    SCORERS["before"] = before


def run(name: str, n: int, n_queries: int, cache: Path) -> dict:
    toks, queries = corpus(name, n, cache)
    idx = SparseIndex()
    t = time.perf_counter()
    idx.load(1, enumerate(toks, 1))
    load_s = time.perf_counter() - t
    n_chunks = len(toks)
    n_post = sum(len(p[0]) for p in idx._post.values())
    del toks
    rng = random.Random(SEED)
    qs = [q for q in (query_tokens(x) for x in queries) if q]
    rng.shuffle(qs)
    qs = qs[: n_queries + 20]
    tenth = np.array(sorted(rng.sample(range(1, n_chunks + 1), n_chunks // 10)), dtype=np.int64)
    session = np.array(sorted(rng.sample(range(1, n_chunks + 1), max(n_chunks // 1000, 10))), dtype=np.int64)
    out: dict = {"corpus": name, "chunks": n_chunks, "postings": n_post, "load_s": round(load_s, 2)}
    for label, k, flt in (
        ("k10", 10, None),
        ("k100", 100, None),
        ("k10-filter10%", 10, tenth),
        ("k10-filter0.1%", 10, session),
    ):
        for q in qs[:20]:  # warm-up (the filter's mask is cached, as Memory hands the same array)
            idx.search(q, k, flt)
            baseline_search(idx, q, k, flt)
        times: dict[str, list[float]] = {tag: [] for tag in SCORERS}
        bad = off = scanned = looked = posted = 0
        for i, q in enumerate(qs[20:]):
            res = {}
            # the terms' weight bounds are cached on first use: filled here, untimed, or the first
            # kernel scorer in each rotation would pay for all (3 of 4 turns for ``kernel``)
            idx.search(q, k, flt)
            runs = list(SCORERS.items())
            if "before" in SCORERS:
                # the two kernel builds side by side, each first every other query (after the
                # scorers that sweep the caches), so neither always follows them
                pair = runs[2:] if i % 2 else runs[2:][::-1]
                runs = runs[:2][i % 2 :] + runs[:2][: i % 2] + pair
            else:
                runs = runs[i % len(runs) :] + runs[: i % len(runs)]  # each scorer first in turn
            for tag, fn in runs:
                t = time.perf_counter()
                res[tag] = fn(idx, q, k, flt)
                times[tag].append((time.perf_counter() - t) * 1000)
            bad += res["numpy"] != res["kernel"]  # the same list, the same float32 scores
            bad += "before" in res and res["before"] != res["kernel"]
            off += not same(res["old"], res["kernel"])
            _, c = idx.search_counted(q, k, flt)
            scanned, looked, posted = scanned + c["scanned"], looked + c["looked_up"], posted + c["postings"]
        p50 = {tag: statistics.median(v) for tag, v in times.items()}
        row = {
            "before_p50_ms": round(p50["old"], 2),
            "before_p95_ms": round(float(np.percentile(times["old"], 95)), 2),
            "numpy_p50_ms": round(p50["numpy"], 2),
            "numpy_p95_ms": round(float(np.percentile(times["numpy"], 95)), 2),
            "after_p50_ms": round(p50["kernel"], 2),
            "after_p95_ms": round(float(np.percentile(times["kernel"], 95)), 2),
            "speedup_p50": round(p50["old"] / p50["kernel"], 2),
            "kernel_vs_numpy_p50": round(p50["numpy"] / p50["kernel"], 2),
            "postings_scanned_share": round(scanned / max(posted, 1), 3),
            "lookups_per_query": round(looked / max(len(qs) - 20, 1)),
            "queries": len(times["old"]),
            "mismatches": bad,
            "differ_from_old": off,
        }
        if "before" in times:  # another build of the kernel, same process
            row["kernel_before_p50_ms"] = round(p50["before"], 3)
            row["kernel_before_p95_ms"] = round(float(np.percentile(times["before"], 95)), 3)
            row["kernel_vs_before_p50"] = round(p50["before"] / p50["kernel"], 3)
        out[label] = row
        print(
            f"  {name} {n_chunks:,} {label}: before p50 {row['before_p50_ms']} ms / p95 {row['before_p95_ms']}, "
            f"numpy p50 {row['numpy_p50_ms']} / p95 {row['numpy_p95_ms']}, "
            f"kernel p50 {row['after_p50_ms']} / p95 {row['after_p95_ms']} ({row['kernel_vs_numpy_p50']}x numpy); "
            f"postings scanned {row['postings_scanned_share']:.0%}, mismatches {bad} (vs old {off})"
            + (
                f"; kernel before p50 {row['kernel_before_p50_ms']} / p95 {row['kernel_before_p95_ms']}, "
                f"now {row['kernel_vs_before_p50']}x"
                if "before" in times
                else ""
            ),
            flush=True,
        )
    out["rss_mb"] = round(rss_mb())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="synthetic,packages")
    ap.add_argument("--size", type=int, default=0, help="chunks per corpus (default 1M synthetic, 500k packages)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/hybridmem-bm25-cache"))
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "bm25-speed.json")
    ap.add_argument("--report", type=Path)
    ap.add_argument("--kernel-before", type=Path, help="another build's _bm25 .so, run beside this one")
    a = ap.parse_args()
    if a.kernel_before:
        load_kernel(a.kernel_before)
    if a.report:
        print(json.dumps(json.loads(a.report.read_text()), indent=1))
        return
    rows = []
    for name in a.corpora.split(","):
        n = a.size or 1_000_000  # packages: every window there is (~440k here)
        print(f"{name}: {n:,} chunks", flush=True)
        rows.append(run(name, n, a.queries, a.cache))
    meta = {
        "sample_stride": bm25_score.SAMPLE_STRIDE,
        "direct_factor": bm25_score.DIRECT_FACTOR,
        "loadavg": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d"),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"meta": meta, "runs": rows}, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
