"""Running a mode: every query through ``Memory.search`` (twice: at ``top_k`` and at ``depth``),
scored per query, with latency, rerankers used and leg failures; the query vectors warmed first."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..memory import Memory
from .datasets import Dataset
from .metrics import means_by_category, per_query, recall_curve
from .modes import AGENT_MODES, CURVE_KS, HYBRID_GRAPH, PLAIN_HYBRID, EvalConfig, Progress


# ---------------------------------------------------------------------------------------- running
def _doc_ranking(resp: Any) -> list[str]:
    """Document ids in rank order; a hit's context turns (``context_window``) follow it."""
    ids: list[str] = []
    for r in resp.results:
        ids.append(r.doc_id)
        ids += [c["doc_id"] for c in r.context or [] if c["doc_id"] != r.doc_id]
    return list(dict.fromkeys(ids))


def search_request(
    ds: Dataset, qid: str, mode: str, top_k: int, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``Memory.search`` request of query ``qid`` in ``mode`` (its scope, filter, the hybrid
    parameters the mode sets, its context window)."""
    # every mode names its fusion: a HYBRIDMEM_FUSION in the environment does not change what is measured
    plain = PLAIN_HYBRID if mode == "hybrid" else {"fusion": "rrf"}
    agent, window = AGENT_MODES.get(mode, (plain, None))
    req: dict[str, Any] = {
        "query_id": qid,
        "search_text": ds.queries[qid],
        "top_k": top_k,
        "mode": "hybrid" if mode in AGENT_MODES else mode,
        **ds.scopes.get(qid, {}),
    }
    if qid in ds.filters:
        req["metadata_filter"] = ds.filters[qid]
    if params or agent:
        req["hybrid_params"] = {**agent, **(params or {})}
    if window:
        req["context_window"] = window
    return req


def run_mode(
    mem: Memory,
    ds: Dataset,
    mode: str,
    cfg: EvalConfig,
    params: dict[str, Any] | None = None,
    tick: Callable[[int], None] | None = None,
    depth: bool = True,
) -> dict[str, Any]:
    scores: dict[str, dict[str, float]] = {}
    curves: list[list[float]] = []
    lat: list[float] = []
    leg_trouble: dict[str, int] = {}
    rerankers: dict[str, int] = {}  # reranker -> queries it actually reordered
    rerank_notes: dict[str, int] = {}
    for qid in ds.queries:
        req = search_request(ds, qid, mode, cfg.top_k, params)
        t = time.perf_counter()
        resp = mem.search(req)
        lat.append((time.perf_counter() - t) * 1000)
        if resp.reranker:
            rerankers[resp.reranker] = rerankers.get(resp.reranker, 0) + (1 if resp.reranked else 0)
        if resp.rerank_note:
            rerank_notes[resp.rerank_note] = rerank_notes.get(resp.rerank_note, 0) + 1
        for leg, rep in resp.legs.items():
            if rep.status in ("error", "timeout"):
                leg_trouble[f"{leg} {rep.status}"] = leg_trouble.get(f"{leg} {rep.status}", 0) + 1
        ranked = _doc_ranking(resp)
        if depth:
            deep = _doc_ranking(mem.search({**req, "top_k": max(cfg.depth, cfg.top_k)}))
            curves.append(recall_curve(deep, ds.qrels[qid], CURVE_KS))
        else:
            deep = ranked
        s = per_query(ranked, ds.qrels[qid])
        s["recall@100"] = per_query(deep, ds.qrels[qid])["recall@100"]
        scores[qid] = s
        if tick:
            tick(1)
    out: dict[str, Any] = {
        "status": "ok",
        "queries": len(scores),
        "per_query": scores,
        "metrics": means_by_category(scores, ds.categories),
    }
    for tag in sorted({t for ts in ds.tags.values() for t in ts}):  # scored apart, e.g. time-constrained
        tagged = {q: s for q, s in scores.items() if tag in ds.tags.get(q, ())}
        if tagged:
            out["metrics"][tag] = means_by_category(tagged)["all"]
    if curves:
        out["recall_curve"] = {"k": list(CURVE_KS), "recall": [float(x) for x in np.mean(curves, axis=0)]}
    a = np.asarray(lat)
    out["latency_ms"] = {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "mean": round(float(a.mean()), 3),
    }
    if leg_trouble:
        out["leg_failures"] = leg_trouble
    if rerankers or rerank_notes:
        out["rerankers"] = rerankers
        out["rerank_notes"] = rerank_notes
    return out


def warm_query_vectors(mem: Memory, ds: Dataset, progress: Progress | None) -> dict[str, float] | None:
    """Embed every query once before any mode is timed, so no mode pays the model and the others
    not; the model's own cost (cache misses only) is reported apart."""
    emb: Any = mem.embedder  # counts its cache misses when it is a CachedEmbedder
    tick = progress("embedding queries", len(ds.queries)) if progress else None
    model_ms = []
    for text in ds.queries.values():
        before = getattr(emb, "misses", None)
        t = time.perf_counter()
        emb.embed_query(text)
        ms = (time.perf_counter() - t) * 1000
        if before is None or emb.misses > before:
            model_ms.append(ms)
        if tick:
            tick(1)
    if not model_ms:
        return None
    a = np.asarray(model_ms)
    return {
        "p50": round(float(np.percentile(a, 50)), 2),
        "p95": round(float(np.percentile(a, 95)), 2),
        "queries": len(model_ms),
    }


def _graph_line(rep: Any) -> str:
    keys = ("entities", "relations", "communities", "chunks_extracted")
    data = rep.model_dump() if hasattr(rep, "model_dump") else {}
    return ", ".join(f"{k.replace('_', ' ')} {data[k]}" for k in keys if k in data) or type(rep).__name__


def run_modes(
    mem: Memory, ds: Dataset, cfg: EvalConfig, progress: Progress | None, notes: list[str]
) -> dict[str, dict[str, Any]]:
    """Every mode of ``cfg.modes``, in order (``graph`` also runs hybrid + graph leg); what a reader
    should know about a run is appended to ``notes``."""
    modes: dict[str, dict[str, Any]] = {}
    for mode in cfg.modes:
        if mode == "graph":
            t = time.perf_counter()
            try:
                rep = mem.graph.update()  # offline extraction + Leiden + summaries; a no-op when fresh
            except Exception as e:  # noqa: BLE001 - reported, never fatal for the other modes
                modes[mode] = {"status": "skipped", "note": f"skipped: graph build failed: {e}"}
                continue
            notes.append(f"graph: built or refreshed offline in {time.perf_counter() - t:.1f} s ({_graph_line(rep)})")
            tick = progress("graph queries", 2 * len(ds.queries)) if progress else None
            modes["graph"] = run_mode(mem, ds, "graph", cfg, tick=tick)
            label, params = HYBRID_GRAPH
            modes[label] = run_mode(mem, ds, "hybrid", cfg, params=params, tick=tick)
            continue
        tick = progress(f"{mode} queries", len(ds.queries)) if progress else None
        modes[mode] = run_mode(mem, ds, mode, cfg, tick=tick)
        if mode == "rerank":
            used = (
                ", ".join(
                    f"{name} (applied to {n} of {len(ds.queries)} queries)"
                    for name, n in modes[mode].get("rerankers", {}).items()
                )
                or "none"
            )
            notes.append(f"rerank: hybrid candidates reordered by {used}")
            notes += [f"rerank: {note} ({n} queries)" for note, n in modes[mode].get("rerank_notes", {}).items()]
        if modes[mode].get("leg_failures"):
            notes.append(f"{mode}: leg failures during the run {modes[mode]['leg_failures']}")
    return modes
