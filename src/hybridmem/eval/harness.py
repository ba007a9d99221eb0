"""The evaluation harness: build (or reuse) a dataset's index, run every mode, score, compare, sweep.

Every mode answers through ``Memory.search`` exactly as an agent's query would (same contract, same
fusion); nothing is re-implemented here. Each query is asked twice per mode: once with the user's
``top_k`` (MRR@10, nDCG@10, Recall@1/5/10 and the latency) and once with ``depth`` results for
Recall@100 and the recall curve. Results are chunks; they are judged at document level (first
occurrence of a document counts).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import __version__, config
from ..embed import embedder_name
from ..errors import ValidationError
from .compare import check_targets, compare_modes
from .datasets import Dataset
from .index import index_key, open_index, utc_now
from .metrics import METRICS, means_by_category
from .modes import AGENT_MODES, ALL_MODES, EvalConfig, Progress
from .references import references_for
from .runner import run_modes, warm_query_vectors
from .sweep import CLASSIC, parse_sweep, run_sweep

__all__ = ["AGENT_MODES", "ALL_MODES", "CLASSIC", "EvalConfig", "index_key", "open_index", "parse_sweep", "run_eval"]


def run_eval(
    ds: Dataset,
    cfg: EvalConfig,
    *,
    load_split: Callable[[str], Dataset] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Evaluate ``cfg.modes`` on ``ds``; returns the results dict the report writes."""
    _check_config(cfg)
    started, t0 = utc_now(), time.perf_counter()
    if cfg.limit:
        ds = ds.subset(list(ds.queries)[: cfg.limit], ds.split)
    need_vectors = any(m in ("vector", "hybrid", "rerank", *AGENT_MODES) for m in cfg.modes) or bool(cfg.sweep)
    mem, index = open_index(ds, cfg, need_vectors, progress)
    notes: list[str] = []
    try:
        if need_vectors:
            qemb = warm_query_vectors(mem, ds, progress)
            if qemb:
                index["query_embed_ms"] = qemb
        modes = run_modes(mem, ds, cfg, progress, notes)
        sweep = run_sweep(mem, ds, cfg, load_split or (lambda s: ds), progress) if cfg.sweep else None
    finally:
        mem.close()
    notes += _index_notes(index, cfg)
    results: dict[str, Any] = {
        "dataset": {
            "name": ds.name,
            "path": ds.path,
            "split": ds.split,
            "docs": len(ds.docs),
            "chunks": index.get("chunks"),
            "queries": len(ds.queries),
            "categories": _category_counts(ds),
        },
        "embedder": embedder_name(cfg.embedder),
        "top_k": cfg.top_k,
        "depth": cfg.depth,
        "metric": cfg.metric,
        "index": {
            k: index[k]
            for k in ("cached", "key", "index_s", "embed_s", "path", "chunks", "vectors", "query_embed_ms")
            if k in index
        },
        "modes": modes,
        "comparisons": compare_modes(modes, cfg.metric, cfg.seed),
        "references": references_for(ds.name, ds.split),
        "targets": check_targets(ds, cfg, modes),
        "notes": notes,
        "started": started,
        "took_s": round(time.perf_counter() - t0, 2),
        "hybridmem_version": __version__,
    }
    if ds.languages:
        results["by_language"] = {
            m: means_by_category(r["per_query"], ds.languages) for m, r in modes.items() if r.get("status") == "ok"
        }
    if sweep:
        results["sweep"] = sweep
    return results


def _check_config(cfg: EvalConfig) -> None:
    unknown = [m for m in cfg.modes if m not in ALL_MODES]
    if unknown:
        raise ValidationError(f"unknown mode(s) {', '.join(unknown)}; known: {', '.join(ALL_MODES)}", field="modes")
    if cfg.metric not in METRICS:
        raise ValidationError(f"unknown metric {cfg.metric!r}; known: {', '.join(METRICS)}", field="metric")
    if not 1 <= cfg.top_k <= config.MAX_TOP_K:
        raise ValidationError(f"top_k must be 1..{config.MAX_TOP_K}", field="top_k")


def _index_notes(index: dict[str, Any], cfg: EvalConfig) -> list[str]:
    notes = []
    if index["cached"]:
        notes.append(f"index reused from the cache ({index['path']}); built earlier")
    if index.get("embedded_now"):
        notes.append(
            f"embedded {index['embedded_now']} chunks in {index['embed_s']} s "
            f"({index['cached_vectors']} vectors came from the embedding cache)"
        )
    notes.append(
        "latency is the wall time of Memory.search at top_k; query vectors were embedded before "
        "timing and come from the embedding cache, so it excludes the model's query embedding cost"
        + (
            f" (measured on this run: p50 {index['query_embed_ms']['p50']} ms, p95 "
            f"{index['query_embed_ms']['p95']} ms over {index['query_embed_ms']['queries']} queries)"
            if index.get("query_embed_ms")
            else ""
        )
    )
    if cfg.limit:
        notes.append(f"only the first {cfg.limit} queries were evaluated (--limit): not a publishable number")
    return notes


def _category_counts(ds: Dataset) -> dict[str, int]:
    counts = {"all": len(ds.queries)}
    for q in ds.queries:
        c = ds.categories.get(q)
        if c:
            counts[c] = counts.get(c, 0) + 1
    return counts
